"""PC-stable depths asked edge by edge, each edge only until it is removed (``until-removed``).

PC-stable removes an edge at depth ``d`` iff one of its conditioning sets of size ``d`` separates
it, with adjacency frozen for the depth. Asking every set (``edge_tests="all"``, one round per
depth) records every separating set, and on a big network nearly all of those tests are spent on
edges already decided: munin's depth 1 holds 101 M tests, of which an edge's first independence
leaves 10 M to ask. Here a depth is asked in rounds: each standing pair asks its next sets,
1, 2, 4, ... per round, until one separates it or none is left. A pair's sets are numbered as the
full depth lists them (the lower endpoint's side, then the other's new sets, each in
``itertools.combinations`` order), except that each side's pool is first ranked by depth 0's
dependence (:class:`DepthPools`): a set that separates two dependent variables usually lies on
the paths between them, so its members depend on both. On munin x 20k over 10 clients depth 1
then asked 6.0 M tests where neighbour order asked 29.6 M (`experiments/bench_scale.py`). Depth
0's dependence is each test's statistic where the answers carry it (:class:`FreshQueries`
``statistics_wanted``), else ``1 - p``. Each depth ends with the same adjacency as the full
depth, whatever the order: a pair is removed iff one of its sets separates it.

What changes is the record of a removed pair: its separating sets among the tests it asked (in
the full depth's order) and its largest p-value among them. PC's collider rules read only the
pairs of unshielded triples; :func:`complete_pairs` asks what the full depth would have asked of
those pairs, in one more batch, so their records, and with them the CPDAG under every collider
rule, equal the full search's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache
from math import comb

import numpy as np

from fedcausal_flwr.discovery.skeleton_record import (
    FreshQueries,
    Pair,
    Skeleton,
    full_depth_order,
    keep_largest,
)

#: The ways a PC-stable depth asks its tests.
EDGE_TESTS = ("all", "until-removed")
#: How much more of its sets a standing pair asks each round than the round before.
ROUND_GROWTH = 2.0


@lru_cache(maxsize=8)
def _binomials(top: int, size: int) -> np.ndarray:
    """``table[j, c] = comb(c, j)`` for ``j <= size``, ``c <= top`` (int64; refused where it would
    overflow: such a depth could never be asked anyway)."""
    if comb(top, size) >= 2**62:
        raise ValueError(
            f"a depth of {size} over {top} neighbours has more conditioning sets than can be "
            "counted; cap the search with max_depth"
        )
    table = np.array([[comb(c, j) for c in range(top + 1)] for j in range(size + 1)], np.int64)
    table.setflags(write=False)
    return table


def lex_combinations(pool: np.ndarray, size: int, ranks: np.ndarray) -> np.ndarray:
    """Rows of the ``size``-subsets of ``range(pool[i])`` at lexicographic rank ``ranks[i]`` (the
    order ``itertools.combinations`` lists them), each ascending.

    The lexicographic rank ``r`` of ``n`` choose ``k`` is the colexicographic rank
    ``comb(n, k) - 1 - r`` of the mirrored set ``{n - 1 - v}``, and colex unranking needs one
    table of binomials for every ``n``: each member is the largest ``c`` with ``comb(c, j)``
    at most what is left of the rank."""
    pool = np.asarray(pool, dtype=np.int64)
    out = np.empty((pool.size, size), dtype=np.int64)
    if not pool.size:
        return out
    table = _binomials(int(pool.max()), size)
    left = table[size, pool] - 1 - np.asarray(ranks, dtype=np.int64)
    for j in range(size, 0, -1):
        member = np.searchsorted(table[j], left, side="right") - 1
        left -= table[j, member]
        out[:, size - j] = pool - 1 - member
    return out


class DepthPools:
    """One depth's frozen adjacency as each pair's two pools: the lower endpoint's neighbours but
    the other, then the other's; a pair's sets are numbered through both (positions).

    With ``strength`` (p x p, larger: more dependent at depth 0) each pool of a pair ``(x, y)``
    is ranked by ``strength[x, s] + strength[y, s]``, strongest first (ties in neighbour order),
    and a side's sets are numbered in combinations order over the ranked pool: a separator on a
    path between the two (dependent on both) comes early. Every set still has one position."""

    #: Pools ranked at once (memory: this many rows of the widest neighbourhood)
    RANK_CHUNK = 4096

    def __init__(self, adjacency: np.ndarray, depth: int, strength: np.ndarray | None = None):
        self.adjacency = adjacency.copy()
        self.depth = depth
        self.strength = strength
        degree = self.adjacency.sum(axis=1)
        self.neighbours = np.zeros((len(degree), max(int(degree.max(initial=0)), 1)), np.int64)
        rows, cols = np.nonzero(self.adjacency)
        place = np.arange(rows.size) - np.searchsorted(rows, rows)  # position within its row
        self.neighbours[rows, place] = cols
        self.pool_size = np.maximum(degree - 1, 0)
        #: per (node, neighbour): how many neighbours of the node come before it, plus one
        self.place = np.cumsum(self.adjacency, axis=1, dtype=np.int32)

    def totals(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per pair: how many sets its lower endpoint's side numbers, and both sides together."""
        top = int(self.pool_size.max(initial=0))
        table = _binomials(max(top, self.depth), self.depth)[self.depth]
        first = table[self.pool_size[lo]]
        return first, first + table[self.pool_size[hi]]

    def tests(self, lo: np.ndarray, hi: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Normalised rows ``[lo, hi, S...]`` of the sets at ``positions`` of each pair; a set of
        the upper endpoint's side already on the lower's is left out (row -1 in column 0)."""
        first, _ = self.totals(lo, hi)
        lower = positions < first
        near = np.where(lower, lo, hi)
        far = np.where(lower, hi, lo)
        rank = np.where(lower, positions, positions - first)
        picks = lex_combinations(self.pool_size[near], self.depth, rank)
        if self.strength is None:
            # a pool is ``near``'s neighbours without ``far``: skip far's place in the row
            picks += picks >= (self.place[near, far] - 1)[:, None]
            sets = self.neighbours[near[:, None], picks]
        else:  # ranked members, normalised
            sets = np.sort(
                self.neighbours[near[:, None], self._ranked_places(lo, hi, near, far, picks)],
                axis=1,
            )
        rows = np.concatenate((lo[:, None], hi[:, None], sets), axis=1)
        seen = ~lower & self.adjacency[lo[:, None], sets].all(axis=1)
        rows[seen, 0] = -1
        return rows

    def _ranked_places(
        self, lo: np.ndarray, hi: np.ndarray, near: np.ndarray, far: np.ndarray, picks: np.ndarray
    ) -> np.ndarray:
        """``picks`` (indices into each row's ranked pool) as places in ``near``'s neighbour row;
        rows come pair by pair, a side's rows together, so each pool is ranked once."""
        strength = self.strength
        assert strength is not None
        out = np.empty_like(picks)
        if not near.size:
            return out
        new_pool = np.r_[True, (near[1:] != near[:-1]) | (far[1:] != far[:-1])]
        starts = np.flatnonzero(new_pool)
        group = np.cumsum(new_pool) - 1
        ends = np.r_[starts[1:], near.size]
        slots = np.arange(self.neighbours.shape[1])
        for first in range(0, starts.size, self.RANK_CHUNK):
            chunk = starts[first : first + self.RANK_CHUNK]
            g_near, g_far = near[chunk], far[chunk]
            members = self.neighbours[g_near]  # (groups, width)
            score = strength[lo[chunk, None], members] + strength[hi[chunk, None], members]
            outside = slots[None, :] > self.pool_size[g_near][:, None]  # the row's padding
            score[outside | (members == g_far[:, None]) | np.isnan(score)] = -np.inf
            ranked = np.argsort(-score, axis=1, kind="stable")
            rows = slice(chunk[0], ends[first + chunk.size - 1])
            out[rows] = ranked[group[rows, None] - first, picks[rows]]
        return out


def until_removed_depth(
    result: Skeleton,
    adjacency: np.ndarray,
    depth: int,
    alpha: float,
    keep: np.ndarray | None,
    batch: int,
    strength: np.ndarray | None = None,
):
    """Generator: one PC-stable depth (``depth >= 1``) asked in rounds, each standing pair its
    next 1, 2, 4, ... sets until one separates it; returns the pairs to remove as a (k, 2) array
    and the tests and rounds asked (``{"tests", "rounds"}``, for the depth's record).
    ``strength``: depth 0's dependence per pair, ranking the pools (:class:`DepthPools`).

    Records per removed pair its separating sets among those asked (in the full depth's order),
    its removal depth and how far it was asked (``result.asked``, for :func:`complete_pairs`);
    per pair its largest p-value among the tests asked."""
    pools = DepthPools(adjacency, depth, strength)
    lo, hi = np.nonzero(np.triu(adjacency, k=1))
    if keep is not None:
        lo, hi = lo[~keep[lo, hi]], hi[~keep[lo, hi]]
    _, total = pools.totals(lo, hi)
    asked = np.zeros(lo.size, dtype=np.int64)
    largest = np.full(lo.size, np.nan)
    standing = np.flatnonzero(total > 0)
    removed: list[int] = []
    tests = rounds = 0
    step = 1.0
    while standing.size:
        take = np.minimum(int(step), total[standing] - asked[standing])
        owner, positions = _next_positions(asked[standing], take)
        rows = pools.tests(lo[standing][owner], hi[standing][owner], positions)
        new = rows[:, 0] >= 0
        pvalues = np.full(owner.size, np.nan)
        pvalues[new] = yield from _ask(rows[new], batch)
        tests += int(new.sum())
        rounds += 1
        np.fmax.at(largest, standing[owner], pvalues)
        hits = pvalues > alpha
        separated = np.bincount(owner[hits], minlength=standing.size) > 0
        asked[standing] += take
        hit_rows = np.flatnonzero(hits)  # grouped by owner, in each pair's order
        bounds = np.searchsorted(owner[hit_rows], np.arange(standing.size + 1))
        sets = rows[hit_rows, 2:].tolist()
        for i in np.flatnonzero(separated).tolist():
            pair = int(standing[i])
            key = (int(lo[pair]), int(hi[pair]))
            result.sepsets[key] = full_depth_order(
                [tuple(s) for s in sets[bounds[i] : bounds[i + 1]]], key[0], pools.adjacency
            )
            result.removed_at[key] = depth
            result.asked[key] = int(asked[pair])
            removed.append(pair)
        standing = standing[~separated & (asked[standing] < total[standing])]
        step *= ROUND_GROWTH
    for pair in np.flatnonzero(~np.isnan(largest)).tolist():
        keep_largest(result.max_pvalue, (int(lo[pair]), int(hi[pair])), float(largest[pair]))
    result.pools[depth] = pools
    gone = np.array(removed, dtype=np.int64)
    return np.stack((lo[gone], hi[gone]), axis=1), {"tests": tests, "rounds": rounds}


def _next_positions(asked: np.ndarray, take: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pair ``i``, its next ``take[i]`` positions after the ``asked[i]`` it has asked: which
    pair each position is of, and the positions, pair by pair."""
    owner = np.repeat(np.arange(take.size), take)
    return owner, asked[owner] + np.arange(owner.size) - (np.cumsum(take) - take)[owner]


def _ask(rows: np.ndarray, batch: int):
    """Generator: ``rows`` asked in :class:`FreshQueries` batches of at most ``batch``; returns
    their p-values in order."""
    answers = []
    for start in range(0, rows.shape[0], batch):
        answers.append(np.asarray((yield FreshQueries(rows[start : start + batch])), dtype=float))
    return np.concatenate(answers) if answers else np.zeros(0)


def complete_pairs(skeleton: Skeleton, pairs: Sequence[Pair], alpha: float, batch: int):
    """Generator: the tests the full depth would have asked of ``pairs`` (x < z) that an
    until-removed depth did not; each set found independent joins its pair's separating sets (in
    the full depth's order) and each p-value its pair's largest. Returns the number of tests.

    Pairs removed at depth 0, never tested, or already asked in full are left as they are. The
    depths' pools and how far each pair was asked are dropped after."""
    asked = 0
    for rows in _remaining(skeleton, pairs):
        pvalues = yield from _ask(rows, batch)
        asked += rows.shape[0]
        found: dict[Pair, list[tuple[int, ...]]] = {}
        for (x, z, *s), p in zip(rows.tolist(), pvalues.tolist(), strict=True):
            keep_largest(skeleton.max_pvalue, (x, z), p)
            if p > alpha:
                found.setdefault((x, z), []).append(tuple(s))
        for key, sets in found.items():
            depth_adjacency = skeleton.pools[skeleton.removed_at[key]].adjacency
            skeleton.sepsets[key] = full_depth_order(
                [*skeleton.sepsets[key], *sets], key[0], depth_adjacency
            )
    skeleton.asked.clear()  # what the until-removed depths left unasked is not needed after
    skeleton.pools.clear()
    return asked


def _remaining(skeleton: Skeleton, pairs: Sequence[Pair]) -> Iterator[np.ndarray]:
    """Per removal depth, the rows of the ``pairs``' sets not asked yet, pair by pair in each
    pair's order."""
    by_depth: dict[int, list[Pair]] = {}
    for key in pairs:
        if key in skeleton.asked:
            by_depth.setdefault(skeleton.removed_at[key], []).append(key)
    for depth, keys in sorted(by_depth.items()):
        pools: DepthPools = skeleton.pools[depth]
        lo, hi = (np.array(side, dtype=np.int64) for side in zip(*keys, strict=True))
        done = np.array([skeleton.asked[key] for key in keys], dtype=np.int64)
        _, total = pools.totals(lo, hi)
        owner, positions = _next_positions(done, total - done)
        rows = pools.tests(lo[owner], hi[owner], positions)
        rows = rows[rows[:, 0] >= 0]
        if rows.shape[0]:
            yield rows
