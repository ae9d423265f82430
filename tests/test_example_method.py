"""The example method of docs/adding-a-method.md runs as the guide says, and gives the pooled
answer: PC's depth-0 skeleton, as FedPC with ``max_depth=0`` finds it."""

import os
import subprocess
import sys
from pathlib import Path

import fedcausal_flwr
from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.partition import split_iid

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "marginal_skeleton"


def run_guide_example(module: str, tmp_path: Path) -> None:
    """``PYTHONPATH=examples python -m MODULE``, as a guide says: a graph and its scores."""
    env = {**os.environ, "PYTHONPATH": "examples", "RAY_TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", module], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert " --- " in done.stdout and "adj_f1" in done.stdout


def test_the_guide_command_runs_the_example(tmp_path):
    run_guide_example("marginal_skeleton.strategy", tmp_path)


def test_the_example_equals_fedpc_at_depth_zero(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    import marginal_skeleton.strategy  # noqa: F401  (registers the method)

    parts = split_iid(load_network("child").sample(3000, seed=3), 3, seed=1).clients
    for test in ("chi2", "g2"):
        example = fedcausal_flwr.run("marginal-skeleton", data=parts, test=test, alpha=0.01)
        fedpc = fedcausal_flwr.run("fedpc", data=parts, test=test, alpha=0.01, max_depth=0)
        assert example.graph.n_edges() > 0
        assert (example.graph.adjacency() == fedpc.graph.adjacency()).all()
    secure = fedcausal_flwr.run("marginal-skeleton", data=parts, secure=True)
    plain = fedcausal_flwr.run("marginal-skeleton", data=parts)
    assert (secure.graph.adjacency() == plain.graph.adjacency()).all()


def test_the_example_is_two_files_under_200_lines():
    sizes = {p.name: len(p.read_text().splitlines()) for p in EXAMPLE.glob("*.py")}
    assert sum(n for name, n in sizes.items() if name != "__init__.py") < 200, sizes


def test_the_guides_line_counts_are_the_files():
    """docs/adding-a-method.md quotes what a method costs in lines: each count is its files'."""
    import re

    guide = (REPO / "docs" / "adding-a-method.md").read_text()

    def lines(*paths: str) -> int:
        return sum(len((REPO / p).read_text().splitlines()) for p in paths)

    def method(name: str) -> tuple[str, ...]:
        return f"strategies/{name}.py", f"clients/{name}.py"

    def protocols(name: str) -> str:
        return f"fedcausal_flwr/protocols/{name}.py"

    quoted = {
        r"\(two files, (\d+) lines\)": lines("examples/marginal_skeleton/strategy.py",
                                              "examples/marginal_skeleton/client.py"),
        r"RFCD (\d+);": lines(*method("rfcd"), protocols("rfcd")),
        r"FedPC/FedFCI (\d+),": lines(*method("fedpc"), protocols("fedpc")),
        r"sketched tables (\d+);": lines("strategies/table_tests.py"),
        r"Fisher-z (\d+):": lines("strategies/moment_tests.py"),
        r"TPSS (\d+);": lines(*method("tpss"), protocols("tpss")),
        r"voting FedPC (\d+) on top": lines(*method("fedpc_vote")),
        r"layer vote \((\d+)\)": lines("strategies/layer_vote.py"),
        r"This guide: (\d+) lines": len(guide.splitlines()),
    }  # fmt: skip
    for pattern, count in quoted.items():
        found = re.search(pattern, guide)
        assert found, pattern
        assert int(found.group(1)) == count, (pattern, count)
