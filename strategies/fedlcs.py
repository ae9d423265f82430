"""FedLCS: federated local causal structure of target variables (Yu et al., Sci China Inf Sci 2025).

The server learns, for each target T, its parents, children and still-undirected neighbours;
clients only ever run CI tests on their own rows. Three stages, all driven by one Flower-free
search (:func:`~fedcausal_flwr.discovery.lcs.lcs_search`) that yields *requests* and is answered
either by a federation (this module: votes, max-p) or by one local oracle
(:func:`~fedcausal_flwr.discovery.lcs.local_structure`, used for the per-client and pooled
baselines):

**FLSke** (layer-wise federated PCsimple). For every variable V whose parents-and-children set is
needed, the server broadcasts V's current candidate set and a layer ``l``; each client replays
PCsimple's layer ``l`` on it with its own tests
(:func:`~fedcausal_flwr.discovery.pcsimple.apply_layer`, on-the-fly pool unless ``stable``) and
returns one keep flag per candidate. The server keeps a candidate with ``votes >= ratio * K``
(K = clients answering; exact decimal comparison, i.e. ``ceil(ratio * K)`` votes, Eq. 2 of the
paper: ratio 0.4 gives 2 of 3, 2 of 5, 4 of 10, 6 of 15; FedPC's MATLAB ``round`` would give 1 of
3). A variable stops when ``stop_unchanged`` is on, ``l >= 1`` and the layer removed nothing
(Sec. 5.1, Phase 4, rule (i), applied from ``l = 1``: docs/choices.md, FedLCS); when
``|CPC| <= l`` for the next layer; or after ``max_level`` (default 6, inclusive).
**All pending variables advance together**: one round per layer, whatever their number.

**FLSori**. PC sets of every member of PC_T (one batched FLSke stage), then the AND rule: an edge
u - v exists iff v is in PC_u and u in PC_v when both are learned (``edge_rule="or"``: either
suffices); if only PC_u is learned, v in PC_u keeps it provisionally (the AND rule, Def. 5, does
not cover this case: docs/choices.md, FedLCS). For every unshielded ``a - T - b`` (a, b not
adjacent) the consistent separating set is searched over ``U = (PC_a | PC_b) \\ {a, b}``, level
``l = 0, 1, ...`` up to ``sep_depth`` (default 3, as FedPC's code; the paper gives no value):
each client tests ``a _||_ b | Z`` for every ``Z`` of size ``l`` in U (``itertools.combinations``
order) and uploads the p-values above alpha only (NaN otherwise; every p-value with
``sep_rule="fisher"``). The server chooses the level's set by ``sep_rule`` (module
:mod:`fedcausal_flwr.discovery.sepset_choice`):

* ``"votes"`` (default, ``vote_choice``): the subset that the most clients found independent, at
  least ``ceil(ratio * K)`` of the K answering (FLSke's threshold), ties broken by the mean p of
  those clients, then subset order; across levels the larger (votes, mean p) wins, strict, so
  lower levels win ties;
* ``"max_p"`` (the paper's rule, Sec. 5.2, ``max_pvalue_choice``): the largest p over (subsets,
  clients), first maximum in subset order then partition id, and the largest over levels
  (strict ``>``). This maximum over levels x subsets x clients favours spurious high p: with
  more, smaller clients a set containing a true collider (a test of low power on one small
  client, or df = 0 giving p = 1) wins over the true set that most clients agree on, and the
  arrowhead F1 falls with N;
* ``"fisher"`` (``fisher_choice``): Fisher's combination of the K clients' p-values per subset,
  the largest combined p if above alpha.

With one client the three rules choose the same set. The measured comparison is in
``experiments/README.md`` (FedLCS). ``sep_stop="first_empty"`` stops a pair at the first level
where no set was chosen (the paper's literal rule, which misses a collider whose ends are
marginally dependent); the default ``"after_found"`` stops at the first empty level *after* a set
was found; ``"first_found"`` stops at the first level where a set was chosen (PC's "first
separating set").
No set found: the triple stays undecided (never a collider). Pairs of all triples and
all targets are searched in the same rounds. Colliders (``T`` not in the set) are oriented in
causal-learn's triple order without overwriting arrowheads, then Meek R1-R4
(:func:`~fedcausal_flwr.graphs.colliders.orient_colliders`, ``apply_meek``).

**FLEori** (extension, then backtracking by Meek). While some T - X stays undirected, up to
``extension_depth`` (default 2) rings: depth 1 learns the PC sets of the neighbours of the
undirected X and examines triples centred at X; depth d > 1 learns the next ring and examines
triples centred at ring d - 1. After each depth the orientation is rebuilt from the skeleton
knowledge and every separating-set decision, so new arrows propagate back to T. The undirected
X of one depth are handled together (the paper treats them one after another). An outer node
whose PC set is unknown has unknown adjacencies to other outer nodes; triples are examined only
at centres whose neighbours are all learned, so every pair decided is known to be non-adjacent.

What stays undirected is reported as ``undirected``. The paper orients it at random under
acyclicity; ``random_orient=True`` does so (seeded by ``seed`` and the target), **off** by default.

Caches: PC sets and separating-set decisions are deterministic functions of the variable (pair),
so they are shared across targets; several targets (option ``target="A,B"`` or ``"all"``) run in
the same rounds and give exactly the per-target results.

Wire protocol (after ``hello``; ``variables, levels, test, alpha`` in every payload):

================  ========================================  =====================================
action            payload                                    reply (per client, server sees each)
================  ========================================  =====================================
``lcs_prune``     ``jobs = [[V, [CPC...], l], ...]``,        uint8 keep flag per candidate, jobs
                  ``stable``                                 concatenated
``lcs_sepsets``   ``jobs = [[a, b, [U...], l], ...]``,       float64 p per subset of size l of U
                  ``reveal_all``                             (NaN where p <= alpha unless
                                                             ``reveal_all``), concatenated
``lcs_local``     ``targets``, ``lcs`` (search options)      int8 ``targets x p x p`` local graphs
                  (``fedlcs-local``)                         (each embedded in all variables)
``raw_data``      (``lcs-pooled``)                           the client's encoded rows
================  ========================================  =====================================

What the server learns: each client's keep/remove decision for every candidate of every layer,
and the p-values of the conditioning sets under which a client found a triple's ends independent;
with ``sep_rule="fisher"`` (``reveal_all``) every separating-set p-value, dependent ones too,
i.e. each client's evidence (effect size given its row count) for every tested subset.
``fedlcs-local`` reveals every client's local structures, ``lcs-pooled`` the raw rows.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.lcs import (
    EDGE_RULES,
    SEP_RULES,
    SEP_STOPS,
    Knowledge,
    LCSOptions,
    LCSSteps,
    LocalStructure,
    PruneRequest,
    SepChoice,
    SepsetRequest,
    choose_sepsets,
    full_graph,
    lcs_search,
    local_structure,
    options_dict,
    parse_targets,
    structure_payload,
)
from fedcausal_flwr.federation.inputs import InputNeeds
from fedcausal_flwr.federation.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.registry import register_method
from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL, Graph
from fedcausal_flwr.metrics import local_metrics
from fedcausal_flwr.options import REQUIRED, Option, OptionSet, documented_by
from fedcausal_flwr.protocols.fedlcs import LCS_LOCAL, LCS_PRUNE, LCS_SEPSETS
from fedcausal_flwr.protocols.voting import RAW_DATA
from fedcausal_flwr.result import Result
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.fedpc_vote import vote_threshold
from fedcausal_flwr.strategies.voting import (
    DiscreteMethodStrategy,
    common_options,
    common_values,
    pooled_oracle,
)


# ============================================================================ strategy
class FedLCSStrategy(DiscreteMethodStrategy):
    """FedLCS server: see the module docstring for rules, ties and the wire protocol."""

    name = "fedlcs"

    def __init__(
        self,
        target: str | int | Sequence = "",
        ratio: float | str = 0.4,
        lcs: LCSOptions | None = None,
        **common: Any,
    ):
        super().__init__(**common)
        vote_threshold(ratio, 1)
        self.target_option = target
        self.ratio = ratio
        self.options = lcs or LCSOptions(alpha=self.alpha)
        if self.options.alpha != self.alpha:
            raise ValueError(f"alpha {self.alpha} differs from the LCS options' {self.options}")
        self.targets: list[int] = []
        self.steps: LCSSteps | None = None
        self.request: PruneRequest | SepsetRequest | None = None
        self.results: dict[int, LocalStructure] | None = None
        self.knowledge: Knowledge | None = None
        self.client_tests: dict[int, int] = {}
        self.stage_rounds = {"prune": 0, "sepsets": 0}
        self.session = uuid.uuid4().hex  # scopes the clients' test caches to this run

    def next_request(self) -> Request | None:
        if self.results is not None:
            return None
        if self.steps is None:
            self.start()
            self.targets = parse_targets(self.target_option, self.variables)
            self.steps = lcs_search(len(self.variables), self.targets, self.options)
            self._advance(None)
        if self.request is None:
            return None
        payload = {**self.base_payload(), "session": self.session}
        if isinstance(self.request, PruneRequest):
            jobs = [[v, list(cpc), lv] for v, cpc, lv in self.request.jobs]
            return Request(LCS_PRUNE, {**payload, "jobs": jobs, "stable": self.options.stable})
        jobs = [[a, b, list(pool), lv] for a, b, pool, lv in self.request.jobs]
        reveal = self.options.sep_rule == "fisher"
        return Request(LCS_SEPSETS, {**payload, "jobs": jobs, "reveal_all": reveal}, nan_ok=True)

    def _advance(self, answer: list | None) -> None:
        assert self.steps is not None  # next_request started the search
        try:
            self.request = next(self.steps) if answer is None else self.steps.send(answer)
        except StopIteration as stop:
            self.request = None
            self.results, self.knowledge = stop.value

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        for r in replies:
            self.client_tests[r.client] = self.client_tests.get(r.client, 0) + int(
                r.meta.get("tests", 0)
            )
        answer: list[tuple[int, ...]] | list[SepChoice | None]
        if request.action == LCS_PRUNE:
            answer = self._vote(replies)
            self.stage_rounds["prune"] += 1
            self.annotate(stage="flske", variables=len(answer))
        else:
            assert isinstance(self.request, SepsetRequest)  # the request these replies answer
            jobs = self.request.jobs
            n = sum(math.comb(len(pool), lv) for _, _, pool, lv in jobs)
            values = np.stack([self._vector(r, n, np.float64) for r in replies]).astype(float)
            need = vote_threshold(self.ratio, len(replies))
            choices = choose_sepsets(jobs, values, self.alpha, self.options.sep_rule, need)
            clients = [r.client for r in replies]
            answer = [None if a is None else (a[0], a[1], clients[a[2]], *a[3:]) for a in choices]
            self.stage_rounds["sepsets"] += 1
            self.annotate(stage="sepsets", pairs=len(jobs), tests=n)
        self._advance(answer)

    def _vector(self, reply: Reply, n: int, dtype) -> np.ndarray:
        values = np.asarray(reply.arrays[0]) if reply.arrays else np.zeros(0)
        if values.shape != (n,):
            raise ClientProtocolError(
                f"client {reply.client} sent {values.shape} values, expected {n} for "
                f"this {self.request.__class__.__name__}"
            )
        return values.astype(dtype)

    def _vote(self, replies: list[Reply]) -> list[tuple[int, ...]]:
        assert isinstance(self.request, PruneRequest)  # the request these replies answer
        jobs = self.request.jobs
        n = sum(len(cpc) for _, cpc, _ in jobs)
        flags = [self._vector(r, n, np.int64) for r in replies]
        for r, f in zip(replies, flags, strict=True):
            if not np.isin(f, (0, 1)).all():
                raise ClientProtocolError(f"client {r.client} sent keep flags other than 0/1")
        votes = np.sum(flags, axis=0)
        keep = votes >= vote_threshold(self.ratio, len(replies))
        out, start = [], 0
        for _, cpc, _ in jobs:
            flags = keep[start : start + len(cpc)]
            out.append(tuple(v for v, k in zip(cpc, flags, strict=True) if k))
            start += len(cpc)
        return out

    def result_payload(self) -> dict:
        assert self.results is not None and self.knowledge is not None  # the search has finished
        return {
            **structure_payload(self.variables, self.targets, self.results, self.knowledge),
            "ratio": str(self.ratio),
            "options": options_dict(self.options),
            "stage_rounds": dict(self.stage_rounds),
            "client_tests": {str(c): n for c, n in sorted(self.client_tests.items())},
            "tests": int(sum(self.client_tests.values())),
        }


# ============================================================================ baselines
class LCSBaselineStrategy(DiscreteMethodStrategy):
    """Shared set-up of FedLCS's baselines: the target option and the search options."""

    def __init__(self, target: str | int | Sequence = "", lcs: LCSOptions | None = None, **common):
        super().__init__(**common)
        self.target_option = target
        self.options = lcs or LCSOptions(alpha=self.alpha)
        if self.options.alpha != self.alpha:
            raise ValueError(f"alpha {self.alpha} differs from the LCS options' {self.options}")
        self.targets: list[int] = []


