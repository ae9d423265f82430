"""What an adjacency search records (:class:`Skeleton`) and the batch it asks when its tests are
all new (:class:`FreshQueries`): shared by the full depths (:mod:`.skeleton`) and the
until-removed ones (:mod:`.edge_rounds`)."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedcausal_flwr.stats.batch_oracle import Query
from fedcausal_flwr.stats.tables import query_rows, rows_to_queries

Pair = tuple[int, int]


@dataclass
class Skeleton:
    """Outcome of an adjacency search."""

    adjacency: np.ndarray  # bool (p, p), symmetric
    # dicts, or PairRecords when a streamed depth 0 recorded its pairs as arrays
    sepsets: MutableMapping[Pair, list[tuple[int, ...]]] = field(default_factory=dict)
    removed_at: MutableMapping[Pair, int] = field(default_factory=dict)
    max_pvalue: MutableMapping[Pair, float] = field(default_factory=dict)
    depths: list[dict] = field(default_factory=list)  # {"depth", "tests", "removed"} per batch
    #: until-removed depths (:mod:`.edge_rounds`): how many of its sets a removed pair asked, and
    #: each such depth's pools, for the sets a later phase asks of it
    asked: dict[Pair, int] = field(default_factory=dict)
    pools: dict[int, Any] = field(default_factory=dict)

    @property
    def n_tests(self) -> int:
        return sum(lv["tests"] for lv in self.depths)


def pair_key(x: int, y: int) -> Pair:
    return (x, y) if x < y else (y, x)


def full_depth_order(
    sets: Sequence[tuple[int, ...]], x: int, adjacency: np.ndarray
) -> list[tuple[int, ...]]:
    """A pair ``(x, y)``'s separating sets (sorted tuples) as a full depth lists them, each once:
    ``x``'s side first (every member adjacent to ``x`` in the depth's ``adjacency``), then
    ``y``'s, each in combinations order (lexicographic)."""
    found = sorted(set(sets))
    from_x = [s for s in found if adjacency[x, list(s)].all()]
    return from_x + [s for s in found if not adjacency[x, list(s)].all()]


def keep_largest(largest: MutableMapping[Pair, float], key: Pair, p: float) -> None:
    """Record ``p`` for the pair ``key`` if it is the largest seen (a pair's deciding p-value)."""
    if p > largest.get(key, -1.0):
        largest[key] = float(p)


class FreshQueries(Sequence[Query]):
    """A batch of distinct, normalised tests never asked before (a cache keeps no answer), held
    as one int64 matrix ``rows`` of ``[x, y, S...]`` (one conditioning-set size); it reads as a
    sequence of ``(x, y, S)``."""

    def __init__(self, rows: np.ndarray | Sequence[Query], statistics_wanted: bool = False):
        if not isinstance(rows, np.ndarray):
            rows = query_rows(rows, normalised=True)
            if rows.size and rows.min() < 0:
                raise ValueError("fresh queries hold one conditioning-set size")
        self.rows = rows
        #: asked by a search that orders its later tests by dependence (an until-removed
        #: search's depth 0): an answerer that computes test statistics leaves them in
        #: :attr:`statistics`, one per test (larger: more dependent); one that does not leaves
        #: None and the search orders by the p-values
        self.statistics_wanted = statistics_wanted
        self.statistics: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def __getitem__(self, i):
        if isinstance(i, slice):
            return rows_to_queries(self.rows[i])
        return rows_to_queries(self.rows[[i]])[0]

    def __iter__(self) -> Iterator[Query]:
        return iter(rows_to_queries(self.rows))
