"""FedC2SL's discrete CI tests from summed contingency tables: exact, or the paper's sketch.

Two :class:`~fedcausal_flwr.strategies.ci_tests.FederatedCITest` implementations over the
clients' global level sets (wire protocol: :mod:`fedcausal_flwr.protocols.fedpc`):

* :class:`TableTests` (``ci="exact"``): clients send the contingency tables of all tests of the
  batch; the server sums them and runs G2 or Pearson chi2, identical to the pooled test
  (causal-learn's conventions). Each batch is planned: dense ``tables`` when they fit
  ``max_cells`` and are smaller than the clients' nonzero cells, otherwise ``sparse_tables``
  (never a dense table on either side; a secure or private run always sums dense tables); a
  batch over ``max_cells`` (what a client holds) or ``max_server_cells`` (the clients' replies
  the server holds together) travels in several rounds, and a test over either alone is an
  error naming it. Where tests share variable sets, one joint table per set is asked
  (:class:`~fedcausal_flwr.stats.set_tables.SetTables`: the same p-values to the bit). With
  ``dp`` each batch's summed tables are released with the run's noise.
* :class:`SketchTests` (``ci="sketch"``): (1) summed stratum margins ``n_xz``, ``n_yz``; the
  server computes expected counts ``E`` and broadcasts them with a projection seed; (2) summed
  projected residuals ``P (T_k - E/K) / sqrt(E)`` (fixed point, 8 fractional bits); Li's
  geometric-mean estimator per stratum gives the chi2 statistic. Two rounds per batch.

A column with one level over all clients stays in (exact mode): each test with it has p = 1,
so it ends isolated, with a printed note.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fedcausal_flwr.data.inputs import Fix
from fedcausal_flwr.discovery.skeleton import FreshQueries
from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.input_notes import note_constant_columns
from fedcausal_flwr.federation.core.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.core.protocol import ProtocolStrategy
from fedcausal_flwr.protocols.fedpc import (
    MARGINS,
    SKETCH,
    SKETCH_SCALE,
    SPARSE_TABLES,
    TABLES,
    SketchRequest,
    TableRequest,
)
from fedcausal_flwr.protocols.queries import encode_queries
from fedcausal_flwr.stats.batch_oracle import Query
from fedcausal_flwr.stats.contingency import (
    TableLayout,
    TableTooLargeError,
    check_sparse_tables,
    discrete_tests,
    make_layout,
    merge_sparse_tables,
    sparse_tests,
    table_cells,
)
from fedcausal_flwr.stats.set_tables import SetTables
from fedcausal_flwr.stats.sketch import expected_counts, sketch_chi2
from fedcausal_flwr.stats.tables import query_rows
from fedcausal_flwr.strategies.base import Options
from fedcausal_flwr.strategies.ci_tests import FederatedCITest
from fedcausal_flwr.strategies.search_stop import server_noise

if TYPE_CHECKING:
    from fedcausal_flwr.discovery.fci import FCIResult
    from fedcausal_flwr.discovery.pc import PCResult

#: The server's default budget for one round's replies: 2**27 cells (1 GiB of int64).
DEFAULT_MAX_SERVER_CELLS = 2**27
#: Budget cells per test a level may hold before it is asked in batches (a test is a few hundred
#: bytes on the server): max_server_cells 2**27 gives 2**21 tests at a time.
DEPTH_BATCH_CELLS = 64


class SummedTests(FederatedCITest):
    """What FedC2SL's tests share: the options, a level asked in batches bounded by the
    server's budget, and the result's record of depths and batches."""

    def __init__(self, options: Options) -> None:
        super().__init__()
        self.options = options
        #: single-level columns, kept as isolated nodes (set by a discrete test when it begins)
        self.constant: list[str] = []

    def depth_batch(self) -> int | None:
        """A level's tests held at once: bounded by the server's budget like its tables; a
        private depth is one batch (it is paid for once, as a whole)."""
        if self.privacy is not None:
            return 2**62
        return max(1, self.options.max_server_cells // DEPTH_BATCH_CELLS)

    def tests_asked(self, result: PCResult | FCIResult | None) -> int:
        """Distinct tests asked (a streamed level's are not cached)."""
        return sum(b["tests"] for b in self.batches)

    def report(self, result: PCResult | FCIResult | None = None) -> dict[str, Any]:
        assert result is not None  # the search has run
        depths = result.skeleton.depths
        return {
            "depths": [lv["depth"] for lv in depths],
            "depths_searched": len(depths),
            "constant_columns": list(self.constant),
            "tests": self.tests_asked(result),
            "batches": self.batches,
        }


class DiscreteSummedTests(SummedTests):
    """Tables over the clients' global level sets (exact or sketched): the level sets fixed
    when the search starts, a batch as one query matrix, the client's cell budget."""

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.levels: dict[str, list] = {}
        self.cards = np.zeros(0, dtype=np.int64)
        self._batch_rows: tuple[Sequence[Query], FreshQueries] | None = None

    def input_needs(self) -> InputNeeds:
        """Discrete columns; the clients' sums equal the pooled test, so one client, or a
        client with one row, is fine."""
        exact = self.options.ci == "exact"
        fix = Fix(
            "for continuous data use {}" + ("" if exact else " with {}"),
            (("test", "fisherz"),) if exact else (("test", "fisherz"), ("ci", "exact")),
        )
        return InputNeeds(
            values="discrete",
            test=self.options.test,
            value_fix=fix,
            isolates_constants=exact,
            missing=self.options.missing,
        )

    def begin(self, strategy: ProtocolStrategy) -> list[str]:
        variables = strategy.variables
        if not self.levels and variables:  # fixed once, when the first search starts
            levels = strategy.global_levels()
            # never None: the input check required discrete columns for this test
            self.levels = {v: levels[v] or [] for v in variables}
            self.cards = np.array([len(self.levels[v]) for v in variables], dtype=np.int64)
            self.constant = note_constant_columns(
                strategy.name, self.levels, self.options.ci == "exact"
            )
        return variables

    def rows(self, pending: Sequence[Query]) -> Sequence[Query]:
        """The search's pending batch as one query matrix, made once per batch: the tuples the
        cache passes on are normalised already, and the request, the cell count and the
        server's layout would each convert them again."""
        if isinstance(pending, FreshQueries):
            return pending
        if self._batch_rows is None or self._batch_rows[0] is not pending:
            self._batch_rows = (pending, FreshQueries(query_rows(pending, normalised=True)))
        return self._batch_rows[1]

    def max_cells(self, strategy: ProtocolStrategy) -> int:
        """The cells of one round's tables at a client: the ``max_cells`` option, lowered to
        the smallest ``max-request-cells`` a site's policy reported in hello (a site refuses a
        request over it)."""
        cap = strategy.site_cell_cap if strategy.client_info else None
        return self.options.max_cells if cap is None else min(self.options.max_cells, cap)

    def table_request(self, strategy: ProtocolStrategy) -> TableRequest:
        return TableRequest(
            strategy.variables, self.levels, self.max_cells(strategy), self.options.missing
        )


@dataclass
class BatchPlan:
    """How an exact batch travels: dense or sparse tables, in parts of query indices (one round
    each), and the p-values of the parts answered so far."""

    sparse: bool
    parts: list[np.ndarray]  # query positions
    dense_cells: int  # every table of the batch, dense: what one client sends through SecAgg+
    tables: int  # tables asked: one per test, or per variable set (SetTables)
    answered: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # (tests, p)
    #: per part, when the batch wants its statistics (tests on their own tables)
    statistics: list[np.ndarray] = field(default_factory=list)
    noise_variance: float = 0.0  # per summed cell, when the run is differentially private
    shares: int | None = None  # distributed noise: how many sites share it (None: the server's)


class TableTests(DiscreteSummedTests):
    """Exact chi2/G2 tests from contingency tables summed over the clients (see the module
    docstring); with ``dp``, each batch's summed tables are one release."""

    ACTIONS = (TABLES, SPARSE_TABLES)

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        batches = options.get("dp_batches")
        #: tables are counts, each release with a privacy loss distribution
        self.privacy = server_noise(
            options, None if batches is None else int(batches), "summed tables", tight=True
        )
        self._plan: BatchPlan | None = None  # how the pending batch is counted
        self._sets: SetTables | None = None  # a batch asked by its tests' variable sets

    def dense_only(self, strategy: ProtocolStrategy) -> bool:
        """Tables travel dense and summed: through SecAgg+, or to be noised as a sum."""
        return strategy.secure_mode or self.privacy is not None

    def request(self, strategy: ProtocolStrategy, queries: Sequence[Query]) -> Request:
        queries = self.rows(queries)
        base = self.table_request(strategy)
        if self._plan is None:
            self._plan = self._plan_exact(strategy, queries)
        plan = self._plan
        counted = queries if self._sets is None else _set_queries(self._sets)
        chosen = _select(counted, plan.parts[len(plan.answered)])
        if plan.sparse:
            return Request(SPARSE_TABLES, base, arrays=[encode_queries(chosen)])
        if self.privacy is not None:
            cells = int(table_cells(chosen, self.cards).sum())
            charge = self.privacy.charge(len(chosen), cells, plan.noise_variance, plan.shares)
            base = replace(base, privacy=charge.encode())
        return Request(TABLES, base, arrays=[encode_queries(chosen)], secure=True)

    def _plan_exact(self, strategy: ProtocolStrategy, queries: Sequence[Query]) -> BatchPlan:
        """How an exact batch is asked: one joint table per variable set where tests share
        sets (:class:`~fedcausal_flwr.stats.set_tables.SetTables`: fewer tables, cells and rows
        counted, the same p-values), and always in a private batch (its noise grows with the
        tables); else the tests' own tables."""
        rows = query_rows(queries, normalised=True)
        private = self.privacy is not None
        sets = SetTables.of(rows) if rows.shape[1] > 2 or private else None
        if sets is not None and (private or len(sets.sets) < len(rows)):
            plan = self._plan_batch(strategy, _set_queries(sets))
            if self.privacy is not None:
                plan.noise_variance, plan.shares = self.privacy.batch_noise(
                    strategy.name, len(sets.sets), plan.dense_cells, len(strategy.alive_clients)
                )
            if private or not plan.sparse:  # (sparse replies are tested test by test)
                self._sets = sets
                return plan
        return self._plan_batch(strategy, queries)

    def _plan_batch(self, strategy: ProtocolStrategy, queries: Sequence[Query]) -> BatchPlan:
        """How an exact batch is counted: dense tables summed (SecAgg+ can carry them) or, when
        the dense tables are over the budget or twice the data a client holds, sparsely (nonzero
        cells with their index, merged on the server: never a dense table). Each round holds at
        most ``max_cells`` cells (a sparse entry counts as two); a batch over it is split into
        several rounds, and one query over it alone is an error naming it."""
        cells = table_cells(queries, self.cards)
        info = strategy.client_info
        rows = np.array([info[pid].n_rows for pid in strategy.alive_clients] or [0])
        most_rows, k = int(rows.max()), len(rows)
        total = float(cells.sum())
        max_cells, max_server_cells = self.max_cells(strategy), self.options.max_server_cells
        dense_only = self.dense_only(strategy)
        # one round when a client's tables fit max_cells and all clients' max_server_cells
        if total <= max_cells and k * total <= max_server_cells:
            sparse_bytes = 16 * float(np.minimum(cells, most_rows).sum())
            sparse = not dense_only and sparse_bytes < 8 * total
            return BatchPlan(sparse, [np.arange(len(queries))], int(total), len(queries))
        # entries the server holds
        sparse_cost = 2 * np.minimum(cells[:, None], rows[None, :]).sum(axis=1)
        sparse = not dense_only and (
            float(cells.max()) > max_cells or float(sparse_cost.sum()) < total
        )
        # (a client's cells, the server's cells) of each query in a round
        client_cost, server_cost = (sparse_cost, sparse_cost) if sparse else (cells, k * cells)
        over = np.flatnonzero((client_cost > max_cells) | (server_cost > max_server_cells))
        if over.size:
            i = int(over[0])
            raise self._over_budget(
                strategy, queries[i], int(cells[i]), int(client_cost[i]), int(server_cost[i]),
                sparse,
            )  # fmt: skip
        # parts as the greedy fill makes them: each as long as both budgets allow
        client_sum = np.concatenate(([0.0], np.cumsum(client_cost)))
        server_sum = np.concatenate(([0.0], np.cumsum(server_cost)))
        parts: list[np.ndarray] = []
        start = 0
        while start < len(queries):
            end = min(
                np.searchsorted(client_sum, client_sum[start] + max_cells, "right"),
                np.searchsorted(server_sum, server_sum[start] + max_server_cells, "right"),
            )
            end = max(int(end) - 1, start + 1)
            parts.append(np.arange(start, end))
            start = end
        return BatchPlan(sparse, parts, int(total), len(queries))

    def _over_budget(
        self, strategy: ProtocolStrategy, query: Query, cells: int, cost: int, server_cost: int,
        sparse: bool,
    ) -> ValueError:  # fmt: skip
        x, y, sz = query
        names, name = strategy.variables, strategy.name
        test = f"{names[x]} _||_ {names[y]} | {[names[v] for v in sz]}"
        depth = f"cap the conditioning sets (--max-depth {len(sz) - 1}) or " if sz else ""
        max_cells = self.max_cells(strategy)
        if cost <= max_cells:  # the server's budget: every client's copy of the table
            budget = self.options.max_server_cells
            return ValueError(
                f"{name}: the contingency table of {test} has {cells:,} cells, and the "
                f"server would hold {server_cost:,} cells of the clients' replies, over the "
                f"memory budget max_server_cells={budget:,}: {depth}raise it "
                f"(--max-server-cells {server_cost}; Python: max_server_cells={server_cost})"
            )
        how = (
            f"even counted sparsely the clients' up to {cost // 2:,} nonzero cells of it (two "
            "budget cells each) exceed"
            if sparse
            else "a secure run sums dense tables (SecAgg+), and its table exceeds"
        )
        return ValueError(
            f"{name}: the contingency table of {test} has {cells:,} cells; {how} the "
            f"memory budget max_cells={max_cells:,}: {depth}raise the budget "
            f"(--max-cells {cost}; Python: max_cells={cost})"
        )

    def answer(
        self, strategy: ProtocolStrategy, request: Request, replies: list[Reply],
        queries: Sequence[Query] | None,
    ) -> np.ndarray | None:  # fmt: skip
        """One part of an exact batch: dense summed tables or the clients' sparse cells; the
        batch's p-values after its last part."""
        assert queries is not None and self._plan is not None  # planned by request
        plan, queries = self._plan, self.rows(queries)
        part = plan.parts[len(plan.answered)]
        if self._sets is not None:  # the part's set tables: each test reads its set's table
            plan.answered.append(self._set_pvalues(strategy, replies, part, plan))
        else:
            pvalues, statistics = self._part_tests(request, replies, queries, part)
            plan.answered.append((part, pvalues))
            if getattr(queries, "statistics_wanted", False):
                plan.statistics.append(statistics)
        strategy.annotate(
            batch=len(self.batches), depth=_depth(queries), tests=len(plan.answered[-1][0]),
            sparse=plan.sparse, part=len(plan.answered),
        )  # fmt: skip
        if len(plan.answered) < len(plan.parts):
            return None
        self._plan = None
        self.batches.append({
            "round": strategy.current_round, "tests": len(queries), "rounds": len(plan.parts),
            "sparse": plan.sparse, "dense_cells": plan.dense_cells, "tables": plan.tables,
        })  # fmt: skip
        answers = np.empty(len(queries))
        for positions, pvalues in plan.answered:
            answers[positions] = pvalues
        if getattr(queries, "statistics_wanted", False) and len(plan.statistics) == len(plan.parts):
            statistics = np.empty(len(queries))  # for the search's order (FreshQueries)
            for (positions, _), part_statistics in zip(plan.answered, plan.statistics, strict=True):
                statistics[positions] = part_statistics
            queries.statistics = statistics  # type: ignore[attr-defined]
        self._sets = None
        if self.privacy is not None:
            self.privacy.accountant.close_batch()
        return answers

    def _set_pvalues(
        self, strategy: ProtocolStrategy, replies: list[Reply], part: np.ndarray, plan: BatchPlan
    ) -> tuple[np.ndarray, np.ndarray]:
        """A part's set tables, summed (and noised in a private run): its tests' p-values."""
        assert self._sets is not None
        (summed,) = replies
        counts = summed.arrays[0]
        if self.privacy is not None:
            counts, _, noted = self.privacy.release(
                counts, len(summed.contributors), strategy.current_round, len(part),
                plan.noise_variance, plan.shares,
            )  # fmt: skip
            strategy.recorder.note_noise(strategy.current_round, TABLES, noted)
            counts = np.maximum(counts, 0)  # (post-processing: free)
        return self._sets.pvalues(
            np.asarray(counts), int(part[0]), int(part[-1]) + 1, self.cards, self.options.test,
            noise_variance=plan.noise_variance,
            empty_strata_add_dof=self.options.empty_strata_add_dof,
        )  # fmt: skip

    def _part_tests(
        self, request: Request, replies: list[Reply], queries: Sequence[Query], part: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """A part's tests, each on its own table: dense and summed, or the clients' sparse
        cells merged; their p-values and statistics."""
        layout = make_layout(_select(queries, part), self.cards, max_cells=None)
        if request.action == TABLES:
            (summed,) = replies
            tested = discrete_tests(
                summed.arrays[0], layout, self.options.test,
                empty_strata_add_dof=self.options.empty_strata_add_dof,
            )  # fmt: skip
            return np.asarray(tested.pvalue, dtype=np.float64), tested.statistic
        cells = []
        for reply in replies:
            if len(reply.arrays) != 2:
                raise ClientProtocolError(
                    f"client {reply.client} sent {len(reply.arrays)} arrays for sparse "
                    "tables, expected 2 (indices, counts)"
                )
            problem = check_sparse_tables(reply.arrays[0], reply.arrays[1], layout.total)
            if problem:
                raise ClientProtocolError(f"client {reply.client} sent {problem}")
            cells.append((reply.arrays[0], reply.arrays[1]))
        indices, counts = merge_sparse_tables(cells)
        tested = sparse_tests(
            indices, counts, layout, self.options.test,
            empty_strata_add_dof=self.options.empty_strata_add_dof,
        )  # fmt: skip
        return np.asarray(tested.pvalue, dtype=np.float64), tested.statistic

    def forget(self) -> None:
        self._plan, self._sets = None, None

    def on_clients_dropped(self, strategy: ProtocolStrategy, dropped: list[int]) -> None:
        """A batch counted in parts restarts from its first part (every sum of one batch comes
        from the same clients); a one-part batch is re-asked as is. A private run keeps the
        parts it has: their noisy sums are released already, and asking them again would pay
        for them twice."""
        if self._plan is not None and self._plan.answered and self.privacy is None:
            self._plan = None
            strategy.retract_request()


class SketchTests(DiscreteSummedTests):
    """FedC2SL's sketched chi2 tests: summed margins, then summed projected residuals (see the
    module docstring). With ``l >= |X||Y|`` the server, which knows the projection, can invert
    the sketch."""

    ACTIONS = (MARGINS, SKETCH)

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self._margins: np.ndarray | None = None  # the pending batch's summed margins
        self._layout: TableLayout | None = None

    def request(self, strategy: ProtocolStrategy, queries: Sequence[Query]) -> Request:
        queries = self.rows(queries)
        batch = encode_queries(queries)
        self._check_table_budget(strategy, queries)
        if self._margins is None:
            return Request(MARGINS, self.table_request(strategy), arrays=[batch], secure=True)
        self._layout = self._layout or make_layout(queries, self.cards)
        expected = expected_counts(self._margins, self._layout)
        payload = SketchRequest(
            strategy.variables,
            self.levels,
            self.max_cells(strategy),
            self.options.missing,
            seed=self._sketch_seed(),
            sketch_length=self.options.sketch_length,
            clients=len(strategy.alive_clients),
        )
        return Request(SKETCH, payload, arrays=[batch, expected], secure=True)

    def answer(
        self, strategy: ProtocolStrategy, request: Request, replies: list[Reply],
        queries: Sequence[Query] | None,
    ) -> np.ndarray | None:  # fmt: skip
        """The summed margins (None: the sketch round is due), then the batch's p-values."""
        assert queries is not None  # the asked batch
        queries = self.rows(queries)
        (summed,) = replies
        vector = summed.arrays[0]
        if request.action == MARGINS:
            self._margins = vector
            self._layout = make_layout(queries, self.cards)
            strategy.annotate(
                batch=len(self.batches), depth=_depth(queries), tests=len(queries),
                step="margins",
            )  # fmt: skip
            return None
        assert self._margins is not None and self._layout is not None  # from the margins reply
        result = sketch_chi2(
            vector.astype(np.float64) / SKETCH_SCALE,
            self._margins,
            self._layout,
            self.options.sketch_length,
            empty_strata_add_dof=self.options.empty_strata_add_dof,
        )
        self._margins, self._layout = None, None
        self.batches.append({"round": strategy.current_round, "tests": len(queries)})
        strategy.annotate(batch=len(self.batches) - 1, depth=_depth(queries), tests=len(queries))
        return np.asarray(result.pvalue)

    def _check_table_budget(self, strategy: ProtocolStrategy, queries: Sequence[Query]) -> None:
        """Refuse a batch whose tables would not fit the budget, before a client counts them."""
        budget = self.max_cells(strategy)
        try:
            layout = make_layout(queries, self.cards, max_cells=budget)
        except TableTooLargeError:
            layout = None
        if layout is not None and layout.total <= budget:
            return
        names = strategy.variables
        sizes = [int(np.prod([self.cards[v] for v in (x, y, *sz)])) for x, y, sz in queries]
        worst = int(np.argmax(sizes))
        x, y, sz = queries[worst]
        total = int(sum(sizes))
        depth = f"limit the conditioning sets (--max-depth {len(sz) - 1}) or " if sz else ""
        raise ValueError(
            f"the contingency tables of this level ({len(queries)} tests, conditioning sets of "
            f"size {len(sz)}) need {total:,} cells, over the budget max_cells={budget:,} "
            f"(the largest: {names[x]} _||_ {names[y]} | {[names[v] for v in sz]}, "
            f"{sizes[worst]:,} cells); each client holds them in memory at once: {depth}raise "
            f"the budget (--max-cells {total}; Python: max_cells={total})"
        )

    def on_clients_dropped(self, strategy: ProtocolStrategy, dropped: list[int]) -> None:
        """A batch restarts from its margins with the survivors: every sum in one test comes
        from the same clients."""
        self._margins, self._layout = None, None
        strategy.retract_request()

    def _sketch_seed(self) -> int:
        return int(
            np.random.SeedSequence([self.options.seed, len(self.batches)]).generate_state(1)[0]
        )


def _set_queries(sets: SetTables) -> Sequence[Query]:
    """The sets' tables as the queries that count them (one size: fresh rows)."""
    if sets.sets.size and sets.sets.min() >= 0:
        return FreshQueries(sets.sets)
    return sets.queries


def _select(queries: Sequence[Query], positions: np.ndarray) -> Sequence[Query]:
    """The queries at ``positions`` (fresh queries stay rows)."""
    if isinstance(queries, FreshQueries):
        return FreshQueries(queries.rows[positions])
    return [queries[i] for i in positions.tolist()]


def _depth(queries: Sequence[Query]) -> int:
    """A batch's largest conditioning-set size, for the round log (a PC batch holds one depth;
    the completion of unshielded pairs after the skeleton may mix them)."""
    if isinstance(queries, FreshQueries):
        return int(queries.rows.shape[1]) - 2
    return max((len(query[2]) for query in queries), default=0)
