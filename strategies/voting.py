"""Voting baselines, the local-only baseline and the pooled reference (FedC2SL paper, Sec. 5.1).

Every method here lets each client decide on its own data (G2 or Pearson chi2 at level ``alpha``
over the global level sets) and the server only combines the decisions:

* ``pc-vote`` / ``fci-vote`` (PC-Voting / FCI-Voting): each client runs PC (FCI) alone and sends
  its endpoint-mark matrix; the server votes entry-wise (:func:`majority_marks`). The entries are
  voted independently, so the voted graph **may be inconsistent**: it need not be the CPDAG (PAG)
  of any DAG (MAG), and may contain directed cycles.
* ``pc-cit-vote`` / ``fci-cit-vote`` (PC-CIT-Voting / FCI-CIT-Voting): the server runs the batched
  PC (FCI) engine; every CI test of a batch is answered by the clients' local p-values, combined
  by :func:`vote_pvalues`. One round per batch, like FedC2SL.
* ``local``: each client runs PC (or FCI) alone; nothing is combined. The result's main graph is
  the lowest partition id's graph; all client graphs are in ``extra["client_graphs"]`` and
  :func:`local_summary` scores them (``local-avg``, and ``local-best``, an oracle that needs the
  truth to pick a client).
* ``pooled``: the **centralised reference, not a federated method**: every client sends its raw
  (encoded) data and the server runs PC (FCI) on the union. It is the upper bound the federated
  methods are compared with, and it is NOT private (the ledger shows ``raw_rows`` messages).

Rules, with ties (all order-independent: they depend on counts, not on client order):

* mark vote (:func:`majority_marks`): an edge is present iff a **strict majority** of the clients
  have it (a tie is not a majority: no edge; a presence vote, as FedECD's -Voting baselines cite
  Na & Yang's voting without details, FedECD paper Sec. 5.1: docs/choices.md, Voting baselines).
  Each endpoint mark of a present edge is the most frequent mark among the clients that have
  the edge, ties to the **smallest code** (tail < arrow < circle; the same order in causal-learn's
  -1/1/2 coding, as FedC2SL's ``np.argmax(np.bincount(...))``). Deciding presence first keeps the
  result a valid graph; FedC2SL votes "no edge" as one more code, which can leave half-edges.
* CI vote (:func:`vote_pvalues`): if a **strict majority** of the clients find ``p > alpha`` the
  test returns the largest client p-value (independent), otherwise the smallest one (dependent);
  a tie counts as dependent (FedC2SL's code, ``alg/cit_voting.py``; the paper gives no rule). A
  NaN p-value counts as dependent. The local tests follow causal-learn's dof rule; FedC2SL's code
  adds +1 dof per empty local stratum, which is not replicated here.
* option ``reliability`` (off by default; every method here, the pooled reference included):
  the Causal Learner rule FedECD's experiments use, a test runs only if it has at least that
  many rows per cell of its table (``n / (a_x a_y prod a_s)``, arities = highest observed code
  + 1); otherwise its p-value is NaN, i.e. dependent.

Wire protocol (actions, payload records, replies): :mod:`fedcausal_flwr.protocols.voting`.

What the server learns: ``local_graph``: every client's whole local graph; ``pvalues``: every
client's p-value of every test the search asks (continuous statistics of its data, which reveal
effect and sample sizes); ``raw_rows``: everything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.driver import StepRunner, with_cache
from fedcausal_flwr.discovery.fci import FCIResult, fci, fci_steps
from fedcausal_flwr.discovery.pc import PCResult, pc, pc_steps
from fedcausal_flwr.discovery.search_report import search_evidence
from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.core.registry import register_method
from fedcausal_flwr.graphs.frequency import split_by_graph
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.graphs.knowledge import Knowledge
from fedcausal_flwr.graphs.truth import dag_to_cpdag, dag_to_pag
from fedcausal_flwr.metrics import graph_metrics
from fedcausal_flwr.options import Option
from fedcausal_flwr.protocols.discrete import ComputedTests
from fedcausal_flwr.protocols.pooled import RAW_ROWS, EncodedRowsRequest
from fedcausal_flwr.protocols.voting import (
    CIT_VOTE_DISCLOSURES,
    GRAPH_VOTE_DISCLOSURES,
    LOCAL_GRAPH,
    POOLED_DISCLOSURES,
    LocalGraphRequest,
)
from fedcausal_flwr.result import Result
from fedcausal_flwr.stats.batch_oracle import Query
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import MethodStrategy, option_attributes, register_variants
from fedcausal_flwr.strategies.discrete import (
    COMMON,
    DiscreteLevels,
    client_marks,
    common_options,
    discrete_needs,
    pooled_oracle,
    pvalues_request,
    scoped,
)

ALGORITHMS = ("pc", "fci")
GRAPH_KIND = {"pc": "CPDAG", "fci": "PAG"}
MARK_ORDER = (TAIL, ARROW, CIRCLE)  # tie order of the mark vote: smallest code first


# ============================================================================ combination rules
def majority_marks(stack: np.ndarray) -> np.ndarray:
    """Entry-wise vote over client mark matrices ``stack`` (K x p x p); see the module docstring.

    An edge is kept iff more than K/2 clients have it; each of its endpoint marks is the most
    frequent one among those clients, ties to the smallest code (tail < arrow < circle).
    """
    stack = np.asarray(stack)
    if stack.ndim != 3 or stack.shape[1] != stack.shape[2] or stack.shape[0] == 0:
        raise ValueError(f"expected a non-empty K x p x p stack of marks, got shape {stack.shape}")
    n_clients = stack.shape[0]
    present = 2 * np.count_nonzero(stack != NONE, axis=0) > n_clients
    counts = np.stack([np.count_nonzero(stack == mark, axis=0) for mark in MARK_ORDER])
    winner = np.asarray(MARK_ORDER, dtype=np.int8)[np.argmax(counts, axis=0)]
    return np.where(present, winner, NONE).astype(np.int8)


def vote_pvalues(pvalues: np.ndarray, alpha: float) -> np.ndarray:
    """Combine client p-values (K x Q) test by test: strict majority ``p > alpha`` -> max p, else
    min p (a tie is dependent; NaN counts as dependent and is ignored by max/min)."""
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] == 0:
        raise ValueError(f"expected a non-empty K x Q matrix of p-values, got shape {p.shape}")
    independent = p > alpha
    majority = 2 * independent.sum(axis=0) > p.shape[0]
    largest = np.where(independent, p, -np.inf).max(axis=0, initial=-np.inf)
    smallest = np.where(np.isnan(p), np.inf, p).min(axis=0, initial=np.inf)
    smallest = np.where(np.isinf(smallest), np.nan, smallest)
    return np.where(majority, largest, smallest)


ALGORITHM = Option(
    "algorithm", "str", "pc", "the search each client (or the server) runs", choices=ALGORITHMS
)
#: every search of these baselines (each client's own, or the server's on voted p-values) takes
#: background knowledge
VOTING_OPTIONS = common_options(paper={"alpha": "0.05", "test": "chi2"}).extend(shared.knowledge())
LOCAL_OPTIONS = VOTING_OPTIONS.extend(ALGORITHM)


def _for_search(option: Option, algorithm: str) -> Option:
    return replace(option, requires=("algorithm", (algorithm,)))


#: ``pooled`` stands in for FedPC / FedFCI: it takes their search engines' options (each only
#: with its algorithm) and their dof rule, with the same defaults and checks.
POOLED_OPTIONS = LOCAL_OPTIONS.extend(
    *(_for_search(o, "pc") for o in shared.search_engine("pc")),
    *(_for_search(o, "fci") for o in shared.search_engine("fci")),
    shared.knowledge(),  # both searches take it
    shared.empty_strata_add_dof(),
    shared.missing(),
    checks=(shared.search_engine_problem,),
)


# ============================================================================ local graphs
class LocalGraphs:
    """The round PC/FCI-Voting and ``local`` share: every client runs PC/FCI alone on its own
    rows and sends its graph. A part each of their strategies holds, so that they differ only in
    how they combine the graphs (and the strategies stay three classes deep)."""

    def __init__(self, knowledge: Knowledge | None) -> None:
        #: the background knowledge each client's search takes
        self.knowledge = knowledge
        #: each client's graph, by client id (read from the replies)
        self.graphs: dict[int, Graph] = {}
        #: each client's count of CI tests, by client id
        self.tests: dict[int, int] = {}

    def request(self, strategy: GraphVoteStrategy | LocalStrategy, algorithm: str) -> Request:
        """Action ``local_graph`` over ``strategy``'s variables and level sets (fixed here, once):
        each client runs ``algorithm``. An unknown name in the knowledge stops the run here."""
        strategy.discrete.fix(strategy)
        knowledge = None
        if self.knowledge is not None:
            self.knowledge.matrix(strategy.variables)
            knowledge = self.knowledge.to_text()
        asked = scoped(
            strategy,
            LocalGraphRequest,
            max_depth=strategy.options.max_depth,
            algorithm=algorithm,
            knowledge=knowledge,
        )
        return Request(LOCAL_GRAPH, asked)

    def read(self, replies: list[Reply], variables: Sequence[str], algorithm: str) -> None:
        """Keep each reply's graph (checked: a malformed one is the client's protocol error)
        and its test count."""
        kind = GRAPH_KIND[algorithm]
        names = tuple(variables)
        self.graphs = {r.client: Graph(names, client_marks(r, names), kind) for r in replies}
        self.tests = {r.client: int(r.meta_as(ComputedTests).tests) for r in replies}


class GraphVoteStrategy(MethodStrategy):
    """PC-Voting: one round of local graphs (:class:`LocalGraphs`), voted entry-wise (may be
    inconsistent); with ``algorithm="fci"``, FCI-Voting: the same vote over the clients' PAGs."""

    #: discrete columns; each client runs its search on its own rows. A column constant over
    #: every site's rows: each site's PC finds it independent of all (a table of one level: no
    #: degree of freedom), so the vote keeps it isolated, as pooled does
    needs = InputNeeds(values="discrete", local_tests=True, isolates_constants=True)
    name = "pc-vote"
    OPTIONS = VOTING_OPTIONS
    VARIANTS = {"pc": ("pc-vote", VOTING_OPTIONS), "fci": ("fci-vote", VOTING_OPTIONS)}
    alpha, test, max_depth, reliability = option_attributes(*COMMON)
    input_needs = discrete_needs

    def __init__(
        self, options: Mapping[str, Any] | None = None, /, *, algorithm: str = "pc",
        **keywords: Any,
    ) -> None:  # fmt: skip
        super().__init__(options, variant=algorithm, **keywords)
        self.discrete = DiscreteLevels()
        self.local = LocalGraphs(shared.parse_knowledge(self.options.knowledge))
        #: the search each client runs
        self.algorithm = algorithm
        self.graph: Graph | None = None

    def next_request(self) -> Request | None:
        return None if self.graph is not None else self.local.request(self, self.algorithm)

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        self.local.read(replies, self.variables, self.algorithm)
        self.graph = self.combine()
        self.annotate(clients=len(replies))

    def combine(self) -> Graph:
        """The entry-wise vote over the clients' graphs, in client order."""
        graphs = self.local.graphs
        stack = np.stack([graphs[c].marks for c in sorted(graphs)])
        return Graph(tuple(self.variables), majority_marks(stack), GRAPH_KIND[self.algorithm])

    def edge_votes(self) -> dict[str, list[list]]:
        """Each pair some client has, by name, with the share of clients that have it: ``kept``
        edges ``[x, y, share]`` (a majority) and ``removed`` pairs ``[x, y, share]``."""
        assert self.graph is not None  # combined
        present = np.stack([g.marks != NONE for g in self.local.graphs.values()])
        share = present.mean(axis=0)
        return split_by_graph(self.variables, share, share > 0, self.graph.adjacency())

    def result_payload(self) -> dict:
        graphs, tests = self.local.graphs, self.local.tests
        return {
            "graph": self.graph,
            "variables": list(self.variables),
            "vote": "edge iff > K/2 clients have it; marks by plurality, ties to tail<arrow<circle",
            "edge_votes": self.edge_votes(),
            "client_edges": {str(c): g.n_edges() for c, g in sorted(graphs.items())},
            "client_tests": {str(c): n for c, n in sorted(tests.items())},
        }


