"""mypy, configured in pyproject's ``[tool.mypy]`` (basic mode), is clean on the package.

The package's installed layout is not its source tree: setuptools' ``package-dir`` installs
``strategies/`` and ``clients/`` as ``fedcausal_flwr.strategies`` and ``fedcausal_flwr.clients``,
and the editable install reaches them through an import hook that mypy does not run. Checked in
place, every ``fedcausal_flwr.strategies.*`` import would be missing and typed ``Any``. So mypy
checks a temporary tree that mirrors the installed layout with symlinks into the repository (each
entry of ``fedcausal_flwr/``, plus one link per mapped folder), built from pyproject's
``package-dir``; its report names the repository's files. ``experiments/`` (scripts) is left out.

``python tests/test_types.py`` prints mypy's report without pytest.
"""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "fedcausal_flwr"
NOT_CHECKED = ("fedcausal_flwr.experiments",)  # scripts, not library code
MYPY_TIMEOUT_S = 600
#: the module's tests share one pytest worker (pyproject's `--dist loadgroup`), so its mypy cache:
#: apart, each worker would check the whole package from scratch
pytestmark = pytest.mark.xdist_group("mypy")


def installed_layout(root: Path) -> dict[str, str]:
    """Lay out ``root/fedcausal_flwr`` as the package installs (symlinks into the repository).

    Returns ``{path prefix in the tree: path prefix in the repository}`` for the mapped folders.
    """
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    package_dir = config["tool"]["setuptools"]["package-dir"]
    top = root / PACKAGE
    top.mkdir(parents=True)
    for entry in sorted((REPO_ROOT / package_dir[PACKAGE]).iterdir()):
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    sources = {}
    for name, folder in sorted(package_dir.items()):
        if name == PACKAGE or name in NOT_CHECKED:
            continue
        parent, _, child = name.rpartition(".")
        assert parent == PACKAGE, f"package-dir maps {name}: only direct sub-packages are mirrored"
        (top / child).symlink_to(REPO_ROOT / folder, target_is_directory=True)
        sources[f"{PACKAGE}/{child}/"] = f"{folder}/"
    return sources


def module_files(root: Path) -> int:
    """The ``.py`` files under ``root/fedcausal_flwr``, links followed (mypy's count of sources
    adds the folders without ``__init__.py``, as namespace packages)."""
    return sum(
        name.endswith(".py")
        for folder, _, names in os.walk(root / PACKAGE, followlinks=True)
        if "__pycache__" not in Path(folder).parts
        for name in names
    )


def run_mypy(root: Path, cache_dir: Path, *extra: str) -> tuple[int, str]:
    """mypy on the package laid out under ``root``: its exit code and report."""
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO_ROOT / "pyproject.toml"),
         "--cache-dir", str(cache_dir), "-p", PACKAGE, *extra],
        cwd=root, env=env, capture_output=True, text=True, timeout=MYPY_TIMEOUT_S,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def in_repository(report: str, sources: dict[str, str]) -> str:
    """``report`` with the tree's paths of mapped folders rewritten to the repository's."""
    lines = []
    for line in report.splitlines():
        for tree_prefix, repo_prefix in sources.items():
            if line.startswith(tree_prefix):
                line = repo_prefix + line[len(tree_prefix) :]
                break
        lines.append(line)
    return "\n".join(lines)


@pytest.fixture(scope="module")
def layout(tmp_path_factory) -> tuple[Path, Path, dict[str, str]]:
    """The mirrored tree, a mypy cache shared by this module's tests, the path mapping."""
    base = tmp_path_factory.mktemp("types")
    sources = installed_layout(base / "tree")
    return base / "tree", base / "mypy-cache", sources


@pytest.mark.slow
def test_mypy_is_clean_on_the_package(layout):
    root, cache_dir, sources = layout
    code, report = run_mypy(root, cache_dir)
    assert code == 0, "mypy (pyproject's [tool.mypy]) reports:\n" + in_repository(report, sources)
    # every module was checked, the mapped sub-packages included
    checked = re.search(r"no issues found in (\d+) source files", report)
    assert checked is not None and int(checked.group(1)) >= module_files(root), report


@pytest.mark.slow
def test_mapped_subpackages_are_checked_with_their_types(layout):
    """A module importing from ``fedcausal_flwr.strategies`` gets the real types, not ``Any``."""
    root, cache_dir, sources = layout
    assert set(sources) == {f"{PACKAGE}/strategies/", f"{PACKAGE}/clients/"}
    probe = root / "type_probe.py"
    probe.write_text(
        "from fedcausal_flwr.clients.base import ProtocolClient\n"
        "from fedcausal_flwr.strategies.base import ProtocolStrategy\n\n"
        "name: int = ProtocolStrategy.name\n"
        "client: str = ProtocolClient\n"
    )
    try:
        code, report = run_mypy(root, cache_dir, "-m", "type_probe")
    finally:
        probe.unlink()
    probe_errors = [line for line in report.splitlines() if line.startswith("type_probe.py:")]
    assert code == 1 and len(probe_errors) == 2, report
    assert all(line.endswith("[assignment]") for line in probe_errors), report


if __name__ == "__main__":  # print mypy's report on the package, as the test runs it
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        mapping = installed_layout(Path(tmp) / "tree")
        status, text = run_mypy(Path(tmp) / "tree", Path(tmp) / "mypy-cache")
        print(in_repository(text, mapping))
        sys.exit(status)


def unannotated_functions(folder: Path) -> list[str]:
    """``file:line name`` of each function in ``folder`` with a parameter (``self``/``cls``
    aside) or a return (``__init__`` aside) left without a type."""
    import ast

    out = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            arguments = node.args
            params = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            params += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
            bare = [a.arg for a in params if a.annotation is None and a.arg not in ("self", "cls")]
            if bare or (node.returns is None and node.name != "__init__"):
                out.append(f"{path.name}:{node.lineno} {node.name}")
    return out


def test_the_client_side_is_fully_annotated(tmp_path):
    """Every function of clients/ says its types, so mypy checks every body there (it skips the
    body of a function without annotations)."""
    assert unannotated_functions(REPO_ROOT / "clients") == []
    (tmp_path / "loose.py").write_text("def handler(self, payload: dict, arrays):\n    pass\n")
    assert unannotated_functions(tmp_path) == ["loose.py:1 handler"]
