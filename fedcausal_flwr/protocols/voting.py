"""Actions answered by the voting client: local graphs, local p-values, layer pruning, raw data;
their payloads and what each discloses.

The wire protocols are documented in :mod:`fedcausal_flwr.strategies.voting` (``local_graph``,
``pvalues``, ``raw_data``), :mod:`fedcausal_flwr.strategies.fedpc_vote` (``prune``, ``pvalues``)
and :mod:`fedcausal_flwr.strategies.fedecd` (``prune``); ``raw_data`` is also the pooled reference
of :mod:`fedcausal_flwr.strategies.fedlcs`. Queries and separating sets travel as
:func:`fedcausal_flwr.protocols.queries.encode_queries` matrices. The base records are
:mod:`fedcausal_flwr.protocols.discrete`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.protocols.discrete import DiscreteScope, LevelSets
from fedcausal_flwr.protocols.records import optional, wire

LOCAL_GRAPH = "local_graph"  # the client's own PC/FCI graph (endpoint marks)
PVALUES = "pvalues"  # the client's p-value of every query of a batch
PRUNE = "prune"  # one PC-stable level on the broadcast skeleton: kept edges + separating sets
RAW_DATA = "raw_data"  # the encoded rows themselves (centralised references only, not private)
ACTIONS = (LOCAL_GRAPH, PVALUES, PRUNE, RAW_DATA)

#: what each baseline's clients disclose: their own graphs (pc/fci-vote, local), their own p-values
#: (pc/fci-cit-vote), or their rows (pooled: the centralised reference, NOT private)
GRAPH_VOTE_DISCLOSURES = {LOCAL_GRAPH: disclosure.PER_CLIENT}
CIT_VOTE_DISCLOSURES = {PVALUES: disclosure.PER_CLIENT}
POOLED_DISCLOSURES = {RAW_DATA: disclosure.RAW}
#: fedpc-vote: each client's kept edges and separating sets of a layer, and its own p-values
FEDPC_VOTE_DISCLOSURES = {PRUNE: disclosure.PER_CLIENT, PVALUES: disclosure.PER_CLIENT}


@dataclass(frozen=True)
class LocalGraphRequest(DiscreteScope):
    """``local_graph``: run ``algorithm`` (pc|fci) alone up to ``max_depth`` (None: no limit),
    with the background ``knowledge`` (its text; absent: none)."""

    max_depth: int | None = field(kw_only=True)
    algorithm: str = field(kw_only=True)
    knowledge: str | None = optional(kw_only=True)


@dataclass(frozen=True)
class PValuesRequest(LevelSets):
    """``pvalues``: the client's p-value of each query (the first array) by ``test`` (the
    reliability rule as :class:`~fedcausal_flwr.protocols.discrete.DiscreteScope`'s)."""

    test: str
    reliability: float | None


@dataclass(frozen=True)
class PruneRequest(DiscreteScope):
    """``prune``: one PC-stable layer (conditioning sets of size ``level``) on the broadcast
    skeleton (the first array)."""

    depth: int = wire("level", kw_only=True)  # PC depth: the conditioning-set size


@dataclass(frozen=True)
class RawDataRequest(LevelSets):
    """``raw_data``: the client's rows encoded over the level sets (``missing``: the mode of the
    pooled reference; absent: ``error``, as ``lcs-pooled`` asks)."""

    missing: str | None = optional()
