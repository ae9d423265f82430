"""Server sides of the methods (one module per method family; importing one registers its methods).

:data:`BUILTIN_METHODS` names, once, the module that registers each built-in method, so a run
imports only the module of the method it runs (``registry.get_method``); listing every method
(``known_methods()``, ``builtin_methods()``) imports them all. A test checks the map against what
the modules register.

No method module imports another's (a test reads the imports): what methods share has a module
of its own that registers nothing: :mod:`.discrete` (the discrete-test methods' options and
strategy base, the pooled oracle), :mod:`.layer_vote` (the layer-wise vote of fedpc-vote and
FedECD), :mod:`.glm_tests` (fedCI's federated GLM tests, for fedci-pc/-fci and fedCI-IOD),
:mod:`.shared_options` (options several methods declare alike) and :mod:`.base`. The client side
mirrors it (``clients/discrete.py``, ``clients/glm_tests.py``, ``clients/base.py``).
"""

from __future__ import annotations

import importlib

#: built-in method name -> the module of this package that registers it
BUILTIN_METHODS: dict[str, str] = {
    "fedpc": "fedpc",
    "fedfci": "fedpc",
    "fedpc-vote": "fedpc_vote",
    "fedecd": "fedecd",
    "notears-admm": "notears_admm",
    "fedcsl": "fedcsl",
    "fedlcs": "fedlcs",
    "fedlcs-local": "fedlcs",
    "lcs-pooled": "fedlcs",
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


def import_all() -> None:
    """Import every method module (registers every built-in method)."""
    for module in METHOD_MODULES:
        importlib.import_module(f"{__name__}.{module}")