class LCSLocalStrategy(LCSBaselineStrategy):
    """``fedlcs-local``: each client runs the whole search (PCsimple + orientation) on its own rows.

    One round (action ``lcs_local``, payload ``targets`` + ``lcs`` options): every client returns an
    int8 ``n_targets x p x p`` stack, each slice the target's local graph embedded into all
    variables (:func:`~fedcausal_flwr.discovery.lcs.full_graph`). Nothing is combined: the main
    result is the lowest partition id's, ``extra["client_graphs"]`` holds all, and
    :func:`lcs_local_summary` scores them (``-avg`` and the oracle ``-best``, like ``local``'s
    :func:`local_summary`). The server learns every client's local structures.
    """

    name = "fedlcs-local"

    def __init__(self, target: str | int | Sequence = "", lcs: LCSOptions | None = None, **common):
        super().__init__(target, lcs, **common)
        self.client_graphs: dict[int, dict[str, Graph]] = {}
        self.client_tests: dict[int, int] = {}

    def next_request(self) -> Request | None:
        if self.client_graphs:
            return None
        self.start()
        self.targets = parse_targets(self.target_option, self.variables)
        payload = {**self.base_payload(), "targets": self.targets}
        return Request(LCS_LOCAL, {**payload, "lcs": options_dict(self.options)})

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
            self.client_tests[r.client] = int(r.meta.get("tests", 0))
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
            "options": options_dict(self.options),
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


