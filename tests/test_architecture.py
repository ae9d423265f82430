"""The layering holds: imports go downwards with no circle, the protocol core is Flower-free,
Flower internals are used in one adapter module only, no source file is over 800 lines, and a
method runs under Flower's own workflow too (not only the project's)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
#: source folder -> the import package it is installed as (pyproject's package-dir)
SOURCES = {
    "fedcausal_flwr": "fedcausal_flwr",
    "strategies": "fedcausal_flwr.strategies",
    "clients": "fedcausal_flwr.clients",
    "experiments": "fedcausal_flwr.experiments",
}
FLOWER_INTERNALS = "fedcausal_flwr.federation.runtime.flower_internals"
#: Flower 1.42's public API: these modules and the names in their __all__.
FLOWER_PUBLIC = (
    "flwr.app", "flwr.clientapp", "flwr.serverapp", "flwr.client", "flwr.client.mod",
    "flwr.common", "flwr.server", "flwr.server.strategy", "flwr.server.workflow",
    "flwr.simulation",
)  # fmt: skip
FLOWER_FREE = (
    "fedcausal_flwr.environment", "fedcausal_flwr.options", "fedcausal_flwr.notes",
    "fedcausal_flwr.settings", "fedcausal_flwr.progress",
    "fedcausal_flwr.result", "fedcausal_flwr.outputs",
    "fedcausal_flwr.metrics", "fedcausal_flwr.scoring", "fedcausal_flwr.graphs",
    "fedcausal_flwr.data", "fedcausal_flwr.stats", "fedcausal_flwr.discovery",
    "fedcausal_flwr.protocols",
    "fedcausal_flwr.federation.core",  # the protocol core, every module of it
)  # fmt: skip
#: Layers, lowest first; a module may import its own layer or lower ones (and never in a circle).
LAYERS = (
    ("fedcausal_flwr.environment", "fedcausal_flwr.options", "fedcausal_flwr.notes",
     "fedcausal_flwr.progress", "fedcausal_flwr.processes"),
    ("fedcausal_flwr.graphs", "fedcausal_flwr.data", "fedcausal_flwr.stats",
     "fedcausal_flwr.metrics", "fedcausal_flwr.result", "fedcausal_flwr.evidence",
     "fedcausal_flwr.outputs",
     "fedcausal_flwr.server_held"),
    ("fedcausal_flwr.discovery",),
    ("fedcausal_flwr.settings", "fedcausal_flwr.federation.core"),
    ("fedcausal_flwr.protocols", "fedcausal_flwr.scoring"),
    ("fedcausal_flwr.federation", "fedcausal_flwr.clients"),
    ("fedcausal_flwr.strategies",),
    ("fedcausal_flwr.api", "fedcausal_flwr.citest", "fedcausal_flwr.flwr_app"),
    ("fedcausal_flwr.compare", "fedcausal_flwr.plots", "fedcausal_flwr.drawing_layout",
     "fedcausal_flwr.report",
     "fedcausal_flwr.study_files", "fedcausal_flwr.experiments_registry", "fedcausal_flwr.cli",
     "fedcausal_flwr.interrupts", "fedcausal_flwr.audit", "fedcausal_flwr.citest_command"),
    ("fedcausal_flwr", "fedcausal_flwr.experiments"),  # the facade (run, rerun, citest), scripts
)  # fmt: skip


def source_modules() -> dict[str, Path]:
    modules = {}
    for folder, package in SOURCES.items():
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO_ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join([package, *parts])] = path
    return modules


def imports_of(path: Path, module: str) -> list[tuple[str, list[str], int]]:
    """``(imported module, names, line)`` of every import outside ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    found = []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((base, [a.name for a in node.names], node.lineno))
    return found


