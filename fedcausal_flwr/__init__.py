"""fedcausal-flwr: federated causal structure learning on Flower.

The package root is the user's facade: ``run``, ``rerun`` and ``citest`` (the functions of
:mod:`fedcausal_flwr.api` and :mod:`fedcausal_flwr.citest` themselves, so ``help()`` shows their
documentation), imported on first use so that ``import fedcausal_flwr`` loads no Flower;
importing it sets the environment of :mod:`fedcausal_flwr.environment` (nothing the project
starts phones out).
"""

from __future__ import annotations

import importlib
from typing import Any

from fedcausal_flwr.environment import NO_PHONING_OUT
from fedcausal_flwr.environment import VERSION as __version__
from fedcausal_flwr.options import OptionError

__all__ = ["NO_PHONING_OUT", "OptionError", "__version__", "citest", "rerun", "run"]

#: the facade's functions and the module each lives in (imported on first use)
_FACADE = {
    "run": "fedcausal_flwr.api",
    "rerun": "fedcausal_flwr.api",
    "citest": "fedcausal_flwr.citest",
}


def __getattr__(name: str) -> Any:
    if name not in _FACADE:
        raise AttributeError(f"module 'fedcausal_flwr' has no attribute {name!r}")
    function = getattr(importlib.import_module(_FACADE[name]), name)
    if name != "citest":  # importing the citest module made the package's name a callable module
        globals()[name] = function
    return function


def __dir__() -> list[str]:
    return sorted({*globals(), *_FACADE})
