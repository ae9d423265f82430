"""Contingency tables as summable sufficient statistics: their layout, and counting them.

The federated discrete CI test is three calls::

    vec_k, layout = local_tables(codes_k, cards, queries)   # on every client
    total = sum_tables([vec_1, ..., vec_K])                  # secure aggregation
    pvals = discrete_pvalues(total, layout, test="g2")       # on the server (contingency)

Codes index *global* level sets (``0 .. cards[v] - 1``, agreed before the run), so the tables of
all clients have the same shape and add up exactly to the pooled table. The server builds the same
:class:`TableLayout` from the queries and the cards alone (:func:`make_layout`), without data.

Table order: query ``(x, y, S)`` (normalised: ``x < y``, ``S`` sorted) owns the cells
``offsets[i] : offsets[i + 1]`` of the vector, a C-order array of shape ``(card_S, card_x,
card_y)``; the stratum index is the mixed-radix number of the S codes with ``S[0]`` most significant
(causal-learn's order).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any, cast

import numpy as np

from .batch_oracle import Query, normalise_query
from .level_bits import (
    BIT_TABLE_CELLS,
    MAX_BIT_BYTES,
    CellPart,
    LevelBase,
    bit_words,
    cell_plan,
    count_by_bits,
    level_bits,
    words_of,
)

#: Largest table (cells) :func:`local_tables` will allocate for one query (128 MiB of int64).
DEFAULT_MAX_CELLS = 2**24
#: Largest flat cell index of a batch's (possibly sparse) table vector: int64 indices.
MAX_FLAT_CELLS = 2**62
#: Working-set sizes (array elements) of one vectorised counting / testing chunk.
_COUNT_CHUNK_ELEMENTS = 2**18

#: The level code of a missing value (test-wise deletion: a row missing any of a test's
#: variables is left out of that test's table, and only of that one).
MISSING_CODE = -1


class TableTooLargeError(ValueError):
    """A query's dense contingency table would exceed the cell limit."""


def _where(client: str | None) -> str:
    return f" of client {client!r}" if client is not None else ""


def _name(variables: Sequence[str] | None, v: int) -> str:
    return f"{variables[v]!r} (column {v})" if variables is not None else f"column {v}"