class LocalStrategy(MethodStrategy):
    """Each client alone: one round of local graphs (:class:`LocalGraphs`), no combination.
    Main graph = lowest partition id's graph."""

    #: discrete columns; each client runs its search on its own rows
    needs = InputNeeds(values="discrete", local_tests=True)
    name = "local"
    OPTIONS = LOCAL_OPTIONS
    alpha, test, max_depth, reliability = option_attributes(*COMMON)
    input_needs = discrete_needs

    def __init__(self, options: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        super().__init__(options, **keywords)
        self.discrete = DiscreteLevels()
        self.local = LocalGraphs(shared.parse_knowledge(self.options.knowledge))
        #: the search each client runs (option ``algorithm``)
        self.algorithm = self.options.algorithm
        self.graph: Graph | None = None

    def next_request(self) -> Request | None:
        return None if self.graph is not None else self.local.request(self, self.algorithm)

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        self.local.read(replies, self.variables, self.algorithm)
        self.graph = self.combine()
        self.annotate(clients=len(replies))

    def combine(self) -> Graph:
        """No combination: the lowest partition id's graph."""
        return self.local.graphs[min(self.local.graphs)]

    def result_payload(self) -> dict:
        graphs, tests = self.local.graphs, self.local.tests
        return {
            "graph": self.graph,
            "variables": list(self.variables),
            "main_graph": f"client {min(graphs)} (use local_summary for avg/best)",
            "client_graphs": [
                {"client": c, "graph": g.to_json()} for c, g in sorted(graphs.items())
            ],
            "client_tests": {str(c): n for c, n in sorted(tests.items())},
        }


def local_summary(result: Result, truth: Graph) -> dict[str, dict]:
    """Score every client graph of a ``local`` result: ``local-avg`` and ``local-best``.

    ``truth``: the true DAG (converted to the graphs' kind, CPDAG or PAG without latents) or a
    reference already of that kind. ``local-avg`` is the mean of each metric over the clients (a
    metric average, not an aggregated graph). ``local-best`` is the client with the highest
    ``arrow_f1`` (ties: lowest partition id) and its metrics; it is an **oracle** (it needs the
    truth to choose), an optimistic bound rather than a deployable method.
    """
    entries = result.extra.get("client_graphs")
    if not entries:
        raise KeyError(
            f"result of method {result.method!r} has no extra['client_graphs']; "
            "local_summary needs a 'local' result"
        )
    graphs = {int(e["client"]): Graph.from_json(e["graph"]) for e in entries}
    kind = next(iter(graphs.values())).kind
    reference = truth
    if truth.kind == "DAG" and kind == "CPDAG":
        reference = dag_to_cpdag(truth)
    elif truth.kind == "DAG" and kind == "PAG":
        reference = dag_to_pag(truth, [])
    elif truth.kind != kind:
        raise ValueError(f"truth is a {truth.kind} but the client graphs are {kind}s")
    scores = {c: graph_metrics(g, reference) for c, g in sorted(graphs.items())}
    keys = sorted(next(iter(scores.values())))
    average = {k: float(np.mean([s[k] for s in scores.values()])) for k in keys}
    best_client = max(scores, key=lambda c: (scores[c]["arrow_f1"], -c))
    best = {**scores[best_client], "client": best_client, "oracle": True}
    return {"local-avg": average, "local-best": best}


# ============================================================================ CI-test voting
class CITVoteStrategy(MethodStrategy):
    """PC-CIT-Voting: server-side search, each CI test decided by client vote; with
    ``algorithm="fci"``, FCI-CIT-Voting: FCI on the server, the same votes."""

    #: a column constant over every site's rows: every site's p-value with it is 1, so it stays
    #: an isolated node, as in pooled PC
    needs = InputNeeds(values="discrete", local_tests=True, isolates_constants=True)
    name = "pc-cit-vote"
    OPTIONS = VOTING_OPTIONS
    VARIANTS = {"pc": ("pc-cit-vote", VOTING_OPTIONS), "fci": ("fci-cit-vote", VOTING_OPTIONS)}
    alpha, test, max_depth, reliability = option_attributes(*COMMON)
    input_needs = discrete_needs

    def __init__(
        self, options: Mapping[str, Any] | None = None, /, *, algorithm: str = "pc",
        **keywords: Any,
    ) -> None:  # fmt: skip
        super().__init__(options, variant=algorithm, **keywords)
        self.discrete = DiscreteLevels()
        #: the server's search
        self.algorithm = algorithm
        #: the background knowledge the server's search takes
        self.knowledge = shared.parse_knowledge(self.options.knowledge)
        self.cache: dict[Query, float] = {}
        self.runner: StepRunner | None = None
        self.batches: list[dict] = []

    def next_request(self) -> Request | None:
        if self.runner is None:
            self.discrete.fix(self)
            engine = pc_steps if self.algorithm == "pc" else fci_steps
            options = self.options
            steps = engine(
                self.variables, options.alpha, options.max_depth, knowledge=self.knowledge
            )
            self.runner = StepRunner(with_cache(steps, self.cache))
        if self.runner.pending is None:  # the search has finished
            return None
        return pvalues_request(self, self.runner.pending)

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        assert self.runner is not None and self.runner.pending is not None  # the asked batch
        n_queries = len(self.runner.pending)
        local = np.stack([_pvalue_vector(r, n_queries) for r in replies])
        combined = vote_pvalues(local, self.options.alpha)
        independent = int(np.count_nonzero(combined > self.options.alpha))
        self.batches.append(
            {"round": self.current_round, "tests": n_queries, "independent": independent}
        )
        self.annotate(batch=len(self.batches) - 1, tests=n_queries)
        self.runner.answer(combined)

    def result_payload(self) -> dict:
        assert self.runner is not None and self.runner.result is not None  # a finished search
        result = self.runner.result
        return {
            "graph": result.graph,
            "variables": list(result.graph.names),
            "tests": len(self.cache),
            "batches": self.batches,
            "depths_searched": len(result.skeleton.depths),
            **search_evidence(result),  # the voted p-values'
        }


def _pvalue_vector(reply: Reply, n_queries: int) -> np.ndarray:
    values = np.asarray(reply.arrays[0], dtype=np.float64) if reply.arrays else np.zeros(0)
    if values.shape != (n_queries,):
        raise ClientProtocolError(
            f"client {reply.client} sent {values.shape} p-values for a batch of {n_queries} tests"
        )
    return values


# ============================================================================ pooled reference
class PooledStrategy(MethodStrategy):
    """Centralised reference: raw data to the server, PC/FCI on the union. NOT private."""

    name = "pooled"
    OPTIONS = POOLED_OPTIONS
    #: the server tests the pooled rows: any client size; a single-level column is isolated
    needs = InputNeeds(values="discrete", isolates_constants=True)
    alpha, test, max_depth, reliability = option_attributes(*COMMON)

    def __init__(self, options: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        super().__init__(options, **keywords)
        self.discrete = DiscreteLevels()
        #: the server's search (option ``algorithm``) and its engine's keywords
        self.algorithm = self.options.algorithm
        self.engine_options = shared.search_engine_options(self.algorithm, self.options)
        self.result: PCResult | FCIResult | None = None
        self.rows: dict[int, int] = {}

    def next_request(self) -> Request | None:
        if self.result is not None:
            return None
        self.discrete.fix(self)
        asked = EncodedRowsRequest(self.variables, self.discrete.levels, self.options.missing)
        return Request(RAW_ROWS, asked)

    def input_needs(self) -> InputNeeds:
        return replace(self.needs, missing=self.options.missing)

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        options = self.options
        oracle = pooled_oracle(
            replies,
            self.variables,
            self.discrete.cards,
            options.test,
            self.rows,
            options.reliability,
            options.empty_strata_add_dof,
            allow_missing=options.missing == "testwise",
        )
        search = pc if self.algorithm == "pc" else fci
        self.result = search(
            oracle, options.alpha, max_depth=options.max_depth, **self.engine_options
        )
        self.annotate(rows=int(sum(self.rows.values())))

    def result_payload(self) -> dict:
        assert self.result is not None  # handle_replies has run
        return {
            "graph": self.result.graph,
            "variables": list(self.result.graph.names),
            "reference": "centralised: clients sent raw data (not private)",
            "rows": {str(c): n for c, n in sorted(self.rows.items())},
            "tests": self.result.n_tests,
            "constant_columns": list(self.discrete.constant),
            **self.missing_report(self.options.missing),
            **search_evidence(self.result),
        }


# ============================================================================ registration
def fci_vote_strategy(options: Mapping[str, Any]) -> GraphVoteStrategy:
    """FCI-Voting: PC-Voting's strategy over the clients' FCI graphs."""
    return GraphVoteStrategy(options, algorithm="fci")


def fci_cit_vote_strategy(options: Mapping[str, Any]) -> CITVoteStrategy:
    """FCI-CIT-Voting: PC-CIT-Voting's strategy with FCI on the server."""
    return CITVoteStrategy(options, algorithm="fci")


def local_rows(result: Result, truth: Graph) -> dict[str, dict]:
    """The rows a comparison adds for a ``local`` run: ``local-avg`` and ``local-best-oracle``."""
    summary = local_summary(result, truth)
    return {"local-avg": summary["local-avg"], "local-best-oracle": summary["local-best"]}


def _register_votes() -> None:
    """PC/FCI-Voting and PC/FCI-CIT-Voting (FedC2SL's baselines), each class's two searches."""
    for strategy, makers, disclosures, words in (
        (GraphVoteStrategy, {"pc": GraphVoteStrategy, "fci": fci_vote_strategy},
         GRAPH_VOTE_DISCLOSURES, "{alg}-Voting: local {alg} per client, entry-wise mark vote"),
        (CITVoteStrategy, {"pc": CITVoteStrategy, "fci": fci_cit_vote_strategy},
         CIT_VOTE_DISCLOSURES, "{alg}-CIT-Voting: server-side {alg}, each CI test by client "
         "majority (max p if independent, else min p)"),
    ):  # fmt: skip
        register_variants(
            makers,
            strategy.VARIANTS,
            {search: words.format(alg=search.upper()) for search in makers},
            "fedcausal_flwr.clients.voting:VotingClient",
            bootstrap=True,
            disclosures=disclosures,
            paper="baseline (FedC2SL)",
            min_sites=2,
        )


#: every method of this module: its strategy class and its own registry fields
METHODS: tuple[tuple[type[MethodStrategy], dict[str, Any]], ...] = (
    (
        LocalStrategy,
        {
            "disclosures": GRAPH_VOTE_DISCLOSURES,
            "summaries": local_rows,
            "paper": "baseline",
            "description": "each client alone runs PC (algorithm=fci: FCI); see local_summary for "
            "avg/best",
        },
    ),
    (
        PooledStrategy,
        {
            "disclosures": POOLED_DISCLOSURES,
            "paper": "upper bound",
            "description": "centralised reference (NOT private): raw data to the server, PC/FCI on "
            "the union",
        },
    ),
)
_register_votes()
for _strategy, _own in METHODS:
    register_method(
        _strategy.name,
        _strategy,
        "fedcausal_flwr.clients.voting:VotingClient",
        bootstrap=True,
        **_own,
    )

__all__ = [
    "CITVoteStrategy",
    "GraphVoteStrategy",
    "LocalStrategy",
    "PooledStrategy",
    "local_summary",
    "majority_marks",
    "vote_pvalues",
]
