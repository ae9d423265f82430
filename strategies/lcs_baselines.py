"""FedLCS's baselines: ``fedlcs-local`` (each client alone) and ``lcs-pooled`` (LCS-All).

Both run the search of :mod:`fedcausal_flwr.strategies.fedlcs` with its options (less ``ratio``
and ``sep_rule``: one oracle chooses the same separating set under every rule); their actions
(``lcs_local``, ``raw_data``) are in that module's wire-protocol table, their client side in
:mod:`fedcausal_flwr.clients.lcs_baselines`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.lcs import (
    Knowledge,
    LCSOptions,
    LocalStructure,
    full_graph,
    local_structure,
    options_dict,
    parse_targets,
    structure_payload,
)
from fedcausal_flwr.federation.disclosure import PER_CLIENT, RAW
from fedcausal_flwr.federation.inputs import InputNeeds
from fedcausal_flwr.federation.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.registry import register_method
from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL, Graph
from fedcausal_flwr.metrics import local_metrics
from fedcausal_flwr.options import documented_by
from fedcausal_flwr.protocols.fedlcs import LCS_LOCAL
from fedcausal_flwr.protocols.voting import RAW_DATA
from fedcausal_flwr.result import Result
from fedcausal_flwr.strategies.fedlcs import (
    BASELINE_OPTIONS,
    SCORE_VIEW,
    lcs_options,
    score_local_structure,
)
from fedcausal_flwr.strategies.voting import DiscreteMethodStrategy, common_values, pooled_oracle


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


def lcs_local_rows(result: Result, truth: Graph) -> dict[str, dict]:
    """The rows a comparison adds for a ``fedlcs-local`` run (``-avg`` and ``-best-oracle``)."""
    summary = lcs_local_summary(result, truth)
    return {
        "fedlcs-local-avg": summary["fedlcs-local-avg"],
        "fedlcs-local-best-oracle": summary["fedlcs-local-best"],
    }


def make_client(partition_id, data, options):
    from fedcausal_flwr.clients.lcs_baselines import LCSBaselineClient

    return LCSBaselineClient(partition_id, data)


#: fedlcs-local: each client's own local structure; lcs-pooled: the clients' rows (NOT private)
LOCAL_DISCLOSURES = {LCS_LOCAL: PER_CLIENT}
POOLED_DISCLOSURES = {RAW_DATA: RAW}


register_method(
    "fedlcs-local",
    make_local_strategy,
    make_client,
    options=BASELINE_OPTIONS,
    disclosures=LOCAL_DISCLOSURES,
    bootstrap=True,
    score=score_local_structure,
    score_view=SCORE_VIEW,
    summaries=lcs_local_rows,
    paper="baseline (FedLCS)",
    description="each client alone runs the FedLCS search; see lcs_local_summary for avg/best",
)
register_method(
    "lcs-pooled",
    make_pooled_strategy,
    make_client,
    options=BASELINE_OPTIONS,
    disclosures=POOLED_DISCLOSURES,
    bootstrap=True,
    score=score_local_structure,
    score_view=SCORE_VIEW,
    paper="baseline (FedLCS: LCS-All)",
    description="LCS-All, centralised reference (NOT private): raw data, the search on the union",
)
__all__ = ["LCSLocalStrategy", "LCSPooledStrategy", "lcs_local_summary"]
