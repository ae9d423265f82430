"""The layering holds: imports go downwards with no circle, the protocol core is Flower-free,
Flower internals are used in one adapter module only, no source file is over 800 lines, no
strategy class is more than three deep, and a method runs under Flower's own workflow too (not
only the project's)."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterable, Sequence
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
    "fedcausal_flwr.protocols", "fedcausal_flwr.privacy", "fedcausal_flwr.payload",
    "fedcausal_flwr.federation.core",  # the protocol core, every module of it
)  # fmt: skip
#: Layers, lowest first; a module may import its own layer or lower ones (and never in a circle).
LAYERS = (
    ("fedcausal_flwr.environment", "fedcausal_flwr.options", "fedcausal_flwr.notes",
     "fedcausal_flwr.progress", "fedcausal_flwr.processes", "fedcausal_flwr.payload"),
    ("fedcausal_flwr.graphs", "fedcausal_flwr.data", "fedcausal_flwr.stats",
     "fedcausal_flwr.metrics", "fedcausal_flwr.result", "fedcausal_flwr.evidence",
     "fedcausal_flwr.outputs",
     "fedcausal_flwr.server_held"),
    ("fedcausal_flwr.discovery", "fedcausal_flwr.privacy"),
    ("fedcausal_flwr.settings", "fedcausal_flwr.federation.core"),
    ("fedcausal_flwr.protocols", "fedcausal_flwr.scoring"),
    ("fedcausal_flwr.federation", "fedcausal_flwr.clients"),
    ("fedcausal_flwr.strategies",),
    ("fedcausal_flwr.api", "fedcausal_flwr.citest", "fedcausal_flwr.flwr_app"),
    ("fedcausal_flwr.federation.deployment", "fedcausal_flwr.compare", "fedcausal_flwr.plots",
     "fedcausal_flwr.drawing_layout", "fedcausal_flwr.report", "fedcausal_flwr.study_files",
     "fedcausal_flwr.experiments_registry", "fedcausal_flwr.cli", "fedcausal_flwr.method_reference",
     "fedcausal_flwr.study_runs",
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


def imports_of(
    path: Path, module: str, *, type_only: bool = True
) -> list[tuple[str, list[str], int]]:
    """``(imported module, names, line)`` of every import statement, lazy ones included, and
    those under ``if TYPE_CHECKING:`` unless ``type_only`` is False (a type-only import still
    ties two modules: a circle of them is a circle)."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    if not type_only:
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


def string_imports(path: Path, modules: Iterable[str]) -> list[tuple[str, int]]:
    """``(module, line)`` for every string naming a project module (``"pkg.mod"`` or
    ``"pkg.mod:attr"``) in a file that imports by name (``import_module``, ``__import__``): an
    import the statements do not show, which must obey the layers all the same."""
    text = path.read_text()
    if "import_module" not in text and "__import__" not in text:
        return []
    known = set(modules)
    return [
        (node.value.partition(":")[0], node.lineno)
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.partition(":")[0] in known
    ]