class LCSPooledStrategy(LCSBaselineStrategy):
    """``lcs-pooled`` (LCS-All): the centralised reference, NOT private. Every client sends its
    raw (encoded) rows (action ``raw_data``, as ``pooled``) and the server runs the same search on
    the union with one oracle (:func:`~fedcausal_flwr.discovery.lcs.local_structure`): the
    upper bound for ``fedlcs``."""

    name = "lcs-pooled"
    needs = InputNeeds(values="discrete")  # the server tests the pooled rows: any client size

    def __init__(self, target: str | int | Sequence = "", lcs: LCSOptions | None = None, **common):
        super().__init__(target, lcs, **common)
        self.rows: dict[int, int] = {}
        self.found: tuple[dict[int, LocalStructure], Knowledge] | None = None
        self.n_tests = 0

    def next_request(self) -> Request | None:
        if self.found is not None:
            return None
        self.start()
        self.targets = parse_targets(self.target_option, self.variables)
        return Request(RAW_DATA, {"variables": self.variables, "levels": self.levels})

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        oracle = pooled_oracle(
            replies, self.variables, self.cards, self.test, self.rows, self.reliability
        )
        self.found = local_structure(oracle, self.targets, self.options)
        self.n_tests = oracle.n_computed
        self.annotate(rows=int(sum(self.rows.values())))

    def result_payload(self) -> dict:
        assert self.found is not None  # handle_replies has run
        results, kb = self.found
        return {
            **structure_payload(self.variables, self.targets, results, kb),
            "reference": "centralised: clients sent raw data (not private)",
            "options": options_dict(self.options),
            "rows": {str(c): n for c, n in sorted(self.rows.items())},
            "tests": int(self.n_tests),
        }


