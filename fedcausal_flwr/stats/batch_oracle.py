"""The batched conditional-independence oracle every constraint-based engine talks to.

Engines never ask one test at a time: they hand a whole batch (all tests of one PC depth) to
:meth:`CIOracle.test_batch` and get p-values back. A local oracle computes them from its own data; a
federated oracle turns the batch into one Flower round. Answers are cached under the normalised key
``(min(x, y), max(x, y), sorted(S))`` so a test asked twice (from x's and from y's side) costs once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

Query = tuple[int, int, tuple[int, ...]]


def normalise_query(x: int, y: int, s: Sequence[int]) -> Query:
    """The cache key of ``x _||_ y | S``: symmetric in x, y and order-free in S."""
    x, y = int(x), int(y)
    # (most tests of a search condition on at most one variable: no sort for them)
    s_sorted = tuple(sorted(map(int, s))) if len(s) > 1 else (int(s[0]),) if len(s) else ()
    if x == y:
        raise ValueError(f"a CI test needs two different variables, got x = y = {x}")
    if s_sorted:
        if x in s_sorted or y in s_sorted:
            raise ValueError(f"conditioning set {s_sorted} contains a tested variable ({x}, {y})")
        if len(s_sorted) > 1 and len(set(s_sorted)) != len(s_sorted):
            raise ValueError(f"conditioning set {s_sorted} has repeated variables")
    return (x, y, s_sorted) if x < y else (y, x, s_sorted)


def by_conditioning_size(queries: Sequence[Sequence]) -> dict[int, list[int]]:
    """Query positions grouped by |S| (in order): batches are vectorised one size at a time."""
    groups: dict[int, list[int]] = {}
    for i, (_, _, s) in enumerate(queries):
        groups.setdefault(len(s), []).append(i)
    return groups


class CIOracle(ABC):
    """Answers batches of CI queries with p-values; caches by normalised query.

    Subclasses implement :meth:`compute_batch` for a list of *distinct, normalised, uncached*
    queries. ``n_asked`` counts queries asked, ``n_computed`` those actually computed, and
    ``n_batches`` the calls that needed computing (one federated round each).
    """

    def __init__(self, variables: Sequence[str]):
        self.variables = tuple(str(v) for v in variables)
        self.cache: dict[Query, float] = {}
        self.n_asked = 0
        self.n_computed = 0
        self.n_batches = 0

    @property
    def n_vars(self) -> int:
        return len(self.variables)

    def check_query(self, q: Sequence) -> Query:
        x, y, s = q
        key = normalise_query(x, y, s)
        low, high, given = key
        if given:
            low, high = min(low, given[0]), max(high, given[-1])
        if low < 0 or high >= len(self.variables):
            bad = low if low < 0 else high
            raise KeyError(
                f"CI query on unknown variable index {bad}; the oracle knows {self.n_vars} "
                f"variables {list(self.variables)}"
            )
        return key

    def test_batch(self, queries: Sequence[Sequence]) -> np.ndarray:
        """p-values for ``[(x, y, S), ...]`` in the order given."""
        keys = [self.check_query(q) for q in queries]
        self.n_asked += len(keys)
        todo = list(dict.fromkeys(k for k in keys if k not in self.cache))
        if todo:
            pvals = np.asarray(self.compute_batch(todo), dtype=float)
            if pvals.shape != (len(todo),):
                raise RuntimeError(
                    f"{type(self).__name__}.compute_batch returned shape {pvals.shape} "
                    f"for {len(todo)} queries"
                )
            self.cache.update(zip(todo, pvals.tolist(), strict=True))
            self.n_computed += len(todo)
            self.n_batches += 1
        return np.array([self.cache[k] for k in keys], dtype=float)

    def fresh_batch(self, queries: Sequence[Query]) -> np.ndarray:
        """p-values of distinct, normalised queries never asked before, computed and not kept
        in the cache (an engine that asks a test again later asks it again). A batch that
        wants its tests' statistics (``statistics_wanted``, a search's
        :class:`~fedcausal_flwr.discovery.skeleton_record.FreshQueries`) gets them in its
        ``statistics`` where :meth:`compute_statistics` gives them."""
        self.n_asked += len(queries)
        self.n_computed += len(queries)
        self.n_batches += 1
        if getattr(queries, "statistics_wanted", False):
            pvalues, statistics = self.compute_statistics(list(queries))
            queries.statistics = statistics  # type: ignore[attr-defined]
            return np.asarray(pvalues, dtype=float)
        return np.asarray(self.compute_batch(list(queries)), dtype=float)

    def compute_statistics(self, queries: list[Query]) -> tuple[np.ndarray, np.ndarray | None]:
        """p-values of distinct normalised queries and their test statistics (larger: more
        dependent), or None where this oracle has none to give."""
        return self.compute_batch(queries), None

    def test(self, x: int, y: int, s: Sequence[int] = ()) -> float:
        return float(self.test_batch([(x, y, tuple(s))])[0])

    @abstractmethod
    def compute_batch(self, queries: list[Query]) -> np.ndarray:
        """p-values of distinct normalised queries."""