def owner(name: str, modules: Iterable[str]) -> str | None:
    """The project module an import resolves to (``from pkg import mod`` counts as ``pkg.mod``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def edges(modules: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """Module -> the project modules it imports: statements anywhere in it (lazy and type-only
    ones too) and modules it names for an import by name."""
    modules = source_modules() if modules is None else modules
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for target, names, _ in imports_of(path, module):
            if not target.startswith("fedcausal_flwr"):
                continue
            for name in [f"{target}.{n}" for n in names] or [target]:
                dst = owner(name, modules) or owner(target, modules)
                if dst and dst != module:
                    graph[module].add(dst)
        for target, _ in string_imports(path, modules):
            if target != module:
                graph[module].add(target)
    return graph


def layer_of(module: str, layers: Sequence[Sequence[str]] = ()) -> int:
    best, rank = -1, None
    for k, layer in enumerate(layers or LAYERS):
        for prefix in layer:
            covers = module == prefix or (
                module.startswith(prefix + ".") and prefix != "fedcausal_flwr"
            )
            if covers and len(prefix) > best:
                best, rank = len(prefix), k
    assert rank is not None, f"{module} is in no layer; add it to LAYERS"
    return rank


def upward(graph: dict[str, set[str]], layers: Sequence[Sequence[str]] = ()) -> list[str]:
    """Every import from a module to one in a higher layer."""
    return [
        f"{src} (layer {layer_of(src, layers)}) imports {dst} (layer {layer_of(dst, layers)})"
        for src, dsts in sorted(graph.items())
        for dst in sorted(dsts)
        if layer_of(dst, layers) > layer_of(src, layers)
    ]


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of ``graph``: its strongly connected components of more than one node
    (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
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
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def folder_of(module: str, packages: set[str]) -> str:
    """The folder a module sits in (a package), or the module itself for the top package's
    own files (``fedcausal_flwr.cli``): the rooms a maintainer sees."""
    parent = module if module in packages else module.rpartition(".")[0]
    return module if parent == "fedcausal_flwr" else parent


def folder_graph(graph: dict[str, set[str]], packages: set[str]) -> dict[str, set[str]]:
    """``graph`` between folders: one folder imports another if any module of it does."""
    out: dict[str, set[str]] = {}
    for src, dsts in graph.items():
        room = folder_of(src, packages)
        out.setdefault(room, set()).update(
            folder_of(d, packages) for d in dsts if folder_of(d, packages) != room
        )
    return out


def packages_of(modules: dict[str, Path]) -> set[str]:
    return {m for m, path in modules.items() if path.name == "__init__.py"}


def test_imports_go_downwards_and_form_no_circle():
    """Across the tree: no import runs up a layer, no module circle (lazy, type-only and
    by-name imports included), and no circle between folders."""
    modules = source_modules()
    graph = edges(modules)
    assert not upward(graph), "\n".join(upward(graph))
    assert not circles(graph), f"import circles: {circles(graph)}"
    between = circles(folder_graph(graph, packages_of(modules)))
    assert not between, f"folders importing each other: {between}"


def _module_file(tmp_path: Path, name: str, text: str) -> tuple[str, Path]:
    path = tmp_path / (name.replace(".", "_") + ".py")
    path.write_text(text)
    return name, path


def test_the_checks_catch_a_synthetic_case_of_each_kind(tmp_path):
    """Each check can fail: an upward import, a module circle that only a type-only import
    closes, a circle between folders with no module circle, and an upward import by name."""
    layers = (("pkg.low",), ("pkg.high",))
    low, low_path = _module_file(tmp_path, "pkg.low.a", "from pkg.high.b import B\n")
    high, high_path = _module_file(tmp_path, "pkg.high.b", "B = 1\n")
    graph = {low: {high}, high: set()}
    assert upward(graph, layers) == ["pkg.low.a (layer 0) imports pkg.high.b (layer 1)"]

    typed = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fedcausal_flwr.q import Q\n"
    )
    modules = dict([
        _module_file(tmp_path, "fedcausal_flwr.p", "from fedcausal_flwr import q\n"),
        _module_file(tmp_path, "fedcausal_flwr.q", typed),
    ])  # fmt: skip
    modules["fedcausal_flwr.q"].write_text(typed.replace(".q import Q", ".p import P"))
    assert circles(edges(modules)) == [["fedcausal_flwr.p", "fedcausal_flwr.q"]]

    folders = {"f.one.x": {"f.two.y"}, "f.two.z": {"f.one.w"}, "f.one.w": set(), "f.two.y": set()}
    assert circles(folders) == []
    assert circles(folder_graph(folders, {"f.one", "f.two"})) == [["f.one", "f.two"]]

    by_name = dict([
        _module_file(tmp_path, "fedcausal_flwr.federation.core.reg",
                     'import importlib\nTOP = "fedcausal_flwr.strategies"\n'
                     "def load():\n    return importlib.import_module(TOP)\n"),
        _module_file(tmp_path, "fedcausal_flwr.strategies", ""),
    ])  # fmt: skip
    named = edges(by_name)
    assert named["fedcausal_flwr.federation.core.reg"] == {"fedcausal_flwr.strategies"}
    assert upward(named) == [
        f"fedcausal_flwr.federation.core.reg (layer {layer_of('fedcausal_flwr.federation.core')}) "
        f"imports fedcausal_flwr.strategies (layer {layer_of('fedcausal_flwr.strategies')})"
    ]


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


#: the longest a function of the package (fedcausal_flwr/, strategies/, clients/) may be
MAX_FUNCTION_LINES = 80


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``name (lines)`` of every function in ``path`` longer than ``limit`` lines."""
    return [
        f"{node.name} ({node.end_lineno - node.lineno + 1})"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > limit
    ]


