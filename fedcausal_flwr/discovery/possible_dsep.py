"""FCI's Possible-D-Sep phase: remove edges separated by subsets of Possible-D-Sep sets.

After the adjacency search and collider orientation, an edge ``a *-* b`` may still be separable by
a set of non-neighbours. The candidate sets come from ``possible_dsep(a, b)``: nodes reachable from
``a`` by paths on which every inner node is a collider or lies in a triangle. The walk, the
"possible parent" refinement and the order of candidates follow causal-learn 0.1.4.8's
``getPossibleDsep`` / ``removeByPossibleDsep`` (candidates sorted by descending index; subsets by
increasing size, then lexicographically; subsets of size < 2 or inside adj(a) or adj(b) skipped).

Two schedules:

* ``"sequential"`` (causal-learn): edges in index order on the *live* graph, so a removal changes
  later Possible-D-Sep sets. The loop is replayed from the known answers; at its first unknown
  test it asks that (edge side, subset size) batch together with the tests it would ask next if
  no edge were removed (up to :data:`SPECULATIVE_TESTS`), so a federated run pays one round per
  removal that changes the plan, not one per (side, size); the result is the same.
* ``"stable"``: every Possible-D-Sep set is computed once on the graph at the phase start and all
  edges advance together, one batch per subset size; removals apply at the end. Fewer rounds for a
  federated run; may differ from causal-learn when one removal would have changed another's set.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, MutableMapping
from itertools import combinations
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.driver import NeedTests, PValues, Steps, replay
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, TAIL, Graph
from fedcausal_flwr.stats.batch_oracle import Query, normalise_query

MAX_BATCH = 2_000_000
#: How many tests the sequential schedule asks ahead of need in one batch (see _speculation).
SPECULATIVE_TESTS = 20_000


def _semi_directed_path_exists(marks: np.ndarray, start: int, goal: int) -> bool:
    """A path start ... goal whose every edge leaves its near node without an arrowhead there."""
    seen: set[int] = set()
    queue: deque[int] = deque()

    def push_from(t: int) -> None:
        for u in np.flatnonzero(marks[t]):
            if marks[u, t] in (TAIL, CIRCLE) and u not in seen:
                seen.add(int(u))
                queue.append(int(u))

    push_from(start)
    while queue:
        t = queue.popleft()
        if t == goal:
            return True
        push_from(t)
    return False


def possible_dsep(graph: Graph, x: int, y: int, max_path_length: int = -1) -> list[int]:
    """Possible-D-Sep(x, y) as causal-learn computes it, sorted by descending index."""
    marks = graph.marks
    adjacent = marks != 0
    limit = 1000 if max_path_length == -1 else max_path_length
    dsep: set[int] = set()
    previous: dict[int, set[int]] = {}
    visited: set[tuple[int, int]] = set()
    queue: deque[tuple[int, int]] = deque()
    depth_end: tuple[int, int] | None = None
    for b in map(int, np.flatnonzero(adjacent[x])):
        if b == y:
            continue
        edge = (x, b)
        if depth_end is None:
            depth_end = edge
        queue.append(edge)
        visited.add(edge)
        previous.setdefault(x, set()).add(b)
        dsep.add(b)
    distance = 0
    while queue:
        t = queue.popleft()
        if depth_end == t:
            depth_end = None
            distance += 1
            if distance > limit:
                break
        a, b = t
        if _has_possible_parent_path(marks, previous, b, x):
            dsep.add(b)
        for c in map(int, np.flatnonzero(adjacent[b])):
            if c in (a, x, y):
                continue
            previous.setdefault(c, set()).add(b)
            collider = (
                adjacent[a, b] and marks[a, b] == ARROW and marks[c, b] == ARROW
            )  # a *-> b <-* c
            if collider or adjacent[a, c]:
                u = (a, c)  # causal-learn extends the walk with (a, c), not (b, c)
                if u in visited:
                    continue
                visited.add(u)
                queue.append(u)
                if depth_end is None:
                    depth_end = u
    dsep.discard(x)
    dsep.discard(y)
    return sorted(dsep, reverse=True)


def _has_possible_parent_path(
    marks: np.ndarray, previous: dict[int, set[int]], w: int, x: int
) -> bool:
    if w == x:
        return True
    for r in previous.get(w, ()):
        if r in (w, x):
            continue
        if _semi_directed_path_exists(marks, r, x) or _semi_directed_path_exists(marks, r, w):
            return True
    return False


def _candidate_sets(graph: Graph, a: int, b: int, pds: list[int], size: int) -> list[tuple]:
    adj_a = set(graph.neighbors(a).tolist())
    adj_b = set(graph.neighbors(b).tolist())
    out = []
    for subset in combinations(pds, size):
        s = set(subset)
        if s <= adj_a or s <= adj_b:
            continue
        out.append(subset)
    return out


def _check_batch(n: int) -> None:
    if n > MAX_BATCH:
        raise RuntimeError(
            f"the Possible-D-Sep phase would ask {n} CI tests in one batch; cap the subset size "
            "(pds_max_size) or disable the phase"
        )


def _speculation(
    live: Graph,
    edges: list[tuple[int, int]],
    index: int,
    side: tuple[int, int],
    size: int,
    needed: list[Query],
    cache: dict[Query, float],
    sizes,
    max_path_length: int,
) -> list[Query]:
    """The batch asked when the sequential schedule meets an unknown test: the (side, size)
    batch it needs, then, while under :data:`SPECULATIVE_TESTS`, the tests the schedule would
    ask next if no edge were removed: the side's larger subsets, the edge's other side, and the
    later edges, all on the live graph. A removal makes some of them unneeded (asked, unused)
    and the next unknown test starts a new batch, so the result equals the one-batch-per-size
    schedule's; only the number of rounds drops."""
    batch = dict.fromkeys(k for k in needed if k not in cache)
    _check_batch(len(batch))

    def add(a: int, b: int, pds: list[int], first: int) -> bool:
        for extra in sizes(pds):
            if extra < first:
                continue
            if len(batch) >= SPECULATIVE_TESTS:
                return False
            for s in _candidate_sets(live, a, b, pds, extra):
                key = normalise_query(a, b, s)
                if key not in cache:
                    batch.setdefault(key, None)
        return True

    a, b = edges[index]
    if not add(a, b, possible_dsep(live, side[0], side[1], max_path_length), size + 1):
        return list(batch)
    later = [((a, b), (b, a))] if side == (a, b) else []
    later += [((c, d), (c, d)) for c, d in edges[index + 1 :]]
    later += [((c, d), (d, c)) for c, d in edges[index + 1 :]]
    later.sort(key=lambda item: edges.index(item[0]))  # edge order, near side first
    for (c, d), near in later:
        if not live.adjacent(c, d):
            continue
        if not add(c, d, possible_dsep(live, near[0], near[1], max_path_length), 2):
            break
    return list(batch)


