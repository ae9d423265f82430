"""Concrete CI oracles: local discrete and Gaussian data, perfect d-separation, fixed tables."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from ..graphs.graph import ARROW, NONE, TAIL, Graph
from .batch_oracle import CIOracle, Query, by_conditioning_size
from .contingency import (
    DEFAULT_MAX_CELLS,
    DiscreteTestOptions,
    TableLayout,
    check_codes,
    count_tables,
    discrete_tests,
    finish_tests,
    make_layout,
    query_rows,
    resolve_test_name,
    stacked_statistics,
    table_cells,
)
from .dsep import d_connected_batch
from .gaussian import (
    GaussianMoments,
    correlation_from_moments,
    fisher_z_from_correlation,
    fisher_z_from_query_moments,
    local_moments,
    query_moments,
)

_RESAMPLE_CELLS = 1 << 24  # table cells (over all resamples) per batched chunk: 128 MB


def _chunks_by_cells(cells: Sequence[int], copies: int, limit: int) -> list[list[int]]:
    """Consecutive index chunks whose ``copies * sum(cells)`` stays under ``limit`` (at least one
    query per chunk)."""
    chunks: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i, c in enumerate(cells):
        if current and total + copies * c > limit:
            chunks.append(current)
            current, total = [], 0
        current.append(i)
        total += copies * c
    if current and copies:
        chunks.append(current)
    return chunks


def _cell_budget_parts(positions: np.ndarray, cells: np.ndarray, budget: int) -> list[np.ndarray]:
    """``positions`` in consecutive parts whose dense tables hold at most about ``budget`` cells
    together (a part holds one table at least): a big batch is counted part by part, so its
    memory is a part's, not the batch's."""
    if not positions.size:
        return []
    ends = np.cumsum(cells[positions], dtype=np.float64)
    part_of = (ends - 1) // max(int(budget), 1)
    bounds = np.flatnonzero(np.diff(part_of)) + 1
    return np.split(positions, bounds)


class DiscreteOracle(CIOracle):
    """G2 / Pearson chi2 on one data set of integer codes over global level sets.

    Options are those of :func:`~.contingency.discrete_tests`. Queries whose dense table would
    exceed ``max_cells`` are counted sparsely over the observed strata only (``np.unique`` of the
    S codes); the p-value is the same because empty strata contribute nothing.
    """

    def __init__(
        self,
        codes: np.ndarray,
        cards: Sequence[int] | np.ndarray,
        variables: Sequence[str],
        test: str = "g2",
        reliability: float | None = None,
        *,
        reliability_arity: Literal["max_observed", "global"] = "max_observed",
        unreliable_pvalue: float = np.nan,
        empty_strata_add_dof: bool = False,
        max_cells: int = DEFAULT_MAX_CELLS,
        client: str | None = None,
        allow_missing: bool = False,
    ):
        super().__init__(variables)
        self.codes, self.cards = check_codes(
            codes, cards, self.variables, client, allow_missing=allow_missing
        )
        #: rows with a missing value (MISSING_CODE) are left out test by test
        self.has_missing = bool(allow_missing and self.codes.size and self.codes.min() < 0)
        dtype = np.int32 if int(self.cards.max()) < 2**31 else np.int64
        self.codes_t = np.ascontiguousarray(self.codes.T, dtype=dtype)
        self.test_name = resolve_test_name(test)
        self.options = DiscreteTestOptions(
            reliability=reliability,
            reliability_arity=reliability_arity,
            unreliable_pvalue=unreliable_pvalue,
            empty_strata_add_dof=empty_strata_add_dof,
        )
        if reliability_arity not in ("max_observed", "global"):
            raise ValueError(f"unknown reliability_arity {reliability_arity!r}")
        self.max_cells = max_cells

    def arities(self, codes: np.ndarray | None = None) -> np.ndarray:
        """Per-variable arities of the reliability rule on ``codes`` (default: all rows)."""
        codes = self.codes if codes is None else codes
        if self.options["reliability_arity"] == "global":
            return self.cards.astype(np.float64)
        if codes.shape[0] == 0:
            return np.zeros(self.n_vars)
        return codes.max(axis=0).astype(np.float64) + 1.0

    def reliable(self, queries: Sequence[Query], arities: np.ndarray, n_rows: int) -> np.ndarray:
        """Which queries pass the reliability rule, decided before any counting: every row falls
        in every table, so a table's size is ``n_rows`` and its observed arities are the
        sample's. All True when the rule is off."""
        ok = np.ones(len(queries), dtype=bool)
        threshold = self.options["reliability"]
        if threshold is None:
            return ok
        by_size = by_conditioning_size(queries)
        for k, members in by_size.items():
            rows = np.array([(queries[i][0], queries[i][1], *queries[i][2]) for i in members])
            product = arities[rows.reshape(len(members), k + 2)].prod(axis=1)
            ok[members] = (n_rows > 0) & (n_rows >= threshold * product)
        return ok

    def compute_batch(self, queries: list[Query]) -> np.ndarray:
        return self.compute_statistics(queries)[0]

    def compute_statistics(self, queries: list[Query]) -> tuple[np.ndarray, np.ndarray]:
        """p-values and statistics (0 for a test decided unreliable without counting, and for
        one over the cell budget, counted sparsely: the search's order needs no more)."""
        pvals = np.full(len(queries), self.options["unreliable_pvalue"], dtype=np.float64)
        stats = np.zeros(len(queries), dtype=np.float64)
        keep = np.arange(len(queries))
        if not self.has_missing:  # with missing values each table's own n decides (below)
            keep = np.flatnonzero(self.reliable(queries, self.arities(), len(self.codes)))
        if keep.size < len(queries):  # unreliable tests are decided without counting
            pvals[keep], stats[keep] = self.compute_statistics([queries[i] for i in keep.tolist()])
            return pvals, stats
        options = self.options
        if not self.has_missing and options["reliability"] is not None:
            # every row is in every table: the rule above decided it as the tables would
            options = DiscreteTestOptions(**{**options, "reliability": None})
        rows = query_rows(queries, normalised=True)  # once, for the sizes and the layout
        cells = table_cells(rows, self.cards)
        small = cells <= self.max_cells
        sparse = np.flatnonzero(~small).tolist()
        for part in _cell_budget_parts(np.flatnonzero(small), cells, self.max_cells):
            layout = make_layout(rows[part], self.cards, self.max_cells)
            tables = count_tables(self.codes_t, layout)
            tested = discrete_tests(tables, layout, self.test_name, **options)
            pvals[part], stats[part] = tested.pvalue, tested.statistic
        for i in sparse:
            pvals[i] = self._sparse_pvalue(queries[i])
        return pvals, stats

    def test_resamples(
        self, queries: Sequence[Sequence], row_sets: Sequence[np.ndarray]
    ) -> np.ndarray:
        """p-values of ``queries`` on each resample ``codes[rows]`` (``B x Q``; not cached).

        Equal, test by test, to a fresh oracle on each resample (FedECD's bootstraps), but the
        layout is built once and the tables of every resample go through ONE batched test, so the
        per-group overhead is paid once instead of ``B`` times.
        """
        all_keys = list(dict.fromkeys(self.check_query(q) for q in queries))
        position = {k: i for i, k in enumerate(all_keys)}
        order = [position[self.check_query(q)] for q in queries]
        n_sets = len(row_sets)
        samples = [np.asarray(rows, dtype=np.int64) for rows in row_sets]
        for rows in samples:
            if rows.ndim != 1 or (rows.size and (rows.min() < 0 or rows.max() >= len(self.codes))):
                raise ValueError(
                    f"resample rows must be indices into the {len(self.codes)} rows of the data"
                )
        full = np.full((n_sets, len(all_keys)), self.options["unreliable_pvalue"], dtype=float)
        # only tests reliable on some resample are counted (on every resample; the rule then
        # marks the others exactly as a fresh oracle would)
        reliable_somewhere = np.zeros(len(all_keys), dtype=bool)
        for rows in samples:
            reliable_somewhere |= self.reliable(all_keys, self.arities(self.codes[rows]), len(rows))
        counted = np.flatnonzero(reliable_somewhere)
        keys = [all_keys[i] for i in counted.tolist()]
        pvals = np.empty((n_sets, len(keys)))
        cells = [math.prod(int(self.cards[v]) for v in (x, y, *s)) for x, y, s in keys]
        dense = [i for i, c in enumerate(cells) if c <= self.max_cells]
        sparse = [i for i, c in enumerate(cells) if c > self.max_cells]
        for chunk in _chunks_by_cells([cells[i] for i in dense], n_sets, _RESAMPLE_CELLS):
            members = [dense[i] for i in chunk]
            layout = make_layout([keys[i] for i in members], self.cards, self.max_cells)
            tables = np.concatenate(
                [count_tables(self.codes_t[:, rows], layout) for rows in samples]
            )
            stacked = TableLayout(
                np.tile(layout.rows, (n_sets, 1)),
                layout.cards,
                np.tile(layout.shapes, (n_sets, 1)),
                np.concatenate(
                    [layout.offsets[:-1] + r * layout.total for r in range(n_sets)]
                    + [np.array([n_sets * layout.total])]
                ),
            )
            result = discrete_tests(tables, stacked, self.test_name, **self.options)
            pvals[:, members] = result.pvalue.reshape(n_sets, len(members))
        for r, rows in enumerate(samples):
            if sparse:
                part = DiscreteOracle(
                    self.codes[rows], self.cards, self.variables, self.test_name,
                    max_cells=self.max_cells, **self.options,
                )  # fmt: skip
                pvals[r, sparse] = [part._sparse_pvalue(keys[i]) for i in sparse]
        full[:, counted] = pvals
        self.n_asked += len(queries) * n_sets
        self.n_computed += len(keys) * n_sets
        self.n_batches += 1
        return full[:, order]

    def _sparse_pvalue(self, query: Query) -> float:
        """Counts over observed S-configurations only, for tables too large to lay out densely."""
        x, y, s = query
        cx, cy = int(self.cards[x]), int(self.cards[y])
        codes = self.codes
        if self.has_missing:  # test-wise deletion
            codes = codes[(codes[:, [x, y, *s]] >= 0).all(axis=1)]
        _, stratum, observed = np.unique(
            codes[:, list(s)], axis=0, return_inverse=True, return_counts=True
        )
        n_obs = observed.size
        cell = (stratum.ravel() * cx + codes[:, x]) * cy + codes[:, y]
        table = np.bincount(cell, minlength=n_obs * cx * cy).reshape(1, n_obs, cx, cy)
        stat, dof, n, _ = stacked_statistics(table, self.test_name)
        n_empty = math.prod(int(self.cards[v]) for v in s) - n_obs
        if self.options["reliability_arity"] == "global":
            arity = float(math.prod(int(self.cards[v]) for v in (x, y, *s)))
        else:
            highest = codes.max(axis=0) + 1 if codes.shape[0] else np.zeros(self.n_vars)
            arity = float(math.prod(int(highest[v]) for v in (x, y, *s)))
        result = finish_tests(
            stat,
            dof,
            n,
            np.array([n_empty]),
            np.array([arity]),
            self.options["reliability"],
            self.options["unreliable_pvalue"],
            self.options["empty_strata_add_dof"],
        )
        return float(result.pvalue[0])


