"""PC-stable adjacency search, one batch of CI tests per depth.

At depth ``l`` every still-adjacent ordered pair ``(x, y)`` is tested given every subset ``S``
of size ``l`` of ``adj(x) \\ {y}``, with adjacency sets frozen for the whole depth (PC-stable,
Colombo and Maathuis 2014). All those tests form one batch, so a federated run spends one round
per depth. An edge is removed at the end of the depth if any of its tests says independent
(``p > alpha``).

Because the whole depth is tested anyway, *every* separating set of the removal depth is
recorded, from x's side first, then y's (x < y), each side in ``itertools.combinations`` order.
This is what the collider rules need: the standard rule reads the first set, causal-learn's rule
reads all of them (``y`` is a collider iff it is in none), the majority/conservative rules count
them.

A depth with more tests than ``depth_batch`` (PC-stable) is asked in batches of that many distinct
tests, generated as they are sent (:func:`streamed_depth`): its tests are never all in memory,
nor their p-values, only each pair's largest p-value and the separating sets found. Such a batch
is :class:`FreshQueries`: distinct, normalised and never asked before, held as int64 rows, so a
p-value cache passes it through without keeping its answers (a later phase that reads one of them
asks again). Above depth 0 its tests come variable set by variable set (:func:`depth_rows`), so a
batch asks one joint table per set. A streamed depth 0 (wide data: millions of pairs) keeps its
records as arrays (:class:`~.pair_record.PairRecord`), read by the orientation and the result
without listing them.

``stable=False`` reads the same batch in causal-learn's order-dependent way (:func:`apply_depth_
sequential`): nodes in index order, each with its neighbours fixed when its turn comes, an edge
removed at the first independence with that set recorded. The outcome depends on the column order.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from itertools import combinations, islice
from math import comb

import numpy as np

from fedcausal_flwr.discovery.edge_rounds import EDGE_TESTS, until_removed_depth
from fedcausal_flwr.discovery.pair_record import PairRecord
from fedcausal_flwr.discovery.skeleton_record import (
    FreshQueries,
    Pair,
    Skeleton,
    full_depth_order,
    keep_largest,
    pair_key,
)
from fedcausal_flwr.stats.batch_oracle import Query


def depth_queries(adjacency: np.ndarray, depth: int) -> list[tuple[int, int, tuple[int, ...]]]:
    """Every ``(x, y, S)`` PC-stable asks at ``depth``, in causal-learn's order (x, then y, then
    S)."""
    out: list[tuple[int, int, tuple[int, ...]]] = []
    for x, row in enumerate(adjacency):
        nx = np.flatnonzero(row).tolist()
        if len(nx) - 1 < depth:
            continue
        if depth == 0:
            out.extend((x, y, ()) for y in nx)
            continue
        for i, y in enumerate(nx):
            out.extend((x, y, s) for s in combinations(nx[:i] + nx[i + 1 :], depth))
    return out


#: Tests of one depth above which PC-stable asks the depth in batches of this many distinct
#: tests (:func:`streamed_depth`).
DEPTH_BATCH = 2**21


def depth_size(adjacency: np.ndarray, depth: int, keep: np.ndarray | None = None) -> int:
    """How many ``(x, y, S)`` :func:`depth_queries` would list (pairs of ``keep`` left out),
    counted without listing them."""
    degree = adjacency.sum(axis=1)
    asked = degree if keep is None else (adjacency & ~keep).sum(axis=1)
    return sum(int(a) * comb(int(d) - 1, depth) for a, d in zip(asked, degree, strict=True) if d)


def skeleton_steps(
    n_vars: int,
    alpha: float,
    max_depth: int | None = None,
    initial: np.ndarray | None = None,
    stable: bool = True,
    keep: np.ndarray | None = None,
    depth_batch: int | None = None,
    edge_tests: str = "all",
):
    """Generator: yields one batch of queries per depth, returns a :class:`Skeleton`.

    ``initial`` (bool p x p) restricts the search to a given undirected graph; ``max_depth`` caps
    the conditioning-set size (``None``: until no node has enough neighbours, as causal-learn's
    PC); the pairs of ``keep`` (bool p x p, symmetric: required edges) are never tested. A
    PC-stable depth of more than ``depth_batch`` tests (default :data:`LEVEL_BATCH`) is asked
    in batches of at most that many (:func:`streamed_depth`). ``edge_tests="until-removed"`` asks
    each depth above 0 in rounds, each edge until it is removed (:mod:`.edge_rounds`): the same
    adjacency, fewer tests, more rounds, and a removed pair records the separating sets it asked.
    """
    if edge_tests not in EDGE_TESTS:
        raise ValueError(f"edge_tests must be one of {EDGE_TESTS}, got {edge_tests!r}")
    if edge_tests != "all" and not stable:
        raise ValueError("edge_tests='until-removed' asks PC-stable's depths; it needs stable=True")
    batch = DEPTH_BATCH if depth_batch is None else int(depth_batch)
    if batch < 1:
        raise ValueError(f"depth_batch must be at least 1, got {depth_batch}")
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
    strength = None  # an until-removed search's depth-0 statistics: its later depths' order
    depth = -1
    while adjacency.sum(axis=1).max(initial=0) - 1 > depth:
        depth += 1
        if max_depth is not None and depth > max_depth:
            break
        tests = depth_size(adjacency, depth, keep)
        if not tests:
            continue
        rounds: dict[str, int] = {}  # an until-removed depth: the tests it asked, in rounds
        if edge_tests != "all" and depth:
            removed, rounds = yield from until_removed_depth(
                result, adjacency, depth, alpha, keep, batch, strength
            )
        elif stable and (tests > batch or edge_tests != "all"):
            if edge_tests != "all":  # depth 0 of an until-removed search
                strength = np.zeros(adjacency.shape, dtype=np.float32)
            removed = yield from streamed_depth(
                result, adjacency, depth, alpha, keep, batch, strength
            )
        else:
            queries = depth_queries(adjacency, depth)
            if keep is not None:
                queries = [q for q in queries if not keep[q[0], q[1]]]
            pvalues = np.asarray((yield queries), dtype=float)
            if stable:
                removed = apply_depth(result, queries, pvalues, alpha, depth)
            else:
                removed = apply_depth_sequential(
                    result, adjacency, queries, pvalues, alpha, depth, keep
                )
        if isinstance(removed, np.ndarray):
            adjacency[removed[:, 0], removed[:, 1]] = False
            adjacency[removed[:, 1], removed[:, 0]] = False
        else:
            for x, y in removed:
                adjacency[x, y] = adjacency[y, x] = False
        result.depths.append({"depth": depth, "tests": tests, "removed": len(removed), **rounds})
    result.adjacency = adjacency
    return result


def apply_depth(
    result: Skeleton, queries: list[Query], pvalues: np.ndarray, alpha: float, depth: int
) -> list[Pair]:
    """Record p-values and separating sets of one depth; return the pairs to remove."""
    removed: dict[Pair, None] = {}
    for (x, y, s), p in zip(queries, np.asarray(pvalues, dtype=float).tolist(), strict=True):
        key = pair_key(x, y)
        keep_largest(result.max_pvalue, key, p)
        if p > alpha:
            removed[key] = None
            result.sepsets.setdefault(key, []).append(tuple(sorted(s)))
            result.removed_at[key] = depth
    # Queries come lower endpoint's side first; a set found from both sides is kept once.
    for key in removed:
        sets = result.sepsets[key]
        result.sepsets[key] = list(dict.fromkeys(sets))
    return list(removed)


def streamed_depth(
    result: Skeleton,
    adjacency: np.ndarray,
    depth: int,
    alpha: float,
    keep: np.ndarray | None,
    batch: int,
    strength: np.ndarray | None = None,
):
    """Generator: one PC-stable depth asked in :class:`FreshQueries` batches of ``batch`` tests
    (the last may hold fewer); returns the pairs to remove as a (k, 2) array and records what
    :func:`apply_depth` records. Depth 0 fills ``strength`` (p x p, given zeroed) with each
    pair's test statistic where the answers carry them, else with ``1 - p``.

    The tests are those of :func:`depth_queries`, each once, those of one variable set together
    (:func:`depth_rows`). Kept per depth: each pair's largest p-value and the sets with
    ``p > alpha``; a removed pair's separating sets are then listed as :func:`apply_depth` lists
    them (``x``'s side first, then ``y``'s, each once). Depth 0 on an empty record is recorded as
    arrays (:class:`~.pair_record.PairRecord`): wide data removes millions of pairs there."""
    n = adjacency.shape[0]
    largest = _LargestPerPair()
    found_codes: list[np.ndarray] = []
    found_sets: list[np.ndarray] = []
    for rows in _exact_batches(depth_rows(adjacency, depth, keep, batch), batch):
        asked = FreshQueries(rows, statistics_wanted=strength is not None)
        pvalues = np.asarray((yield asked), dtype=float)
        if strength is not None:
            known = 1.0 - pvalues if asked.statistics is None else asked.statistics
            strength[rows[:, 0], rows[:, 1]] = strength[rows[:, 1], rows[:, 0]] = known
        codes = rows[:, 0] * n + rows[:, 1]
        largest.add(codes, pvalues)
        hit = pvalues > alpha
        found_codes.append(codes[hit])
        found_sets.append(rows[hit, 2:])
    codes = np.concatenate(found_codes) if found_codes else np.zeros(0, dtype=np.int64)
    sets = np.concatenate(found_sets) if found_sets else np.zeros((0, depth), dtype=np.int64)
    removed_codes = np.sort(codes)  # distinct at depth 0; a pair's sets repeat it above
    if removed_codes.size:
        removed_codes = removed_codes[np.r_[True, removed_codes[1:] != removed_codes[:-1]]]
    removed = np.empty((removed_codes.size, 2), dtype=np.int64)
    np.floor_divide(removed_codes, n, out=removed[:, 0])
    np.remainder(removed_codes, n, out=removed[:, 1])
    best_codes, best_p = largest.result()
    fresh = not (result.max_pvalue or result.sepsets or result.removed_at)
    if depth == 0 and fresh:
        result.max_pvalue = PairRecord(n)
        result.max_pvalue.set_bulk_codes(best_codes, best_p)
        result.sepsets = PairRecord(n)
        result.sepsets.set_bulk_codes(removed_codes, shared=_no_set)
        result.removed_at = PairRecord(n)
        result.removed_at.set_bulk_codes(removed_codes, np.zeros(len(removed), dtype=np.int64))
        return removed
    for code, p in zip(best_codes.tolist(), best_p.tolist(), strict=True):
        keep_largest(result.max_pvalue, (code // n, code % n), p)
    order = np.argsort(codes, kind="stable")
    codes, sets = codes[order], sets[order]
    starts: list[int] = []
    ends: list[int] = []
    if codes.size:
        first = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        starts, ends = first.tolist(), np.r_[first[1:], codes.size].tolist()
    for start, end in zip(starts, ends, strict=True):
        x, y = divmod(int(codes[start]), n)
        result.sepsets[(x, y)] = full_depth_order(
            [tuple(row) for row in sets[start:end].tolist()], x, adjacency
        )
        result.removed_at[(x, y)] = depth
    return removed


def _no_set() -> list[tuple[int, ...]]:
    """The separating sets of a pair removed at depth 0: the empty set."""
    return [()]


class _LargestPerPair:
    """:func:`_largest_per_pair` over a depth's batches: a batch of pairs each once and after
    every pair so far (depth 0 lists its pairs so) is kept as it is, any other is merged."""

    def __init__(self) -> None:
        self._codes: list[np.ndarray] = []
        self._pvalues: list[np.ndarray] = []
        self._last = -1  # the largest code added

    def add(self, codes: np.ndarray, pvalues: np.ndarray) -> None:
        if not codes.size:
            return
        if codes[0] > self._last and bool(np.all(codes[1:] > codes[:-1])):
            known = ~np.isnan(pvalues)
            self._codes.append(codes[known])
            self._pvalues.append(pvalues[known])
            self._last = int(codes[-1])
            return
        merged_codes, merged_p = _largest_per_pair(
            np.concatenate([*self._codes, codes]), np.concatenate([*self._pvalues, pvalues])
        )
        self._codes, self._pvalues = [merged_codes], [merged_p]
        self._last = max(self._last, int(codes.max()))

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """Each pair code once (ascending) with its largest p-value."""
        if not self._codes:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        return np.concatenate(self._codes), np.concatenate(self._pvalues)


def _largest_per_pair(codes: np.ndarray, pvalues: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each pair code once (ascending) with its largest p-value (NaN ignored, as
    :func:`keep_largest` does; a pair with none is left out)."""
    if not codes.size:
        return codes, pvalues
    if not bool(np.all(codes[1:] >= codes[:-1])):
        order = np.argsort(codes, kind="stable")
        codes, pvalues = codes[order], pvalues[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    largest = np.fmax.reduceat(pvalues, starts)
    known = ~np.isnan(largest)
    return codes[starts][known], largest[known]


@lru_cache(maxsize=32)
def _combinations(pool: int, size: int) -> np.ndarray:
    """Every ``size``-subset of ``range(pool)`` as rows of positions, in combinations order."""
    out = np.array(list(combinations(range(pool), size)), dtype=np.int64)
    out.setflags(write=False)
    return out.reshape(-1, size)


def depth_rows(
    adjacency: np.ndarray, depth: int, keep: np.ndarray | None, batch: int
) -> Iterator[np.ndarray]:
    """The distinct tests of a PC-stable depth as int64 blocks of normalised rows ``[x, y,
    S...]`` (each at most about ``batch`` rows), the tests of one variable set together.

    Depth 0 lists the pairs ``x < y`` in order. Above it, a test ``(x, y, S)`` asked from x's side
    reads the joint table of the set ``{x, y} | S``, a star: x adjacent to every other member
    (a *centre* of the set). Every test of a set comes from one of its centres, paired with
    another member, given the rest; so at x's turn the sets ``{x} | B`` (``B`` in ``adj(x)``)
    whose smallest centre is x are listed with all their tests (a triangle's three tests
    together, where x-order listing meets the third from another x, usually in another
    batch). A batch then asks one joint table per set. Pairs of ``keep`` are left out."""
    if depth == 0:
        for x in range(adjacency.shape[0]):
            ys = np.flatnonzero(adjacency[x])
            if keep is not None:
                ys = ys[~keep[x, ys]]
            ys = ys[ys > x]  # the empty set is in every adj(y): y < x asked it first
            if ys.size:
                yield np.stack((np.full_like(ys, x), ys), axis=1)
        return
    members = depth + 1  # of B
    per_chunk = max(1, batch // comb(depth + 2, 2))  # sets whose tests fill about a batch
    for x in range(adjacency.shape[0]):
        near = np.flatnonzero(adjacency[x])
        if near.size < members:
            continue
        if comb(near.size, members) > per_chunk:  # listed in slices
            pool = combinations(near.tolist(), members)
            while chunk := list(islice(pool, per_chunk)):
                rows = _set_tests(adjacency, x, np.array(chunk, dtype=np.int64), keep)
                if rows.size:
                    yield rows
            continue
        rows = _set_tests(adjacency, x, near[_combinations(near.size, members)], keep)
        if rows.size:
            yield rows


@lru_cache(maxsize=16)
def _pair_positions(width: int) -> tuple[np.ndarray, np.ndarray]:
    """For a sorted set of ``width`` variables: every pair of positions ``(i, j)``, ``i < j``,
    and the other positions in order, as rows ``[i, j, rest...]``; and the pairs alone."""
    rows = [
        (i, j, *(k for k in range(width) if k not in (i, j)))
        for i, j in combinations(range(width), 2)
    ]
    out = np.array(rows, dtype=np.int64)
    out.setflags(write=False)
    return out, out[:, :2]


def _set_tests(
    adjacency: np.ndarray, x: int, stars: np.ndarray, keep: np.ndarray | None
) -> np.ndarray:
    """Normalised rows of every test of the sets ``{x} | stars[i]`` whose smallest centre is
    ``x``, set by set: each pair of members with a centre among them, given the rest."""
    m, width = stars.shape
    inner = adjacency[stars[:, :, None], stars[:, None, :]]
    inner |= np.eye(width, dtype=bool)
    centre = inner.all(axis=2)  # adjacent to every other member (x is adjacent to all)
    first = ~(centre & (stars < x)).any(axis=1)
    if not first.all():
        stars, centre = stars[first], centre[first]
    full = np.concatenate((np.full((len(stars), 1), x, dtype=np.int64), stars), axis=1)
    centres = np.concatenate((np.ones((len(stars), 1), dtype=bool), centre), axis=1)
    order = np.argsort(full, axis=1, kind="stable")
    full = np.take_along_axis(full, order, axis=1)
    centres = np.take_along_axis(centres, order, axis=1)
    layout, pairs = _pair_positions(width + 1)
    asked = centres[:, pairs[:, 0]] | centres[:, pairs[:, 1]]  # (sets, pairs)
    rows = full[:, layout]  # (sets, pairs, width + 1)
    if keep is not None:
        asked &= ~keep[rows[:, :, 0], rows[:, :, 1]]
    return rows[asked]


def _exact_batches(blocks: Iterator[np.ndarray], batch: int) -> Iterator[np.ndarray]:
    """The rows of ``blocks`` regrouped in batches of exactly ``batch`` (the last may hold
    fewer)."""
    held: list[np.ndarray] = []
    count = 0
    for block in blocks:
        while block.shape[0]:
            take = min(batch - count, block.shape[0])
            held.append(block[:take])
            count += take
            block = block[take:]
            if count == batch:
                yield np.concatenate(held)
                held, count = [], 0
    if count:
        yield np.concatenate(held)


def apply_depth_sequential(
    result: Skeleton,
    adjacency: np.ndarray,
    queries: list[Query],
    pvalues: np.ndarray,
    alpha: float,
    depth: int,
    keep: np.ndarray | None = None,
) -> list[Pair]:
    """causal-learn's ``stable=False`` depth from the PC-stable depth's answers: x ascending, x's
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
            for s in combinations(others, depth):
                p = answer[normalise(x, y, s)]
                key = pair_key(x, y)
                keep_largest(result.max_pvalue, key, p)
                if p > alpha:
                    live[x, y] = live[y, x] = False
                    result.sepsets[key] = [tuple(sorted(s))]
                    result.removed_at[key] = depth
                    removed.append(key)
                    break
    return removed


def normalise(x: int, y: int, s: tuple[int, ...]) -> Query:
    """The key of a test whatever side asked it."""
    lo, hi = (x, y) if x < y else (y, x)
    return (lo, hi, tuple(sorted(s)))
