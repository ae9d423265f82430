"""The layer-wise vote, owned by no method: ``fedpc-vote`` and FedECD both build their skeleton
with it (Flower-free).

At each depth ``l = 0, 1, ...`` every client prunes the broadcast skeleton once with conditioning
sets of size ``l`` on its own rows (action ``prune``, :mod:`~fedcausal_flwr.protocols.voting`)
and the server keeps a pair that at least ``ratio`` of the clients kept
(:func:`vote_threshold`, exact; FedLCS's vote uses the same threshold). Each strategy holds
the loop as a part (:class:`LayerLoop`) and declares :data:`LAYER_NEEDS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.protocols.voting import PRUNE, PruneRequest
from fedcausal_flwr.strategies.base import MethodStrategy
from fedcausal_flwr.strategies.discrete import DiscreteLevels, HoldsLevels, scoped


def vote_threshold(ratio: float | str | Fraction, n_clients: int) -> int:
    """Smallest vote count with ``votes >= ratio * n_clients`` (exact: ratio read as a decimal)."""
    exact = Fraction(str(ratio)) if not isinstance(ratio, Fraction) else ratio
    if not 0 < exact <= 1:
        raise ValueError(f"ratio must be in (0, 1], got {ratio}")
    if n_clients < 1:
        raise ValueError(f"need at least one client, got {n_clients}")
    return math.ceil(exact * n_clients)


def kept_skeleton(reply: Reply, before: np.ndarray) -> np.ndarray:
    """A client's reply to ``prune``: its kept skeleton, checked (0/1, symmetric, no new edges)."""
    kept = np.asarray(reply.arrays[0]) if reply.arrays else np.zeros(0)
    if kept.shape != before.shape or not np.isin(kept, (0, 1)).all():
        raise ClientProtocolError(
            f"client {reply.client} sent a kept skeleton of shape {kept.shape}, expected a "
            f"0/1 matrix of shape {before.shape}"
        )
    kept = kept.astype(bool)
    if np.any(kept != kept.T) or np.any(kept & ~before):
        raise ClientProtocolError(
            f"client {reply.client} sent a kept skeleton that is not symmetric or adds edges "
            "absent from the broadcast skeleton"
        )
    return kept


@dataclass(frozen=True)
class LayerVote:
    """One layer's outcome: the skeleton before, each client's kept skeleton, the votes per
    pair, the vote threshold and the skeleton after."""

    before: np.ndarray
    kept: list[np.ndarray]
    votes: np.ndarray
    threshold: int
    after: np.ndarray

    @property
    def lost(self) -> np.ndarray:
        """Pairs ``(x < y)`` that lost the vote, as an int64 ``(n, 2)`` array."""
        return np.argwhere(np.triu(self.before & ~self.after, k=1)).astype(np.int64)


#: what fedpc-vote and FedECD need of the data: discrete columns; each client prunes on its own
#: rows (each strategy's ``needs``)
LAYER_NEEDS = InputNeeds(values="discrete", local_tests=True)


class LayerLoop:
    """The layer loop that ``fedpc-vote`` and FedECD each hold (attribute ``loop``), so neither
    inherits it: levels ``l = 0, 1, ...``; at each, every client prunes the broadcast skeleton
    once with conditioning sets of size ``l`` (action ``prune``) and the server keeps an edge
    with enough votes. A layer is due while ``l <= max_depth`` and some node has more than
    ``l`` neighbours."""

    def __init__(self) -> None:
        self.adjacency: np.ndarray | None = None
        self.depth = 0
        #: the owning strategy's phase: "skeleton" while layers run, then the strategy's own
        self.phase = "skeleton"
        self.layers: list[dict] = []
        #: per pair, the share of clients keeping it at its last vote and that vote's depth
        self.vote_share: np.ndarray | None = None
        self.vote_depth: np.ndarray | None = None

    def start(self, strategy: MethodStrategy, levels: DiscreteLevels) -> None:
        """After hello (once): fix ``strategy``'s level sets, then the complete graph over the
        common variables."""
        if self.adjacency is None:
            levels.fix(strategy)
            self.adjacency = ~np.eye(len(strategy.variables), dtype=bool)

    def due(self, max_depth: int | None) -> bool:
        """Whether another layer runs: ``depth <= max_depth`` and some node has more than
        ``depth`` neighbours."""
        if max_depth is not None and self.depth > max_depth:
            return False
        assert self.adjacency is not None  # start has run
        return int(self.adjacency.sum(axis=1).max(initial=0)) > self.depth

    def prune_request(self, strategy: HoldsLevels) -> Request:
        """Action ``prune`` at the current depth, with the current skeleton."""
        assert self.adjacency is not None  # start has run
        asked = scoped(strategy, PruneRequest, depth=self.depth)
        return Request(PRUNE, asked, arrays=[self.adjacency.astype(np.uint8)])

    def vote(self, replies: list[Reply], ratio: float | str | Fraction) -> LayerVote:
        """The clients' kept skeletons (checked) and the skeleton that keeps ``ratio`` of votes;
        records each voted pair's share and depth (the adjacency is the caller's to update)."""
        before = self.adjacency
        assert before is not None  # start has run
        kept = [kept_skeleton(r, before) for r in replies]
        # asarray: numpy's stubs allow a scalar for a sum over axis 0
        votes = np.asarray(np.sum(kept, axis=0, dtype=np.int64))
        threshold = vote_threshold(ratio, len(replies))
        if self.vote_share is None or self.vote_depth is None:
            self.vote_share = np.full(before.shape, np.nan)
            self.vote_depth = np.full(before.shape, -1, dtype=np.int64)
        self.vote_share[before] = votes[before] / len(replies)
        self.vote_depth[before] = self.depth
        return LayerVote(before, kept, votes, threshold, before & (votes >= threshold))

    def edge_votes(self, names: list[str]) -> dict[str, list[list]]:
        """Each voted pair's confidence, by name: the share of clients that kept it at the layer
        that decided it: ``kept`` edges ``[x, y, share]`` at their last layer, ``removed`` pairs
        ``[x, y, share, depth]`` at the layer that removed them (the share fell below ratio)."""
        if self.vote_share is None or self.vote_depth is None or self.adjacency is None:
            return {"kept": [], "removed": []}
        share, depth = self.vote_share, self.vote_depth
        rows, cols = np.nonzero(np.triu(depth >= 0, k=1))
        kept: list[list] = []
        removed: list[list] = []
        for a, b in zip(rows.tolist(), cols.tolist(), strict=True):
            if self.adjacency[a, b]:
                kept.append([names[a], names[b], float(share[a, b])])
            else:
                removed.append([names[a], names[b], float(share[a, b]), int(depth[a, b])])
        return {"kept": kept, "removed": removed}
