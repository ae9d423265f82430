"""Actions answered by the voting client: local graphs, local p-values, layer pruning, raw data;
their payloads and what each discloses.

Wire protocol (after the built-in ``hello``; ``levels`` are the global level sets; queries and
separating sets travel as int64 matrices of rows ``[x, y, S..., -1 padding]`` of variable indices,
:func:`fedcausal_flwr.protocols.queries.encode_queries`). The payloads are the records below,
built on :mod:`fedcausal_flwr.protocols.discrete`'s; keys in wire order. Every reply reaches the
server per client (none is summed):

===============  =============  ===============================  =========================  ======
action           methods        payload (record: keys) + arrays  reply (arrays; meta)       summed
===============  =============  ===============================  =========================  ======
``local_graph``  pc-vote,       ``LocalGraphRequest``:           int8 ``p x p`` endpoint    no
                 fci-vote,      ``variables, levels, test,       marks of the client's own
                 local          alpha, reliability, max_depth,   PC/FCI graph; meta
                                algorithm, knowledge``           ``tests``
``pvalues``      pc-cit-vote,   ``PValuesRequest``:              float64 p-value per query  no
                 fci-cit-vote,  ``variables, levels, test,
                 fedpc-vote     reliability`` + queries
``prune``        fedpc-vote,    ``PruneRequest``: ``variables,   uint8 ``p x p`` kept       no
                 fedecd         levels, test, alpha,             skeleton, int64 rows
                                reliability, depth`` + uint8     ``[x, y, S...]`` (its
                                ``p x p`` global skeleton        separating sets); meta
                                                                 ``tests``
===============  =============  ===============================  =========================  ======

``PruneRequest.depth`` is the conditioning-set size. ``knowledge`` (the background knowledge's
text) is left out while None. A ``pvalues`` p-value is NaN where the client's test is unreliable
(fewer than ``reliability`` rows per table cell), which every vote reads as dependent.

What travels when: ``pc-vote``, ``fci-vote`` and ``local``: one ``local_graph`` round;
``pc-cit-vote`` and ``fci-cit-vote``: one ``pvalues`` round per batch of CI tests of the server's
PC (FCI) search; ``fedpc-vote``: one ``prune`` round per layer (the current global skeleton as the
first array), then with ``orientation="maxp"`` one ``pvalues`` round with the candidate
separating sets of every unshielded pair; FedECD's skeleton: one ``prune`` round per layer (its
separating sets unused); ``pooled`` and ``lcs-pooled``: one ``raw_rows`` round
(:mod:`fedcausal_flwr.protocols.pooled`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.payload import optional
from fedcausal_flwr.protocols import pooled
from fedcausal_flwr.protocols.discrete import DiscreteScope, LevelSets

LOCAL_GRAPH = "local_graph"  # the client's own PC/FCI graph (endpoint marks)
PVALUES = "pvalues"  # the client's p-value of every query of a batch
PRUNE = "prune"  # one PC-stable depth on the broadcast skeleton: kept edges + separating sets
ACTIONS = (LOCAL_GRAPH, PVALUES, PRUNE)

#: what each baseline's clients disclose: their own graphs (pc/fci-vote, local), their own p-values
#: (pc/fci-cit-vote), or their rows (pooled: the centralised reference, NOT private)
GRAPH_VOTE_DISCLOSURES = {LOCAL_GRAPH: disclosure.LOCAL}
CIT_VOTE_DISCLOSURES = {PVALUES: disclosure.LOCAL}
POOLED_DISCLOSURES = pooled.DISCLOSURES
#: fedpc-vote: each client's kept edges and separating sets of a layer, and its own p-values
FEDPC_VOTE_DISCLOSURES = {PRUNE: disclosure.LOCAL, PVALUES: disclosure.LOCAL}


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
    """``prune``: one PC-stable layer (conditioning sets of size ``depth``) on the broadcast
    skeleton (the first array)."""

    depth: int = field(kw_only=True)  # PC depth: the conditioning-set size
