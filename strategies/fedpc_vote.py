"""Layer-wise voting FedPC (Huang, Guo, Yu et al., arXiv 2211.06919; the skeleton step of FedLCS).

Not FedC2SL's FedPC (``fedpc``): here every CI test runs on one client's data and the server only
counts votes. Layer by layer (conditioning-set size ``l = 0, 1, ...``):

1. the server broadcasts the current global skeleton;
2. each client prunes it once at size ``l`` with its own tests (PC-stable within the layer:
   conditioning sets are subsets of ``adj(x) \\ {y}`` in the *broadcast* skeleton, every test of
   the layer is run, an edge goes if any test says ``p > alpha``; see
   :mod:`fedcausal_flwr.discovery.layerwise`) and returns the edges it kept plus every separating
   set it found;
3. the server keeps an edge iff ``votes >= ratio * K`` (K = clients that answered this layer).
   The comparison is real-valued, i.e. ``votes >= ceil(ratio * K)``, with ``ratio`` read as the
   decimal it prints as (``0.3 * 10`` is exactly 3): FedLCS's Eq. 2. FedPC's MATLAB code uses
   ``round(ratio * K)`` instead, which differs e.g. at ratio 0.4, K = 3 (1 vote vs 2). Default
   ``ratio = 0.5``; FedLCS uses 0.4, FedPC's code 0.3. For a removed edge the server keeps the
   union of the removing clients' separating sets (all distinct sets, partition order).

The layers stop when no node has more than ``l`` neighbours in the global skeleton, or after
``max_depth``.

Orientation (``orientation="maxp"``, default): consistent separating sets by the largest p-value
over clients (FedPC's ``max_p``; FedLCS §5.2). For every unshielded pair ``x, z`` of the final
skeleton the candidates are all ``S`` in ``(adj(x) | adj(z)) \\ {x, z}`` with ``|S| <= sep_depth``
(default 3, as FedPC's code). In ONE extra round every client returns its p-value of
``x _||_ z | S`` for every candidate. Per pair the server picks, among the (client, S) with
``p > alpha``, the largest p; ties go to the first in the order (|S| ascending, then
``itertools.combinations`` order, then partition id ascending), i.e. strict ``>`` while scanning.
A triple ``x - y - z`` is a collider iff ``y`` is not in the chosen set. **If no client finds any
independent candidate, the pair's triples stay undecided** (neither collider nor non-collider);
FedPC's MATLAB ``orient_dis`` declares a v-structure in that case, which is a bug not copied here.
(FedLCS stops its per-level search at the first level where no client is independent; this
implementation scans all levels up to ``sep_depth``, as FedPC's ``max_p`` does.) Then colliders are
oriented and Meek's rules applied with :func:`~fedcausal_flwr.graphs.meek.orient_cpdag`
(causal-learn's conflict policy: a collider meeting an edge already pointing away from y is
skipped; causal-learn's Meek R1-R3).

``orientation="sepsets"`` skips the extra round and decides colliders from the voted separating
sets of the skeleton phase (collider iff ``y`` is in none of them, causal-learn's rule). With one
client this is exactly PC-stable (:func:`fedcausal_flwr.discovery.pc.pc`).

Wire protocol (actions, payload records, replies): :mod:`fedcausal_flwr.protocols.voting`
(``prune``, ``pvalues``).

What the server learns: each client's keep/remove decision on every edge at every layer, the
separating sets that removed them, and, in the orientation round, each client's p-value of every
candidate test (continuous statistics of its data). No raw data and no counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from itertools import combinations
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.pair_record import sorted_entries
from fedcausal_flwr.discovery.pc import undirected_graph, unshielded_pairs
from fedcausal_flwr.discovery.sepset_choice import max_pvalue_choice
from fedcausal_flwr.discovery.skeleton import pair_key
from fedcausal_flwr.evidence import Evidence
from fedcausal_flwr.federation.core.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.core.registry import register_method
from fedcausal_flwr.graphs.colliders import ColliderOrientation
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.graphs.meek import orient_cpdag
from fedcausal_flwr.options import Option
from fedcausal_flwr.protocols.discrete import ComputedTests
from fedcausal_flwr.protocols.queries import decode_queries
from fedcausal_flwr.protocols.voting import FEDPC_VOTE_DISCLOSURES, PRUNE
from fedcausal_flwr.stats.batch_oracle import Query
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import MethodStrategy, option_attributes
from fedcausal_flwr.strategies.discrete import (
    COMMON,
    DiscreteLevels,
    common_options,
    discrete_needs,
    pvalues_request,
)
from fedcausal_flwr.strategies.layer_vote import LAYER_NEEDS, LayerLoop, vote_threshold

ORIENTATIONS = ("maxp", "sepsets")
Pair = tuple[int, int]


def candidate_queries(adjacency: np.ndarray, sep_depth: int) -> tuple[list[Query], list[tuple]]:
    """Max-p candidates: for each unshielded pair (x < z), every S in the union of both
    neighbourhoods (minus x, z) with ``|S| <= sep_depth``; returns queries and per-pair spans
    ``(x, z, start, stop)`` into them."""
    queries: list[Query] = []
    spans = []
    for x, z in unshielded_pairs(adjacency):
        pool = [int(v) for v in np.flatnonzero(adjacency[x] | adjacency[z]) if v not in (x, z)]
        start = len(queries)
        for size in range(min(sep_depth, len(pool)) + 1):
            queries.extend((x, z, s) for s in combinations(pool, size))
        spans.append((x, z, start, len(queries)))
    return queries, spans


FEDPC_VOTE_OPTIONS = common_options(
    paper={"alpha": "0.01 in the authors' code"},
    why={"alpha": "the level of the other methods here, so a comparison changes only the method"},
).extend(
    replace(
        shared.ratio(0.5, paper="0.3 in the authors' code"),
        why="a majority of the clients, as every other voting method here; ratio=0.3 runs the "
        "code's threshold (FedECD's grid does)",
    ),
    Option(
        "sep_depth",
        "int",
        3,
        "largest candidate separating set in the max-p orientation round",
        minimum=0,
        requires=("orientation", ("maxp",)),
        paper="3 (the code's max order)",
    ),
    Option(
        "orientation",
        "str",
        "maxp",
        "separating sets for the colliders: the largest client p-value over candidate sets "
        "(maxp), or the sets the skeleton layers voted (sepsets)",
        choices=ORIENTATIONS,
        paper="maxp",
    ),
)


class FedPCVoteStrategy(MethodStrategy):
    """Layer-wise voting FedPC; see the module docstring for rules and ties (the wire protocol:
    :mod:`fedcausal_flwr.protocols.voting`). The skeleton layers are its :class:`LayerLoop`."""

    name = "fedpc-vote"
    OPTIONS = FEDPC_VOTE_OPTIONS
    needs = LAYER_NEEDS
    alpha, test, max_depth, reliability = option_attributes(*COMMON)
    input_needs = discrete_needs

    def __init__(self, options: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        super().__init__(options, **keywords)
        self.discrete = DiscreteLevels()
        #: the skeleton layers: adjacency, depth, phase, layer records, vote shares
        self.loop = LayerLoop()
        self.sepsets: dict[Pair, list[tuple[int, ...]]] = {}
        self.candidates: list[Query] = []
        self.spans: list[tuple] = []
        self.chosen: dict[Pair, dict | None] = {}
        self.graph: Graph | None = None
        self.colliders: ColliderOrientation | None = None

    # ------------------------------------------------------------------ protocol
    def next_request(self) -> Request | None:
        if self.graph is not None:
            return None
        loop = self.loop
        loop.start(self, self.discrete)
        if loop.phase == "skeleton":
            if loop.due(self.options.max_depth):
                return loop.prune_request(self)
            loop.phase = "orient"
            if self.options.orientation == "maxp":
                assert loop.adjacency is not None  # start has run
                sep_depth = self.options.sep_depth
                self.candidates, self.spans = candidate_queries(loop.adjacency, sep_depth)
        if self.options.orientation == "sepsets" or not self.candidates:
            self._orient()
            return None
        return pvalues_request(self, self.candidates)

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        if request.action == PRUNE:
            self._vote_layer(replies)
        else:
            self._choose_sepsets(replies)
            self._orient()

    # ------------------------------------------------------------------ skeleton
    def _vote_layer(self, replies: list[Reply]) -> None:
        loop = self.loop
        vote = loop.vote(replies, self.options.ratio)
        before, votes, threshold, after = vote.before, vote.votes, vote.threshold, vote.after
        client_sets = [
            self._client_sepsets(r, before, k) for r, k in zip(replies, vote.kept, strict=True)
        ]
        removed = [tuple(pair) for pair in vote.lost.tolist()]
        for x, y in removed:
            key = (int(x), int(y))
            sets = [s for per_client in client_sets for s in per_client.get(key, [])]
            self.sepsets[key] = list(dict.fromkeys(sets))
        names = self.variables
        rows, cols = np.nonzero(np.triu(before, k=1))
        loop.layers.append(
            {
                "depth": loop.depth,
                "clients": [r.client for r in replies],
                "threshold": threshold,
                "edges_before": len(rows),
                "removed": len(removed),
                "votes": {
                    f"{names[a]}|{names[b]}": int(votes[a, b])
                    for a, b in zip(rows.tolist(), cols.tolist(), strict=True)
                },
                "client_tests": {
                    str(r.client): int(r.meta_as(ComputedTests).tests) for r in replies
                },
            }
        )
        self.annotate(depth=loop.depth, threshold=threshold, removed=len(removed))
        loop.adjacency = after
        loop.depth += 1

    def _client_sepsets(
        self, reply: Reply, before: np.ndarray, kept: np.ndarray
    ) -> dict[Pair, list[tuple[int, ...]]]:
        rows = decode_queries(reply.arrays[1]) if len(reply.arrays) > 1 else []
        out: dict[Pair, list[tuple[int, ...]]] = {}
        depth = self.loop.depth
        for x, y, s in rows:
            key = pair_key(x, y)
            if not (0 <= key[0] < key[1] < len(kept)) or not before[key] or kept[key]:
                raise ClientProtocolError(
                    f"client {reply.client} sent a separating set for the pair {key}, which it "
                    "did not remove at this layer"
                )
            if len(s) != depth or any(v in key or not 0 <= v < len(kept) for v in s):
                raise ClientProtocolError(
                    f"client {reply.client} sent the separating set {s} for {key} at layer {depth}"
                )
            out.setdefault(key, []).append(tuple(sorted(s)))
        dropped = np.triu(before & ~kept, k=1)
        missing = [(int(a), int(b)) for a, b in zip(*np.nonzero(dropped), strict=True)]
        missing = [k for k in missing if k not in out]
        if missing:
            raise ClientProtocolError(
                f"client {reply.client} removed {missing} without a separating set"
            )
        return out

    # ------------------------------------------------------------------ orientation
    def _choose_sepsets(self, replies: list[Reply]) -> None:
        n = len(self.candidates)
        local = []
        for r in replies:
            values = np.asarray(r.arrays[0], dtype=np.float64) if r.arrays else np.zeros(0)
            if values.shape != (n,):
                raise ClientProtocolError(
                    f"client {r.client} sent {values.shape} p-values for {n} candidate tests"
                )
            local.append(values)
        pvalues = np.stack(local)
        for x, z, start, stop in self.spans:
            pick = max_pvalue_choice(pvalues[:, start:stop], self.options.alpha)
            if pick is None:
                self.chosen[(x, z)] = None
                continue
            candidate, client, p = pick
            self.chosen[(x, z)] = {
                "set": self.candidates[start + candidate][2],
                "p": p,
                "client": replies[client].client,
            }
        undecided = sum(v is None for v in self.chosen.values())
        self.annotate(tests=n, pairs=len(self.spans), undecided_pairs=undecided)

    def _orient(self) -> None:
        assert self.loop.adjacency is not None  # the loop has started
        graph = undirected_graph(self.variables, self.loop.adjacency)
        if self.options.orientation == "sepsets":
            self.colliders = orient_cpdag(
                graph, self.sepsets, rule="causallearn", conflict="existing", meek="causallearn"
            )
        else:
            everyone = tuple(range(len(self.variables)))
            decisions = {}
            for (x, z), choice in self.chosen.items():
                if choice is None:  # two contradicting sets: every triple is "ambiguous"
                    others = tuple(v for v in everyone if v not in (x, z))
                    decisions[(x, z)] = [others, ()]
                else:
                    decisions[(x, z)] = [choice["set"]]
            self.colliders = orient_cpdag(
                graph, decisions, rule="conservative", conflict="existing", meek="causallearn"
            )
        self.graph = graph

    # ------------------------------------------------------------------ result
    def result_payload(self) -> dict:
        assert self.colliders is not None  # _orient has run
        names = self.variables

        def pair_name(pair: Pair) -> str:
            return f"{names[pair[0]]}|{names[pair[1]]}"

        def triples(items: list) -> list[list[str]]:
            return [[names[a], names[b], names[c]] for a, b, c in items]

        chosen = {
            pair_name(pair): None
            if c is None
            else {"set": [names[v] for v in c["set"]], "p": c["p"], "client": c["client"]}
            for pair, c in sorted(self.chosen.items())
        }
        return {
            "graph": self.graph,
            "variables": list(names),
            "ratio": str(self.options.ratio),
            "orientation": self.options.orientation,
            "layers": self.loop.layers,
            "edge_votes": self.loop.edge_votes(names),
            "evidence": Evidence.build(names, sepsets=sorted_entries(self.sepsets)),
            "consistent_sepsets": chosen,
            "orientation_tests": len(self.candidates),
            "colliders": triples(self.colliders.colliders),
            "undecided_triples": triples(self.colliders.ambiguous),
            "collider_conflicts": triples(self.colliders.conflicts),
        }


#: fedpc-vote's strategy from its options (a mapping, keywords, or both)
make_strategy = FedPCVoteStrategy


register_method(
    "fedpc-vote",
    FedPCVoteStrategy,
    "fedcausal_flwr.clients.fedpc_vote:FedPCVoteClient",
    disclosures=FEDPC_VOTE_DISCLOSURES,
    bootstrap=True,
    paper="FedPC (Huang et al.)",
    description="layer-wise voting FedPC (Huang et al.): per-layer client votes, max-p sepsets",
    min_sites=2,
)

__all__ = ["FedPCVoteStrategy", "candidate_queries", "make_strategy", "vote_threshold"]
