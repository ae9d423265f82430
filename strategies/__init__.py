"""Server sides of the methods (one module per method; importing registers them)."""

from fedcausal_flwr.strategies import fedc2sl, fedci, fedecd, fedlcs, fedpc_vote, voting  # noqa: F401
