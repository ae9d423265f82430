"""Server sides of the methods (one module per method family; importing one registers its methods).

:data:`BUILTIN_METHODS` names, once, the module that registers each built-in method, so a run
imports only the module of the method it runs (``registry.get_method``); listing every method
(``known_methods()``, ``builtin_methods()``) imports them all. A test checks the map against what
the modules register.
"""

from __future__ import annotations

import importlib

#: built-in method name -> the module of this package that registers it
BUILTIN_METHODS: dict[str, str] = {
    "fedpc": "fedc2sl",
    "fedfci": "fedc2sl",
    "fedpc-vote": "fedpc_vote",
    "fedecd": "fedecd",
    "notears-admm": "notears_admm",
    "fedcsl": "fedcsl",
    "fedlcs": "fedlcs",
    "fedlcs-local": "lcs_baselines",
    "lcs-pooled": "lcs_baselines",
    "rfcd": "rfcd",
    "fedci-pc": "fedci",
    "fedci-fci": "fedci",
    "fedci-iod": "fedci_iod",
    "iod-fisher": "fedci_iod",
    "iod-pooled": "fedci_iod",
    "fedcdnv": "tpss",
    "fedcdnv-vote": "tpss",
    "fci-base": "tpss",
    "pc-vote": "voting",
    "pc-cit-vote": "voting",
    "fci-vote": "voting",
    "fci-cit-vote": "voting",
    "local": "voting",
    "pooled": "voting",
}

#: the method modules, each once, in a fixed order
METHOD_MODULES: tuple[str, ...] = tuple(dict.fromkeys(sorted(BUILTIN_METHODS.values())))


def import_method_module(name: str) -> bool:
    """Import the module that registers built-in method ``name``; False if it is no built-in."""
    module = BUILTIN_METHODS.get(name)
    if module is None:
        return False
    importlib.import_module(f"{__name__}.{module}")
    return True


def import_all() -> None:
    """Import every method module (registers every built-in method)."""
    for module in METHOD_MODULES:
        importlib.import_module(f"{__name__}.{module}")