def _lcs_options(with_ratio: bool) -> OptionSet:
    """FedLCS's declared options (``fedlcs-local`` and ``lcs-pooled``: without ``ratio``)."""
    options = common_options(
        max_depth=6,
        paper={"alpha": "0.05", "test": "G2", "max_depth": "6"},
        why={
            "test": "the test of the other discrete voting methods, so a comparison changes only "
            "the protocol; test=g2 runs the paper's"
        },
    ).extend(
        Option(
            "target",
            "str",
            REQUIRED,
            "the target variable: a name, several as 'A,B', or 'all'",
        ),
        replace(
            shared.max_depth(6, help="FLSke's largest layer (conditioning set size)", paper="6"),
            nullable=False,
            null_values=(),
        ),
        Option(
            "stable",
            "bool",
            False,
            "PCsimple layers on a frozen candidate pool (stable) instead of on the fly",
        ),
        Option(
            "stop_unchanged",
            "bool",
            True,
            "stop a variable after a layer (l >= 1) that removed nothing",
        ),
        Option(
            "sep_depth",
            "int",
            3,
            "largest set in the consistent separating-set search",
            minimum=0,
            paper="not given; 3 in FedPC's code",
        ),
        Option(
            "sep_stop",
            "str",
            "after_found",
            "stop a pair's separating-set search at the first empty level after a set was found, "
            "at the first empty level, or at the first level with a set",
            choices=SEP_STOPS,
            paper="first_empty (the paper's rule)",
            why="the paper's rule misses colliders whose ends are marginally dependent; "
            "after_found was better in 13 of 16 measured settings (with max_p; "
            "experiments/README.md)",
        ),
        Option(
            "edge_rule",
            "str",
            "and",
            "an edge u - v needs v in PC_u and u in PC_v (and) or either (or), where both PC "
            "sets are learned",
            choices=EDGE_RULES,
            paper="and (the AND rule, Def. 5 and Sec. 5.3)",
        ),
        Option(
            "extension_depth",
            "int",
            2,
            "rings of FLEori's orientation extension",
            minimum=0,
            paper="2",
        ),
        Option(
            "random_orient",
            "bool",
            False,
            "orient what stays undirected at random under acyclicity",
            paper="true",
            why="a random orientation is not learned; it is reported as undirected instead",
        ),
        shared.seed("seed of random_orient"),
    )
    if with_ratio:
        options = options.extend(
            shared.ratio(0.4, paper="0.4 (Eq. 2)"),
            Option(
                "sep_rule",
                "str",
                "votes",
                "how a level's separating set is chosen across clients: the set most clients "
                "(at least ratio x clients) found independent, ties by their mean p (votes); the "
                "largest p of any client (max_p); the largest Fisher-combined p (fisher, clients "
                "send every p-value)",
                choices=SEP_RULES,
                paper="max_p (the highest p over clients, subsets and levels, Sec. 5.2)",
                why="the maximum over more, smaller clients picks spurious sets (p = 1 on "
                "sparse tables); votes beat it by up to 0.21 on alarm and beat lcs-avg in every "
                "measured cell (experiments/README.md)",
            ),
        )
    return options