def test_no_function_of_the_package_is_over_80_lines(tmp_path):
    """A long function is split where the split has a name; the check can fail."""
    long = {
        str(path.relative_to(REPO_ROOT)): found
        for module, path in source_modules().items()
        if not module.startswith("fedcausal_flwr.experiments")
        if (found := long_functions(path))
    }
    assert not long, long
    synthetic = tmp_path / "long.py"
    synthetic.write_text("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES)
    assert long_functions(synthetic) == [f"f ({MAX_FUNCTION_LINES + 1})"]


def test_no_source_file_is_over_800_lines():
    long = {
        str(path.relative_to(REPO_ROOT)): n
        for path in source_modules().values()
        if (n := len(path.read_text().splitlines())) > 800
    }
    assert not long, long


#: the most classes a strategy's MRO may hold from its own class down to ``ProtocolStrategy``:
#: ``ProtocolStrategy -> MethodStrategy -> X``; shared behaviour is a part, not a base class
MAX_STRATEGY_DEPTH = 3


def too_deep(classes: Iterable[type], limit: int = MAX_STRATEGY_DEPTH) -> dict[str, list[str]]:
    """Each of ``classes`` whose MRO holds more than ``limit`` classes from itself down to
    ``ProtocolStrategy`` (both counted): its name -> that chain."""
    from fedcausal_flwr.federation.core.protocol import ProtocolStrategy

    chains = {cls: cls.__mro__[: cls.__mro__.index(ProtocolStrategy) + 1] for cls in classes}
    return {
        cls.__name__: [c.__name__ for c in chain]
        for cls, chain in chains.items()
        if len(chain) > limit
    }


def strategy_classes() -> set[type]:
    """Every built-in method's strategy class (a factory function's by its return annotation)
    and every other strategy class the package defines (the bases they share, too)."""
    import inspect
    import typing

    from fedcausal_flwr.federation.core.protocol import ProtocolStrategy
    from fedcausal_flwr.federation.core.registry import builtin_methods, get_method

    registered = set()
    for name in builtin_methods():
        make = get_method(name).make_strategy
        made = make if inspect.isclass(make) else typing.get_type_hints(make)["return"]
        assert inspect.isclass(made) and issubclass(made, ProtocolStrategy), (name, made)
        registered.add(made)
    defined, stack = set(), [ProtocolStrategy]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub.__module__.startswith("fedcausal_flwr.") and sub not in defined:
                defined.add(sub)
                stack.append(sub)
    assert registered <= defined, registered - defined
    return defined


def test_no_strategy_class_is_more_than_three_deep():
    """ProtocolStrategy -> MethodStrategy -> the method's class, at most; the check can fail."""
    from fedcausal_flwr.strategies.voting import GraphVoteStrategy

    deep = too_deep(strategy_classes())
    assert not deep, deep

    class OnAMethod(GraphVoteStrategy):
        pass

    chain = ["OnAMethod", "GraphVoteStrategy", "MethodStrategy", "ProtocolStrategy"]
    assert too_deep([OnAMethod, GraphVoteStrategy]) == {"OnAMethod": chain}


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
        def make(pid, data, context):
            return make_toy_client(pid, data, {}, context=context)

        return PartitionedClients(make, parts)

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