def remove_by_possible_dsep(
    graph: Graph,
    sepsets: MutableMapping[tuple[int, int], Any],
    alpha: float,
    schedule: str = "sequential",
    max_size: int | None = None,
    max_path_length: int = -1,
    keep: np.ndarray | None = None,
):
    """Generator: yields batches of queries, removes edges from ``graph`` in place.

    ``sepsets`` (pair (min, max) -> separating set) gets the set that removed each edge; the
    pairs of ``keep`` (required edges) are never tested. Returns the list of removed pairs.
    """
    if schedule not in ("sequential", "stable"):
        raise ValueError(f"unknown Possible-D-Sep schedule {schedule!r}; use sequential|stable")
    candidates = graph.adjacency() if keep is None else graph.adjacency() & ~keep
    edges = [(int(a), int(b)) for a, b in zip(*np.nonzero(np.triu(candidates)), strict=True)]
    sizes = _subset_sizes(max_size)
    if schedule == "sequential":
        found = yield from _sequential_removals(graph, edges, alpha, sizes, max_path_length)
    else:
        stable = yield from _stable_removals(graph, edges, alpha, sizes, max_path_length)
        found = list(stable.items())
    removed: list[tuple[int, int]] = []
    for pair, hit in found:
        graph.remove_edge(*pair)
        sepsets[pair] = set(hit)
        removed.append(pair)
    return removed