OPTIONS = _lcs_options(with_ratio=True)
BASELINE_OPTIONS = _lcs_options(with_ratio=False)


def lcs_options(values: Mapping[str, Any]) -> LCSOptions:
    """:class:`LCSOptions` of resolved options (``max_depth`` is FLSke's maximum layer)."""
    return LCSOptions(
        alpha=values["alpha"],
        max_level=values["max_depth"],
        stable=values["stable"],
        stop_unchanged=values["stop_unchanged"],
        sep_depth=values["sep_depth"],
        sep_stop=values["sep_stop"],
        edge_rule=values["edge_rule"],
        # one oracle (fedlcs-local, lcs-pooled): every rule chooses the same set
        **({"sep_rule": values["sep_rule"]} if "sep_rule" in values else {}),
        extension_depth=values["extension_depth"],
        random_orient=values["random_orient"],
        seed=values["seed"],
    )


@documented_by(OPTIONS)
def make_strategy(options: Mapping[str, Any]) -> FedLCSStrategy:
    """From its options (resolved here, so raw keywords work too)."""
    values = OPTIONS.resolve(options, owner="method 'fedlcs'")
    return FedLCSStrategy(
        target=values["target"],
        ratio=values["ratio"],
        lcs=lcs_options(values),
        **common_values(values),
    )


