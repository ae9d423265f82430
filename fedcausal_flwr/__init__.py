"""fedcausal-flwr: federated causal structure learning on Flower."""

__version__ = "0.1.0"


def run(*args, **kwargs):
    """See :func:`fedcausal_flwr.api.run` (imported lazily: Flower loads only when needed)."""
    from fedcausal_flwr.api import run as _run

    return _run(*args, **kwargs)