class GaussianOracle(CIOracle):
    """Fisher-z partial-correlation test on one (pooled or local) continuous data set."""

    def __init__(self, data: np.ndarray, variables: Sequence[str], client: str | None = None):
        super().__init__(variables)
        self._use(local_moments(data, variables=self.variables, client=client))

    @classmethod
    def from_moments(cls, moments: GaussianMoments, variables: Sequence[str]) -> GaussianOracle:
        """An oracle over (possibly summed) moments: what a federated server holds."""
        oracle = cls.__new__(cls)
        CIOracle.__init__(oracle, variables)
        if moments.n_vars != oracle.n_vars:
            raise ValueError(f"moments cover {moments.n_vars} variables, not {oracle.n_vars}")
        oracle._use(moments)
        return oracle

    def _use(self, moments: GaussianMoments) -> None:
        self.moments = moments
        self.correlation = correlation_from_moments(moments, self.variables)

    def compute_batch(self, queries: list[Query]) -> np.ndarray:
        return fisher_z_from_correlation(self.correlation, self.moments.n, queries, self.variables)


class GaussianTestwiseOracle(CIOracle):
    """Fisher-z on continuous data with missing values (NaN), each test on the rows complete on
    its variables (causal-learn's ``mv_fisherz``); the pooled reference of federated test-wise
    deletion, whose clients send the same per-test moment blocks."""

    def __init__(self, data: np.ndarray, variables: Sequence[str]):
        super().__init__(variables)
        self.data = np.asarray(data, dtype=np.float64)
        if self.data.ndim != 2 or self.data.shape[1] != self.n_vars:
            raise ValueError(f"data of shape {self.data.shape} for {self.n_vars} variables")
        for v in np.flatnonzero(np.isinf(self.data).any(axis=0)):
            raise ValueError(f"variable {self.variables[int(v)]!r} has inf values")

    def compute_batch(self, queries: list[Query]) -> np.ndarray:
        blocks = query_moments(self.data, queries, self.variables)
        return fisher_z_from_query_moments(blocks, queries, self.variables)[0]


