"""Counting small contingency tables by level bitsets.

A variable's level is a bitset over the rows (bit ``r`` set where row ``r`` has that level); a
table cell's count is the popcount of the AND of its variables' level bitsets. A cell then costs
one 64-bit word per 64 rows, where counting row by row (:func:`~.tables.count_tables`' cell codes
and ``np.bincount``) costs a few passes per row and table: tables of up to
:data:`BIT_TABLE_CELLS` cells are counted here, larger ones row by row. The counts are the same
either way; a missing value (a negative code) is in no level's bitset, so the row drops out of
every table over that variable, as test-wise deletion has it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Largest table (cells) counted by bitsets: a cell costs a word per 64 rows, a table counted row
#: by row a few passes per row, so the two meet near 64 cells (measured on ALARM's depth-1 tables
#: at 1,000 rows: 4.7 ns a word against 5.8 ns a row visit).
BIT_TABLE_CELLS = 64
#: Largest level bitset matrix (bytes) built for one count; beyond it, every table row by row.
MAX_BIT_BYTES = 2**28
#: 64-bit words gathered per chunk of cells (the working set of one step).
_CHUNK_WORDS = 2**16


@dataclass(frozen=True)
class LevelBase:
    """Where each variable's levels start in a level bitset matrix: ``start[v]`` (-1 for a
    variable the batch does not use), the variables used (ascending) and the matrix's rows."""

    start: np.ndarray
    used: np.ndarray
    levels: int

    @classmethod
    def of(cls, used: np.ndarray, cards: np.ndarray) -> LevelBase:
        start = np.full(cards.size, -1, dtype=np.int64)
        ends = np.cumsum(cards[used])
        start[used] = ends - cards[used]
        return cls(start, used, int(ends[-1]) if ends.size else 0)


def words_of(rows: int) -> int:
    """64-bit words of one level bitset over ``rows`` rows."""
    return -(-rows // 64)


def level_bits(codes_t: np.ndarray, base: LevelBase) -> np.ndarray:
    """The ``(levels, words)`` uint64 bitset matrix of the variables ``base`` places, from the
    ``(p, n)`` validated codes (a negative code sets no bit)."""
    n = codes_t.shape[1]
    width = 64 * words_of(n)
    out = np.zeros((base.levels, width // 8), dtype=np.uint8)
    ends = np.append(base.start[base.used][1:], base.levels)  # each variable's last level + 1
    step = max(1, 2**24 // max(1, width))  # level rows of one step's one-hot matrix
    first = 0
    while first < base.used.size:  # variables in groups whose one-hot rows fit in a step
        low = int(base.start[base.used[first]])
        last = max(first + 1, int(np.searchsorted(ends, low + step, side="right")))
        group = base.used[first:last]
        hit = np.zeros((int(ends[last - 1]) - low, width), dtype=bool)
        codes = codes_t[group]
        present = codes >= 0
        level_row = (base.start[group] - low)[:, None] + codes
        hit[level_row[present], np.nonzero(present)[1]] = True
        out[low : low + hit.shape[0]] = np.packbits(hit, axis=1, bitorder="little")
        first = last
    return out.view(np.uint64)


@dataclass(frozen=True)
class CellPlan:
    """Each cell's table axes as level rows of the bitset matrix: the last two axes (x, y) as
    one of the distinct level pairs ``pairs`` (``(2, pairs)``; ``pair_of[cell]``), the others
    (S) in ``levels`` (``(|S|, cells)``); and where each count goes in the table vector (a slice
    when the cells are one contiguous run)."""

    pairs: np.ndarray
    pair_of: np.ndarray
    levels: np.ndarray
    target: slice | np.ndarray


def cell_plan(
    rows: np.ndarray, cards: np.ndarray, offsets: np.ndarray, base: LevelBase
) -> CellPlan:
    """The cells of queries ``rows`` (``[x, y, S...]``, one size) whose tables start at
    ``offsets``: a table's cells run in its axis order ``(S..., x, y)``, row-major. Cells of
    many tables share their (x, y) levels (a PC depth asks each pair given many sets): their
    AND is taken once per level pair."""
    axes = np.concatenate((rows[:, 2:], rows[:, :2]), axis=1)
    axis_cards = cards[axes]
    sizes = axis_cards[:, 0].copy()
    for j in range(1, axes.shape[1]):
        sizes *= axis_cards[:, j]
    starts = np.cumsum(sizes) - sizes
    query = np.repeat(np.arange(len(rows)), sizes)
    local = np.arange(query.size) - starts[query]
    levels = np.empty((axes.shape[1], query.size), dtype=np.intp)
    for j in range(axes.shape[1] - 1, -1, -1):  # the last axis varies fastest
        card = axis_cards[query, j]
        levels[j] = base.start[axes[query, j]] + local % card
        local //= card
    pair_keys, pair_of = np.unique(levels[-2] * base.levels + levels[-1], return_inverse=True)
    pairs = np.stack(np.divmod(pair_keys, base.levels))
    total = int(sizes.sum())
    first = int(offsets[0]) if len(offsets) else 0
    target: slice | np.ndarray
    if len(offsets) and np.array_equal(offsets - first, starts):
        target = slice(first, first + total)
    else:
        target = offsets[query] + (np.arange(total) - starts[query])
    return CellPlan(pairs, pair_of.ravel(), levels[:-2].copy(), target)


def count_by_bits(bits: np.ndarray, plan: CellPlan, out: np.ndarray) -> None:
    """Write every planned cell's count into ``out``: the popcount of the AND of its level
    bitsets (its (x, y) pair's AND taken once)."""
    pair_bits = bits[plan.pairs[0]]
    pair_bits &= bits[plan.pairs[1]]
    cells, words = plan.pair_of.size, bits.shape[1]
    counts = np.empty(cells, dtype=np.int64)
    # a row of popcounts summed as a product with ones (BLAS), exact in the float's mantissa
    ones = np.ones(words, dtype=np.float32 if 64 * words < 2**24 else np.float64)
    chunk = max(1, _CHUNK_WORDS // max(1, words))
    for start in range(0, cells, chunk):
        stop = min(cells, start + chunk)
        joint = pair_bits[plan.pair_of[start:stop]]
        for axis in plan.levels:
            joint &= bits[axis[start:stop]]
        ones_per_word = np.bitwise_count(joint)
        if words == 1:
            counts[start:stop] = ones_per_word[:, 0]
        else:
            counts[start:stop] = ones_per_word.astype(ones.dtype) @ ones
    out[plan.target] = counts
