"""Client of layer-wise voting FedPC (mirror of :mod:`fedcausal_flwr.strategies.fedpc_vote`).

It answers ``prune`` (one layer of the vote, on the site's rows) and ``pvalues`` (its own
p-values of the max-p candidates), both actions of
:class:`~fedcausal_flwr.clients.discrete.DiscreteClient`.
"""

from __future__ import annotations

from fedcausal_flwr.clients.discrete import DiscreteClient


class FedPCVoteClient(DiscreteClient):
    """One site's data, for ``fedpc-vote``."""