def dag_adjacency(dag: Graph) -> np.ndarray:
    """Boolean ``adj[i, j] = i -> j`` of a :class:`Graph`; rejects undirected edges and cycles."""
    directed = (dag.marks == ARROW) & (dag.marks.T == TAIL)
    if np.any((dag.marks != NONE) & ~(directed | directed.T)):
        raise ValueError("d-separation needs a DAG: the graph has non-directed edges")
    remaining = np.ones(dag.n_nodes, dtype=bool)
    while remaining.any():
        roots = remaining & ~directed[remaining].any(axis=0)
        if not roots.any():
            cyc = [dag.names[i] for i in np.flatnonzero(remaining)]
            raise ValueError(f"d-separation needs a DAG: a directed cycle runs through {cyc}")
        remaining &= ~roots
    return directed


class DSeparationOracle(CIOracle):
    """Perfect CI answers from a DAG: p = 1.0 if d-separated given S, else 0.0.

    ``observed`` (names or indices, default all nodes) are the oracle's variables; the others are
    latent, so answers are m-separations of the marginal MAG (d-separation in the full DAG).
    """

    def __init__(self, dag: Graph, observed: Sequence[str | int] | None = None):
        if not isinstance(dag, Graph):
            raise TypeError(f"DSeparationOracle needs a Graph, got {type(dag).__name__}")
        self.adjacency = dag_adjacency(dag)
        nodes = range(dag.n_nodes) if observed is None else observed
        self.full_index = np.array([dag.index(v) for v in nodes], dtype=np.int64)
        if len(set(self.full_index.tolist())) != self.full_index.size:
            raise ValueError(f"observed nodes repeat: {list(observed or [])}")
        super().__init__([dag.names[i] for i in self.full_index])

    def compute_batch(self, queries: list[Query]) -> np.ndarray:
        """One batched Bayes-ball per distinct ``(x, S)`` of the batch answers all its ``y``."""
        fi = self.full_index
        keys = list(dict.fromkeys((x, s) for x, _, s in queries))
        row = {key: i for i, key in enumerate(keys)}
        cond = np.zeros((len(keys), self.adjacency.shape[0]), dtype=bool)
        for i, (_, s) in enumerate(keys):
            cond[i, fi[list(s)]] = True
        xs = fi[[x for x, _ in keys]]
        connected = d_connected_batch(self.adjacency, xs, cond)
        rows = np.array([row[(x, s)] for x, _, s in queries], dtype=np.int64)
        ys = fi[[y for _, y, _ in queries]]
        return np.where(connected[rows, ys], 0.0, 1.0)


