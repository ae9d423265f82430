"""Protocol vocabulary: clients never import strategies, and every action name is one shared
constant of :mod:`fedcausal_flwr.protocols` (checked on the source, with ``ast``)."""

import ast
import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import fedcausal_flwr.clients
import fedcausal_flwr.protocols
import fedcausal_flwr.strategies
from fedcausal_flwr.clients.base import ProtocolClient
from fedcausal_flwr.federation.core.messages import BOOTSTRAP, HELLO

PROTOCOL_HOMES = ("fedcausal_flwr.protocols", "fedcausal_flwr.federation.core.messages")
CORE = ("fedcausal_flwr.stats", "fedcausal_flwr.discovery", "fedcausal_flwr.graphs")
CORE += (
    "fedcausal_flwr.data",
    "fedcausal_flwr.federation.core.messages",
    "fedcausal_flwr.federation.core.disclosure",  # a message's disclosure class beside its record
    "fedcausal_flwr.payload",  # the records' machinery
    "fedcausal_flwr.protocols",
)
PACKAGES = (fedcausal_flwr.clients, fedcausal_flwr.protocols, fedcausal_flwr.strategies)


def sources(package) -> list[tuple[str, ast.Module]]:
    """``(module name, syntax tree)`` of every module of ``package`` (its ``__init__`` too)."""
    folder = Path(package.__file__).parent
    out = []
    for path in sorted(folder.glob("*.py")):
        name = package.__name__ if path.stem == "__init__" else f"{package.__name__}.{path.stem}"
        out.append((name, ast.parse(path.read_text(), filename=str(path))))
    return out


def is_package(module: str) -> bool:
    return module in {p.__name__ for p in PACKAGES}


def imports(module: str, tree: ast.Module) -> list[str]:
    """Every module name ``tree`` imports, lazy imports included; ``from a import b`` gives
    ``a.b`` (``b`` may be a submodule), relative imports resolved against ``module``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                anchor = parts if is_package(module) else parts[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found += [f"{base}.{alias.name}" for alias in node.names]
    return found


def within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_clients_never_import_strategies():
    offending = [
        (module, name)
        for module, tree in sources(fedcausal_flwr.clients)
        for name in imports(module, tree)
        if within(name, ["fedcausal_flwr.strategies"])
    ]
    assert sources(fedcausal_flwr.clients) and not offending


def test_protocols_import_only_the_core():
    """numpy, the standard library and the Flower-free core: no flwr, strategies or clients."""
    allowed = {"__future__", "numpy", *sys.stdlib_module_names}
    offending = [
        (module, name)
        for module, tree in sources(fedcausal_flwr.protocols)
        for name in imports(module, tree)
        if name.split(".")[0] not in allowed and not within(name, CORE)
    ]
    assert not offending


def test_protocols_and_the_lcs_engine_load_without_flower():
    """Transitively too: importing them (in a fresh interpreter) loads no Flower module."""
    engine = ["fedcausal_flwr.discovery.lcs", "fedcausal_flwr.discovery.lcs_payload"]
    modules = [f"fedcausal_flwr.protocols.{m.name}" for m in pkgutil.iter_modules(
        fedcausal_flwr.protocols.__path__)] + engine  # fmt: skip
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'flwr' or "
        "m.startswith(('fedcausal_flwr.strategies', 'fedcausal_flwr.clients'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def declared_actions() -> dict[str, str]:
    """Action name -> the protocols module declaring it (in its ``ACTIONS``); ``hello`` built in."""
    declared = {HELLO: "fedcausal_flwr.federation.core.messages"}
    declared[BOOTSTRAP] = "fedcausal_flwr.federation.core.messages"
    for info in pkgutil.iter_modules(fedcausal_flwr.protocols.__path__):
        module = importlib.import_module(f"fedcausal_flwr.protocols.{info.name}")
        for name in getattr(module, "ACTIONS", ()):
            assert name not in declared, f"{name!r} declared twice"
            declared[name] = module.__name__
    return declared


def client_classes() -> list[type[ProtocolClient]]:
    classes = []
    for info in pkgutil.iter_modules(fedcausal_flwr.clients.__path__):
        module = importlib.import_module(f"fedcausal_flwr.clients.{info.name}")
        classes += [
            cls
            for cls in vars(module).values()
            if inspect.isclass(cls)
            and issubclass(cls, ProtocolClient)
            and cls.__module__ == module.__name__
        ]
    return classes


def test_every_handled_action_is_a_declared_constant_and_every_constant_is_handled():
    declared = declared_actions()
    handled = {name for cls in client_classes() for name in cls.known_actions()}
    assert len(client_classes()) >= 6
    assert handled - set(declared) == set(), "actions handled but not declared in protocols"
    assert set(declared) - handled == set(), "actions declared but handled by no client"


def test_each_protocols_module_lists_all_its_action_constants():
    for info in pkgutil.iter_modules(fedcausal_flwr.protocols.__path__):
        module = importlib.import_module(f"fedcausal_flwr.protocols.{info.name}")
        strings = {v for k, v in vars(module).items() if k.isupper() and isinstance(v, str)}
        assert strings == set(getattr(module, "ACTIONS", ())), module.__name__


def protocol_names(module: str, tree: ast.Module) -> set[str]:
    """Local names bound by imports from a protocols module or ``federation.messages``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and within(node.module or "", PROTOCOL_HOMES):
            names |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.asname and within(a.name, PROTOCOL_HOMES)}
    return names


