"""Contingency tables as summable sufficient statistics, and the G2 / Pearson chi2 tests on them
(the tables' layout and counting live in :mod:`~fedcausal_flwr.stats.tables`, re-exported here).

The tables add up over clients exactly to the pooled table (:mod:`~.tables`); the server tests
the sum (:func:`discrete_pvalues`).

The tests reproduce causal-learn 0.1.4.8 ``Chisq_or_Gsq``: empty strata are dropped, a stratum
contributes ``(r_z - 1)(c_z - 1)`` degrees of freedom where ``r_z``, ``c_z`` count the x and y
levels observed in it (so unobserved global levels change nothing), and ``p = 1`` when the total
dof is 0.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, TypedDict

import numpy as np

from .tables import (  # noqa: F401  (re-exported: the layout and counting live in tables)
    DEFAULT_MAX_CELLS,
    MISSING_CODE,
    TableLayout,
    TableTooLargeError,
    check_cards,
    check_codes,
    check_sparse_tables,
    count_tables,
    count_type,
    counting_threads,
    local_tables,
    make_layout,
    merge_sparse_tables,
    query_rows,
    sparse_local_tables,
    sum_tables,
    table_cells,
)

#: Working-set sizes (array elements) of one vectorised testing chunk.
_CHUNK_ELEMENTS = 2**22
#: Table cells per chunk of :func:`stacked_statistics` calls: small enough to stay in cache
#: (the statistics make several passes over the chunk; 2**22 cells ran at a third of the speed).
TEST_CHUNK_CELLS = 2**18

DiscreteTest = Literal["g2", "chi2"]
_TEST_NAMES: dict[str, DiscreteTest] = {"g2": "g2", "gsq": "g2", "chi2": "chi2", "chisq": "chi2"}


def sparse_tests(
    indices: np.ndarray,
    counts: np.ndarray,
    layout: TableLayout,
    test: str = "g2",
    *,
    empty_strata_add_dof: bool = False,
) -> DiscreteTestResult:
    """:func:`discrete_tests` on sparse (summed) tables: each query's table is laid out densely
    over its observed strata only (an empty stratum adds nothing but, optionally, a dof), in
    chunks of strata, so memory follows the data, not the tables' dense size."""
    test_name = resolve_test_name(test)
    indices, counts = np.asarray(indices, dtype=np.int64), np.asarray(counts, dtype=np.int64)
    q = layout.n_queries
    stat = np.zeros(q)
    dof = np.zeros(q, dtype=np.int64)
    n = np.zeros(q, dtype=np.int64)
    empty = np.zeros(q, dtype=np.int64)
    bounds = np.searchsorted(indices, layout.offsets)
    for i in range(q):
        cs, cx, cy = (int(v) for v in layout.shapes[i])
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        local = indices[lo:hi] - layout.offsets[i]
        stratum = local // (cx * cy)
        strata, rank = np.unique(stratum, return_inverse=True)
        empty[i] = cs - strata.size
        per_chunk = max(1, _CHUNK_ELEMENTS // (8 * cx * cy))
        for first in range(0, strata.size, per_chunk):
            take = (rank >= first) & (rank < first + per_chunk)
            width = min(per_chunk, strata.size - first)
            table = np.zeros(width * cx * cy, dtype=np.int64)
            table[(rank[take] - first) * (cx * cy) + local[take] % (cx * cy)] = counts[lo:hi][take]
            st, df, nn, _ = stacked_statistics(table.reshape(1, width, cx, cy), test_name)
            stat[i] += st[0]
            dof[i] += df[0]
            n[i] += nn[0]
    return finish_tests(stat, dof, n, empty, np.ones(q), None, np.nan, empty_strata_add_dof)


def table_marginals(tables: np.ndarray, layout: TableLayout) -> np.ndarray:
    """Per query, the stratum-wise margins ``[n_xz (card_S*card_x), n_yz (card_S*card_y)]``.

    Summable like the tables; FedC2SL's first aggregation round reveals only these.
    Offsets: :func:`marginal_offsets`.
    """
    tables = np.asarray(tables)
    parts = []
    for i in range(layout.n_queries):
        t = layout.table(tables, i)
        parts.append(t.sum(axis=2).ravel())
        parts.append(t.sum(axis=1).ravel())
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def marginal_offsets(layout: TableLayout) -> np.ndarray:
    """Offsets of each query's block in :func:`table_marginals`'s vector."""
    cs, cx, cy = layout.shapes.T
    offsets = np.zeros(layout.n_queries + 1, dtype=np.int64)
    np.cumsum(cs * (cx + cy), out=offsets[1:])
    return offsets


def split_marginals(
    marginals: np.ndarray, layout: TableLayout, i: int
) -> tuple[np.ndarray, np.ndarray]:
    """Query ``i``'s ``(n_xz (card_S, card_x), n_yz (card_S, card_y))`` from a marginal vector."""
    cs, cx, cy = (int(v) for v in layout.shapes[i])
    start = int(marginal_offsets(layout)[i])
    block = np.asarray(marginals)[start : start + cs * (cx + cy)]
    return block[: cs * cx].reshape(cs, cx), block[cs * cx :].reshape(cs, cy)


# ------------------------------------------------------------------------------------- testing
@dataclass(frozen=True)
class DiscreteTestResult:
    """Per-query statistic, degrees of freedom, p-value, sample size and reliability flag."""

    statistic: np.ndarray
    dof: np.ndarray
    pvalue: np.ndarray
    n: np.ndarray
    reliable: np.ndarray


def expected_from_margins(n_xz: np.ndarray, n_yz: np.ndarray) -> np.ndarray:
    """Expected counts under independence, ``n_xz * n_yz / n_z`` per stratum (0 in empty strata).

    Works on stacked ``(..., card_S, card_x)`` / ``(..., card_S, card_y)`` margins; the integer
    product is divided by the integer stratum size as causal-learn does (bit-identical).
    """
    n_z = n_xz.sum(axis=-1)
    return n_xz[..., :, None] * n_yz[..., None, :] / np.maximum(n_z, 1)[..., None, None]


def stacked_statistics(
    t: np.ndarray, test: str, noise_variance: float = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(statistic, dof, n, n_empty_strata)`` of stacked tables ``t`` of shape (g, S, X, Y).

    Many small tables are worked on with the stack as the last axis (every elementwise pass then
    runs one long inner loop instead of g * S loops of length X or Y: 2-4x faster); each cell's
    arithmetic, and the order of the final sum, are those of :func:`expected_from_margins` and
    causal-learn's, so the statistics are bit-identical either way. ``noise_variance``: the
    tables carry independent noise of that variance per cell (a differentially private release):
    Pearson's terms are divided by ``expected + noise_variance``, each cell's variance under
    independence, so the noise does not read as dependence.
    """
    if t.shape[0] < 8:
        return _cell_statistics(t, test, 0, noise_variance)
    moved = np.ascontiguousarray(np.moveaxis(t, 0, -1))
    stat, dof, n, empty = _cell_statistics(moved, test, -1, noise_variance)
    return stat, dof, n, empty


def _cell_statistics(
    t: np.ndarray, test: str, stack_axis: int, noise_variance: float = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`stacked_statistics` on tables stacked along ``stack_axis`` (0 or -1)."""
    first = 1 if stack_axis == 0 else 0  # the S axis; X and Y follow it
    n_xz = t.sum(axis=first + 2)
    n_yz = t.sum(axis=first + 1)
    n_z = n_xz.sum(axis=first + 1)
    expected = np.expand_dims(n_xz, first + 2) * np.expand_dims(n_yz, first + 1)
    expected = expected / np.expand_dims(np.maximum(n_z, 1), (first + 1, first + 2))
    if test == "chi2":
        terms = t - expected
        terms *= terms
        if noise_variance > 0:
            terms /= expected + noise_variance
        else:
            expected[expected == 0] = 1.0  # empty row or column: the cell's count and term are 0
            terms /= expected
    else:
        expected[expected == 0] = 1.0
        terms = t / expected
        terms[terms == 0] = 1.0  # 0 * log(0) = 0
        np.log(terms, out=terms)
        terms *= t
    if stack_axis != 0:  # sum each table's cells in the same order as a (g, S, X, Y) stack
        terms = np.ascontiguousarray(np.moveaxis(terms, -1, 0))
    stat = terms.sum(axis=(1, 2, 3))
    if test != "chi2":
        stat *= 2.0
    nonempty = n_z > 0
    rows = np.count_nonzero(n_xz, axis=first + 1) - 1
    cols = np.count_nonzero(n_yz, axis=first + 1) - 1
    dof = np.where(nonempty, rows * cols, 0).sum(axis=first)
    return stat, dof, n_z.sum(axis=first), (~nonempty).sum(axis=first)


def resolve_test_name(test: str) -> DiscreteTest:
    """``"g2"`` or ``"chi2"`` (causal-learn's ``"gsq"`` / ``"chisq"`` are accepted too)."""
    name = _TEST_NAMES.get(test)
    if name is None:
        raise ValueError(f"unknown discrete test {test!r}; expected 'g2' or 'chi2'")
    return name


def _max_observed_arity_product(t: np.ndarray, radices: tuple[int, ...]) -> np.ndarray:
    """Product over x, y, S of (highest observed level + 1): FedECD's ``max(data)`` arities."""
    full = t.reshape(t.shape[0], *radices)
    product = np.ones(t.shape[0], dtype=np.float64)
    for axis in range(1, full.ndim):
        other = tuple(a for a in range(1, full.ndim) if a != axis)
        observed = full.sum(axis=other) > 0
        highest = np.where(
            observed.any(axis=1), observed.shape[1] - np.argmax(observed[:, ::-1], 1), 0
        )
        product *= highest
    return product


#: Tests from which the chi2 tail runs in threads (the special function releases the GIL).
THREADED_PVALUES = 2**17


def _pvalues(stat: np.ndarray, dof: np.ndarray) -> np.ndarray:
    """``chi2.sf(stat, dof)`` (1 where dof is 0). The tail function costs about a microsecond a
    test, so a level of millions is split over the cores: the same values, in threads."""
    from scipy import special  # here, not at import: a client counting tables needs none

    p = np.ones(stat.shape, dtype=np.float64)
    # one and two degrees of freedom (every test of two binary columns) have closed forms, 20x
    # cheaper than the incomplete gamma: erfc(sqrt(x / 2)) and exp(-x / 2)
    for df_closed, tail in (
        (1, lambda x: special.erfc(np.sqrt(x / 2))),
        (2, lambda x: np.exp(-x / 2)),
    ):
        at = np.flatnonzero(dof == df_closed)
        p[at] = tail(np.maximum(stat[at], 0.0))
    pos = np.flatnonzero(dof > 2)
    df, x = dof[pos].astype(np.float64), stat[pos]
    workers = min(4, counting_threads(), max(1, pos.size // THREADED_PVALUES))
    if workers < 2:
        p[pos] = special.chdtrc(df, x)
        return p
    parts = np.array_split(np.arange(pos.size), workers)
    with ThreadPoolExecutor(workers) as pool:
        tails = list(pool.map(lambda part: special.chdtrc(df[part], x[part]), parts))
    p[pos] = np.concatenate(tails)
    return p


class DiscreteTestOptions(TypedDict):
    """The keyword options of :func:`discrete_tests` (as an oracle keeps them)."""

    reliability: float | None
    reliability_arity: Literal["max_observed", "global"]
    unreliable_pvalue: float
    empty_strata_add_dof: bool


def equal_rows(columns: np.ndarray) -> list[np.ndarray]:
    """Positions of the equal rows of ``columns`` (small integers), group by group (ascending
    positions in each)."""
    key = np.zeros(columns.shape[0], dtype=np.int64)
    for column in columns.T:  # one int key per row (np.unique(axis=0) is slow)
        levels, inverse = np.unique(column, return_inverse=True)
        key = key * levels.size + inverse.reshape(-1)
    _, inverse = np.unique(key, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.cumsum(np.bincount(inverse))[:-1]
    return np.split(order, bounds)


def _table_groups(
    layout: TableLayout, by_radices: bool
) -> list[tuple[np.ndarray, tuple[int, ...] | None]]:
    """The layout's queries grouped by table shape ``(card_S, card_x, card_y)`` (one
    vectorised pass; what the statistics need) or, with ``by_radices``, by every variable's
    level count (what the observed-arity reliability rule needs)."""
    if not by_radices:
        if layout.n_queries == 0:
            return []
        return [(members, None) for members in equal_rows(layout.shapes)]
    groups: dict[tuple[int, ...], list[int]] = {}
    for i in range(layout.n_queries):
        groups.setdefault(layout.radices(i), []).append(i)
    return [(np.asarray(m, dtype=np.int64), r) for r, m in groups.items()]


def discrete_tests(
    tables: np.ndarray,
    layout: TableLayout,
    test: str = "g2",
    *,
    reliability: float | None = None,
    reliability_arity: Literal["max_observed", "global"] = "max_observed",
    unreliable_pvalue: float = np.nan,
    empty_strata_add_dof: bool = False,
    noise_variance: float = 0.0,
) -> DiscreteTestResult:
    """G2 or Pearson chi2 for every query of ``layout`` from (possibly summed) table vectors.

    Vectorised over tables of equal level structure. Options beyond causal-learn's behaviour:

    * ``reliability`` (FedECD, from the authors' ``my_g2_test``): a test is run only if
      ``n / (a_x * a_y * prod a_s) >= reliability`` (FedECD uses 5). Otherwise its p-value is
      ``unreliable_pvalue``: NaN by default, as in FedECD's code, where the caller decides (the
      local pass keeps the edge, the bootstrap pass ignores the test); pass 1.0 to treat as
      independent.
      ``reliability_arity="max_observed"`` takes each arity as highest observed level + 1 in the
      tested data (FedECD's ``max(data)`` on 1-based codes); ``"global"`` uses the public cards.
      Tests on no data at all (n = 0) are unreliable too.
    * ``empty_strata_add_dof``: FedC2SL's public code adds 1 dof per empty stratum; off by default.
    * ``noise_variance`` (Pearson chi2 only): the tables carry noise of that variance per cell
      (:func:`stacked_statistics`).
    """
    test_name = resolve_test_name(test)
    if noise_variance > 0 and test_name != "chi2":
        raise ValueError("noisy tables are tested with Pearson's chi2 (test='chi2')")
    if reliability_arity not in ("max_observed", "global"):
        raise ValueError(
            f"reliability_arity must be 'max_observed' or 'global', got {reliability_arity!r}"
        )
    tables = np.asarray(tables)
    if tables.shape != (layout.total,):
        raise ValueError(
            f"table vector has shape {tables.shape}, the layout needs ({layout.total},)"
        )
    if tables.dtype.kind not in "iu":
        raise TypeError(f"table vector has dtype {tables.dtype}; counts must be integers")
    if tables.size and tables.min() < 0:
        raise ValueError("table vector has negative counts")
    q = layout.n_queries
    stat = np.zeros(q)
    dof = np.zeros(q, dtype=np.int64)
    n = np.zeros(q, dtype=np.int64)
    empty = np.zeros(q, dtype=np.int64)
    arity_product = np.ones(q)
    by_radices = reliability is not None and reliability_arity == "max_observed"
    for members, radices in _table_groups(layout, by_radices):
        cs, cx, cy = (int(v) for v in layout.shapes[members[0]])
        size = cs * cx * cy
        chunk = max(1, TEST_CHUNK_CELLS // size)
        for start in range(0, members.size, chunk):
            qi = members[start : start + chunk]
            t = tables[layout.offsets[qi][:, None] + np.arange(size)].reshape(-1, cs, cx, cy)
            stat[qi], dof[qi], n[qi], empty[qi] = stacked_statistics(t, test_name, noise_variance)
            if reliability is not None:
                if radices is None:  # global arities: the table's own size
                    arity_product[qi] = float(size)
                else:
                    arity_product[qi] = _max_observed_arity_product(t, radices)
    return finish_tests(
        stat, dof, n, empty, arity_product, reliability, unreliable_pvalue, empty_strata_add_dof
    )


def finish_tests(
    stat: np.ndarray,
    dof: np.ndarray,
    n: np.ndarray,
    empty_strata: np.ndarray,
    arity_product: np.ndarray,
    reliability: float | None,
    unreliable_pvalue: float,
    empty_strata_add_dof: bool,
) -> DiscreteTestResult:
    """Turn statistics into p-values with the dof, dof = 0 and reliability rules (shared helper)."""
    if empty_strata_add_dof:
        dof = dof + empty_strata
    pvalue = _pvalues(stat, dof)
    reliable = np.ones(stat.shape, dtype=bool)
    if reliability is not None:
        reliable = (n > 0) & (n >= reliability * arity_product)
        pvalue[~reliable] = unreliable_pvalue
    return DiscreteTestResult(stat, dof, pvalue, n, reliable)


def discrete_pvalues(
    tables: np.ndarray, layout: TableLayout, test: str = "g2", **options
) -> np.ndarray:
    """p-values of :func:`discrete_tests` (same options)."""
    return discrete_tests(tables, layout, test, **options).pvalue
