"""FedLCS: federated local causal structure of target variables (Yu et al., Sci China Inf Sci 2025).

The server learns, for each target T, its parents, children and still-undirected neighbours;
clients only run CI tests on their own rows. The Flower-free search
(:func:`~fedcausal_flwr.discovery.lcs.lcs_search`) yields one *request* per round, answered here
from the replies. Its baselines, ``fedlcs-local`` (each client alone) and ``lcs-pooled``
(LCS-All), are at the end of this module. The paper's gaps and our choices: ``docs/choices.md``
(FedLCS); measured rules: ``experiments/README.md``.

**FLSke** (layer-wise federated PCsimple). For every variable V whose PC set is needed, the server
sends V's candidates and a layer ``l``; each client runs PCsimple's layer ``l`` with its own tests
(pool frozen at the layer's start, ``stable``; Table 2 removes on the fly: ``stable=False``) and
returns a keep flag per candidate. A candidate stays with ``votes >= ratio * K`` (K = clients
answering; exact decimal comparison, Eq. 2: ratio 0.4 keeps 2 of 3, 2 of 5, 4 of 10, 6 of 15). A
variable stops after a layer ``l >= 1`` that removed nothing (``stop_unchanged``), when
``|CPC| <= l``, or after ``max_depth`` (6). All pending variables share one round per layer.

**FLSori**. PC sets of every member of PC_T, then an edge u - v iff v in PC_u and u in PC_v
(``edge_rule="and"``, Def. 5; ``"or"``: either). For every unshielded ``a - T - b`` a consistent
separating set is searched over ``U = (PC_a | PC_b) \\ {a, b}``, levels ``0..sep_depth``: each
client tests ``a _||_ b | Z`` for every ``Z`` of size ``l`` (``itertools.combinations`` order) and
uploads the p-values above alpha (NaN otherwise; all with ``sep_rule="fisher"``). The server
picks the level's set by ``sep_rule`` (:mod:`~fedcausal_flwr.discovery.sepset_choice`): ``votes``
(default) the subset most clients found independent, at least ``ceil(ratio * K)``, ties by the
smallest p among them; ``max_p`` (the paper's) the largest p over subsets x clients; ``fisher``
the largest Fisher-combined p above alpha. Across levels the larger (votes, p) wins, lower levels
on ties; ``sep_stop`` ends a pair's search (``after_found``: the first empty level after a set).
No set: the triple stays undecided. Colliders by ``collider_rule`` (``standard``: T not in the
chosen set), then Meek R1-R4.

**FLEori**. While some T - X stays undirected, up to ``extension_depth`` (2) rings of PC sets and
triples further out, the orientation rebuilt after each ring so arrows propagate back to T. What
stays undirected is reported so (``random_orient=True``: the paper's random orientation). PC sets
and separating-set decisions are shared across targets (``target="A,B"`` or ``"all"``: the same
rounds, exactly the per-target results).

Wire protocol (actions, payload records, replies): :mod:`fedcausal_flwr.protocols.fedlcs`
(``lcs-pooled``'s ``raw_rows``: :mod:`fedcausal_flwr.protocols.voting`).

What the server learns: each client's keep/remove flag for every candidate of every layer and the
p-values of the sets under which a client found a triple's ends independent; with
``sep_rule="fisher"`` every separating-set p-value (each client's evidence for every subset).
``fedlcs-local`` reveals every client's local structures, ``lcs-pooled`` the raw rows.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.driver import StepRunner
from fedcausal_flwr.discovery.lcs import lcs_search, local_structure
from fedcausal_flwr.discovery.lcs_payload import (
    full_graph,
    options_dict,
    parse_targets,
    structure_payload,
)
from fedcausal_flwr.discovery.lcs_state import (
    EDGE_RULES,
    SEP_STOPS,
    Knowledge,
    LCSOptions,
    LocalStructure,
    PruneJob,
    PruneRequest,
)
from fedcausal_flwr.discovery.sepset_choice import SEP_RULES, decide_sepsets
from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.core.registry import register_method
from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL, Graph
from fedcausal_flwr.graphs.sepsets import SEPSET_RULES
from fedcausal_flwr.metrics import local_metrics
from fedcausal_flwr.options import REQUIRED, Option, OptionSet
from fedcausal_flwr.protocols.discrete import ComputedTests
from fedcausal_flwr.protocols.fedlcs import (
    DISCLOSURES,
    LCS_LOCAL,
    LCS_PRUNE,
    LCS_SEPSETS,
    LOCAL_DISCLOSURES,
    POOLED_DISCLOSURES,
    LCSLocalRequest,
    LCSPruneRequest,
    LCSSepsetsRequest,
)
from fedcausal_flwr.protocols.pooled import RAW_ROWS, EncodedRowsRequest
from fedcausal_flwr.result import Result
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import MethodStrategy, option_attributes
from fedcausal_flwr.strategies.discrete import (
    COMMON,
    DiscreteLevels,
    common_options,
    discrete_needs,
    pooled_oracle,
    scoped,
)
from fedcausal_flwr.strategies.layer_vote import vote_threshold


def _lcs_options(with_ratio: bool) -> OptionSet:
    """FedLCS's declared options (its baselines: without ``ratio`` and ``sep_rule``)."""
    options = _lcs_test_options().extend(*_lcs_search_options(), *_lcs_orientation_options())
    if not with_ratio:
        return options
    return options.extend(*_lcs_vote_options())


