"""causal-learn's graph bookkeeping that its PC orientation reads: the ancestor matrix ``dpath`` and
the adjacency-order enumerations of unshielded triples, triangles and kites.

An exact reproduction of causal-learn's ``uc_sepset`` and ``meek`` must visit triples in the same
order and consult the same (incomplete) ancestor matrix.
"""

from __future__ import annotations

import numpy as np

from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL
from fedcausal_flwr.graphs.marks import Triple, is_directed


class CausalLearnAncestry:
    """causal-learn's ``GeneralGraph.dpath``: the ancestor matrix it keeps while orienting.

    causal-learn updates it incrementally on every added directed edge (``adjust_dpath``: ancestors
    of i become ancestors of j, descendants of j get i as ancestor, but ancestors of i are *not*
    linked to descendants of j) and rebuilds it from all directed edges, last edge first, whenever a
    directed edge is removed (``reconstitute_dpath``). Meek's ancestor checks read it, so an exact
    reproduction of causal-learn's PC must carry the same matrix from collider orientation to Meek.
    ``dpath[j, i]`` is True when causal-learn believes i is an ancestor of j.
    """

    def __init__(self, n_nodes: int):
        self._dpath = np.eye(n_nodes, dtype=bool)
        # a rebuild asked for and not yet done: the graph it reads, the edits made to that graph
        # since (to undo them), and the edges added since (to replay them)
        self._pending: np.ndarray | None = None
        self._edits: list[tuple[int, int, int, int]] = []
        self._added: list[tuple[int, int]] = []

    @classmethod
    def from_marks(cls, marks: np.ndarray) -> CausalLearnAncestry:
        anc = cls(marks.shape[0])
        anc._rebuild(marks)
        return anc

    @property
    def dpath(self) -> np.ndarray:
        """The matrix (``dpath[j, i]``: i is an ancestor of j), brought up to date."""
        self._settle()
        return self._dpath

    def adjust(self, i: int, j: int) -> None:
        """Record the new edge ``i --> j`` exactly as ``GeneralGraph.adjust_dpath`` does."""
        if self._pending is not None:
            self._added.append((i, j))
            return
        d = self._dpath
        d[j, i] = True
        d[j, :] |= d[i, :]
        d[:, i] |= d[:, j]

    def edit(self, marks: np.ndarray, a: int, b: int, mark_ab: int, mark_ba: int) -> None:
        """Set the edge ``a - b`` of ``marks`` to ``(mark_ab, mark_ba)``. Every change to the graph
        between a :meth:`reconstitute` and the next read goes through here, so the rebuild can
        see the graph as it was when asked."""
        if self._pending is marks:
            self._edits.append((a, b, int(marks[a, b]), int(marks[b, a])))
        marks[a, b], marks[b, a] = mark_ab, mark_ba

    def reconstitute(self, marks: np.ndarray) -> None:
        """Rebuild from the directed edges of ``marks`` (``reconstitute_dpath``), when next read:
        a later rebuild replaces this one, so a run of removals costs one rebuild, not one per
        removed edge."""
        self._pending, self._edits, self._added = marks, [], []

    def rebuild_from(self, marks: np.ndarray, added: list[tuple[int, int]]) -> None:
        """Stand where :meth:`reconstitute` on ``marks`` followed by :meth:`adjust` of each edge
        of ``added`` would leave the matrix (``marks`` is kept, not copied), rebuilt when read."""
        self._pending, self._edits, self._added = marks, [], list(added)

    def pending_on(self, marks: np.ndarray) -> bool:
        """Whether a rebuild waits on ``marks`` (edits to it must go through :meth:`edit`)."""
        return self._pending is marks

    def _settle(self) -> None:
        if self._pending is None:
            return
        marks = self._pending.copy()
        for a, b, mark_ab, mark_ba in reversed(self._edits):  # the graph when the rebuild was asked
            marks[a, b], marks[b, a] = mark_ab, mark_ba
        added = self._added
        self._pending, self._edits, self._added = None, [], []
        self._rebuild(marks)
        for i, j in added:
            self.adjust(i, j)

    def _rebuild(self, marks: np.ndarray) -> None:
        self._dpath = np.eye(marks.shape[0], dtype=bool)
        rows, cols = np.nonzero(np.triu(marks != NONE, k=1))
        for i, j in zip(rows[::-1].tolist(), cols[::-1].tolist(), strict=True):
            if is_directed(marks, i, j):
                self.adjust(i, j)
            elif is_directed(marks, j, i):
                self.adjust(j, i)

    def is_ancestor(self, a: int, b: int) -> bool:
        """causal-learn's ``is_ancestor_of(a, b)``."""
        return bool(self.dpath[b, a])