def _subset_sizes(max_size: int | None) -> Callable[[list[int]], range]:
    """The subset sizes tested for a Possible-D-Sep set: 2 up to its size, capped at
    ``max_size``."""

    def sizes(pds: list[int]) -> range:
        top = len(pds) if max_size is None else min(len(pds), max_size)
        return range(2, top + 1)

    return sizes


def _sequential_removals(
    graph: Graph,
    edges: list[tuple[int, int]],
    alpha: float,
    sizes: Callable[[list[int]], range],
    max_path_length: int,
) -> Steps[list[tuple[tuple[int, int], tuple]]]:
    """Generator: the sequential schedule (causal-learn's loop, replayed from the answers known
    so far). Returns the removed pairs, each with the subset that separated it, in the order
    removed; ``graph`` is left as it is."""
    cache: dict[Query, float] = {}

    def walk(_: PValues) -> list[tuple[tuple[int, int], tuple]]:
        """causal-learn's sequential loop on a copy of the graph, from the known answers;
        at the first unknown test it asks that (side, size) batch plus a speculation."""
        live = graph.copy()
        found: list[tuple[tuple[int, int], tuple]] = []
        for index, (a, b) in enumerate(edges):
            for side in ((a, b), (b, a)):
                if not live.adjacent(a, b):
                    break
                pds = possible_dsep(live, side[0], side[1], max_path_length)
                for size in sizes(pds):
                    subsets = _candidate_sets(live, a, b, pds, size)
                    keys = [normalise_query(a, b, s) for s in subsets]
                    if any(k not in cache for k in keys):
                        raise NeedTests(
                            _speculation(
                                live,
                                edges,
                                index,
                                side,
                                size,
                                keys,
                                cache,
                                sizes,
                                max_path_length,
                            )  # fmt: skip
                        )
                    hit = next(
                        (s for s, k in zip(subsets, keys, strict=True) if cache[k] > alpha),
                        None,
                    )
                    if hit is not None:
                        live.remove_edge(a, b)
                        found.append(((a, b), hit))
                        break
        return found

    return (yield from replay(walk, cache))


def _stable_removals(
    graph: Graph,
    edges: list[tuple[int, int]],
    alpha: float,
    sizes: Callable[[list[int]], range],
    max_path_length: int,
) -> Steps[dict[tuple[int, int], tuple]]:
    """Generator: the stable schedule, one batch per subset size over every edge side's
    Possible-D-Sep set on the graph at the phase start. Returns each separated pair's first
    separating subset; ``graph`` is left as it is."""
    sides = []
    for a, b in edges:
        for near, far in ((a, b), (b, a)):
            sides.append(((a, b), possible_dsep(graph, near, far, max_path_length)))
    found: dict[tuple[int, int], tuple] = {}
    top = max((len(sizes(pds)) + 1 for _, pds in sides), default=1)
    for size in range(2, top + 1):
        batch: list[Query] = []
        owners: list[tuple[tuple[int, int], tuple]] = []
        for pair, pds in sides:
            if pair in found or size not in sizes(pds):
                continue
            for s in _candidate_sets(graph, pair[0], pair[1], pds, size):
                batch.append((pair[0], pair[1], s))
                owners.append((pair, s))
        if not batch:
            continue
        _check_batch(len(batch))
        pvalues = yield batch
        for (pair, s), p in zip(owners, pvalues, strict=True):
            if pair not in found and p > alpha:
                found[pair] = s
    return found