def _lcs_test_options() -> OptionSet:
    """The options every discrete method shares (alpha, the CI test, max_depth, reliability)
    at FedLCS's defaults, with the paper's values and why the defaults differ."""
    return common_options(
        max_depth=6,
        reliability=1.0,
        paper={"alpha": "0.05", "test": "G2", "max_depth": "6", "reliability": "none stated"},
        why={
            "test": "the test of the other discrete voting methods, so a comparison changes only "
            "the protocol; test=g2 runs the paper's",
            "reliability": "a test on fewer rows than its table has cells has no power, yet "
            "PCsimple removes a candidate at the first of its many subsets with p > alpha, so "
            "small clients all lose hubs' true neighbours (pigs at N = 15, experiments/README.md); "
            "MMHC's heuristic power rule, with 1 row per cell (its 5 stops small clients at "
            "layer 1)",
        },
    )


def _lcs_search_options() -> tuple[Option, ...]:
    """The options of FLSke, the search for each target's parents and children."""
    return (
        Option("target", "str", REQUIRED,
               "the target variable: a name, several as 'A,B', or 'all'"),
        replace(
            shared.max_depth(6, help="FLSke's largest layer (conditioning set size)", paper="6"),
            nullable=False,
            null_values=(),
        ),
        Option("stable", "bool", True,
               "PCsimple layers on the candidate pool frozen at the layer's start (stable) "
               "instead of on the fly",
               paper="on the fly (Table 2's trace)",
               why="every client tests the same sets in a layer, so the votes count the same "
               "evidence; with it FedLCS is at or above lcs-avg and fedpc-vote in every measured "
               "cell, on the fly it falls below fedpc-vote on win95pts (experiments/README.md)"),
        Option("stop_unchanged", "bool", True,
               "stop a variable after a layer (l >= 1) that removed nothing"),
    )  # fmt: skip


def _lcs_orientation_options() -> tuple[Option, ...]:
    """The options of the separating-set search, the edge and collider rules, and FLEori's
    orientation."""
    return (
        Option("sep_depth", "int", 3, "largest set in the consistent separating-set search",
               minimum=0, paper="not given; 3 in FedPC's code"),
        Option(
            "sep_stop", "str", "after_found",
            "stop a pair's separating-set search at the first empty level after a set was found, "
            "at the first empty level, or at the first level with a set",
            choices=SEP_STOPS,
            paper="first_empty (the paper's rule)",
            why="the paper's rule misses colliders whose ends are marginally dependent; "
            "after_found was better in 13 of 16 measured settings (with max_p; "
            "experiments/README.md)",
        ),
        Option(
            "edge_rule", "str", "and",
            "an edge u - v needs v in PC_u and u in PC_v (and) or either (or), where both PC "
            "sets are learned",
            choices=EDGE_RULES,
            paper="and (the AND rule, Def. 5 and Sec. 5.3)",
        ),
        Option(
            "collider_rule", "str", "standard",
            "which separating sets decide a triple a - T - b: the chosen consistent set "
            "(standard), or every set found independent at the searched levels: T in none of "
            "them (causallearn), none or all else undecided (conservative), the majority of them "
            "(majority, ties undecided)",
            choices=SEPSET_RULES,
            paper="standard (the consistent separating set, Sec. 5.2)",
        ),
        Option("extension_depth", "int", 2, "rings of FLEori's orientation extension",
               minimum=0, paper="2"),
        Option("random_orient", "bool", False,
               "orient what stays undirected at random under acyclicity", paper="true",
               why="a random orientation is not learned; it is reported as undirected instead"),
        shared.seed("seed of random_orient"),
    )  # fmt: skip


