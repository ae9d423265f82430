"""One joint table per variable set: the tests of a batch that share a set read one table.

The tests ``x _||_ y | {z}``, ``x _||_ z | {y}`` and ``y _||_ z | {x}`` all count the joint table of
``{x, y, z}``, in three axis orders: asking that table once, and testing each test on a transpose
of it, asks fewer tables at no cost to any test (the same cells, in the same order, give the same
statistic to the bit). An exact batch asks fewer cells and counts fewer rows (one table for 2.88
tests on munin's depth 1, for 2-3 on ALARM's); a differentially private one also pays less noise:
a row adds one count to every table of a batch, so a batch of ``T`` tables has L2 sensitivity
``sqrt(T)`` (:mod:`fedcausal_flwr.privacy.accounting`), and ``T`` is the number of distinct sets.

A set's table is the one :func:`~fedcausal_flwr.stats.tables.local_tables` counts for the query
``(a, b, (c, ...))`` with ``a < b < c < ...``: a C-order array over the axes ``(c, ..., a, b)``
(:mod:`fedcausal_flwr.stats.tables`).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .batch_oracle import Query
from .contingency import (
    TEST_CHUNK_CELLS,
    equal_rows,
    finish_tests,
    resolve_test_name,
    stacked_statistics,
)
from .tables import counting_threads, make_layout, query_rows, rows_to_queries

_PAD = np.iinfo(np.int64).max
#: Cells of a part's tables from which its tests run in threads.
THREADED_TEST_CELLS = 2**22


@dataclass(frozen=True)
class SetTables:
    """The distinct variable sets of a batch of tests (in the order the tests first name them),
    and which set each test reads."""

    tests: np.ndarray  # the tests as normalised rows [x, y, S..., -1 padding]
    sets: np.ndarray  # one row per distinct set: its variables ascending, -1 padding
    index: np.ndarray  # per test, the row of its set

    @classmethod
    def of(cls, queries: Sequence[Query] | np.ndarray) -> SetTables:
        tests = query_rows(queries)
        keyed = np.where(tests < 0, _PAD, tests)
        keyed.sort(axis=1)
        keyed[keyed == _PAD] = -1
        first, index = _distinct_rows(keyed)
        return cls(tests, keyed[first], index)

    @property
    def queries(self) -> list[Query]:
        """Each set as the query whose table it is (``(a, b, (c, ...))``, ascending)."""
        return rows_to_queries(self.sets)

    @cached_property
    def _readers(self) -> tuple[np.ndarray, np.ndarray]:
        """The tests ordered by their set, and where each set's tests start in that order."""
        order = np.argsort(self.index, kind="stable")
        starts = np.searchsorted(self.index[order], np.arange(len(self.sets) + 1))
        return order, starts

    def readers(self, first: int, end: int) -> np.ndarray:
        """Positions of the tests that read the sets ``first .. end - 1``."""
        order, starts = self._readers
        return order[starts[first] : starts[end]]

    def pvalues(
        self,
        counts: np.ndarray,
        first: int,
        end: int,
        cards: Sequence[int] | np.ndarray,
        test: str,
        *,
        noise_variance: float = 0.0,
        empty_strata_add_dof: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The tests of the sets ``first .. end - 1``, whose tables ``counts`` holds (their
        layout's order): ``(their positions, their p-values)``, each tested on its set's table
        transposed to its own axes ``(S..., x, y)`` (as
        :func:`~fedcausal_flwr.stats.contingency.discrete_tests` would test its own table; same
        options)."""
        cards = np.asarray(cards, dtype=np.int64)
        test_name = resolve_test_name(test)
        layout = make_layout(self.sets[first:end], cards, max_cells=None)
        if counts.shape != (layout.total,):
            raise ValueError(f"set tables of shape {counts.shape}, expected ({layout.total},)")
        readers = self.readers(first, end)
        at = self.index[readers] - first  # each test's set, in this part
        members = self.sets[first:end][at]
        tests = self.tests[readers]
        width = (members >= 0).sum(axis=1)
        # each test's x and y as positions in its (ascending) set
        x_at = np.argmax(members == tests[:, :1], axis=1)
        y_at = np.argmax(members == tests[:, 1:2], axis=1)
        q = readers.size
        stat, n = np.zeros(q), np.zeros(q, dtype=np.int64)
        dof, empty = np.zeros(q, dtype=np.int64), np.zeros(q, dtype=np.int64)
        member_cards = np.where(members >= 0, cards[np.maximum(members, 0)], 1)

        def test_chunk(qi: np.ndarray, shape: tuple, order: list, table_shape: tuple) -> None:
            t = counts[layout.offsets[at[qi]][:, None] + np.arange(int(np.prod(shape)))]
            # C order, as the test's own table: the sums run in the same order (same bits)
            t = np.ascontiguousarray(t.reshape(-1, *shape).transpose(order))
            t = t.reshape(-1, *table_shape)
            stat[qi], dof[qi], n[qi], empty[qi] = stacked_statistics(t, test_name, noise_variance)

        chunks = []
        for group in equal_rows(np.column_stack((width, x_at, y_at, member_cards))):
            w, i, j = int(width[group[0]]), int(x_at[group[0]]), int(y_at[group[0]])
            held = member_cards[group[0], :w]
            axes = [*range(2, w), 0, 1]  # the set table's axes, as positions in the set
            shape = tuple(int(held[a]) for a in axes)
            rest = [a for a in range(w) if a not in (i, j)]
            order = [0, *(1 + axes.index(a) for a in (*rest, i, j))]
            table_shape = (int(np.prod(held[rest])), int(held[i]), int(held[j]))
            step = max(1, TEST_CHUNK_CELLS // int(np.prod(shape)))
            for start in range(0, group.size, step):
                chunks.append((group[start : start + step], shape, order, table_shape))
        # numpy's passes release the GIL: a large part's chunks run in threads
        workers = min(counting_threads(), len(chunks), max(1, layout.total // THREADED_TEST_CELLS))
        if workers < 2:
            for chunk in chunks:
                test_chunk(*chunk)
        else:
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(lambda chunk: test_chunk(*chunk), chunks))
        result = finish_tests(stat, dof, n, empty, np.ones(q), None, np.nan, empty_strata_add_dof)
        return readers, result.pvalue


def _distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(where each distinct row first occurs, ascending; each row's rank among them)``: rows of
    small integers are keyed as one int64 each (``np.unique(axis=0)`` sorts far slower)."""
    if not rows.size:
        return np.zeros(0, dtype=np.int64), np.zeros(rows.shape[0], dtype=np.int64)
    base = int(rows.max()) + 2  # -1 padding keyed as 0
    if rows.shape[1] * np.log2(base) < 62:
        key = np.zeros(rows.shape[0], dtype=np.int64)
        for column in rows.T:
            key = key * base + (column + 1)
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    else:
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return np.sort(first), rank[inverse.reshape(-1)]
