"""FedECD (Guo et al., FL@FM-NeurIPS 2024): bootstrap two-layer aggregation for small clients.

Discrete data, identical columns, G2 tests. Defaults follow the paper where it is explicit and the
authors' MATLAB code (github.com/Xianjie-Guo/FedECD) where it is not, except where noted
(docs/choices.md, FedECD); every choice is an option.

**Phase 1, skeleton** (levels ``l = 0 .. max_depth``, default 3):

1. ``prune``: each client prunes the broadcast skeleton once at size ``l`` with its own tests and
   returns the edges it kept. The local pass is the layer step of ``fedpc-vote``
   (:func:`~fedcausal_flwr.discovery.layerwise.prune_depth`, PC-stable within the layer); the
   authors' code runs order-dependent original PC inside a layer (not copied: the result would
   depend on the column order). Tests follow the code's ``my_g2_test``: zero-margin degrees of
   freedom, ``p = 1`` when they are 0, and the reliability rule ``n / (a_x a_y prod a_s) >= 5``
   (``reliability``; arities = highest observed code + 1, as the code); an unreliable test is
   NaN, i.e. dependent: the edge stays.
2. The server keeps an edge iff at least half of the clients kept it (``votes >= ceil(K / 2)``; a
   tie keeps it, Eq. 4). The losers form ``E_del``.
3. ``bootstrap_weights``: each client re-tests every ``E_del`` edge on ``bootstraps`` resamples
   (default 15, the code's value): all size-``l`` subsets of the endpoints' neighbourhoods in the
   skeleton at the start of the layer, weight ``w(p) = (p - alpha) / (1 - alpha)`` for every
   independence (unreliable tests ignored), mean per replicate (``evidence="union"``, default:
   over the subsets of both endpoints, order-independent; ``"larger_index"`` reproduces the code,
   where the larger index's neighbourhood wins), then mean over replicates (client layer).
4. The server averages over clients (unweighted, as the code) and **restores** an edge whose
   mean weight is ``<= tau`` (Eq. 7, read with S-hat). ``tau`` defaults to the paper's **0.05**
   (the code uses 0.10).

A layer is run while some node has more than ``l`` neighbours (the code's convergence test, done
on the server) and ``l <= max_depth``; ``stop="no_removal"`` also stops after a layer that removed
nothing (the paper's rule; default ``"levels"``, the code's).

**Phase 2, orientation** (``orient``): each client runs one BDeu tabu hill climbing per resample
(ESS 10 plus the reference's ``ln(1 / (ESS + 1))`` per parent; tabu list 100, 15 barren
iterations; our :func:`~fedcausal_flwr.discovery.score.hill_climb`, 43-170x faster than pgmpy's
on the same moves, see that module) restricted to the skeleton, with
both orientations of every edge allowed (``lower_triangle_compat`` emulates the code's CPM quirk),
and votes the directions of its ``bootstraps`` DAGs; the server votes the client graphs the same
way (:func:`~fedcausal_flwr.discovery.bootstrap.vote_directions`): presence by union, direction
by strict majority, ties by ``tie_rule``: ``undirected`` (default; order-independent: the tied edge
is returned undirected, tail-tail), ``lower_parent`` (the paper's Eq. 9) or ``higher_parent`` (the
code). The voted graph can contain directed cycles; unless ``allow_cycles`` (the paper's
behaviour) the weakest-voted edges on cycles are dropped
(:func:`~fedcausal_flwr.discovery.bootstrap.break_cycles`). The result is a ``DAG``-kind graph
(possibly with undirected tied edges) compared with the true DAG, as in the paper.

**Resamples** are seeded from ``(seed, partition id, replicate)``: reproducible, independent of the
order clients answer in, the same in both phases. ``resample=False`` uses the full local data for
every replicate (with ``bootstraps=1`` and ``tau=0`` phase 1 is then exactly the plain voting
skeleton: an edge that lost the vote has evidence > 0 from the clients that removed it).

Wire protocol (actions, payload records, replies): :mod:`fedcausal_flwr.protocols.fedecd`
(``bootstrap_weights``, ``orient``) and :mod:`fedcausal_flwr.protocols.voting` (``prune``).

What the server learns: each client's keep/remove decision on every edge at every layer (and the
separating sets it used), its bootstrap-averaged weights of the removed edges (graded strength of
independence), and its voted local DAG. No raw data and no counts. Every server step is a count,
a mean or a sum, so secure aggregation could hide the individual replies (not done here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import networkx as nx
import numpy as np

from fedcausal_flwr.discovery.bootstrap import EVIDENCE_RULES, voted_dag_marks
from fedcausal_flwr.federation.core.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.core.registry import register_method
from fedcausal_flwr.graphs.graph import ARROW, Graph
from fedcausal_flwr.options import Option
from fedcausal_flwr.protocols.discrete import ComputedTests, HillClimbReply
from fedcausal_flwr.protocols.fedecd import (
    BOOTSTRAP_WEIGHTS,
    DISCLOSURES,
    ORIENT,
    BootstrapWeightsRequest,
    OrientRequest,
)
from fedcausal_flwr.protocols.voting import PRUNE
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import MethodStrategy, option_attributes
from fedcausal_flwr.strategies.discrete import (
    COMMON,
    DiscreteLevels,
    common_options,
    discrete_needs,
    scoped,
)
from fedcausal_flwr.strategies.layer_vote import LAYER_NEEDS, LayerLoop

STOP_RULES = ("levels", "no_removal")
#: the options a result reports, in its order
RESULT_OPTIONS = (
    *("bootstraps", "tau", "reliability", "resample", "evidence", "stop", "tie_rule"),
    *("allow_cycles", "seed", *shared.HILL_CLIMB),
)


FEDECD_OPTIONS = common_options(
    alpha=0.01,
    test="g2",
    max_depth=3,
    reliability=5.0,
    paper={
        "alpha": "not stated; 0.01 in the authors' code",
        "test": "G2",
        "max_depth": "not stated; 3 in the code (maxK)",
        "reliability": "not stated; the code's n / prod(arities) >= 5",
    },
).extend(
    Option(
        "bootstraps",
        "int",
        15,
        "bootstrap resamples B per client, in both phases",
        minimum=1,
        paper="not stated; 15 in the code",
    ),
    Option(
        "tau",
        "float",
        0.05,
        "restore an edge that lost a layer's vote when the clients' mean independence weight is "
        "<= tau",
        minimum=0.0,
        maximum=1.0,
        paper="0.05 (Eq. 7); 0.10 in the code",
    ),
    Option(
        "resample",
        "bool",
        True,
        "draw bootstrap resamples (false: every replicate is the client's full data)",
    ),
    Option(
        "evidence",
        "str",
        "union",
        "which conditioning sets give a removed edge's evidence: both endpoints' neighbourhoods "
        "(order-independent) or the larger index's (the code)",
        choices=EVIDENCE_RULES,
        paper="larger_index in the code",
        why="the code's choice depends on the column order",
    ),
    Option(
        "stop",
        "str",
        "levels",
        "run every level up to max_depth while some node has enough neighbours (the code), or "
        "also stop after a level that removed nothing (the paper)",
        choices=STOP_RULES,
        paper="no_removal (the paper's text); levels in the code",
        why="the authors' experiments ran the code's rule",
    ),
    *shared.DAG_VOTE,
    shared.seed("seed of the bootstrap resamples"),
)


class FedECDStrategy(MethodStrategy):
    """FedECD's server; see the module docstring for the rules (the wire protocol:
    :mod:`fedcausal_flwr.protocols.fedecd`). Phase 1's layers are its :class:`LayerLoop`."""

    name = "fedecd"
    OPTIONS = FEDECD_OPTIONS
    needs = LAYER_NEEDS
    alpha, test, max_depth, reliability = option_attributes(*COMMON)
    input_needs = discrete_needs
    #: options read as attributes too
    tau, bootstraps = option_attributes("tau", "bootstraps")

    def __init__(self, options: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        super().__init__(options, **keywords)
        self.discrete = DiscreteLevels()
        #: the voting skeleton's layers: adjacency, depth, phase, layer records, vote shares
        self.loop = LayerLoop()
        #: the clients' BDeu hill climbing, as it travels
        self.search = shared.hill_climb_keywords(self.options)
        self.layer_start: np.ndarray | None = None
        self.removed: np.ndarray = np.zeros((0, 2), dtype=np.int64)
        self.votes: np.ndarray | None = None
        self.dropped: list[tuple[int, int]] = []
        self.graph: Graph | None = None
        self.score_seconds: dict[str, float] = {}

    # ------------------------------------------------------------------ protocol
    def next_request(self) -> Request | None:
        if self.graph is not None:
            return None
        loop = self.loop
        loop.start(self, self.discrete)
        assert loop.adjacency is not None  # start has run
        if loop.phase == "evidence":
            assert self.layer_start is not None  # the layer that lost edges set it
            weights = scoped(
                self,
                BootstrapWeightsRequest,
                **self.resamples(),
                depth=loop.depth,
                evidence=self.options.evidence,
            )
            arrays = [self.layer_start.astype(np.uint8), self.removed]
            return Request(BOOTSTRAP_WEIGHTS, weights, arrays=arrays)
        if loop.phase == "skeleton":
            if self.layer_due():
                return loop.prune_request(self)
            loop.phase = "orient"
        orient = scoped(
            self, OrientRequest, **self.resamples(), **self.search, tie_rule=self.options.tie_rule
        )
        return Request(ORIENT, orient, arrays=[loop.adjacency.astype(np.uint8)])

    def resamples(self) -> dict[str, Any]:
        """The bootstrap resamples both phases' requests name (``bootstraps, seed, resample``)."""
        return {key: self.options[key] for key in ("bootstraps", "seed", "resample")}

    def layer_due(self) -> bool:
        """The loop's rule (:meth:`LayerLoop.due`), and with ``stop="no_removal"`` no layer after
        one that removed nothing."""
        layers = self.loop.layers
        if self.options.stop == "no_removal" and layers and layers[-1]["removed"] == 0:
            return False
        return self.loop.due(self.options.max_depth)

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        if request.action == PRUNE:
            self._vote_layer(replies)
        elif request.action == BOOTSTRAP_WEIGHTS:
            self._restore(replies)
        else:
            self._vote_graphs(replies)

    # ------------------------------------------------------------------ phase 1
    def _vote_layer(self, replies: list[Reply]) -> None:
        loop = self.loop
        vote = loop.vote(replies, "0.5")  # a tie keeps the edge (Eq. 4)
        before, threshold = vote.before, vote.threshold
        self.removed = vote.lost
        self.layer_start, loop.adjacency = before, vote.after
        loop.layers.append(
            {
                "depth": loop.depth,
                "clients": [r.client for r in replies],
                "threshold": threshold,
                "edges_before": int(np.triu(before, k=1).sum()),
                "lost_vote": len(self.removed),
                "restored": 0,
                "removed": len(self.removed),
                "client_tests": {
                    str(r.client): int(r.meta_as(ComputedTests).tests) for r in replies
                },
            }
        )
        self.annotate(depth=loop.depth, threshold=threshold, lost_vote=len(self.removed))
        if len(self.removed):
            loop.phase = "evidence"
        else:
            loop.depth += 1

    def _restore(self, replies: list[Reply]) -> None:
        n = len(self.removed)
        weights = []
        for r in replies:
            w = np.asarray(r.arrays[0], dtype=np.float64) if r.arrays else np.zeros(0)
            if w.shape != (n,) or np.any(~np.isfinite(w)) or np.any((w < 0) | (w > 1)):
                raise ClientProtocolError(
                    f"client {r.client} sent {w.shape} weights for {n} removed edges, expected "
                    "one weight in [0, 1] per edge"
                )
            weights.append(w)
        mean = np.mean(weights, axis=0)
        restore = mean <= self.options.tau
        loop = self.loop
        assert loop.adjacency is not None  # the loop has started
        for a, b in self.removed[restore].tolist():
            loop.adjacency[a, b] = loop.adjacency[b, a] = True
        layer = loop.layers[-1]
        names = self.variables
        layer["restored"] = int(restore.sum())
        layer["removed"] = n - int(restore.sum())
        layer["client_tests"] = {
            str(r.client): layer["client_tests"].get(str(r.client), 0)
            + int(r.meta_as(ComputedTests).tests)
            for r in replies
        }
        layer["weights"] = {
            f"{names[a]}|{names[b]}": round(float(w), 6)
            for (a, b), w in zip(self.removed.tolist(), mean.tolist(), strict=True)
        }
        self.annotate(depth=loop.depth, restored=layer["restored"], removed=layer["removed"])
        loop.phase, self.removed = "skeleton", np.zeros((0, 2), dtype=np.int64)
        loop.depth += 1

    # ------------------------------------------------------------------ phase 2
    def _vote_graphs(self, replies: list[Reply]) -> None:
        skeleton = self.loop.adjacency
        assert skeleton is not None  # the loop has started
        p = len(self.variables)
        votes = np.zeros((p, p), dtype=np.int64)
        for r in replies:
            graph: np.ndarray = np.asarray(r.arrays[0]) if r.arrays else np.zeros(0)
            if graph.shape != (p, p) or not np.isin(graph, (0, 1)).all():
                raise ClientProtocolError(
                    f"client {r.client} sent a graph of shape {graph.shape}, expected a 0/1 "
                    f"{p}x{p} matrix"
                )
            graph = graph.astype(bool)
            undirected = graph | graph.T
            if np.any(undirected & ~skeleton) or np.any(np.diag(graph)):
                raise ClientProtocolError(
                    f"client {r.client} sent edges outside the skeleton it was given"
                )
            votes += graph
            self.score_seconds[str(r.client)] = float(r.meta_as(HillClimbReply).score_seconds)
        self.votes = votes
        options = self.options
        marks, self.dropped, undirected = voted_dag_marks(
            votes, options.tie_rule, options.allow_cycles
        )
        self.graph = Graph(tuple(self.variables), marks, "DAG")
        self.annotate(edges=self.graph.n_edges(), undirected=undirected, dropped=len(self.dropped))

    # ------------------------------------------------------------------ result
    def result_payload(self) -> dict:
        skeleton = self.loop.adjacency
        assert skeleton is not None  # the loop has started
        names = self.variables
        cycles_left = 0
        if self.options.allow_cycles and self.graph is not None:
            one_way = self.graph.marks == ARROW
            dg = nx.DiGraph(list(zip(*np.nonzero(one_way), strict=True)))
            cycles_left = sum(1 for c in nx.strongly_connected_components(dg) if len(c) > 1)
        return {
            "graph": self.graph,
            "variables": list(names),
            "skeleton": [
                [names[a], names[b]] for a, b in np.argwhere(np.triu(skeleton, k=1)).tolist()
            ],
            "layers": self.loop.layers,
            # the voting skeleton's (restored edges included)
            "edge_votes": self.loop.edge_votes(names),
            "options": {key: self.options[key] for key in RESULT_OPTIONS},
            "dropped_for_cycles": [[names[a], names[b]] for a, b in self.dropped],
            "cyclic_components": cycles_left,
            "score_seconds": self.score_seconds,
        }


#: FedECD's strategy from its options (a mapping, keywords, or both)
make_strategy = FedECDStrategy


register_method(
    "fedecd",
    FedECDStrategy,
    "fedcausal_flwr.clients.fedecd:FedECDClient",
    disclosures=DISCLOSURES,
    bootstrap=True,
    paper="FedECD (Guo et al. 2024)",
    description="FedECD (Guo et al. 2024): voting skeleton + bootstrap evidence, bootstrap BDeu HC",
    min_sites=2,
)
