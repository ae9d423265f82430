"""Client of the voting baselines, the local-only baseline and the pooled reference.

Mirror of :mod:`fedcausal_flwr.strategies.voting` (wire protocol:
:mod:`fedcausal_flwr.protocols.voting`): the shared actions of
:class:`~fedcausal_flwr.clients.discrete.DiscreteClient` (local graphs, local
p-values, raw rows), of which each baseline answers the one it declares.
"""

from __future__ import annotations

from fedcausal_flwr.clients.discrete import DiscreteClient


class VotingClient(DiscreteClient):
    """One site's data, for the voting baselines, ``local`` and ``pooled``."""
