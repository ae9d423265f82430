"""PCsimple: the parents-and-children set of one target, layer by layer (Li et al. 2015).

Layer ``l`` tests every candidate ``X`` against the target ``T`` given subsets ``Z`` of size ``l``
of the other candidates; ``X`` leaves the candidate set at the first ``Z`` with ``p > alpha``.
Candidates are scanned in ascending index order and ``Z`` in ``itertools.combinations`` order.

By default the candidate pool is updated *on the fly* inside a layer (a removed ``X`` is no longer
used in later conditioning sets of the same layer), as in the FedLCS paper's Table 2 trace; with
``stable=True`` the pool is frozen at the layer start. Either way the layer's tests are known up to
a superset at the layer start (on-the-fly pools only shrink), so a layer is **one batch**: the
superset is asked, then the layer is replayed sequentially against the answers.

The search stops when ``|CPC| <= l`` or after ``max_depth``.

:func:`apply_layer` replays a layer one test at a time; :func:`first_stop` is the same scan of one
candidate as array work over its subsets (indexed in combination order by
:func:`combination_rows`), for callers that hold only part of a layer's tests (FedLCS's clients).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations
from math import comb

import numpy as np

from fedcausal_flwr.stats.batch_oracle import Query, normalise_query

#: Combination tables up to this many entries (rows x depth) are kept in memory.
COMBINATION_CACHE_ENTRIES = 1 << 22


@dataclass
class LocalSkeleton:
    """Candidate parents/children of ``target`` and the separating set that removed each other
    node."""

    target: int
    pc: list[int]
    sepsets: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removed_at: dict[int, int] = field(default_factory=dict)
    layers: list[dict] = field(default_factory=list)  # {"depth", "tests", "removed"}

    @property
    def n_tests(self) -> int:
        return sum(lv["tests"] for lv in self.layers)


def layer_queries(target: int, candidates: Sequence[int], depth: int) -> list[Query]:
    """All tests layer ``depth`` may need (the superset when the pool shrinks on the fly)."""
    out: list[Query] = []
    for x in candidates:
        others = [v for v in candidates if v != x]
        out.extend(normalise_query(x, target, z) for z in combinations(others, depth))
    return list(dict.fromkeys(out))


def apply_layer(
    target: int,
    candidates: Sequence[int],
    depth: int,
    pvalue: Callable[[Query], float],
    alpha: float,
    stable: bool = False,
) -> tuple[list[int], dict[int, tuple[int, ...]]]:
    """Replay one layer sequentially; return the kept candidates and the new separating sets.

    One ``pvalue`` call per subset, in scan order (the reference semantics; a client answering
    many layers from partly fetched tests scans arrays instead: :func:`first_stop`).
    """
    current = list(candidates)
    found: dict[int, tuple[int, ...]] = {}
    for x in candidates:
        pool = [v for v in (candidates if stable else current) if v != x]
        for z in combinations(pool, depth):
            if pvalue(normalise_query(x, target, z)) > alpha:
                found[x] = tuple(z)
                current.remove(x)
                break
    return current, found


# ============================================================================ array scans
@lru_cache(maxsize=128)
def binomials(n: int, k: int) -> np.ndarray:
    """``table[m, r] = C(m, r)`` for ``m <= n``, ``r <= k`` (int64; read-only)."""
    if comb(n, k) >= 2**62:
        raise ValueError(f"C({n}, {k}) subsets are too many to scan")
    table = np.array([[comb(m, r) for r in range(k + 1)] for m in range(n + 1)], dtype=np.int64)
    table.flags.writeable = False
    return table


def _unrank(ranks: np.ndarray, n: int, k: int) -> np.ndarray:
    """Rows of the ``k``-subsets of ``range(n)`` with these lexicographic ranks."""
    table = binomials(n, k)
    rest = comb(n, k) - 1 - np.asarray(ranks, dtype=np.int64)  # co-lex rank of the mirror image
    rows = np.empty((rest.size, k), dtype=np.int64)
    for t in range(k - 1, -1, -1):
        mirror = np.searchsorted(table[:n, t + 1], rest, side="right") - 1
        rest -= table[mirror, t + 1]
        rows[:, k - 1 - t] = n - 1 - mirror
    return rows


#: Lexicographic tables of the ``k``-subsets of ``range(n)``, per ``(n, k)`` (cleared when they
#: hold more than ``COMBINATION_CACHE_ENTRIES`` entries in all).
_TABLES: dict[tuple[int, int], np.ndarray] = {}


def combination_rows(n: int, k: int, start: int, stop: int) -> np.ndarray:
    """Subsets ``start:stop`` of ``itertools.combinations(range(n), k)`` as an int array."""
    table = _TABLES.get((n, k))
    if table is None:
        total = comb(n, k)
        if total * k > COMBINATION_CACHE_ENTRIES:
            stop = min(stop, total)
            return _unrank(np.arange(min(start, stop), stop), n, k)
        if sum(t.size for t in _TABLES.values()) + total * k > COMBINATION_CACHE_ENTRIES:
            _TABLES.clear()
        table = _unrank(np.arange(total), n, k)
        table.flags.writeable = False
        _TABLES[(n, k)] = table
    return table[start:stop]


def combination_ranks(rows: np.ndarray, n: int) -> np.ndarray:
    """Positions of ascending rows of ``k``-subsets of ``range(n)`` in combination order."""
    k = rows.shape[1]
    table = binomials(n, k)
    mirror = table[n - 1 - rows, np.arange(k, 0, -1)] if k else np.zeros((len(rows), 0), int)
    return comb(n, k) - 1 - mirror.sum(axis=1, dtype=np.int64)


def subset_members(n_candidates: int, depth: int, x: int, start: int, stop: int) -> np.ndarray:
    """Candidate positions of the conditioning sets ``start:stop`` of candidate ``x``'s scan
    (the ``depth``-subsets of the other candidates, in combination order)."""
    rows = combination_rows(n_candidates - 1, depth, start, stop)
    return rows + (rows >= x)


def first_stop(
    dependent: np.ndarray,
    n_candidates: int,
    depth: int,
    x: int,
    start: int,
    gone: np.ndarray | None,
    chunk: int = 256,
) -> int:
    """Where :func:`apply_layer`'s scan of candidate ``x`` (a position) stops, from ``start``.

    ``dependent[i]`` says subset ``i`` of the scan is known to be dependent (past its end:
    unknown); subsets with a member flagged in ``gone`` are not in the pool and are passed
    over. Returns the index of the first other subset (unknown, or independent), or the number
    of subsets if there is none. Every subset before ``start`` must be known dependent or gone.
    """
    total = comb(n_candidates - 1, depth)
    known_end = min(len(dependent), total)
    lo = start
    while lo < total:
        hi = known_end if lo < known_end else min(total, lo + chunk)
        stops = np.ones(hi - lo, dtype=bool) if lo >= known_end else ~dependent[lo:hi]
        if gone is not None:
            stops &= ~gone[subset_members(n_candidates, depth, x, lo, hi)].any(axis=1)
        hit = int(np.argmax(stops))
        if stops[hit]:
            return lo + hit
        if lo >= known_end:
            chunk *= 2
        lo = hi
    return total


def pcsimple_steps(
    n_vars: int,
    target: int,
    alpha: float,
    max_depth: int = 3,
    stable: bool = False,
    candidates: Sequence[int] | None = None,
):
    """Generator: one batch per layer; returns a :class:`LocalSkeleton`."""
    if not 0 <= target < n_vars:
        raise KeyError(f"target index {target} is not one of the {n_vars} variables")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    cpc = sorted(v for v in (range(n_vars) if candidates is None else candidates) if v != target)
    result = LocalSkeleton(target=target, pc=cpc)
    depth = 0
    while len(cpc) > depth and depth <= max_depth:
        queries = layer_queries(target, cpc, depth)
        pvalues = yield queries
        answers = dict(zip(queries, (float(p) for p in pvalues), strict=True))
        kept, found = apply_layer(target, cpc, depth, answers.__getitem__, alpha, stable)
        result.sepsets.update(found)
        result.removed_at.update(dict.fromkeys(found, depth))
        result.layers.append({"depth": depth, "tests": len(queries), "removed": len(found)})
        cpc = kept
        depth += 1
    result.pc = cpc
    return result
