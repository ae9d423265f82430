"""Server sides of the methods (one module per method; importing registers them)."""

from fedcausal_flwr.strategies import (  # noqa: F401
    fedc2sl,
    fedci,
    fedecd,
    fedlcs,
    fedpc_vote,
    tpss,
    voting,
)
