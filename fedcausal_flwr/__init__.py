"""fedcausal-flwr: federated causal structure learning on Flower."""

import os

# Nothing the project starts phones out: Flower's telemetry and update check stay off, and no Flower
# process installs an app's dependencies at run time. Every Flower process the project starts
# inherits these (a user who wants them can set them before importing the package).
NO_PHONING_OUT = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
}
for _name, _value in NO_PHONING_OUT.items():
    os.environ.setdefault(_name, _value)

__version__ = "0.1.0"

from fedcausal_flwr.options import OptionError  # noqa: E402 - after the environment is set

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
