"""FedCSL (Guo et al., AAAI 2024): federated local-to-global structure learning, two rounds.

Discrete data, identical columns, G2 tests. The paper was not available to us; the steps,
defaults and rules follow the authors' MATLAB code (github.com/Xianjie-Guo/FedCSL), read for
facts only, and the descriptions of FedCSL in the FedCDnv and FedECD papers ("weights from
relative sample sizes inferred from p-values"). The maths is in
:mod:`fedcausal_flwr.discovery.fedcsl`.

1. ``neighbours``: each client runs HITON-PC for every variable (G2, ``alpha`` 0.01, conditioning
   sets up to ``max_depth`` 3, the code's reliability rule ``n / prod(arities) >= 5``; the
   code's rules for unreliable tests: unconditional = independent, conditional = dependent) and
   sends the neighbour sets and its **weight**: the mean over all pairs of the confidence of the
   unconditional decision, ``(p - alpha) / (1 - alpha)`` above alpha, ``1 - p / alpha`` below.
   The server picks, per variable, the neighbour count and then the members with the largest
   total client weight, and settles the asymmetric pairs by a weighted +2 / -2 vote (>= 0 keeps
   the edge): the federated skeleton.
2. ``local_dag``: each client runs one BDeu tabu hill climbing restricted to the skeleton (ESS 10
   plus ``ln(1 / (ESS + 1))`` per parent, tabu list 100, 15 barren iterations: the code's Mens X
   Machina defaults, our :func:`~fedcausal_flwr.discovery.score.hill_climb`). The server sums the
   DAGs with the client weights; a pair is present iff it has positive weight, and points to the
   heavier direction.

Choices where the code leaves one open or depends on the column order (each an option or said
here):

* candidates enter HITON-PC by decreasing unconditional test statistic (the code's G2 ``dep``),
  ties to the lower index;
* ties of the weighted neighbour-count vote go to the smaller count, ties of the membership vote
  to the lower index (the code's ``max`` / stable ``sort``; kept: with unequal weights ties are
  rare);
* ``tie_rule`` of the direction merge: ``undirected`` by default (order-independent: the tied
  edge stays undirected); the code's ``>=`` makes the higher index the parent (``higher_parent``);
* ``allow_cycles`` (default false): the weighted merge can contain directed cycles; the weakest
  edges on them are dropped (:func:`~fedcausal_flwr.discovery.bootstrap.break_cycles`, on the
  weighted votes); the code keeps them;
* ``lower_triangle_compat`` (default false): the code searches ``CPM = tril(skeleton)``, which
  forbids half of the orientations (as in FedECD's code);
* an asymmetric pair that no client lists from both sides or from neither scores 0 and is kept
  (the code's ``>= 0``), so HITON-PC's one-sided false positives survive (kept as the code);
* the client's BDeu uses the federation's level sets, not the client's largest observed code;
* a client without a reliable unconditional test has weight 0 (the code: NaN); all weights 0 is
  an error.

Wire protocol (actions, payload records, replies): :mod:`fedcausal_flwr.protocols.fedcsl`.

What the server learns: every client's neighbour set of every variable, one number summarising
the strength of its unconditional dependencies (which grows with its sample size: the paper's
intent), and its whole local DAG. No raw data, counts or p-values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.bootstrap import voted_dag_marks
from fedcausal_flwr.discovery.fedcsl import (
    VOTE_SCALE,
    FederatedSkeleton,
    federated_skeleton,
    weighted_direction_votes,
)
from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.core.registry import register_method
from fedcausal_flwr.graphs.frequency import split_by_graph
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.protocols.fedcsl import (
    DISCLOSURES,
    LOCAL_DAG,
    NEIGHBOURS,
    LocalDagRequest,
    NeighboursReply,
    NeighboursRequest,
)
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import MethodStrategy, option_attributes
from fedcausal_flwr.strategies.discrete import (
    COMMON,
    DiscreteLevels,
    common_options,
    discrete_needs,
    scoped,
)

FEDCSL_OPTIONS = common_options(
    alpha=0.01,
    test="g2",
    max_depth=3,
    reliability=5.0,
    paper={
        "alpha": "0.01 in the code's example",
        "test": "G2",
        "max_depth": "3 in the code (maxK)",
        "reliability": "the code's n / prod(arities) >= 5",
    },
).extend(
    shared.dag_vote_option(
        "tie_rule",
        help="a weighted direction tie: leave the edge undirected (order-independent), or make "
        "the lower or higher (the code) index the parent",
        paper="higher_parent in the code (>=)",
        why="the code's rule makes the graph depend on the column order",
    ),
    shared.dag_vote_option(
        "allow_cycles",
        help="keep directed cycles of the weighted merge (false: drop the weakest-weighted "
        "edge on each)",
        paper="true (the code does not remove cycles)",
    ),
    shared.dag_vote_option("ess"),
    shared.dag_vote_option("structure_prior"),
    shared.dag_vote_option("tabu_length"),
    shared.dag_vote_option("max_barren"),
    shared.dag_vote_option("lower_triangle_compat"),
)


class FedCSLStrategy(MethodStrategy):
    """FedCSL's server; see the module docstring for the rules (the wire protocol:
    :mod:`fedcausal_flwr.protocols.fedcsl`)."""

    name = "fedcsl"
    OPTIONS = FEDCSL_OPTIONS
    #: discrete columns; each client tests and searches on its own rows
    needs = InputNeeds(values="discrete", local_tests=True)
    alpha, test, max_depth, reliability = option_attributes(*COMMON)
    input_needs = discrete_needs

    def __init__(self, options: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        super().__init__(options, **keywords)
        #: the direction merge's tie rule (an attribute: a test switches it between merges)
        self.tie_rule: str = self.options.tie_rule
        #: the clients' BDeu hill climbing, as it travels
        self.search = shared.hill_climb_keywords(self.options)
        self.discrete = DiscreteLevels()
        self.weights: dict[int, float] = {}
        self.client_tests: dict[int, int] = {}
        self.neighbour_sets: dict[int, np.ndarray] = {}
        self.skeleton: FederatedSkeleton | None = None
        self.votes: np.ndarray | None = None
        self.dropped: list[tuple[int, int]] = []
        self.graph: Graph | None = None

    # ------------------------------------------------------------------ protocol
    def next_request(self) -> Request | None:
        if self.graph is not None:
            return None
        self.discrete.fix(self)
        if self.skeleton is None:
            asked = scoped(self, NeighboursRequest, max_depth=self.options.max_depth)
            return Request(NEIGHBOURS, asked)
        arrays = [self.skeleton.skeleton.astype(np.uint8)]
        return Request(LOCAL_DAG, scoped(self, LocalDagRequest, **self.search), arrays=arrays)

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        if request.action == NEIGHBOURS:
            self._skeleton(replies)
        else:
            self._merge(replies)

    def _square(self, reply: Reply, what: str) -> np.ndarray:
        p = len(self.variables)
        matrix = np.asarray(reply.arrays[0]) if reply.arrays else np.zeros(0)
        if matrix.shape != (p, p) or not np.isin(matrix, (0, 1)).all():
            raise ClientProtocolError(
                f"client {reply.client} sent {what} of shape {matrix.shape}, expected a 0/1 "
                f"{p}x{p} matrix"
            )
        matrix = matrix.astype(bool)
        if np.any(np.diag(matrix)):
            raise ClientProtocolError(f"client {reply.client} sent {what} with a self-loop")
        return matrix

    def _skeleton(self, replies: list[Reply]) -> None:
        sets, weights = [], []
        for r in replies:
            members = self._square(r, "neighbour sets")
            weight = np.asarray(r.arrays[1], dtype=np.float64) if len(r.arrays) > 1 else None
            if weight is None or weight.shape != (1,) or not 0 <= weight[0] <= 1:
                raise ClientProtocolError(
                    f"client {r.client} sent no weight in [0, 1] with its neighbour sets"
                )
            sets.append(members)
            weights.append(float(weight[0]))
            self.neighbour_sets[r.client] = members
            self.weights[r.client] = float(weight[0])
            self.client_tests[r.client] = int(r.meta_as(NeighboursReply).tests)
        if not any(weights):
            raise ValueError(
                "fedcsl: every client's weight is 0 (no client has a reliable unconditional "
                "test; see --reliability)"
            )
        self.skeleton = federated_skeleton(np.stack(sets), weights)
        self.annotate(
            clients=len(replies),
            edges=int(np.triu(self.skeleton.skeleton, k=1).sum()),
            asymmetric=len(self.skeleton.asymmetric),
        )

    def _merge(self, replies: list[Reply]) -> None:
        assert self.skeleton is not None  # the neighbours round ran first
        allowed = self.skeleton.skeleton
        dags = []
        for r in replies:
            dag = self._square(r, "a DAG")
            if np.any((dag | dag.T) & ~allowed) or np.any(dag & dag.T):
                raise ClientProtocolError(
                    f"client {r.client} sent a graph with edges outside the skeleton it was "
                    "given or with both directions of a pair"
                )
            dags.append(dag)
        # the weights of the clients that answered this round (a dropout loses its vote)
        unknown = [r.client for r in replies if r.client not in self.weights]
        if unknown:
            raise ClientProtocolError(
                f"client {unknown[0]} sent a DAG but no neighbour sets in the first round"
            )
        weights = [self.weights[r.client] for r in replies]
        votes = weighted_direction_votes(np.stack(dags).astype(np.uint8), weights)
        self.votes = votes
        marks, self.dropped, undirected = voted_dag_marks(
            votes, self.tie_rule, self.options.allow_cycles
        )
        self.graph = Graph(tuple(self.variables), marks, "DAG")
        self.annotate(edges=self.graph.n_edges(), undirected=undirected, dropped=len(self.dropped))

    # ------------------------------------------------------------------ result
    def result_payload(self) -> dict:
        assert self.skeleton is not None  # the neighbours round ran
        names = self.variables

        def pairs(matrix: np.ndarray) -> list[list[str]]:
            return [[names[a], names[b]] for a, b in np.argwhere(np.triu(matrix, k=1)).tolist()]

        sk = self.skeleton
        return {
            "graph": self.graph,
            "variables": list(names),
            "weights": {str(k): round(w, 12) for k, w in sorted(self.weights.items())},
            "neighbour_counts": dict(zip(names, sk.neighbour_counts.tolist(), strict=True)),
            "skeleton": pairs(sk.skeleton),
            "asymmetric_pairs": {
                f"{names[a]}|{names[b]}": {"score": round(float(s), 12), "kept": bool(s >= 0)}
                for (a, b), s in zip(sk.asymmetric.tolist(), sk.scores.tolist(), strict=True)
            },
            "client_neighbours": {
                str(k): {v: [names[u] for u in np.flatnonzero(m[i])] for i, v in enumerate(names)}
                for k, m in sorted(self.neighbour_sets.items())
            },
            "client_tests": {str(k): t for k, t in sorted(self.client_tests.items())},
            "direction_weights": (
                {}
                if self.votes is None
                else {
                    f"{names[a]}->{names[b]}": round(float(self.votes[a, b]) / VOTE_SCALE, 9)
                    for a, b in np.argwhere(self.votes > 0).tolist()
                }
            ),
            "dropped_for_cycles": [[names[a], names[b]] for a, b in self.dropped],
            "edge_votes": self.edge_votes(),
            "options": {
                "tie_rule": self.tie_rule,
                "allow_cycles": self.options.allow_cycles,
                **self.search,
            },
        }

    def edge_votes(self) -> dict[str, list[list]]:
        """Per pair some client's HITON-PC lists (from either side), the client-weighted share
        of clients listing it: ``kept`` edges of the result ``[x, y, share]``, ``removed`` pairs
        ``[x, y, share]``."""
        assert self.graph is not None  # the run has finished
        pids = sorted(self.neighbour_sets)
        weights = np.array([self.weights[k] for k in pids])
        listed = np.stack([self.neighbour_sets[k] | self.neighbour_sets[k].T for k in pids])
        total = weights.sum()
        share = np.tensordot(weights, listed, axes=1) / total if total > 0 else listed.mean(0)
        adjacency = self.graph.adjacency()
        return split_by_graph(self.variables, share, np.any(listed, axis=0), adjacency)


#: FedCSL's strategy from its options (a mapping, keywords, or both)
make_strategy = FedCSLStrategy


register_method(
    "fedcsl",
    FedCSLStrategy,
    "fedcausal_flwr.clients.fedcsl:FedCSLClient",
    disclosures=DISCLOSURES,
    bootstrap=True,
    paper="FedCSL (Guo et al. 2024)",
    description="FedCSL (Guo et al. 2024): weighted HITON-PC skeleton + weighted BDeu HC DAGs",
)