def check_cards(
    cards: Sequence[int] | np.ndarray, variables: Sequence[str] | None = None
) -> np.ndarray:
    """Validate the public level counts: integers >= 1. A one-level (constant) variable is
    allowed: every test with it has 0 degrees of freedom and p = 1, as in causal-learn, so PC and
    FCI leave it isolated."""
    arr = np.asarray(cards)
    if arr.ndim != 1:
        raise ValueError(f"cards must be a 1-d array of level counts, got shape {arr.shape}")
    if arr.dtype.kind not in "iu" and not (
        arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))
    ):
        raise TypeError(f"cards must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if variables is not None and len(variables) != arr.size:
        raise ValueError(f"{arr.size} cards given for {len(variables)} variables")
    for v in np.flatnonzero(arr < 1):
        raise ValueError(
            f"variable {_name(variables, int(v))} has {int(arr[v])} levels; a discrete CI test "
            "needs at least one"
        )
    return arr


def check_codes(
    codes: np.ndarray,
    cards: Sequence[int] | np.ndarray,
    variables: Sequence[str] | None = None,
    client: str | None = None,
    *,
    allow_missing: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Validate integer level codes against the global cards; return ``(codes int64, cards)``.

    Float arrays are accepted only when every value is an exact integer (a lossless view of codes);
    anything else means continuous data reached a discrete test, which is an error, not a rounding.
    ``allow_missing``: :data:`MISSING_CODE` marks a missing value (test-wise deletion).
    """
    cards_arr = check_cards(cards, variables)
    arr = np.asarray(codes)
    if arr.ndim != 2:
        raise ValueError(f"codes{_where(client)} must be a 2-d (n, p) array, got shape {arr.shape}")
    if arr.shape[1] != cards_arr.size:
        raise ValueError(
            f"codes{_where(client)} have {arr.shape[1]} columns but "
            f"{cards_arr.size} cards are given"
        )
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        cols = np.flatnonzero(bad.any(axis=0))
        if cols.size:
            v = int(cols[0])
            example = arr[np.flatnonzero(bad[:, v])[0], v].item()
            raise ValueError(
                f"variable {_name(variables, v)}{_where(client)} has non-integer values "
                f"(e.g. {example!r}); discrete tests need integer level codes - discretise "
                "continuous data first"
            )
    elif arr.dtype.kind not in "iub":
        raise TypeError(f"codes{_where(client)} must be numeric level codes, got dtype {arr.dtype}")
    if arr.shape[0]:
        lo, hi = arr.min(axis=0), arr.max(axis=0)
        lowest = MISSING_CODE if allow_missing else 0
        for col in np.flatnonzero((lo < lowest) | (hi >= cards_arr)):
            raise ValueError(
                f"variable {_name(variables, int(col))}{_where(client)} has codes in "
                f"[{lo[col].item()!r}, {hi[col].item()!r}] but its global level set is "
                f"0..{cards_arr[col] - 1}"
            )
    return arr.astype(np.int64), cards_arr


@dataclass(frozen=True, eq=False)
class TableLayout:
    """Where each query's table sits in the concatenated vector; built from queries and cards only.

    ``rows`` holds the (normalised) queries as int64 rows ``[x, y, S..., -1 padding]``;
    ``shapes[i] = (card_S, card_x, card_y)``; ``offsets`` has ``n_queries + 1`` entries.
    """

    rows: np.ndarray
    cards: np.ndarray
    shapes: np.ndarray
    offsets: np.ndarray

    @cached_property
    def queries(self) -> tuple[Query, ...]:
        """The queries as ``(x, y, S)`` tuples (listed when first read)."""
        return tuple(rows_to_queries(self.rows))

    @cached_property
    def joint_plans(self) -> dict[int, Any]:
        """How counting reads each conditioning-set size's tables from shared joint tables,
        worked out on first count (see :func:`count_tables`)."""
        return {}

    @cached_property
    def bit_plans(self) -> dict[tuple[str, int], Any]:
        """Which tables of each group counting reads from level bitsets, and their cells'
        plans, worked out on first count (see :func:`count_tables`)."""
        return {}

    @cached_property
    def level_base(self) -> LevelBase:
        """Where the levels of the batch's variables sit in a level bitset matrix (a variable
        of more levels than a bitset-counted table has cells is in none of those tables)."""
        used = np.unique(self.rows[self.rows >= 0])
        return LevelBase.of(used[self.cards[used] <= BIT_TABLE_CELLS], self.cards)

    @property
    def n_queries(self) -> int:
        return int(self.rows.shape[0])

    @property
    def total(self) -> int:
        """Length of the concatenated table vector."""
        return int(self.offsets[-1])

    def table(self, vector: np.ndarray, i: int) -> np.ndarray:
        """Query ``i``'s table as a ``(card_S, card_x, card_y)`` view of ``vector``."""
        return np.asarray(vector)[self.offsets[i] : self.offsets[i + 1]].reshape(self.shapes[i])

    def radices(self, i: int) -> tuple[int, ...]:
        """Level counts ``(cards of S..., card_x, card_y)`` of query ``i`` (table axis order)."""
        x, y, *s = (v for v in self.rows[i].tolist() if v >= 0)
        return tuple(int(self.cards[v]) for v in (*s, x, y))


def query_rows(queries: Sequence[Sequence] | np.ndarray, normalised: bool = False) -> np.ndarray:
    """A batch as int64 rows ``[x, y, S..., -1 padding]``: a query matrix as it is (its padding
    must trail), fresh queries' rows, or ``(x, y, S)`` tuples (normalised unless
    ``normalised``)."""
    held = getattr(queries, "rows", queries)
    if isinstance(held, np.ndarray):
        rows = held.astype(np.int64, copy=False)
        if rows.ndim != 2 or rows.shape[1] < 2:
            raise ValueError(f"a query matrix must be (n, >= 2), got shape {rows.shape}")
        padding = rows[:, 2:] < 0
        if padding.size and np.any(padding[:, :-1] & ~padding[:, 1:]):
            raise ValueError("a query matrix must put its padding after the conditioning set")
        if np.any(rows[:, :2] < 0):
            raise ValueError("a query matrix names negative variables")
        return rows
    seq = cast("Sequence[Sequence]", queries)
    keys = seq if normalised else [normalise_query(*q) for q in seq]
    width = 2 + max((len(q[2]) for q in keys), default=0)
    out = np.full((len(keys), width), -1, dtype=np.int64)
    for i, (x, y, z) in enumerate(keys):
        out[i, : 2 + len(z)] = (x, y, *z)
    return out


def rows_to_queries(rows: np.ndarray) -> list[Query]:
    """The ``(x, y, S)`` tuples of rows ``[x, y, S..., -1 padding]`` (padding dropped)."""
    return [(r[0], r[1], tuple(v for v in r[2:] if v >= 0)) for r in rows.tolist()]


def _positions_by_size(rows: np.ndarray) -> dict[int, np.ndarray]:
    """Row positions grouped by |S| (ascending positions): batches are vectorised one size at a
    time."""
    if rows.shape[1] == 2 or bool(rows[:, -1].min(initial=0) >= 0):  # one size: no padding
        return {rows.shape[1] - 2: np.arange(rows.shape[0])} if rows.shape[0] else {}
    sizes = (rows[:, 2:] >= 0).sum(axis=1)
    return {int(k): np.flatnonzero(sizes == k) for k in np.unique(sizes)}


def row_products(matrix: np.ndarray) -> np.ndarray:
    """``matrix.prod(axis=1)`` one column at a time: a batch is millions of rows of a few
    columns, where numpy's reduction along the short axis is several times slower. Integers
    multiply in int64, as ``prod`` does for narrower ones."""
    out = np.ones(matrix.shape[0], dtype=np.int64 if matrix.dtype.kind in "biu" else matrix.dtype)
    for column in matrix.T:
        out *= column
    return out


def make_layout(
    queries: Sequence[Sequence] | np.ndarray,
    cards: Sequence[int] | np.ndarray,
    max_cells: int | None = DEFAULT_MAX_CELLS,
    *,
    normalised: bool = False,
) -> TableLayout:
    """The table layout of a batch; raises :class:`TableTooLargeError` naming an oversized query.

    ``queries``: ``(x, y, S)`` tuples, a query matrix (rows ``[x, y, S..., -1 padding]``, taken
    as normalised) or fresh queries. ``normalised=True`` takes tuples as they are (a client
    laying out the server's already-normalised batch), skipping the per-query normalisation.
    ``max_cells=None``: no per-query limit (a sparse count, :func:`sparse_local_tables`, never
    allocates the dense tables); the flat cell indices must still fit in int64.
    """
    limit = MAX_FLAT_CELLS if max_cells is None else min(int(max_cells), MAX_FLAT_CELLS)
    cards_arr = check_cards(cards)
    rows = query_rows(queries, normalised)
    shapes = np.empty((rows.shape[0], 3), dtype=np.int64)
    for k, members in _positions_by_size(rows).items():
        block = rows[:, : k + 2] if members.size == rows.shape[0] else rows[members, : k + 2]
        bad = block >= cards_arr.size
        if bad.any():
            r, c = np.argwhere(bad)[0]
            x, y, *z = block[r].tolist()
            raise KeyError(
                f"query {(x, y, tuple(z))} uses variable {int(block[r, c])} but only "
                f"{cards_arr.size} cards are known"
            )
        level_counts = cards_arr[block]
        # in floats (no overflow), a superset of the tables over the limit, then exact
        too_big = np.flatnonzero(row_products(level_counts.astype(np.float64)) > limit * 0.999)
        if too_big.size:
            x, y, *z = block[too_big[0]].tolist()
            cells = math.prod(int(cards_arr[v]) for v in (x, y, *z))
            if cells > limit:
                raise TableTooLargeError(
                    f"the table of query x={x}, y={y}, S={tuple(z)} would have {cells} cells "
                    f"(limit {limit}); reduce the conditioning set size or the level counts"
                )
        shapes[members, 0] = row_products(level_counts[:, 2:])
        shapes[members, 1] = level_counts[:, 0]
        shapes[members, 2] = level_counts[:, 1]
    offsets = np.zeros(rows.shape[0] + 1, dtype=np.int64)
    sizes = row_products(shapes)
    near_limit = float(sizes.sum(dtype=np.float64)) > MAX_FLAT_CELLS / 2  # exact only then
    if near_limit and sum(int(v) for v in sizes.tolist()) > MAX_FLAT_CELLS:
        raise TableTooLargeError(
            f"the {rows.shape[0]} tables of this batch have more than {MAX_FLAT_CELLS} cells in "
            "all, too many to index; split the batch"
        )
    np.cumsum(sizes, out=offsets[1:])
    return TableLayout(rows, cards_arr, shapes, offsets)


def table_cells(queries: Sequence[Query] | np.ndarray, cards: np.ndarray) -> np.ndarray:
    """Each query's dense table size ``prod(cards of x, y, S)`` as float64 (exact below 2**53;
    beyond that only its comparison with a cell limit matters), vectorised per |S|."""
    rows = query_rows(queries, normalised=True)
    cells = np.empty(rows.shape[0])
    levels = np.asarray(cards, dtype=np.float64)
    for k, members in _positions_by_size(rows).items():
        cells[members] = row_products(levels[rows[members, : k + 2]])
    return cells


def _incomplete(codes_t: np.ndarray, xs: np.ndarray, ys: np.ndarray, ss: np.ndarray) -> np.ndarray:
    """``(queries, rows)``: whether the row misses x, y or a member of S of each query."""
    missing = codes_t[xs] < 0
    missing |= codes_t[ys] < 0
    for j in range(ss.shape[1]):
        missing |= codes_t[ss[:, j]] < 0
    return missing


def _pair_runs(xs: np.ndarray, ys: np.ndarray, n_vars: int) -> np.ndarray | None:
    """Where each run of equal ``(x, y)`` starts, when runs are at least two queries long on
    average (a PC depth asks each pair given many sets, one after the other); else None."""
    pair = xs * n_vars + ys
    starts = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
    return starts if 2 * starts.size <= pair.size else None


def count_tables(
    codes_t: np.ndarray, layout: TableLayout, dtype: np.dtype | type = np.int64
) -> np.ndarray:
    """Fill the table vector: one bincount per chunk of queries with equal |S|.

    ``codes_t`` is the (p, n) transposed matrix of *validated* codes (see :func:`check_codes`);
    a row with :data:`MISSING_CODE` in any of a query's variables is not counted in its table.
    Each row's cell index is the mixed-radix code ``((s_0 * c_s1 + s_1) ... * c_x + x) * c_y + y``
    plus the query's offset inside the chunk.
    Chunks stay small (cache-friendly) and use int32 indices when they fit.

    Queries over the same variables (``x _||_ y | z`` and ``x _||_ z | y``: a PC depth asks many)
    are one joint table read in different axis orders: when a group's queries share their
    variable sets, each set's joint table is counted once and every query's table is read from
    it (the same counts, over the rows complete on those variables).

    ``dtype``: of the vector (a count is at most the rows: a client replying with its counts
    asks for the smallest type that holds them, :func:`count_type`, and skips a widening pass).
    """
    out = np.zeros(layout.total, dtype=dtype)
    n = codes_t.shape[1]
    if n == 0 or layout.n_queries == 0:
        return out
    if int(layout.cards.max()) < 2**31:
        codes_t = codes_t.astype(np.int32, copy=False)
    plans = layout.joint_plans
    # the level bitsets, built on first use; None where they would be too large to build
    bits: list[np.ndarray] | None = (
        [] if layout.level_base.levels * words_of(n) * 8 <= MAX_BIT_BYTES else None
    )
    for k, members in _positions_by_size(layout.rows).items():
        block = layout.rows[members, : k + 2]
        if k not in plans:  # worked out once per layout: the clients of a process share it
            plans[k] = _joint_plan(block, layout, members, codes_t.shape[1])
        plan = plans[k]
        if plan is None:
            _count_group(codes_t, layout, ("queries", k), block, layout.offsets[members], out, bits)
            continue
        as_queries, starts, index, target = plan
        tables = np.zeros(int(starts[-1]), dtype=np.int64)
        _count_group(codes_t, layout, ("joint", k), as_queries, starts[:-1], tables, bits)
        out[target] = tables[index]
    return out


def _count_group(
    codes_t: np.ndarray,
    layout: TableLayout,
    key: tuple[str, int],
    rows: np.ndarray,
    offsets: np.ndarray,
    out: np.ndarray,
    bits: list[np.ndarray] | None,
) -> None:
    """Count the tables of ``rows`` (one size) into ``out`` at ``offsets``: those of at most
    :data:`BIT_TABLE_CELLS` cells by level bitsets (``bits`` holds the bitsets once built; None:
    too large to build), the rest row by row."""
    if bits is not None:
        if key not in layout.bit_plans:  # once per layout, as the joint plans
            layout.bit_plans[key] = _bit_split(rows, layout, offsets)
        small, rest = layout.bit_plans[key]
        if small is not None:
            if not bits:
                bits.append(level_bits(codes_t, layout.level_base))
            work = bit_words(small, bits[0].shape[1])
            workers = min(counting_threads(), max(1, work // THREADED_VISITS))
            count_by_bits(bits[0], small, out, workers)
            if rest is None:
                return
            rows, offsets = rows[rest], offsets[rest]
    _count_rows(codes_t, rows, layout.cards, offsets, out)


def _bit_split(
    rows: np.ndarray, layout: TableLayout, offsets: np.ndarray
) -> tuple[list[CellPart] | None, np.ndarray | None]:
    """The cell plan of the tables of ``rows`` small enough for bitsets (None: none is), and the
    positions of the others (None: none is left)."""
    cells = row_products(layout.cards[rows])
    small = cells <= BIT_TABLE_CELLS
    if not small.any():
        return None, np.arange(len(rows))
    plan = cell_plan(rows[small], cells[small], layout.cards, offsets[small], layout.level_base)
    return plan, (None if small.all() else np.flatnonzero(~small))


#: Row visits one cell read from a joint table is worth (the read costs a few gathers).
_JOINT_READ_COST = 4


def _joint_plan(
    block: np.ndarray, layout: TableLayout, members: np.ndarray, n_rows: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, slice | np.ndarray] | None:
    """How a group's queries ``[x, y, S...]`` (S not empty) read their tables from their variable
    sets' joint tables: ``(the sets as queries, their tables' starts, each query cell's index in
    those tables, where the cells go in the layout's vector)``; None when the rows a shared set
    saves do not pay for reading its cells.

    A set's joint table is the query (second-to-last, last | the others) of its sorted variables
    (axes in sorted order, row-major); a query's cell maps to it through the strides of its own
    axes (S..., x, y)."""
    if block.shape[1] < 3:
        return None
    variables = np.sort(block, axis=1)
    sets, inverse = np.unique(variables, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    cards = layout.cards.astype(np.int64)
    axes = np.concatenate((block[:, 2:], block[:, :2]), axis=1)  # the query's table axis order
    axis_cards = cards[axes]
    sizes = row_products(axis_cards)
    if n_rows * (len(block) - len(sets)) <= _JOINT_READ_COST * int(sizes.sum()):
        return None
    width = sets.shape[1]
    set_cards = cards[sets]
    strides = np.ones_like(set_cards)
    for j in range(width - 2, -1, -1):
        strides[:, j] = strides[:, j + 1] * set_cards[:, j + 1]
    where = np.argmax(sets[inverse][:, None, :] == axes[:, :, None], axis=2)  # sorted position
    axis_strides = np.take_along_axis(strides[inverse], where, axis=1)
    set_sizes = row_products(set_cards)
    starts = np.concatenate(([0], np.cumsum(set_sizes)))
    query = np.repeat(np.arange(len(block)), sizes)
    local = np.arange(query.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    index = starts[inverse][query]
    for j in range(width - 1, -1, -1):  # the last axis varies fastest
        digit = local % axis_cards[query, j]
        local //= axis_cards[query, j]
        index += digit * axis_strides[query, j]
    first, last = int(members[0]), int(members[-1])
    target: slice | np.ndarray
    if last - first + 1 == members.size:
        target = slice(int(layout.offsets[first]), int(layout.offsets[last + 1]))
    else:
        target = np.repeat(layout.offsets[members], sizes)
        target += np.arange(target.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    as_queries = np.concatenate((sets[:, width - 2 :], sets[:, : width - 2]), axis=1)
    return as_queries, starts, index, target


#: Row visits of a count from which its chunks run in threads (numpy's gathers, arithmetic and
#: bincount release the GIL: about 1.5x on two cores).
THREADED_VISITS = 2**24


def counting_threads() -> int:
    """Threads this process may count and test in: the cores it may run on (all of the
    machine's where the system cannot say), at most ``OMP_NUM_THREADS`` where that is set (as
    BLAS reads it: a process sharing the cores with other workers, as a sweep's or a Ray
    simulation's do, counts in one thread)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    limit = os.environ.get("OMP_NUM_THREADS", "")
    if limit.isdigit() and int(limit) > 0:
        return min(cores, int(limit))
    return cores


def _count_rows(
    codes_t: np.ndarray, rows: np.ndarray, cards: np.ndarray, offsets: np.ndarray, out: np.ndarray
) -> None:
    """Count the tables of ``rows`` (queries ``[x, y, S...]`` of one size) into ``out`` at
    ``offsets`` (ascending), a chunk of queries per bincount; a large count's chunks in threads
    (each writes its own tables)."""
    n = codes_t.shape[1]
    chunk = max(1, _COUNT_CHUNK_ELEMENTS // n)
    starts = list(range(0, len(rows), chunk))
    has_missing = bool(codes_t.size) and int(codes_t.min()) < 0
    sizes = row_products(cards[rows])

    def count_span(span: list[int]) -> None:
        for start in span:
            _count_chunk(codes_t, rows, cards, offsets, out, sizes, start, chunk, has_missing)

    workers = min(counting_threads(), len(starts), max(1, len(rows) * n // THREADED_VISITS))
    if workers < 2:
        count_span(starts)
        return
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(count_span, [starts[w::workers] for w in range(workers)]))


#: Queries per (x, y) run from which a chunk adds each run's pair code by broadcast.
_LONG_RUN = 16


def _count_chunk(
    codes_t: np.ndarray,
    rows: np.ndarray,
    cards: np.ndarray,
    offsets: np.ndarray,
    out: np.ndarray,
    sizes_all: np.ndarray,
    start: int,
    chunk: int,
    has_missing: bool,
) -> None:
    """One chunk of :func:`_count_rows`: the tables of ``rows[start : start + chunk]``."""
    k = rows.shape[1] - 2
    sl = slice(start, start + chunk)
    xs, ys, ss = rows[sl, 0], rows[sl, 1], rows[sl, 2:]
    local_sizes = sizes_all[sl]
    local_offsets = np.concatenate(([0], np.cumsum(local_sizes)[:-1]))
    n_cells = int(local_sizes.sum())
    dtype = codes_t.dtype if n_cells < 2**31 else np.int64
    radix = cards.astype(dtype)
    cell = codes_t[ss[:, 0] if k else xs].astype(dtype, copy=False)
    for j in range(1, k):
        cell *= radix[ss[:, j]][:, None]
        cell += codes_t[ss[:, j]]
    runs = _pair_runs(xs, ys, cards.size) if k else None
    if runs is not None:  # (x, y) repeats over S: its code x * c_y + y made once per run
        xy = codes_t[xs[runs]].astype(dtype, copy=False) * radix[ys[runs]][:, None]
        xy += codes_t[ys[runs]]
        cell *= (radix[xs] * radix[ys])[:, None]
        cell += local_offsets.astype(dtype)[:, None]
        if runs.size * _LONG_RUN > xs.size:  # short runs: one repeat beats a loop over them
            cell += np.repeat(xy, np.diff(np.r_[runs, xs.size]), axis=0)
        else:  # long runs (a PC level by variable set): broadcast over each, never repeated
            ends = [*runs[1:].tolist(), xs.size]
            for run, (first, end) in enumerate(zip(runs.tolist(), ends, strict=True)):
                cell[first:end] += xy[run]
    else:
        if k:
            cell *= radix[xs][:, None]
            cell += codes_t[xs]
        cell *= radix[ys][:, None]
        cell += codes_t[ys]
        cell += local_offsets.astype(dtype)[:, None]
    if has_missing:  # test-wise deletion: the row goes to a spare cell, then away
        cell[_incomplete(codes_t, xs, ys, ss)] = n_cells
        counts = np.bincount(cell.ravel(), minlength=n_cells + 1)[:n_cells]
    else:
        counts = np.bincount(cell.ravel(), minlength=n_cells)
    first = offsets[start]
    target_sizes = offsets[sl] - first - local_offsets
    if not target_sizes.any():  # contiguous tables: one slice
        out[first : first + n_cells] = counts
    else:
        target = np.repeat(offsets[sl] - local_offsets, local_sizes)
        target += np.arange(target.size)
        out[target] = counts


def local_tables(
    codes: np.ndarray,
    cards: Sequence[int] | np.ndarray,
    queries: Sequence[Sequence] | TableLayout,
    *,
    variables: Sequence[str] | None = None,
    client: str | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
    allow_missing: bool = False,
    dtype: np.dtype | type = np.int64,
) -> tuple[np.ndarray, TableLayout]:
    """Contingency tables of a batch of queries over one client's codes, as one vector (int64,
    or ``dtype``, as :func:`count_tables`).

    ``queries`` may be a ready :class:`TableLayout` (then its cards must equal ``cards``).
    Errors name the client and variable (non-integer codes, codes outside the global level set,
    one-level variables, oversized tables). ``allow_missing``: codes may be
    :data:`MISSING_CODE` (each table counts the rows complete on its variables).
    """
    codes_i64, cards_arr = check_codes(codes, cards, variables, client, allow_missing=allow_missing)
    if isinstance(queries, TableLayout):
        layout = queries
        if not np.array_equal(layout.cards, cards_arr):
            raise ValueError(f"the layout was built for other cards than those{_where(client)}")
    else:
        layout = make_layout(queries, cards_arr, max_cells)
    return count_tables(np.ascontiguousarray(codes_i64.T), layout, dtype), layout


def count_type(rows: int) -> np.dtype:
    """The smallest unsigned type that holds any count over ``rows`` rows."""
    return np.min_scalar_type(max(int(rows), 0))


def sum_tables(vectors: Sequence[np.ndarray]) -> np.ndarray:
    """Add the clients' table vectors (the server-side view of secure aggregation)."""
    if not vectors:
        raise ValueError("no table vectors to sum")
    arrays = [np.asarray(v) for v in vectors]
    for k, a in enumerate(arrays):
        if a.ndim != 1 or a.shape != arrays[0].shape:
            raise ValueError(
                f"table vector {k} has shape {a.shape}, expected {arrays[0].shape} "
                "(all clients must use the same layout)"
            )
        if a.dtype.kind not in "iu":
            raise TypeError(f"table vector {k} has dtype {a.dtype}; counts must be integers")
    return np.stack(arrays).sum(axis=0, dtype=np.int64)


# ------------------------------------------------------------------------------- sparse tables
def count_sparse_tables(codes_t: np.ndarray, layout: TableLayout) -> tuple[np.ndarray, np.ndarray]:
    """The nonzero cells of :func:`count_tables`'s vector, without allocating it: ``(flat
    indices, sorted ascending, int64; counts, int64)``. Memory is one chunk of cell codes plus
    at most one entry per row and query, whatever the tables' dense size."""
    n = codes_t.shape[1]
    if n == 0 or layout.n_queries == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    cards = layout.cards.astype(np.int64)
    chunk = max(1, _COUNT_CHUNK_ELEMENTS // n)
    has_missing = bool(codes_t.size) and int(codes_t.min()) < 0
    indices: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    for k, members in _positions_by_size(layout.rows).items():
        rows = layout.rows[members, : k + 2]
        for start in range(0, len(members), chunk):
            part = rows[start : start + chunk]
            qi = members[start : start + chunk]
            cell = np.zeros((len(part), n), dtype=np.int64)
            for j in range(k):  # S[0] most significant, then x, then y (the dense order)
                cell *= cards[part[:, 2 + j]][:, None]
                cell += codes_t[part[:, 2 + j]]
            for j in (0, 1):
                cell *= cards[part[:, j]][:, None]
                cell += codes_t[part[:, j]]
            cell += layout.offsets[qi][:, None]
            if has_missing:  # test-wise deletion: marked, then dropped after counting
                cell[_incomplete(codes_t, part[:, 0], part[:, 1], part[:, 2:])] = -1
            found, found_counts = np.unique(cell, return_counts=True)
            if has_missing and found.size and found[0] < 0:
                found, found_counts = found[1:], found_counts[1:]
            indices.append(found)
            counts.append(found_counts.astype(np.int64))
    flat = np.concatenate(indices)
    order = np.argsort(flat, kind="stable")
    return flat[order], np.concatenate(counts)[order]


def sparse_local_tables(
    codes: np.ndarray,
    cards: Sequence[int] | np.ndarray,
    layout: TableLayout,
    *,
    variables: Sequence[str] | None = None,
    client: str | None = None,
    allow_missing: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """One client's nonzero table cells of a batch (see :func:`count_sparse_tables`;
    ``allow_missing`` as in :func:`local_tables`)."""
    codes_i64, cards_arr = check_codes(codes, cards, variables, client, allow_missing=allow_missing)
    if not np.array_equal(layout.cards, cards_arr):
        raise ValueError(f"the layout was built for other cards than those{_where(client)}")
    return count_sparse_tables(np.ascontiguousarray(codes_i64.T), layout)


def check_sparse_tables(indices: np.ndarray, counts: np.ndarray, total: int) -> str | None:
    """Why a client's sparse reply is malformed (None if it is well formed)."""
    indices, counts = np.asarray(indices), np.asarray(counts)
    if indices.ndim != 1 or counts.shape != indices.shape:
        return f"sparse tables of shapes {indices.shape} and {counts.shape}, expected two equal 1-d"
    if indices.dtype.kind not in "iu" or counts.dtype.kind not in "iu":
        return "sparse tables must hold integer indices and counts"
    # compact replies come in narrow (unsigned) types: check in int64, where a difference can
    # be negative
    indices, counts = indices.astype(np.int64), counts.astype(np.int64)
    if indices.size and (indices.min() < 0 or indices.max() >= total):
        return f"sparse table indices outside 0..{total - 1}"
    if counts.size and counts.min() < 1:
        return "sparse table counts must be positive"
    if indices.size > 1 and np.any(np.diff(indices) <= 0):
        return "sparse table indices must be strictly increasing"
    return None


def merge_sparse_tables(
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """Sum the clients' sparse tables (the sparse :func:`sum_tables`): exact int64 sums."""
    if not parts:
        raise ValueError("no sparse tables to merge")
    flat = np.concatenate([np.asarray(i, dtype=np.int64) for i, _ in parts])
    counts = np.concatenate([np.asarray(c, dtype=np.int64) for _, c in parts])
    if flat.size == 0:
        return flat, counts
    order = np.argsort(flat, kind="stable")
    flat, counts = flat[order], counts[order]
    starts = np.flatnonzero(np.concatenate(([True], flat[1:] != flat[:-1])))
    return flat[starts], np.add.reduceat(counts, starts)
