"""fedcausal-flwr: federated causal structure learning on Flower.

The package root is the user's facade (``run``, ``rerun``, ``citest``, imported lazily so that
``import fedcausal_flwr`` loads no Flower); importing it sets the environment of
:mod:`fedcausal_flwr.environment` (nothing the project starts phones out).
"""

from fedcausal_flwr.environment import NO_PHONING_OUT
from fedcausal_flwr.environment import VERSION as __version__
from fedcausal_flwr.options import OptionError

__all__ = ["NO_PHONING_OUT", "OptionError", "__version__", "citest", "rerun", "run"]


def run(*args, **kwargs):
    """See :func:`fedcausal_flwr.api.run` (imported lazily: Flower loads only when needed)."""
    from fedcausal_flwr.api import run as _run

    return _run(*args, **kwargs)


def rerun(*args, **kwargs):
    """See :func:`fedcausal_flwr.api.rerun` (imported lazily)."""
    from fedcausal_flwr.api import rerun as _rerun

    return _rerun(*args, **kwargs)


def citest(*args, **kwargs):
    """See :func:`fedcausal_flwr.citest.citest` (imported lazily)."""
    from fedcausal_flwr.citest import citest as _citest

    return _citest(*args, **kwargs)