def _causallearn_adjacency_list(marks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``CausalGraph.find_adj()`` as two arrays (first, second): (c, r) for every tail at r, then
    for every arrow at r."""
    firsts, seconds = [], []
    for code in (TAIL, ARROW):
        rows, cols = np.nonzero(marks.T == code)  # marks.T[r, c] is the mark at r on edge r-c
        firsts.append(cols)
        seconds.append(rows)
    return np.concatenate(firsts), np.concatenate(seconds)


def causallearn_paths(
    marks: np.ndarray,
    second: np.ndarray | None = None,
    ends: np.ndarray | None = None,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """Every path a0 - a1 - b1 (a0 != b1) over causal-learn's adjacency list, in its order, as
    an (n, 3) array; only those whose edge a1 - b1 has ``second[a1, b1]``, whose ends have
    ``ends[a0, b1]`` and whose first node has ``start[a0]`` when given (filters that keep the
    order of what is left)."""
    first, last = _causallearn_adjacency_list(marks)
    opening = None if start is None else start[first]
    if second is None:
        onward = np.arange(first.size)
    else:
        onward = np.flatnonzero(second[first, last])
    # the continuations of a1: the adjacency entries (a1, b1), in adjacency-list order
    onward = onward[np.argsort(first[onward], kind="stable")]
    n = marks.shape[0]
    count = np.bincount(first[onward], minlength=n)
    start = np.concatenate(([0], np.cumsum(count)[:-1]))
    per_entry = count[last]
    if opening is not None:
        per_entry = np.where(opening, per_entry, 0)
    entry = np.repeat(np.arange(first.size), per_entry)
    within = np.arange(entry.size) - np.repeat(np.cumsum(per_entry) - per_entry, per_entry)
    b1 = last[onward[start[last[entry]] + within]]
    a0, a1 = first[entry], last[entry]
    keep = a0 != b1
    if ends is not None:
        keep &= ends[a0, b1]
    return np.stack((a0[keep], a1[keep], b1[keep]), axis=1)


def as_triples(paths: np.ndarray) -> list[Triple]:
    """Rows of an (n, 3) array as tuples."""
    return [(a, b, c) for a, b, c in paths.tolist()]


def causallearn_unshielded_triples(marks: np.ndarray) -> list[Triple]:
    """``CausalGraph.find_unshielded_triples()`` in causal-learn's order (both (x,y,z) and (z,y,x)).

    On an undirected skeleton this is the order "y ascending, then x, then z".
    """
    return as_triples(causallearn_paths(marks, ends=marks == NONE))


def causallearn_triangles(marks: np.ndarray) -> list[Triple]:
    """``CausalGraph.find_triangles()`` in causal-learn's order."""
    # "(a0, b1) in Adj": a tail or an arrow at b1 on the edge a0-b1
    return as_triples(causallearn_paths(marks, ends=(marks == TAIL) | (marks == ARROW)))


def causallearn_kites(
    marks: np.ndarray, triangles: list[Triple]
) -> list[tuple[int, int, int, int]]:
    """``CausalGraph.find_kites()``: (i, j, k, l) from triangle pairs sharing i and l, j < k."""
    by_ends: dict[tuple[int, int], list[Triple]] = {}
    for t in triangles:
        by_ends.setdefault((t[0], t[2]), []).append(t)
    out = []
    for t0 in triangles:
        for t1 in by_ends[(t0[0], t0[2])]:
            if t0[1] < t1[1] and marks[t0[1], t1[1]] == NONE:
                out.append((t0[0], t0[1], t1[1], t0[2]))
    return out