def is_protocol_constant(node: ast.expr, names: set[str]) -> bool:
    """``NAME`` or ``module.NAME`` where the name comes from a protocols module import."""
    if isinstance(node, ast.Name):
        return node.id in names
    return isinstance(node, ast.Attribute) and is_protocol_constant(node.value, names)


def action_uses(tree: ast.Module, callee: str) -> list[tuple[int, ast.expr]]:
    """``(line, action argument)`` of every call ``callee(...)``, and for ``Request`` also of
    every comparison ``<something>.action == ...``."""
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == callee:
            args = node.args[:1] + [k.value for k in node.keywords if k.arg == "action"]
            uses += [(node.lineno, arg) for arg in args]
        elif callee == "Request" and isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr == "action" for s in sides):
                uses += [(node.lineno, s) for s in sides if not isinstance(s, ast.Attribute)]
    return uses


@pytest.mark.parametrize(
    "package, callee",
    [(fedcausal_flwr.strategies, "Request"), (fedcausal_flwr.clients, "action")],
    ids=["strategies-Request", "clients-action"],
)
def test_action_names_are_protocol_constants_not_literals(package, callee):
    offending, seen = [], 0
    for module, tree in sources(package):
        names = protocol_names(module, tree)
        for line, arg in action_uses(tree, callee):
            seen += 1
            if not is_protocol_constant(arg, names):
                offending.append(f"{module}:{line}: {ast.unparse(arg)}")
    assert seen >= 10 and not offending


#: names a payload or a reply's meta goes by in the method modules
PAYLOAD_NAMES = ("payload", "meta", "asked", "part")


def carries_payload(node: ast.expr) -> bool:
    """``payload``, ``r.meta``, ``self.base_payload()``: an expression named like a payload."""
    while isinstance(node, ast.Call):
        node = node.func
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return any(word in name.lower() for word in PAYLOAD_NAMES)


def keyed_dict(node: ast.expr | None) -> bool:
    """A dict display with a key (``{}`` is an empty payload, not a key)."""
    return isinstance(node, ast.Dict) and bool(node.keys)


def payload_key_literals(tree: ast.Module) -> list[str]:
    """Each place ``tree`` writes a payload key itself instead of through a record of
    :mod:`fedcausal_flwr.protocols`: ``payload["k"]``, ``meta.get("k")``, a keyed dict as a
    request's payload or as the meta a handler returns (directly or through a local name)."""
    found = []
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]:
        dicts = {  # local names bound to keyed dict displays
            t.id
            for n in ast.walk(fn)
            if isinstance(n, ast.Assign) and keyed_dict(n.value)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        is_handler = any(
            isinstance(d, ast.Call) and getattr(d.func, "id", None) == "action"
            for d in fn.decorator_list
        )
        # a helper that builds a payload (the result's payload is not a message)
        builds_payload = "payload" in fn.name and fn.name != "result_payload"
        for node in ast.walk(fn):
            if builds_payload and isinstance(node, ast.Return) and keyed_dict(node.value):
                found.append(f"{node.lineno}: {fn.name} returns {ast.unparse(node.value)[:60]}")
            elif isinstance(node, ast.Subscript) and carries_payload(node.value):
                if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                    found.append(f"{node.lineno}: {ast.unparse(node)}")
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get":
                key = node.args[0] if node.args else None
                if carries_payload(node.func.value) and isinstance(key, ast.Constant):
                    found.append(f"{node.lineno}: {ast.unparse(node)}")
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Request":
                sent = node.args[1:2] + [k.value for k in node.keywords if k.arg == "payload"]
                for arg in sent:
                    if keyed_dict(arg) or (isinstance(arg, ast.Name) and arg.id in dicts):
                        found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
            elif is_handler and isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
                meta = node.value.elts[1] if len(node.value.elts) == 2 else None
                if keyed_dict(meta) or (isinstance(meta, ast.Name) and meta.id in dicts):
                    found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return found


@pytest.mark.parametrize("package", [fedcausal_flwr.strategies, fedcausal_flwr.clients])
def test_no_payload_key_is_written_outside_the_protocol_records(package):
    """Strategies and clients build and read every payload (and reply meta) through the records
    of their :mod:`fedcausal_flwr.protocols` module, so each key is written once, there."""
    offending = [
        f"{module}:{place}"
        for module, tree in sources(package)
        for place in payload_key_literals(tree)
    ]
    assert not offending, "\n".join(offending)


def test_the_payload_key_check_finds_each_kind_of_literal():
    """The check above can fail: one of each kind it looks for, and their record spellings."""
    bad = """
@action(X)
def handler(self, payload, arrays):
    level = payload["level"]
    depth = payload.get("max_depth")
    return [], {"tests": 3}

def base_payload(self):
    return {"variables": self.variables}

def next_request(self):
    sent = {"variables": self.variables}
    Request(X, {"variables": self.variables})
    Request(X, {**self.base_payload(), "jobs": 2})
    Request(X, sent)
    return r.meta.get("tests", 0)
"""
    good = """
@action(X, PruneRequest)
def handler(self, request, arrays):
    level = request.level
    return [], ComputedTests(3)

def next_request(self):
    Request(X, PruneRequest(self.variables, level=2))
    Request(X, {})
    return r.meta_as(ComputedTests).tests + levels["a"]
"""
    assert len(payload_key_literals(ast.parse(bad))) == 8
    assert payload_key_literals(ast.parse(good)) == []