def owner(name: str, modules: dict[str, Path]) -> str | None:
    """The project module an import resolves to (``from pkg import mod`` counts as ``pkg.mod``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def edges() -> dict[str, set[str]]:
    modules = source_modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for target, names, _ in imports_of(path, module):
            if not target.startswith("fedcausal_flwr"):
                continue
            for name in [f"{target}.{n}" for n in names] or [target]:
                dst = owner(name, modules) or owner(target, modules)
                if dst and dst != module:
                    graph[module].add(dst)
    return graph


def layer_of(module: str) -> int:
    best, rank = -1, None
    for k, layer in enumerate(LAYERS):
        for prefix in layer:
            covers = module == prefix or (
                module.startswith(prefix + ".") and prefix != "fedcausal_flwr"
            )
            if covers and len(prefix) > best:
                best, rank = len(prefix), k
    assert rank is not None, f"{module} is in no layer; add it to LAYERS"
    return rank


def test_imports_go_downwards_and_form_no_circle():
    graph = edges()
    upward = [
        f"{src} (layer {layer_of(src)}) imports {dst} (layer {layer_of(dst)})"
        for src, dsts in graph.items()
        for dst in dsts
        if layer_of(dst) > layer_of(src)
    ]
    assert not upward, "\n".join(upward)
    # no circle, lazy imports included (Tarjan's strongly connected components)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not circles, f"import circles: {circles}"


def test_the_protocol_core_is_flower_free():
    modules = source_modules()
    offenders = [
        f"{module}:{line} imports {target}"
        for module, path in modules.items()
        if any(module == p or module.startswith(p + ".") for p in FLOWER_FREE)
        for target, _, line in imports_of(path, module)
        if target == "flwr" or target.startswith("flwr.")
    ]
    assert not offenders, "\n".join(offenders)


def test_only_the_adapter_module_reaches_past_flowers_public_api():
    public = {name: set(getattr(importlib.import_module(name), "__all__", ())) for name in
              FLOWER_PUBLIC}  # fmt: skip
    offenders = []
    for module, path in source_modules().items():
        if module == FLOWER_INTERNALS:
            continue
        text = path.read_text()
        if "__dict__[" in text and "metadata" in text:
            offenders.append(f"{module}: writes a private Flower field")
        for target, names, line in imports_of(path, module):
            if target != "flwr" and not target.startswith("flwr."):
                continue
            if target not in public:
                offenders.append(f"{module}:{line} imports the internal module {target}")
                continue
            hidden = [n for n in names if n not in public[target]]
            if hidden:
                offenders.append(f"{module}:{line} imports {hidden} from {target} (not public)")
    assert not offenders, "\n".join(offenders)
    # ... and the adapter module does use internals (else it should not exist)
    internals = source_modules()[FLOWER_INTERNALS]
    assert any(t.startswith("flwr.") and t not in public for t, _, _ in imports_of(internals, "x"))


def test_no_source_file_is_over_800_lines():
    long = {
        str(path.relative_to(REPO_ROOT)): n
        for path in source_modules().values()
        if (n := len(path.read_text().splitlines())) > 800
    }
    assert not long, long


@pytest.mark.parametrize("secure", [False])
def test_a_method_runs_under_flowers_own_default_workflow(secure):
    """FlowerStrategy works with Flower's ServerApp(server_fn=...) and its DefaultWorkflow (a
    fixed number of rounds): the same result as the project's round-until-done workflow."""
    from flwr.server import ServerAppComponents, ServerConfig
    from flwr.serverapp import ServerApp

    from fedcausal_flwr.federation.runtime.adapter import FlowerStrategy
    from fedcausal_flwr.federation.runtime.localgrid import run_local
    from fedcausal_flwr.federation.runtime.runners import PartitionedClients, run_protocol
    from fedcausal_flwr.federation.runtime.workflow import make_client_app
    from tests.test_federation_toy import ToyStrategy, make_toy_client, toy_partitions

    parts = toy_partitions(3)

    def factory():
        return PartitionedClients(lambda pid, data: make_toy_client(pid, data, {}), parts)

    ours = run_protocol(ToyStrategy(), factory(), 3)
    strategy = ToyStrategy()
    app = ServerApp(
        server_fn=lambda context: ServerAppComponents(
            strategy=FlowerStrategy(strategy), config=ServerConfig(num_rounds=6)
        )
    )
    run_local(app, make_client_app(factory()), 3)
    theirs = strategy.build_result()
    assert theirs.extra == ours.extra and theirs.rounds == ours.rounds == 4
    assert [e["action"] for e in theirs.log] == [e["action"] for e in ours.log]
    assert strategy.protocol_run.finished