class TableOracle(CIOracle):
    """Fixed answers ``{(x, y, S): p}`` (indices or names), for unit tests of engines.

    Queries missing from the table get ``default``, or raise KeyError if ``default`` is None.
    """

    def __init__(
        self,
        table: Mapping[tuple, float],
        variables: Sequence[str],
        default: float | None = None,
    ):
        super().__init__(variables)
        self.default = default
        self.table: dict[Query, float] = {}
        for (x, y, s), p in table.items():
            key = self.check_query((self._index(x), self._index(y), [self._index(v) for v in s]))
            if key in self.table and self.table[key] != float(p):
                raise ValueError(f"conflicting p-values for query {key}")
            self.table[key] = float(p)

    def _index(self, v: int | str) -> int:
        if isinstance(v, str):
            if v not in self.variables:
                raise KeyError(f"unknown variable {v!r}; the table knows {list(self.variables)}")
            return self.variables.index(v)
        return int(v)

    def compute_batch(self, queries: list[Query]) -> np.ndarray:
        out = []
        for q in queries:
            if q in self.table:
                out.append(self.table[q])
            elif self.default is not None:
                out.append(float(self.default))
            else:
                names = (
                    self.variables[q[0]],
                    self.variables[q[1]],
                    [self.variables[v] for v in q[2]],
                )
                raise KeyError(f"query {names} is not in the table and no default is set")
        return np.array(out, dtype=float)


__all__ = [
    "DSeparationOracle",
    "DiscreteOracle",
    "GaussianOracle",
    "TableOracle",
    "dag_adjacency",
]
