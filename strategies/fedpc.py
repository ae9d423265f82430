"""FedC2SL (FedPC / FedFCI): PC or FCI on the server, every CI test answered from summed statistics.

Wang et al., "Towards Practical Federated Causal Structure Learning". The server runs the batched
PC-stable or FCI engine of :mod:`fedcausal_flwr.discovery`; each batch of CI tests (a whole PC
level, a Possible-D-Sep subset size, an R4 step) becomes one protocol step.

CI modes (``ci``):

* ``exact``: clients send the contingency tables of all tests of the batch; the server sums them
  and runs G2 or Pearson chi2. Identical to the pooled test (causal-learn's conventions).
* ``sketch``: the paper's protocol, batched: (1) summed stratum margins ``n_xz``, ``n_yz``; the
  server computes expected counts ``E`` and broadcasts them with a projection seed; (2) summed
  projected residuals ``P (T_k - E/K) / sqrt(E)`` (fixed point, 8 fractional bits); Li's
  geometric-mean estimator per stratum gives the chi2 statistic. Two rounds per batch.
* Gaussian data (``test="fisherz"``): one round of summed moments ``n, sum x, sum x x^T``; every
  Fisher-z test then runs on the server (exact mode only: SecAgg+ sums 32-bit integers).

A secure run (the run setting ``secure``: ``--secure``) sums the tables, margins and sketches
through Flower's SecAgg+ (exact integer sums). Mixed data: the methods ``fedci-pc`` /
``fedci-fci`` (:mod:`fedcausal_flwr.strategies.fedci`).

Wire protocol (actions, payload records, replies, what travels when):
:mod:`fedcausal_flwr.protocols.fedpc`.

Missing values (``missing``): ``testwise`` makes each summed test equal the pooled test with
test-wise deletion (each table, or each Fisher-z test's moments, over the rows complete on the
test's variables); ``listwise`` makes each client drop its incomplete rows first.

Exact mode plans each batch (:meth:`FedPCStrategy._plan_batch`): dense ``tables`` when they fit
``max_cells`` and are smaller than the clients' nonzero cells, otherwise ``sparse_tables`` (never a
dense table on either side; a secure run always sums dense tables through SecAgg+); a batch whose
tables are over ``max_cells`` (what a client holds) or ``max_server_cells`` (the clients' replies
the server holds together) travels in several rounds, and a test over either alone is an error
naming it. A client that cannot count a batch refuses it with the cause (the run stops), it does
not drop out. A column with one level over all clients stays in (exact mode): each test with it
has p = 1, so it ends isolated, with a printed note.

``empty_strata_add_dof=True`` reproduces the FedC2SL code's degrees of freedom (+1 for every empty
stratum of a table: ``_CalculatePValue`` in the authors' ``alg/fed_cit.py``; the paper's formula,
Sec. 4.2, is silent on empty strata: docs/choices.md, FedC2SL); the default is causal-learn's
correct count.

What the server learns (see the ledger of each result): summed tables (exact/secure), each
client's nonzero table cells for a sparse batch (exact, never secure: a plain run's server adds the
clients' dense tables itself, so it sees them too), summed margins and sketches (sketch), or the
pooled covariance (Gaussian). With ``l >= |X||Y|`` the sketch can be
inverted by the server, which knows the projection (the paper's Sec. 4.2 claims the projection
hides the table "under appropriate parameters"; its l = 50, Supplementary Sec. 7.4, is not such a
setting: docs/choices.md, FedC2SL). A client that drops out mid-run is removed; a sketch batch
then restarts from its margins so every sum in one test comes from the same clients.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from fedcausal_flwr.data.inputs import Fix, InputError
from fedcausal_flwr.discovery.driver import StepRunner, with_cache
from fedcausal_flwr.discovery.fci import FCIResult, fci_steps
from fedcausal_flwr.discovery.pc import PCResult, pc_steps
from fedcausal_flwr.discovery.search_report import search_evidence
from fedcausal_flwr.discovery.skeleton import FreshQueries
from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.input_notes import note_constant_columns
from fedcausal_flwr.federation.core.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.options import Option, OptionSet
from fedcausal_flwr.protocols.fedpc import (
    DISCLOSURES,
    MARGINS,
    MOMENTS,
    QUERY_MOMENTS,
    SKETCH,
    SKETCH_SCALE,
    SPARSE_TABLES,
    TABLES,
    MomentsRequest,
    SketchRequest,
    TableRequest,
)
from fedcausal_flwr.protocols.queries import encode_queries
from fedcausal_flwr.stats.batch_oracle import Query
from fedcausal_flwr.stats.contingency import (
    DEFAULT_MAX_CELLS,
    TableLayout,
    TableTooLargeError,
    check_sparse_tables,
    discrete_pvalues,
    make_layout,
    merge_sparse_tables,
    sparse_tests,
    table_cells,
)
from fedcausal_flwr.stats.gaussian import (
    GaussianMoments,
    TooFewSamplesError,
    fisher_z_from_query_moments,
    query_block_sizes,
)
from fedcausal_flwr.stats.oracles import GaussianOracle
from fedcausal_flwr.stats.set_tables import SetTables
from fedcausal_flwr.stats.sketch import expected_counts, sketch_chi2
from fedcausal_flwr.stats.tables import query_rows
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import MethodStrategy, register_variants
from fedcausal_flwr.strategies.search_stop import privacy_report, server_noise, stop_search

CI_MODES = ("exact", "sketch")


#: The server's default budget for one round's replies: 2**27 cells (1 GiB of int64).
DEFAULT_MAX_SERVER_CELLS = 2**27
#: Budget cells per test a level may hold before it is asked in batches (a test is a few hundred
#: bytes on the server): max_server_cells 2**27 gives 2**21 tests at a time.
DEPTH_BATCH_CELLS = 64


def _options(algorithm: str) -> OptionSet:
    """FedPC's (``pc``) or FedFCI's (``fci``) declared options."""
    engine = shared.search_engine(algorithm)
    return OptionSet(
        (
            Option(
                "ci",
                "str",
                "exact",
                "how a CI test is answered: contingency tables summed over clients (exactly the "
                "pooled test), or the paper's random-projection sketch",
                choices=CI_MODES,
                paper="sketch (the paper's protocol)",
                why="summed tables give exactly the pooled test (the sketch approximates it, and "
                "the server can invert it when l >= |X||Y|); ci=sketch runs the paper's protocol",
            ),
            shared.test("chi2", ("chi2", "g2", "fisherz"), paper="chi2"),
            shared.alpha(0.05, paper="0.05"),
            shared.max_depth(),
            Option(
                "sketch_length",
                "int",
                50,
                "length l of each stratum's random projection",
                minimum=2,
                requires=("ci", ("sketch",)),
                paper="50",
            ),
            shared.seed("seed of the sketch's projections"),
            shared.empty_strata_add_dof(
                requires=("test", ("chi2", "g2")),
                paper="true in the authors' code (not stated in the paper)",
                why="causal-learn's count is the textbook one and keeps FedPC equal to pooled PC",
            ),
            Option(
                "max_cells",
                "int",
                DEFAULT_MAX_CELLS,
                "memory budget: cells of all contingency tables of one round (each client "
                "holds them at once; 8 bytes each); a depth over it is refused before a client "
                "counts it",
                minimum=1,
            ),
            Option(
                "max_server_cells",
                "int",
                DEFAULT_MAX_SERVER_CELLS,
                "memory budget of the server: cells of the clients' tables it holds in one "
                "round (all clients' replies together, 8 bytes a cell); a depth over it travels "
                "in several rounds (many clients: 1,000 clients x max_cells would not fit)",
                minimum=1,
            ),
            shared.missing(),
            *engine,
            *shared.dp_options(),
        ),
        checks=(
            shared.fisherz_needs_exact,
            shared.sketch_needs_chi2,
            shared.search_engine_problem,
            shared.dp_needs_exact_tables,
        ),
    )


FEDPC_OPTIONS = _options("pc")
FEDFCI_OPTIONS = _options("fci")
#: the search -> the method it makes and its options
METHOD_OF = {"pc": ("fedpc", FEDPC_OPTIONS), "fci": ("fedfci", FEDFCI_OPTIONS)}


@dataclass
class BatchPlan:
    """How an exact batch travels: dense or sparse tables, in parts of query indices (one round
    each), and the p-values of the parts answered so far."""

    sparse: bool
    parts: list[np.ndarray]  # query positions
    dense_cells: int  # every table of the batch, dense: what one client sends through SecAgg+
    tables: int  # tables asked: one per test, or per variable set (SetTables)
    answered: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # (tests, p)
    noise_variance: float = 0.0  # per summed cell, when the run is differentially private
    shares: int | None = None  # distributed noise: how many sites share it (None: the server's)


class FedPCStrategy(MethodStrategy):
    """FedPC: PC-stable with a federated CI test; with ``algorithm="fci"``, FedFCI: FCI with
    the same tests (PAG output), under its own name and options."""

    name = "fedpc"
    OPTIONS = FEDPC_OPTIONS
    VARIANTS = METHOD_OF

    def __init__(
        self, options: Mapping[str, Any] | None = None, /, *, algorithm: str = "pc", **keywords: Any
    ):
        super().__init__(options, variant=algorithm, **keywords)
        #: the search: ``pc`` (FedPC) or ``fci`` (FedFCI)
        self.algorithm = algorithm
        batches = self.options.get("dp_batches")
        #: the server's side of a private run (None: dp off): tables are counts, each release
        #: with a privacy loss distribution
        self.privacy = server_noise(
            self.options, None if batches is None else int(batches), "summed tables", tight=True
        )
        #: why the search ended before its last depth (None: it did not)
        self.stopped: str | None = None
        self.engine_options = shared.search_engine_options(self.algorithm, self.options)
        self.levels: dict[str, list] = {}
        self.cards = np.zeros(0, dtype=np.int64)
        self.cache: dict[Query, float] = {}
        self.runner: StepRunner | None = None
        self.moments: GaussianMoments | None = None
        self.batches: list[dict] = []
        self.constant: list[str] = []  # single-level columns, kept as isolated nodes
        self._margins: np.ndarray | None = None  # sketch: margins of the pending batch
        self._plan: BatchPlan | None = None  # exact: how the pending batch is counted
        self._layout: TableLayout | None = None
        self._sets: SetTables | None = None  # a batch asked by its tests' variable sets
        # a batch's p-values, handed to the search when the next round begins: the round's
        # messages, tables and layouts are gone by then (on wide data, hundreds of MB that
        # would otherwise stay alive through the search's next step)
        self._answers_due: np.ndarray | None = None
        self._batch_rows: tuple[Sequence[Query], FreshQueries] | None = None

    def _pending_batch(self) -> Sequence[Query] | None:
        """The search's pending batch as one query matrix, made once per batch: the tuples the
        cache passes on are normalised already, and the request, the cell count and the
        server's layout would each convert them again."""
        assert self.runner is not None
        pending = self.runner.pending
        if pending is None or isinstance(pending, FreshQueries):
            return pending
        if self._batch_rows is None or self._batch_rows[0] is not pending:
            self._batch_rows = (pending, FreshQueries(query_rows(pending, normalised=True)))
        return self._batch_rows[1]

    def _advance_search(self) -> None:
        """Give the search the p-values of the batch last answered (see ``_answers_due``)."""
        if self._answers_due is not None:
            assert self.runner is not None  # the batch came from it
            answers, self._answers_due = self._answers_due, None
            self.runner.answer(answers)

    @property
    def max_cells(self) -> int:
        """The cells of one round's tables at a client: the ``max_cells`` option, lowered to
        the smallest ``max-request-cells`` a site's policy reported in hello (a site refuses a
        request over it)."""
        cap = self.site_cell_cap if self.client_info else None
        return self.options.max_cells if cap is None else min(self.options.max_cells, cap)

    # ------------------------------------------------------------------ set-up
    def input_needs(self) -> InputNeeds:
        """Discrete columns for chi2/G2, numbers for Fisher-z; the clients' sums equal the
        pooled test, so one client, or a client with one row, is fine."""
        if self.options.test == "fisherz":
            return InputNeeds(
                values="numeric",
                test="Fisher-z",
                value_fix=Fix("for discrete data use {}", (("test", "chi2"),)),
                missing=self.options.missing,
            )
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

    def start_search(self, max_depth: int | None = None) -> StepRunner:
        """The search engine, capped at ``max_depth`` (default: the options' cap); its batches
        answered before come from the cache."""
        variables = self.variables
        if self.options.test != "fisherz" and self.runner is None:
            levels = self.global_levels()
            # never None: the input check required discrete columns for this test
            self.levels = {v: levels[v] or [] for v in variables}
            self.cards = np.array([len(self.levels[v]) for v in variables], dtype=np.int64)
            self.constant = note_constant_columns(
                self.name, self.levels, self.options.ci == "exact"
            )
        # a level's tests held at once: bounded by the server's budget like its tables
        depth_batch = max(1, self.options.max_server_cells // DEPTH_BATCH_CELLS)
        if self.privacy is not None:  # a depth is one batch: it is paid for once, as a whole
            depth_batch = 2**62
        engine = pc_steps if self.algorithm == "pc" else fci_steps
        max_depth = self.options.max_depth if max_depth is None else max_depth
        if self.privacy is not None and self.options.dp_batches is not None:
            cap = self.options.dp_batches - 1  # one even budget share per skeleton depth
            max_depth = cap if max_depth is None else min(max_depth, cap)
        steps = engine(
            variables,
            self.options.alpha,
            max_depth,
            depth_batch=depth_batch,
            **self.engine_options,
        )
        self.runner = StepRunner(with_cache(steps, self.cache))
        return self.runner

    # ------------------------------------------------------------------ protocol
    def next_request(self) -> Request | None:
        self._advance_search()
        runner = self.runner
        if runner is None:
            if self.options.test == "fisherz" and self.options.missing != "testwise":
                return Request(MOMENTS, MomentsRequest(self.variables, self.options.missing))
            runner = self.start_search()
        queries = self._pending_batch()
        if queries is None:  # the search has finished
            return None
        if self.options.test == "fisherz":  # test-wise deletion: each batch's moments, test by test
            asked = MomentsRequest(self.variables, self.options.missing)
            return Request(QUERY_MOMENTS, asked, arrays=[encode_queries(queries)])
        base = TableRequest(self.variables, self.levels, self.max_cells, self.options.missing)
        if self.options.ci == "exact":
            if self._plan is None:
                self._plan = self._plan_exact(queries)
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
        batch = encode_queries(queries)
        self._check_table_budget(queries)
        if self._margins is None:
            return Request(MARGINS, base, arrays=[batch], secure=True)
        self._layout = self._layout or make_layout(queries, self.cards)
        expected = expected_counts(self._margins, self._layout)
        payload = SketchRequest(
            self.variables,
            self.levels,
            self.max_cells,
            self.options.missing,
            seed=self._sketch_seed(),
            sketch_length=self.options.sketch_length,
            clients=len(self.alive_clients),
        )
        return Request(SKETCH, payload, arrays=[batch, expected], secure=True)

    def _plan_exact(self, queries: Sequence[Query]) -> BatchPlan:
        """How an exact batch is asked: one joint table per variable set where tests share
        sets (:class:`~fedcausal_flwr.stats.set_tables.SetTables`: fewer tables, cells and rows
        counted, the same p-values), and always in a private batch (its noise grows with the
        tables); else the tests' own tables."""
        rows = query_rows(queries, normalised=True)
        private = self.privacy is not None
        sets = SetTables.of(rows) if rows.shape[1] > 2 or private else None
        if sets is not None and (private or len(sets.sets) < len(rows)):
            plan = self._plan_batch(_set_queries(sets))
            if self.privacy is not None:
                plan.noise_variance, plan.shares = self.privacy.batch_noise(
                    self.name, len(sets.sets), plan.dense_cells, len(self.alive_clients)
                )
            if private or not plan.sparse:  # (sparse replies are tested test by test)
                self._sets = sets
                return plan
        return self._plan_batch(queries)

    def _plan_batch(self, queries: Sequence[Query]) -> BatchPlan:
        """How an exact batch is counted: dense tables summed (SecAgg+ can carry them) or, when
        the dense tables are over the budget or twice the data a client holds, sparsely (nonzero
        cells with their index, merged on the server: never a dense table). Each round holds at
        most ``max_cells`` cells (a sparse entry counts as two); a batch over it is split into
        several rounds, and one query over it alone is an error naming it."""
        cells = table_cells(queries, self.cards)
        rows = np.array([self.client_info[pid].n_rows for pid in self.alive_clients] or [0])
        most_rows, k = int(rows.max()), len(rows)
        total = float(cells.sum())
        everything = [np.arange(len(queries))]
        dense_bytes = 8 * total
        sparse_bytes = 16 * float(np.minimum(cells, most_rows).sum())
        # one round when a client's tables fit max_cells and all clients' max_server_cells
        if total <= self.max_cells and k * total <= self.options.max_server_cells:
            sparse = not self.dense_only and sparse_bytes < dense_bytes
            return BatchPlan(sparse, everything, int(total), len(queries))
        # entries the server holds
        sparse_cost = 2 * np.minimum(cells[:, None], rows[None, :]).sum(axis=1)
        sparse = not self.dense_only and (
            float(cells.max()) > self.max_cells or float(sparse_cost.sum()) < total
        )
        # (a client's cells, the server's cells) of each query in a round
        client_cost, server_cost = (sparse_cost, sparse_cost) if sparse else (cells, k * cells)
        over = np.flatnonzero(
            (client_cost > self.max_cells) | (server_cost > self.options.max_server_cells)
        )
        if over.size:
            i = int(over[0])
            raise self._over_budget(
                queries[i], int(cells[i]), int(client_cost[i]), int(server_cost[i]), sparse
            )
        # parts as the greedy fill makes them: each as long as both budgets allow
        client_sum = np.concatenate(([0.0], np.cumsum(client_cost)))
        server_sum = np.concatenate(([0.0], np.cumsum(server_cost)))
        parts: list[np.ndarray] = []
        start = 0
        while start < len(queries):
            end = min(
                np.searchsorted(client_sum, client_sum[start] + self.max_cells, "right"),
                np.searchsorted(
                    server_sum, server_sum[start] + self.options.max_server_cells, "right"
                ),
            )
            end = max(int(end) - 1, start + 1)
            parts.append(np.arange(start, end))
            start = end
        return BatchPlan(sparse, parts, int(total), len(queries))

    def _over_budget(
        self, query: Query, cells: int, cost: int, server_cost: int, sparse: bool
    ) -> ValueError:
        x, y, sz = query
        names = self.variables
        test = f"{names[x]} _||_ {names[y]} | {[names[v] for v in sz]}"
        depth = f"cap the conditioning sets (--max-depth {len(sz) - 1}) or " if sz else ""
        if cost <= self.max_cells:  # the server's budget: every client's copy of the table
            budget = self.options.max_server_cells
            return ValueError(
                f"{self.name}: the contingency table of {test} has {cells:,} cells, and the "
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
            f"{self.name}: the contingency table of {test} has {cells:,} cells; {how} the "
            f"memory budget max_cells={self.max_cells:,}: {depth}raise the budget "
            f"(--max-cells {cost}; Python: max_cells={cost})"
        )

    def _check_table_budget(self, queries: Sequence[Query]) -> None:
        """Refuse a batch whose tables would not fit the budget, before a client counts them."""
        try:
            layout = make_layout(queries, self.cards, max_cells=self.max_cells)
        except TableTooLargeError:
            layout = None
        if layout is not None and layout.total <= self.max_cells:
            return
        names = self.variables
        sizes = [int(np.prod([self.cards[v] for v in (x, y, *sz)])) for x, y, sz in queries]
        worst = int(np.argmax(sizes))
        x, y, sz = queries[worst]
        total, budget = int(sum(sizes)), self.max_cells
        depth = f"limit the conditioning sets (--max-depth {len(sz) - 1}) or " if sz else ""
        raise ValueError(
            f"the contingency tables of this level ({len(queries)} tests, conditioning sets of "
            f"size {len(sz)}) need {total:,} cells, over the budget max_cells={budget:,} "
            f"(the largest: {names[x]} _||_ {names[y]} | {[names[v] for v in sz]}, "
            f"{sizes[worst]:,} cells); each client holds them in memory at once: {depth}raise "
            f"the budget (--max-cells {total}; Python: max_cells={total})"
        )

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        if request.action == MOMENTS:
            self._handle_moments(replies)
            return
        assert self.runner is not None and self.runner.pending is not None  # the asked batch
        if request.action == QUERY_MOMENTS:
            self._handle_query_moments(replies)
            return
        if request.action == TABLES or request.action == SPARSE_TABLES:
            self._handle_tables(request, replies)
            return
        (summed,) = replies
        vector = summed.arrays[0]
        queries = self._pending_batch()
        assert queries is not None  # the asked batch
        if request.action == MARGINS:
            self._margins = vector
            self._layout = make_layout(queries, self.cards)
            self.annotate(
                batch=len(self.batches), depth=_depth(queries), tests=len(queries), step="margins"
            )
            return
        assert self._margins is not None and self._layout is not None  # from the margins reply
        result = sketch_chi2(
            vector.astype(np.float64) / SKETCH_SCALE,
            self._margins,
            self._layout,
            self.options.sketch_length,
            empty_strata_add_dof=self.options.empty_strata_add_dof,
        )
        pvalues = result.pvalue
        self._margins, self._layout = None, None
        self.batches.append({"round": self.current_round, "tests": len(queries)})
        self.annotate(batch=len(self.batches) - 1, depth=_depth(queries), tests=len(queries))
        self.runner.answer(pvalues)

    def _handle_tables(self, request: Request, replies: list[Reply]) -> None:
        """One part of an exact batch: dense summed tables or the clients' sparse cells."""
        assert self.runner is not None and self.runner.pending is not None
        assert self._plan is not None  # planned by next_request
        plan, queries = self._plan, self._pending_batch()
        assert queries is not None
        part = plan.parts[len(plan.answered)]
        if self._sets is not None:  # the part's set tables: each test reads its set's table
            (summed,) = replies
            counts = summed.arrays[0]
            if self.privacy is not None:
                counts, _, noted = self.privacy.release(
                    counts, len(summed.contributors), self.current_round, len(part),
                    plan.noise_variance, plan.shares,
                )  # fmt: skip
                self.recorder.note_noise(self.current_round, TABLES, noted)
                counts = np.maximum(counts, 0)  # (post-processing: free)
            plan.answered.append(
                self._sets.pvalues(
                    np.asarray(counts), int(part[0]), int(part[-1]) + 1, self.cards,
                    self.options.test, noise_variance=plan.noise_variance,
                    empty_strata_add_dof=self.options.empty_strata_add_dof,
                )
            )  # fmt: skip
            self._close_part(plan, queries)
            return
        layout = make_layout(_select(queries, part), self.cards, max_cells=None)
        if request.action == TABLES:
            (summed,) = replies
            pvalues = discrete_pvalues(
                summed.arrays[0],
                layout,
                self.options.test,
                empty_strata_add_dof=self.options.empty_strata_add_dof,
            )
        else:
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
            pvalues = sparse_tests(
                indices,
                counts,
                layout,
                self.options.test,
                empty_strata_add_dof=self.options.empty_strata_add_dof,
            ).pvalue
        plan.answered.append((part, np.asarray(pvalues, dtype=np.float64)))
        self._close_part(plan, queries)

    def _close_part(self, plan: BatchPlan, queries: Sequence[Query]) -> None:
        """A part of the batch is in; after the last, the batch's p-values go to the search."""
        assert self.runner is not None  # the batch came from it
        self.annotate(
            batch=len(self.batches), depth=_depth(queries), tests=len(plan.answered[-1][0]),
            sparse=plan.sparse, part=len(plan.answered),
        )  # fmt: skip
        if len(plan.answered) < len(plan.parts):
            return
        self._plan = None
        self.batches.append({
            "round": self.current_round, "tests": len(queries), "rounds": len(plan.parts),
            "sparse": plan.sparse, "dense_cells": plan.dense_cells, "tables": plan.tables,
        })  # fmt: skip
        answers = np.empty(len(queries))
        for positions, pvalues in plan.answered:
            answers[positions] = pvalues
        self._sets = None
        if self.privacy is not None:
            self.privacy.accountant.close_batch()
        self._answers_due = answers

    # ------------------------------------------------------------------ differential privacy
    @property
    def dense_only(self) -> bool:
        """Tables travel dense and summed: through SecAgg+, or to be noised as a sum."""
        return self.secure_mode or self.privacy is not None

    def forget_pending_batch(self) -> None:
        self._plan, self._sets = None, None

    def privacy_plan(self) -> dict[str, Any] | None:
        if self.privacy is None:
            return None
        sites = self.protocol_run.members.num_clients
        return self.privacy.plan(self.name, self.entry_point, self.secure_mode, sites)

    def _handle_moments(self, replies: list[Reply]) -> None:
        p = len(self.variables)
        total: GaussianMoments | None = None
        for reply in replies:  # partition order: deterministic float sums
            m = GaussianMoments.from_vector(reply.arrays[0], p)
            total = m if total is None else total + m
        assert total is not None  # a round has at least one reply
        self.moments = total
        oracle = GaussianOracle.from_moments(total, self.variables)
        runner = self.start_search()
        try:
            while runner.pending is not None:  # every Fisher-z test runs on the server from here
                self.batches.append({"round": self.current_round, "tests": len(runner.pending)})
                runner.answer(oracle.test_batch(runner.pending))
        except TooFewSamplesError as err:
            raise self._too_few_rows(err) from None

    def _handle_query_moments(self, replies: list[Reply]) -> None:
        assert self.runner is not None and self.runner.pending is not None
        queries = self.runner.pending
        total = np.zeros(int(query_block_sizes(queries).sum()))
        for reply in replies:  # partition order: deterministic float sums
            vector = np.asarray(reply.arrays[0], dtype=np.float64)
            if vector.shape != total.shape:
                raise ClientProtocolError(
                    f"client {reply.client} sent query moments of shape {vector.shape}, "
                    f"expected {total.shape}"
                )
            total += vector
        try:
            pvalues, _ = fisher_z_from_query_moments(total, queries, self.variables)
        except TooFewSamplesError as err:
            raise self._too_few_rows(err) from None
        self.batches.append({"round": self.current_round, "tests": len(queries)})
        self.runner.answer(pvalues)

    def _too_few_rows(self, err: TooFewSamplesError) -> InputError:
        """The search reached a Fisher-z test the pooled rows cannot carry: say how many rows it
        needs and which depth cap would stop before it."""
        x, y, given = err.query
        names = self.variables
        test = f"{names[x]} and {names[y]}" + (f" given {err.k} variables" if err.k else "")
        held = (
            "rows complete on its variables"
            if self.options.missing == "testwise"
            else "rows in all"
        )
        problem = (
            f"the clients hold {err.n} {held}, but {self.name}'s Fisher-z test of {test} "
            f"needs more than {err.k + 3}"
        )
        if err.n < 4:
            fix = Fix("give at least 4 rows, or discretise the columns for {}", (("test", "chi2"),))
            return InputError(problem, fix=fix, entry_point=self.entry_point)
        deepest = (("max_depth", err.n - 4),)
        fix = Fix("give more rows, or cap the conditioning sets with {}", deepest)
        return InputError(problem, fix=fix, entry_point=self.entry_point)

    def stop_search(self, refusal: str) -> bool:
        self._advance_search()
        return stop_search(self, refusal)

    def on_clients_dropped(self, dropped: list[int]) -> None:
        self._advance_search()
        # A sketch batch restarts from its margins with the survivors, a batch counted in parts
        # from its first part (every sum of one batch comes from the same clients); a one-part
        # batch of tables is re-asked as is.
        if self.runner is None or self.runner.done:
            return
        if self.options.ci == "sketch":
            self._margins, self._layout = None, None
            self.retract_request()
        elif self._plan is not None and self._plan.answered and self.privacy is None:
            # (a private run keeps the parts it has: their noisy sums are released already, and
            # asking them again would pay for them twice)
            self._plan = None
            self.retract_request()

    def _sketch_seed(self) -> int:
        return int(
            np.random.SeedSequence([self.options.seed, len(self.batches)]).generate_state(1)[0]
        )

    # ------------------------------------------------------------------ result
    def result_payload(self) -> dict:
        self._advance_search()
        assert self.runner is not None  # the search has run
        result: PCResult | FCIResult = self.runner.result
        skeleton = result.skeleton
        return {
            "graph": result.graph,
            "variables": list(result.graph.names),
            "depths": [lv["depth"] for lv in skeleton.depths],
            "depths_searched": len(skeleton.depths),
            "constant_columns": list(self.constant),
            **self.missing_report(self.options.missing),
            **search_evidence(result),
            # distinct tests asked (a streamed level's are not cached)
            "tests": sum(b["tests"] for b in self.batches)
            if self.options.test != "fisherz"
            else result.n_tests,
            "batches": self.batches,
            **privacy_report(self.privacy, self.stopped),
        }


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


def make_strategy(options: Mapping[str, Any], algorithm: str = "pc") -> FedPCStrategy:
    """FedPC (``algorithm="pc"``) or FedFCI (``"fci"``) from its options (raw keywords work too)."""
    return FedPCStrategy(options, algorithm=algorithm)


def fedfci_strategy(options: Mapping[str, Any]) -> FedPCStrategy:
    """FedFCI: FedPC's strategy searching with FCI."""
    return FedPCStrategy(options, algorithm="fci")


def secure_support(options: Mapping[str, Any]) -> str | None:
    """Tables, margins and sketches are integer sums; the Gaussian moments are floats."""
    if options.get("test") == "fisherz":
        return (
            "the Fisher-z test sums float moments, which SecAgg+ (32-bit integer sums) cannot carry"
        )
    return None


#: the search -> what its method's listing says
DESCRIPTIONS = {
    "pc": "FedC2SL's FedPC: PC-stable with a federated chi2/G2 test (exact summed tables or the "
    "sketch) or Fisher-z on summed moments",
    "fci": "FedC2SL's FedFCI: FCI with the same federated tests (PAG output)",
}
register_variants(
    {"pc": FedPCStrategy, "fci": fedfci_strategy},
    METHOD_OF,
    DESCRIPTIONS,
    "fedcausal_flwr.clients.fedpc:FedPCClient",
    disclosures=DISCLOSURES,
    bootstrap=True,
    secure=secure_support,
    paper="FedC2SL (Wang et al.)",
)


def _depth(queries: Sequence[Query]) -> int:
    """A batch's largest conditioning-set size, for the round log (a PC batch holds one depth;
    the completion of unshielded pairs after the skeleton may mix them)."""
    if isinstance(queries, FreshQueries):
        return int(queries.rows.shape[1]) - 2
    return max((len(query[2]) for query in queries), default=0)
