"""PC-stable adjacency search, one batch of CI tests per level.

At level ``l`` every still-adjacent ordered pair ``(x, y)`` is tested given every subset ``S`` of
size
``l`` of ``adj(x) \\ {y}``, with adjacency sets frozen for the whole level (PC-stable, Colombo and
Maathuis 2014). All those tests form one batch, so a federated run spends one round per level. An
edge is removed at the end of the level if any of its tests says independent (``p > alpha``).

Because the whole level is tested anyway, *every* separating set of the removal level is recorded,
from x's side first, then y's (x < y), each side in ``itertools.combinations`` order. This is what
the
collider rules need: the standard rule reads the first set, causal-learn's rule reads all of them
(``y`` is a collider iff it is in none), the majority/conservative rules count them.

A level with more tests than ``level_batch`` (PC-stable) is asked in batches of that many distinct
tests, generated as they are sent (:func:`streamed_level`): its tests are never all in memory,
nor their p-values, only each pair's largest p-value and the separating sets found. Such a batch
is :class:`FreshQueries`: distinct, normalised and never asked before, so a p-value cache passes
it through without keeping its answers (a later phase that reads one of them asks again).

``stable=False`` reads the same batch in causal-learn's order-dependent way (:func:`apply_level_
sequential`): nodes in index order, each with its neighbours fixed when its turn comes, an edge
removed at the first independence with that set recorded. The outcome depends on the column order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from math import comb

import numpy as np

from fedcausal_flwr.stats.oracle import Query

Pair = tuple[int, int]


@dataclass
class Skeleton:
    """Outcome of an adjacency search."""

    adjacency: np.ndarray  # bool (p, p), symmetric
    sepsets: dict[Pair, list[tuple[int, ...]]] = field(default_factory=dict)
    removed_at: dict[Pair, int] = field(default_factory=dict)
    max_pvalue: dict[Pair, float] = field(default_factory=dict)
    levels: list[dict] = field(default_factory=list)  # {"level", "tests", "removed"} per batch

    @property
    def n_tests(self) -> int:
        return sum(lv["tests"] for lv in self.levels)

    def first_sepset(self, x: int, y: int) -> tuple[int, ...] | None:
        sets = self.sepsets.get(pair_key(x, y))
        return sets[0] if sets else None

    def union_sepset(self, x: int, y: int) -> set[int] | None:
        """All variables of all separating sets of ``{x, y}`` (causal-learn's ``sep_sets``)."""
        sets = self.sepsets.get(pair_key(x, y))
        return None if sets is None else {v for s in sets for v in s}


def pair_key(x: int, y: int) -> Pair:
    return (x, y) if x < y else (y, x)


def keep_largest(largest: dict[Pair, float], key: Pair, p: float) -> None:
    """Record ``p`` for the pair ``key`` if it is the largest seen (a pair's deciding p-value)."""
    if p > largest.get(key, -1.0):
        largest[key] = float(p)


def level_queries(adjacency: np.ndarray, level: int) -> list[tuple[int, int, tuple[int, ...]]]:
    """Every ``(x, y, S)`` PC-stable asks at ``level``, in causal-learn's order (x, then y, then
    S)."""
    out: list[tuple[int, int, tuple[int, ...]]] = []
    for x, row in enumerate(adjacency):
        nx = np.flatnonzero(row).tolist()
        if len(nx) - 1 < level:
            continue
        if level == 0:
            out.extend((x, y, ()) for y in nx)
            continue
        for i, y in enumerate(nx):
            out.extend((x, y, s) for s in combinations(nx[:i] + nx[i + 1 :], level))
    return out


#: Tests of one level above which PC-stable asks the level in batches of this many distinct
#: tests (:func:`streamed_level`).
LEVEL_BATCH = 2**21


class FreshQueries(list):
    """A batch of distinct, normalised tests never asked before (a cache keeps no answer)."""


def level_size(adjacency: np.ndarray, level: int, keep: np.ndarray | None = None) -> int:
    """How many ``(x, y, S)`` :func:`level_queries` would list (pairs of ``keep`` left out),
    counted without listing them."""
    degree = adjacency.sum(axis=1)
    asked = degree if keep is None else (adjacency & ~keep).sum(axis=1)
    return sum(int(a) * comb(int(d) - 1, level) for a, d in zip(asked, degree, strict=True) if d)


def skeleton_steps(
    n_vars: int,
    alpha: float,
    max_depth: int | None = None,
    initial: np.ndarray | None = None,
    stable: bool = True,
    keep: np.ndarray | None = None,
    level_batch: int | None = None,
):
    """Generator: yields one batch of queries per level, returns a :class:`Skeleton`.

    ``initial`` (bool p x p) restricts the search to a given undirected graph; ``max_depth`` caps
    the conditioning-set size (``None``: until no node has enough neighbours, as causal-learn's
    PC); the pairs of ``keep`` (bool p x p, symmetric: required edges) are never tested. A
    PC-stable level of more than ``level_batch`` tests (default :data:`LEVEL_BATCH`) is asked
    in batches of at most that many (:func:`streamed_level`).
    """
    batch = LEVEL_BATCH if level_batch is None else int(level_batch)
    if batch < 1:
        raise ValueError(f"level_batch must be at least 1, got {level_batch}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if initial is None:
        adjacency = ~np.eye(n_vars, dtype=bool)
    else:
        adjacency = np.array(initial, dtype=bool)
        if adjacency.shape != (n_vars, n_vars) or np.any(adjacency != adjacency.T):
            raise ValueError(f"initial adjacency must be a symmetric {n_vars}x{n_vars} matrix")
        np.fill_diagonal(adjacency, False)
    result = Skeleton(adjacency=adjacency)
    level = -1
    while adjacency.sum(axis=1).max(initial=0) - 1 > level:
        level += 1
        if max_depth is not None and level > max_depth:
            break
        tests = level_size(adjacency, level, keep)
        if not tests:
            continue
        if stable and tests > batch:
            removed = yield from streamed_level(result, adjacency, level, alpha, keep, batch)
        else:
            queries = level_queries(adjacency, level)
            if keep is not None:
                queries = [q for q in queries if not keep[q[0], q[1]]]
            pvalues = np.asarray((yield queries), dtype=float)
            if stable:
                removed = apply_level(result, queries, pvalues, alpha, level)
            else:
                removed = apply_level_sequential(
                    result, adjacency, queries, pvalues, alpha, level, keep
                )
        for x, y in removed:
            adjacency[x, y] = adjacency[y, x] = False
        result.levels.append({"level": level, "tests": tests, "removed": len(removed)})
    result.adjacency = adjacency
    return result


def apply_level(
    result: Skeleton, queries: list[Query], pvalues: np.ndarray, alpha: float, level: int
) -> list[Pair]:
    """Record p-values and separating sets of one level; return the pairs to remove."""
    removed: dict[Pair, None] = {}
    for (x, y, s), p in zip(queries, pvalues, strict=True):
        key = pair_key(x, y)
        keep_largest(result.max_pvalue, key, p)
        if p > alpha:
            removed[key] = None
            result.sepsets.setdefault(key, []).append(tuple(sorted(s)))
            result.removed_at[key] = level
    # Queries come lower endpoint's side first; a set found from both sides is kept once.
    for key in removed:
        sets = result.sepsets[key]
        result.sepsets[key] = list(dict.fromkeys(sets))
    return list(removed)


def streamed_level(
    result: Skeleton,
    adjacency: np.ndarray,
    level: int,
    alpha: float,
    keep: np.ndarray | None,
    batch: int,
):
    """Generator: one PC-stable level asked in :class:`FreshQueries` batches of at most ``batch``
    tests; returns the pairs to remove and records what :func:`apply_level` records.

    The tests are those of :func:`level_queries`, each once, in the order a cache would first
    meet them: ``x`` ascending, then ``y``, then ``S``; ``(x, y, S)`` with ``y < x`` was asked
    from ``y``'s side unless ``S`` is not in ``adj(y)``. Kept per level: each pair's largest
    p-value and the sets with ``p > alpha``; a removed pair's separating sets are then listed as
    :func:`apply_level` lists them (``x``'s side first, then ``y``'s, each once)."""
    neighbours = [np.flatnonzero(row).tolist() for row in adjacency]
    sets = [set(n) for n in neighbours]
    largest: dict[Pair, float] = {}
    independent: dict[Pair, set[tuple[int, ...]]] = {}
    pending: FreshQueries = FreshQueries()

    def answer():
        pvalues = np.asarray((yield pending), dtype=float)
        for (x, y, s), p in zip(pending, pvalues.tolist(), strict=True):
            if p > largest.get((x, y), -1.0):
                largest[(x, y)] = p
            if p > alpha:
                independent.setdefault((x, y), set()).add(s)
        pending.clear()

    for x, nx in enumerate(neighbours):
        if len(nx) - 1 < level:
            continue
        for i, y in enumerate(nx):
            if keep is not None and keep[x, y]:
                continue
            others = nx[:i] + nx[i + 1 :]
            for s in combinations(others, level):
                if x < y:
                    pending.append((x, y, s))
                elif not sets[y].issuperset(s):  # not asked from y's side
                    pending.append((y, x, s))
                else:
                    continue
                if len(pending) >= batch:
                    yield from answer()
    if pending:
        yield from answer()
    for key, p in largest.items():
        keep_largest(result.max_pvalue, key, p)
    removed = sorted(independent)
    for x, y in removed:
        # x's side first, then y's, each in combinations order (sorted tuples: lexicographic)
        found = sorted(independent[(x, y)])
        from_x = [s for s in found if sets[x].issuperset(s)]
        from_y = [s for s in found if not sets[x].issuperset(s)]
        result.sepsets[(x, y)] = from_x + from_y
        result.removed_at[(x, y)] = level
    return removed


def apply_level_sequential(
    result: Skeleton,
    adjacency: np.ndarray,
    queries: list[Query],
    pvalues: np.ndarray,
    alpha: float,
    level: int,
    keep: np.ndarray | None = None,
) -> list[Pair]:
    """causal-learn's ``stable=False`` level from the PC-stable level's answers: x ascending, x's
    neighbours taken when its turn comes (edges it removes stay in its conditioning pool, as in
    causal-learn), each edge removed at its first independent set; pairs of ``keep`` (required
    edges) are not tested."""
    answer = {normalise(x, y, s): float(p) for (x, y, s), p in zip(queries, pvalues, strict=True)}
    live = adjacency.copy()
    removed: list[Pair] = []
    for x in range(live.shape[0]):
        nx = np.flatnonzero(live[x]).tolist()
        for y in nx:
            if keep is not None and keep[x, y]:
                continue
            others = [v for v in nx if v != y]
            for s in combinations(others, level):
                p = answer[normalise(x, y, s)]
                key = pair_key(x, y)
                keep_largest(result.max_pvalue, key, p)
                if p > alpha:
                    live[x, y] = live[y, x] = False
                    result.sepsets[key] = [tuple(sorted(s))]
                    result.removed_at[key] = level
                    removed.append(key)
                    break
    return removed


def normalise(x: int, y: int, s: tuple[int, ...]) -> Query:
    """The key of a test whatever side asked it."""
    lo, hi = (x, y) if x < y else (y, x)
    return (lo, hi, tuple(sorted(s)))