@documented_by(BASELINE_OPTIONS)
def make_local_strategy(options: Mapping[str, Any]) -> LCSLocalStrategy:
    """``fedlcs-local`` (as ``fedlcs``, without ``ratio``)."""
    values = BASELINE_OPTIONS.resolve(options, owner="method 'fedlcs-local'")
    return LCSLocalStrategy(target=values["target"], lcs=lcs_options(values),
                            **common_values(values))  # fmt: skip


@documented_by(BASELINE_OPTIONS)
def make_pooled_strategy(options: Mapping[str, Any]) -> LCSPooledStrategy:
    """``lcs-pooled`` (as ``fedlcs``, without ``ratio``)."""
    values = BASELINE_OPTIONS.resolve(options, owner="method 'lcs-pooled'")
    return LCSPooledStrategy(target=values["target"], lcs=lcs_options(values),
                             **common_values(values))  # fmt: skip


def score_local_structure(result: Result, dag: Graph) -> dict[str, float]:
    """A ``LOCAL`` result scored as FedLCS does: the target's local structure (parents,
    children, undirected neighbours) against the true DAG."""
    if result.graph is None:
        raise ValueError(f"the {result.method} result has no graph to score")
    embedded = full_graph(result.graph, dag.names)
    return local_metrics(embedded, dag, result.extra["target"])


def lcs_local_rows(result: Result, truth: Graph) -> dict[str, dict]:
    """The rows a comparison adds for a ``fedlcs-local`` run (``-avg`` and ``-best-oracle``)."""
    summary = lcs_local_summary(result, truth)
    return {
        "fedlcs-local-avg": summary["fedlcs-local-avg"],
        "fedlcs-local-best-oracle": summary["fedlcs-local-best"],
    }


def make_client(partition_id, data, options):
    from fedcausal_flwr.clients.fedlcs import FedLCSClient

    return FedLCSClient(partition_id, data)


register_method(
    "fedlcs",
    make_strategy,
    make_client,
    options=OPTIONS,
    score=score_local_structure,
    paper="FedLCS (Yu et al., Sci China Inf Sci 2025)",
    description="FedLCS (Yu et al. 2025): federated local structure of option 'target'",
    min_sites=2,
)
register_method(
    "fedlcs-local",
    make_local_strategy,
    make_client,
    options=BASELINE_OPTIONS,
    score=score_local_structure,
    summaries=lcs_local_rows,
    paper="baseline (FedLCS)",
    description="each client alone runs the FedLCS search; see lcs_local_summary for avg/best",
)
register_method(
    "lcs-pooled",
    make_pooled_strategy,
    make_client,
    options=BASELINE_OPTIONS,
    score=score_local_structure,
    paper="baseline (FedLCS: LCS-All)",
    description="LCS-All, centralised reference (NOT private): raw data, the search on the union",
)
__all__ = [
    "FedLCSStrategy",
    "LCSLocalStrategy",
    "LCSPooledStrategy",
    "lcs_local_summary",
    "lcs_options",
]
