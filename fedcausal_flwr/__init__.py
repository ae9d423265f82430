"""fedcausal-flwr: federated causal structure learning on Flower."""

import os

# Flower reads this once, at import; federations of private data should not phone home by default.
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

__version__ = "0.1.0"


def run(*args, **kwargs):
    """See :func:`fedcausal_flwr.api.run` (imported lazily: Flower loads only when needed)."""
    from fedcausal_flwr.api import run as _run

    return _run(*args, **kwargs)


def citest(*args, **kwargs):
    """See :func:`fedcausal_flwr.citest.citest` (imported lazily)."""
    from fedcausal_flwr.citest import citest as _citest

    return _citest(*args, **kwargs)