def _lcs_vote_options() -> tuple[Option, ...]:
    """FedLCS's own options, on how clients' separating sets are combined (its baselines,
    with one oracle, choose the same set under every rule)."""
    return (
        shared.ratio(0.4, paper="0.4 (Eq. 2)"),
        Option(
            "sep_rule", "str", "votes",
            "how a level's separating set is chosen across clients: the set most clients "
            "(at least ratio x clients) found independent, ties by their smallest p (votes); the "
            "largest p of any client (max_p); the largest Fisher-combined p (fisher, clients "
            "send every p-value)",
            choices=SEP_RULES,
            paper="max_p (the highest p over clients, subsets and levels, Sec. 5.2)",
            why="the maximum over more, smaller clients picks spurious sets (p = 1 on "
            "sparse tables); votes beat it as N grows and keep FedLCS above lcs-avg in every "
            "measured cell (experiments/README.md)",
        ),
    )  # fmt: skip


FEDLCS_OPTIONS = _lcs_options(with_ratio=True)
#: the baselines' options (one oracle chooses the same separating set under every rule)
BASELINE_OPTIONS = _lcs_options(with_ratio=False)
OPTIONS = FEDLCS_OPTIONS  # fedlcs's, by the name the tests import


def lcs_options(values: Mapping[str, Any]) -> LCSOptions:
    """:class:`LCSOptions` of resolved options (``max_depth`` is FLSke's maximum layer)."""
    keys = ("alpha", "stable", "stop_unchanged", "sep_depth", "sep_stop", "edge_rule",
            "collider_rule", "extension_depth", "random_orient", "seed", "sep_rule")  # fmt: skip
    # one oracle (fedlcs-local, lcs-pooled) has no sep_rule: every rule chooses the same set
    given = {k: values[k] for k in keys if k in values}
    return LCSOptions(max_level=values["max_depth"], **given)


def start_targets(strategy: MethodStrategy, discrete: DiscreteLevels) -> list[int]:
    """After hello, at the first request of FedLCS or a baseline: fix the level sets
    (``discrete``) of ``strategy``'s variables and return its targets (option ``target``) as
    indices, which every request and the payload name."""
    discrete.fix(strategy)
    return parse_targets(strategy.options.target, strategy.variables)


