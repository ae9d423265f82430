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

from concurrent.futures import ThreadPoolExecutor
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
class CellPart:
    """A run of cells: their table axes as level rows of the bitset matrix and where their
    counts go in the table vector (a slice when the run is contiguous there). With a
    conditioning set, two of a cell's axes are one of the run's distinct level pairs
    (``pairs``, ``(2, pairs)``; ``pair_of[cell]``) and ``levels`` holds the others; without one,
    ``levels`` holds x and y and ``pairs`` is None. (Which two axes make the pair does not
    change a count: AND is commutative.)"""

    pairs: np.ndarray | None
    pair_of: np.ndarray | None
    levels: np.ndarray
    target: slice | np.ndarray


#: Cells of one part of a cell plan (its arrays are a few times this many int32).
_PART_CELLS = 2**16


def cell_plan(
    rows: np.ndarray, sizes: np.ndarray, cards: np.ndarray, offsets: np.ndarray, base: LevelBase
) -> list[CellPart]:
    """The cells of queries ``rows`` (``[x, y, S...]``, one size) whose tables of ``sizes``
    cells start at ``offsets``, in parts of about :data:`_PART_CELLS` cells: a table's cells run
    in its axis order ``(S..., x, y)``, row-major. Cells of many tables share level pairs (a PC
    depth asks each pair given many sets): their AND is taken once per level pair of a part."""
    axes = np.concatenate((rows[:, 2:], rows[:, :2]), axis=1)
    axis_cards = cards[axes]
    ends = np.cumsum(sizes)
    parts = []
    first = 0
    while first < len(rows):
        done = int(ends[first - 1]) if first else 0
        last = max(first + 1, int(np.searchsorted(ends, done + _PART_CELLS, side="right")))
        span = slice(first, last)
        parts.append(_part(axes[span], axis_cards[span], sizes[span], offsets[span], base))
        first = last
    return parts


def _part(
    axes: np.ndarray,
    axis_cards: np.ndarray,
    sizes: np.ndarray,
    offsets: np.ndarray,
    base: LevelBase,
) -> CellPart:
    starts = np.cumsum(sizes) - sizes
    query = np.repeat(np.arange(len(axes)), sizes)
    local = np.arange(query.size) - starts[query]
    levels = np.empty((axes.shape[1], query.size), dtype=np.int32)
    for j in range(axes.shape[1] - 1, -1, -1):  # the last axis varies fastest
        card = axis_cards[query, j]
        levels[j] = base.start[axes[query, j]] + local % card
        local //= card
    total = query.size
    target: slice | np.ndarray
    if np.array_equal(offsets - offsets[0], starts):
        target = slice(int(offsets[0]), int(offsets[0]) + total)
    else:
        target = offsets[query] + (np.arange(total) - starts[query])
    if axes.shape[1] == 2:
        return CellPart(None, None, levels, target)
    # the two axes with the fewest distinct level pairs: the last two where queries run by
    # (x, y), the first two where joint tables run by their sorted variables
    width = axes.shape[1]
    choices = []
    for a, b in ((width - 2, width - 1), (0, 1)):
        keys = levels[a].astype(np.int64) * base.levels + levels[b]
        pair_keys, pair_of = np.unique(keys, return_inverse=True)
        choices.append((pair_keys.size, a, b, pair_keys, pair_of))
    _, a, b, pair_keys, pair_of = min(choices, key=lambda choice: choice[0])
    pairs = np.stack(np.divmod(pair_keys, base.levels)).astype(np.int32)
    others = [j for j in range(width) if j not in (a, b)]
    return CellPart(pairs, pair_of.ravel().astype(np.int32), levels[others], target)


def count_by_bits(
    bits: np.ndarray, plan: list[CellPart], out: np.ndarray, workers: int = 1
) -> None:
    """Write every planned cell's count into ``out``: the popcount of the AND of its level
    bitsets (a part's (x, y) level pairs ANDed once); the parts in ``workers`` threads (numpy's
    gathers, ANDs and popcounts release the GIL; each part writes its own cells)."""
    if workers < 2 or len(plan) < 2:
        for part in plan:
            _count_part(bits, part, out)
        return
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda part: _count_part(bits, part, out), plan))


def bit_words(plan: list[CellPart], words: int) -> int:
    """The 64-bit words a count of ``plan`` reads per gathered level (its cells x ``words``)."""
    return sum(part.levels.shape[1] for part in plan) * words


def _count_part(bits: np.ndarray, part: CellPart, out: np.ndarray) -> None:
    words = bits.shape[1]
    # a row of popcounts summed as a product with ones (BLAS), exact in the float's mantissa
    ones = np.ones(words, dtype=np.float32 if 64 * words < 2**24 else np.float64)
    step = max(1, _CHUNK_WORDS // words)
    cells = part.levels.shape[1]
    counts = np.empty(cells, dtype=np.int64)
    if part.pairs is not None:
        pair_bits = bits[part.pairs[0]]
        pair_bits &= bits[part.pairs[1]]
    for start in range(0, cells, step):
        stop = min(cells, start + step)
        if part.pair_of is None:
            joint = bits[part.levels[0, start:stop]]
        else:
            joint = pair_bits[part.pair_of[start:stop]]
        for axis in part.levels[(1 if part.pair_of is None else 0) :]:
            joint &= bits[axis[start:stop]]
        ones_per_word = np.bitwise_count(joint)
        if words == 1:
            counts[start:stop] = ones_per_word[:, 0]
        else:
            counts[start:stop] = ones_per_word.astype(ones.dtype) @ ones
    out[part.target] = counts
