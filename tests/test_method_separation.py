"""No method imports another method's module.

A method's server side (``strategies/<module>.py``) and client side (``clients/<module>.py``) may
import their own mirror, the shared modules that no method owns (the discrete-test base, the
layer vote, the GLM CI tests, the shared options, the code cache) and the core; never the module
that registers another method. So a method can be read, changed or removed on its own, and what
two methods share is named as shared. Checked on the import statements, read from the sources.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from fedcausal_flwr.federation.core.registry import builtin_method_map

#: built-in method name -> the module of strategies/ that registers it (the package's metadata)
BUILTIN_METHODS = {name: m.rpartition(".")[2] for name, m in builtin_method_map().items()}
METHOD_MODULES = tuple(sorted(set(BUILTIN_METHODS.values())))

REPO_ROOT = Path(__file__).resolve().parents[1]
SIDES = {"strategies": "fedcausal_flwr.strategies", "clients": "fedcausal_flwr.clients"}


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in the file (a factory's local import too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def client_classes_named(path: Path) -> set[str]:
    """The modules of the client classes ``path`` registers (``"package.module:Class"``)."""
    return {
        node.value.partition(":")[0]
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"fedcausal_flwr\.clients\.\w+:\w+", node.value)
    }


def method_modules_imported(path: Path) -> set[str]:
    """The method modules (of either side) that ``path`` imports or names as its client class,
    its own name left out."""
    own = path.stem
    out = set()
    for module in imported_modules(path) | client_classes_named(path):
        for package in SIDES.values():
            if module.startswith(package + "."):
                name = module[len(package) + 1 :].split(".")[0]
                if name in METHOD_MODULES and name != own:
                    out.add(f"{package}.{name}")
    return out


SOURCES = sorted(
    path
    for folder in SIDES
    for path in (REPO_ROOT / folder).glob("*.py")
    if path.name != "__init__.py"
)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_module_imports_another_methods_module(path):
    assert method_modules_imported(path) == set(), (
        f"{path.parent.name}/{path.name} imports another method's module; move what they share "
        "into a shared module"
    )


def test_every_method_module_has_its_client_mirror():
    for module in METHOD_MODULES:
        assert (REPO_ROOT / "strategies" / f"{module}.py").is_file()
        assert (REPO_ROOT / "clients" / f"{module}.py").is_file(), module


def test_the_check_sees_an_import_of_another_method(tmp_path):
    """The check can fail: a module of its own name importing a sibling method is caught."""
    other = sorted(set(BUILTIN_METHODS.values()))
    source = tmp_path / f"{other[0]}.py"
    source.write_text(
        f"from fedcausal_flwr.strategies.{other[1]} import X\n"
        "def make_client():\n"
        f"    from fedcausal_flwr.clients import {other[2]}\n"
        f'register_method("m", X, "fedcausal_flwr.clients.{other[3]}:Client")\n'
    )
    assert method_modules_imported(source) == {
        f"fedcausal_flwr.strategies.{other[1]}",
        f"fedcausal_flwr.clients.{other[2]}",
        f"fedcausal_flwr.clients.{other[3]}",
    }


def test_every_builtin_client_class_path_names_a_protocol_client():
    """A client named by its class path is imported only when the first client is built: each
    built-in one resolves, in its method's own client module."""
    import importlib

    from fedcausal_flwr.clients.base import ProtocolClient
    from fedcausal_flwr.federation.core.registry import builtin_methods, get_method

    for name in builtin_methods():
        factory = get_method(name).make_client
        module = importlib.import_module(factory.__module__)
        assert issubclass(getattr(module, factory.__qualname__), ProtocolClient), name
        assert factory.__module__.rpartition(".")[2] == BUILTIN_METHODS[name], name