class FedLCSStrategy(MethodStrategy):
    """FedLCS server: see the module docstring for rules and ties (the wire protocol:
    :mod:`fedcausal_flwr.protocols.fedlcs`)."""

    name = "fedlcs"
    OPTIONS = FEDLCS_OPTIONS
    #: discrete columns; each client tests on its own rows
    needs = InputNeeds(values="discrete", local_tests=True)
    alpha, test, max_depth, reliability = option_attributes(*COMMON)
    input_needs = discrete_needs

    def __init__(self, options: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        super().__init__(options, **keywords)
        #: the search's options (:class:`LCSOptions`) of the resolved ones
        self.lcs = lcs_options(self.options)
        self.targets: list[int] = []  # set by start_targets at the first request
        self.discrete = DiscreteLevels()
        self.runner: StepRunner | None = None  # drives lcs_search, one request per round
        self.client_tests: dict[int, int] = {}
        self.stage_rounds = {"prune": 0, "sepsets": 0}
        self.run_token = uuid.uuid4().hex  # scopes the clients' test caches to this run
        #: (variable, candidate) -> (share of clients keeping it at its last vote, that layer)
        self.votes: dict[tuple[int, int], tuple[float, int]] = {}

    def next_request(self) -> Request | None:
        if self.runner is None:
            self.targets = start_targets(self, self.discrete)
            self.runner = StepRunner(lcs_search(len(self.variables), self.targets, self.lcs))
        request = self.runner.pending
        if request is None:
            return None
        if isinstance(request, PruneRequest):
            jobs = [[v, list(cpc), lv] for v, cpc, lv in request.jobs]
            prune = scoped(
                self,
                LCSPruneRequest,
                run_token=self.run_token,
                jobs=jobs,
                stable=self.options.stable,
            )
            return Request(LCS_PRUNE, prune)
        jobs = [[a, b, list(pool), lv] for a, b, pool, lv in request.jobs]
        reveal = self.options.sep_rule == "fisher"
        sepsets = scoped(
            self, LCSSepsetsRequest, run_token=self.run_token, jobs=jobs, reveal_all=reveal
        )
        return Request(LCS_SEPSETS, sepsets, nan_ok=True)

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        assert self.runner is not None  # next_request started the search
        for r in replies:
            tests = r.meta_as(ComputedTests).tests
            self.client_tests[r.client] = self.client_tests.get(r.client, 0) + tests
        jobs = self.runner.pending.jobs
        if request.action == LCS_PRUNE:
            answer: list = self._vote(jobs, replies)
            self.annotate(stage="flske", variables=len(answer))
        else:
            n = sum(math.comb(len(pool), lv) for _, _, pool, lv in jobs)
            values = np.stack([self._vector(r, n, np.float64) for r in replies]).astype(float)
            need = vote_threshold(self.options.ratio, len(replies))
            decided = decide_sepsets(jobs, values, self.options.alpha, self.options.sep_rule, need)
            clients = [r.client for r in replies]  # choices name a client position: its id
            answer = [(a if a is None else (*a[:2], clients[a[2]], *a[3:]), found)
                      for a, found in decided]  # fmt: skip
            self.annotate(stage="sepsets", pairs=len(jobs), tests=n)
        self.stage_rounds["prune" if request.action == LCS_PRUNE else "sepsets"] += 1
        self.runner.answer(answer)

    def _vector(self, reply: Reply, n: int, dtype) -> np.ndarray:
        values = np.asarray(reply.arrays[0]) if reply.arrays else np.zeros(0)
        if values.shape != (n,):
            raise ClientProtocolError(
                f"client {reply.client} sent {values.shape} values, expected {n} for this "
                f"{self.runner.pending.__class__.__name__ if self.runner else 'request'}"
            )
        return values.astype(dtype)

    def _vote(self, jobs: list[PruneJob], replies: list[Reply]) -> list[tuple[int, ...]]:
        """FLSke's vote: the candidates kept by at least ``ceil(ratio * K)`` clients."""
        n = sum(len(cpc) for _, cpc, _ in jobs)
        flags = [self._vector(r, n, np.int64) for r in replies]
        for r, f in zip(replies, flags, strict=True):
            if not np.isin(f, (0, 1)).all():
                raise ClientProtocolError(f"client {r.client} sent keep flags other than 0/1")
        votes = np.sum(flags, axis=0)
        keep = votes >= vote_threshold(self.options.ratio, len(replies))
        shares = iter((votes / len(replies)).tolist())
        for v, cpc, level in jobs:
            for c in cpc:
                self.votes[(v, c)] = (next(shares), level)
        ends = np.cumsum([len(cpc) for _, cpc, _ in jobs])
        return [tuple(np.asarray(cpc, dtype=int)[keep[e - len(cpc) : e]].tolist())
                for (_, cpc, _), e in zip(jobs, ends, strict=True)]  # fmt: skip

    def result_payload(self) -> dict:
        assert self.runner is not None and self.runner.done  # the search has finished
        results, knowledge = self.runner.result
        return {
            **structure_payload(self.variables, self.targets, results, knowledge),
            "ratio": str(self.options.ratio),
            "options": options_dict(self.lcs),
            "stage_rounds": dict(self.stage_rounds),
            "client_tests": {str(c): n for c, n in sorted(self.client_tests.items())},
            "tests": int(sum(self.client_tests.values())),
            "edge_votes": self.edge_votes(
                results[self.targets[0]].graph(self.variables), knowledge.pc
            ),
        }

    def edge_votes(self, graph: Graph, pc_sets: Mapping[int, Sequence[int]]) -> dict[str, list]:
        """FLSke's vote shares, by name: each edge of ``graph`` ``[x, y, share]`` (the smaller
        of its two PC-set votes: the edge needs both), and each candidate a layer removed from
        a PC set ``[variable, candidate, share, layer]``."""
        names = self.variables
        where = [names.index(n) for n in graph.names]
        kept = []
        for a, b in zip(*np.nonzero(np.triu(graph.adjacency(), k=1)), strict=True):
            u, v = where[a], where[b]
            sides = [self.votes[k][0] for k in ((u, v), (v, u)) if k in self.votes]
            if sides:
                kept.append([names[u], names[v], min(sides)])
        removed = [
            [names[v], names[c], share, level]
            for (v, c), (share, level) in sorted(self.votes.items())
            if c not in pc_sets.get(v, ())
        ]
        return {"kept": kept, "removed": removed}


#: FedLCS's strategy from its options (a mapping, keywords, or both)
make_strategy = FedLCSStrategy


# ============================================================================ baselines
# ``fedlcs-local`` (each client alone) and ``lcs-pooled`` (LCS-All): the search above with its
# options less ``ratio`` and ``sep_rule`` (:data:`BASELINE_OPTIONS`); their actions are in the
# wire-protocol tables of :mod:`fedcausal_flwr.protocols.fedlcs` (``lcs_local``) and
# :mod:`fedcausal_flwr.protocols.voting` (``raw_rows``).
class LCSLocalStrategy(MethodStrategy):
    """``fedlcs-local``: each client runs the whole search (PCsimple + orientation) on its own rows.

    One round (action ``lcs_local`` of :mod:`fedcausal_flwr.protocols.fedlcs`): every client
    returns an int8 ``n_targets x p x p`` stack, each slice the target's local graph embedded into
    all variables (:func:`~fedcausal_flwr.discovery.lcs_payload.full_graph`). Nothing is
    combined: the main result is the lowest partition id's, ``extra["client_graphs"]`` holds all,
    and :func:`lcs_local_summary` scores them (``-avg`` and the oracle ``-best``, like
    ``local``'s :func:`local_summary`). The server learns every client's local structures.
    """

    name = "fedlcs-local"
    OPTIONS = BASELINE_OPTIONS
    #: discrete columns; each client tests on its own rows
    needs = InputNeeds(values="discrete", local_tests=True)
    alpha, test, max_depth, reliability = option_attributes(*COMMON)
    input_needs = discrete_needs

    def __init__(self, options: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        super().__init__(options, **keywords)
        #: the search's options (:class:`LCSOptions`) of the resolved ones
        self.lcs = lcs_options(self.options)
        self.targets: list[int] = []  # set by start_targets at the first request
        self.discrete = DiscreteLevels()
        self.client_graphs: dict[int, dict[str, Graph]] = {}
        self.client_tests: dict[int, int] = {}

    def next_request(self) -> Request | None:
        if self.client_graphs:
            return None
        self.targets = start_targets(self, self.discrete)
        asked = scoped(self, LCSLocalRequest, targets=self.targets, lcs=options_dict(self.lcs))
        return Request(LCS_LOCAL, asked)

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        p, names = len(self.variables), tuple(self.variables)
        for r in replies:
            stack = np.asarray(r.arrays[0]) if r.arrays else np.zeros(0)
            if stack.shape != (len(self.targets), p, p):
                raise ClientProtocolError(
                    f"client {r.client} sent graphs of shape {stack.shape}, expected "
                    f"{(len(self.targets), p, p)}"
                )
            if not np.isin(stack, (NONE, TAIL, ARROW)).all():
                raise ClientProtocolError(f"client {r.client} sent unknown mark codes")
            try:
                graphs = {
                    names[t]: Graph(names, m.astype(np.int8), "LOCAL")
                    for t, m in zip(self.targets, stack, strict=True)
                }
            except ValueError as err:
                raise ClientProtocolError(
                    f"client {r.client} sent an invalid graph: {err}"
                ) from None
            self.client_graphs[r.client] = graphs
            self.client_tests[r.client] = int(r.meta_as(ComputedTests).tests)
        self.annotate(clients=len(replies))

    def result_payload(self) -> dict:
        main = self.client_graphs[min(self.client_graphs)]
        first = self.variables[self.targets[0]]
        per_target = {t: _incident(g, t) for t, g in main.items()}
        return {
            "graph": main[first],
            "variables": list(self.variables),
            "target": first,
            **per_target[first],
            "targets": per_target,
            "main_graph": f"client {min(self.client_graphs)} (use lcs_local_summary for avg/best)",
            "client_graphs": [
                {"client": c, "targets": {t: g.to_json() for t, g in graphs.items()}}
                for c, graphs in sorted(self.client_graphs.items())
            ],
            "options": options_dict(self.lcs),
            "client_tests": {str(c): n for c, n in sorted(self.client_tests.items())},
            "tests": int(sum(self.client_tests.values())),
        }


def _incident(graph: Graph, target: str) -> dict[str, list[str]]:
    """Parents, children and undirected neighbours of ``target`` in ``graph``."""
    t = graph.index(target)
    row, col = graph.marks[t], graph.marks[:, t]
    pick = {
        "parents": (col == ARROW) & (row == TAIL),
        "children": (row == ARROW) & (col == TAIL),
        "undirected": (row == TAIL) & (col == TAIL),
    }
    return {k: [graph.names[i] for i in np.flatnonzero(m)] for k, m in pick.items()}


def lcs_local_summary(result: Result, truth: Graph) -> dict[str, dict]:
    """Score a ``fedlcs-local`` result: ``fedlcs-local-avg`` and ``fedlcs-local-best``.

    Per client: the mean over targets of :func:`~fedcausal_flwr.metrics.local_metrics` against
    the true DAG ``truth``. ``-avg`` is the mean of those over clients; ``-best`` is the client
    with the highest mean F1 (ties: lowest partition id), an **oracle** (it needs the truth).
    """
    entries = result.extra.get("client_graphs")
    if not entries or "targets" not in entries[0]:
        raise KeyError(
            f"result of method {result.method!r} has no per-target extra['client_graphs']; "
            "lcs_local_summary needs a 'fedlcs-local' result"
        )
    scores = {}
    for entry in entries:
        rows = [
            local_metrics(full_graph(Graph.from_json(g), truth.names), truth, t)
            for t, g in entry["targets"].items()
        ]
        scores[int(entry["client"])] = {
            k: float(np.mean([r[k] for r in rows])) for k in ("precision", "recall", "f1", "shd")
        }
    average = {
        k: float(np.mean([s[k] for s in scores.values()])) for k in next(iter(scores.values()))
    }
    best_client = max(scores, key=lambda c: (scores[c]["f1"], -c))
    best = {**scores[best_client], "client": best_client, "oracle": True}
    return {"fedlcs-local-avg": average, "fedlcs-local-best": best}


class LCSPooledStrategy(MethodStrategy):
    """``lcs-pooled`` (LCS-All): the centralised reference, NOT private. Every client sends its
    raw (encoded) rows (action ``raw_rows``, as ``pooled``) and the server runs the same search on
    the union with one oracle (:func:`~fedcausal_flwr.discovery.lcs.local_structure`): the
    upper bound for ``fedlcs``."""

    name = "lcs-pooled"
    OPTIONS = BASELINE_OPTIONS
    needs = InputNeeds(values="discrete")  # the server tests the pooled rows: any client size
    alpha, test, max_depth, reliability = option_attributes(*COMMON)
    input_needs = discrete_needs

    def __init__(self, options: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        super().__init__(options, **keywords)
        #: the search's options (:class:`LCSOptions`) of the resolved ones
        self.lcs = lcs_options(self.options)
        self.targets: list[int] = []  # set by start_targets at the first request
        self.discrete = DiscreteLevels()
        self.rows: dict[int, int] = {}
        self.found: tuple[dict[int, LocalStructure], Knowledge] | None = None
        self.n_tests = 0

    def next_request(self) -> Request | None:
        if self.found is not None:
            return None
        self.targets = start_targets(self, self.discrete)
        return Request(RAW_ROWS, EncodedRowsRequest(self.variables, self.discrete.levels))

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        options, cards = self.options, self.discrete.cards
        oracle = pooled_oracle(
            replies, self.variables, cards, options.test, self.rows, options.reliability
        )
        self.found = local_structure(oracle, self.targets, self.lcs)
        self.n_tests = oracle.n_computed
        self.annotate(rows=int(sum(self.rows.values())))

    def result_payload(self) -> dict:
        assert self.found is not None  # handle_replies has run
        results, kb = self.found
        return {
            **structure_payload(self.variables, self.targets, results, kb),
            "reference": "centralised: clients sent raw data (not private)",
            "options": options_dict(self.lcs),
            "rows": {str(c): n for c, n in sorted(self.rows.items())},
            "tests": int(self.n_tests),
        }


#: what score_local_structure's numbers are: the edges at the target, its parents and children
SCORE_VIEW = "local structure: the target's parents and children against the true DAG's"


def score_local_structure(result: Result, dag: Graph) -> dict[str, float]:
    """A ``LOCAL`` result scored as FedLCS does: the target's local structure (parents,
    children, undirected neighbours) against the true DAG."""
    if result.graph is None:
        raise ValueError(f"the {result.method} result has no graph to score")
    return local_metrics(full_graph(result.graph, dag.names), dag, result.extra["target"])


def lcs_local_rows(result: Result, truth: Graph) -> dict[str, dict]:
    """The rows a comparison adds for a ``fedlcs-local`` run (``-avg`` and ``-best-oracle``)."""
    summary = lcs_local_summary(result, truth)
    return {
        "fedlcs-local-avg": summary["fedlcs-local-avg"],
        "fedlcs-local-best-oracle": summary["fedlcs-local-best"],
    }


#: every method of this module: its strategy class, its client class and its own registry fields
METHODS: tuple[tuple[type[MethodStrategy], str, dict[str, Any]], ...] = (
    (
        FedLCSStrategy,
        "fedcausal_flwr.clients.fedlcs:FedLCSClient",
        {
            "disclosures": DISCLOSURES,
            "paper": "FedLCS (Yu et al., Sci China Inf Sci 2025)",
            "description": "FedLCS (Yu et al. 2025): the parents and children of each target "
            "variable (option target), learned and oriented from the clients' votes",
            "min_sites": 2,
        },
    ),
    (
        LCSLocalStrategy,
        "fedcausal_flwr.clients.fedlcs:LCSBaselineClient",
        {
            "disclosures": LOCAL_DISCLOSURES,
            "summaries": lcs_local_rows,
            "paper": "baseline (FedLCS)",
            "description": "each client alone runs the FedLCS search; see lcs_local_summary for "
            "avg/best",
        },
    ),
    (
        LCSPooledStrategy,
        "fedcausal_flwr.clients.fedlcs:LCSBaselineClient",
        {
            "disclosures": POOLED_DISCLOSURES,
            "paper": "baseline (FedLCS: LCS-All)",
            "description": "LCS-All, centralised reference (NOT private): raw data, the search on "
            "the union",
        },
    ),
)
for _strategy, _client, _own in METHODS:
    register_method(
        _strategy.name,
        _strategy,
        _client,
        bootstrap=True,
        score=score_local_structure,
        score_view=SCORE_VIEW,
        **_own,
    )

__all__ = [
    "FedLCSStrategy",
    "LCSLocalStrategy",
    "LCSPooledStrategy",
    "lcs_local_summary",
    "lcs_options",
    "make_strategy",
]
