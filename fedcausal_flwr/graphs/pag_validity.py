"""Is a marked graph a PAG? Its canonical MAG, m-separation on it, and its triples with order.

* :func:`canonical_mag`: Zhang (2008, "On the completeness of orientation rules for causal
  discovery in the presence of latent confounders and selection bias", Theorem 2): every ``o->``
  becomes ``-->`` and the circle component (the ``o-o`` edges) is oriented into a DAG without
  unshielded colliders; here by a maximum-cardinality-search order, which does that exactly when
  the component is chordal. A circle facing a tail becomes an arrowhead (no selection bias).
* :func:`pag_problem`: why a graph is not a PAG (no selection bias): its canonical MAG is not
  ancestral, not maximal (a non-adjacent pair that no set m-separates), or the PAG of that MAG
  (:func:`~.truth.mag_to_pag`) is not the graph itself. ``None`` for a PAG.
* :class:`MSeparation`: m-separation queries on one MAG, with the reachability of each
  ``(x, conditioning set)`` cached (validation asks many sets per pair).
* :func:`triples_with_order`: the triples of a MAG that have an order in the sense of Ali,
  Richardson and Spirtes (2009, "Markov equivalence for ancestral graphs", Sec. 3): order 0 for
  unshielded triples; order k + 1 for a shielded triple ``<a, b, c>`` with a discriminating path
  ``<theta, ..., a, b, c>`` for b on which every collider triple has order at most k. Their
  colliders ("colliders with order") with the skeleton fix the Markov equivalence class; with the
  non-colliders ("triples with order") as well, the characterisation of Claassen and Bucur (2022).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.graphs.truth import Reachability, ancestor_matrix, check_mag, mag_to_pag


# ============================================================================ canonical MAG
def _mcs_order(adjacency: np.ndarray) -> list[int]:
    """A maximum-cardinality-search order of an undirected graph (ties: lowest index)."""
    p = adjacency.shape[0]
    weight = np.zeros(p, dtype=np.int64)
    done = np.zeros(p, dtype=bool)
    order = []
    for _ in range(p):
        candidates = np.flatnonzero(~done)
        v = int(candidates[np.argmax(weight[candidates])])
        order.append(v)
        done[v] = True
        weight[adjacency[v] & ~done] += 1
    return order


def canonical_mag(pag: Graph) -> Graph:
    """The MAG Zhang's construction reads off a PAG (see the module docstring); kind ``MAG``.

    Tail-tail edges are left as they are (no MAG has them: :func:`pag_problem` says so).
    """
    m = pag.marks.copy()
    circle = m == CIRCLE
    # o-> (circle facing an arrowhead) and o-- (circle facing a tail): the circle is decided
    m[circle & (m.T == ARROW)] = TAIL
    m[circle & (m.T == TAIL)] = ARROW
    both = (m == CIRCLE) & (m.T == CIRCLE)
    if both.any():
        rank = np.empty(m.shape[0], dtype=np.int64)
        rank[_mcs_order(both)] = np.arange(m.shape[0])
        for i, j in zip(*np.nonzero(np.triu(both)), strict=True):
            first, second = (i, j) if rank[i] < rank[j] else (j, i)
            m[first, second], m[second, first] = ARROW, TAIL
    return Graph(pag.names, m, "MAG")


# ============================================================================ m-separation
class MSeparation:
    """m-separation in one MAG (a DAG works too), caching one reachability per (x, set)."""

    def __init__(self, mag: Graph):
        self.search = Reachability(mag)
        self._cache: dict[tuple[int, frozenset[int]], np.ndarray] = {}

    def reachable(self, x: int, given: Iterable[int] = ()) -> np.ndarray:
        """Nodes m-connected to ``x`` given ``given`` (a walk-based Bayes-ball search)."""
        key = (int(x), frozenset(int(v) for v in given))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self.search.reachable([key[0]], list(key[1]))
        return hit

    def separated(self, x: int, y: int, given: Iterable[int] = ()) -> bool:
        return not bool(self.reachable(x, given)[y])


# ============================================================================ validity
def pag_problem(pag: Graph, mag: Graph | None = None) -> str | None:
    """Why ``pag`` is not a PAG without selection bias (see the module docstring), else None.

    ``mag`` is its :func:`canonical_mag` when the caller has it already.
    """
    mag = canonical_mag(pag) if mag is None else mag
    try:
        check_mag(mag)
    except ValueError as err:
        return f"its canonical MAG is not a MAG: {err}"
    anc = ancestor_matrix(mag)
    msep = MSeparation(mag)
    adj = mag.marks != NONE
    for x, y in zip(*np.nonzero(np.triu(~adj, k=1)), strict=True):
        # in an ancestral graph a separable pair is separated by its other ancestors
        # (Richardson and Spirtes 2002, "Ancestral graph Markov models", Sec. 3.7)
        others = np.flatnonzero(anc[:, x] | anc[:, y])
        cond = [int(v) for v in others if v not in (x, y)]
        if not msep.separated(int(x), int(y), cond):
            return f"its canonical MAG is not maximal ({pag.names[x]}, {pag.names[y]})"
    if mag_to_pag(mag) != pag:
        return "it is not the PAG of its canonical MAG"
    return None


# ============================================================================ triples with order
@dataclass(frozen=True)
class OrderedTriple:
    """A triple ``<x, z, y>`` (x < y) with its order, whether z is a collider on it, and the ends
    ``(theta, gamma)`` whose separating set decides it (``(x, y)`` at order 0)."""

    x: int
    z: int
    y: int
    order: int
    collider: bool
    ends: tuple[int, int]


def _discriminating_end(
    m: np.ndarray, a: int, b: int, c: int, ordered: dict[tuple[int, int, int], int], top: int
) -> int | None:
    """theta of a discriminating path ``<theta, ..., a, b, c>`` for b in the MAG ``m`` whose
    collider triples all have an order ``<= top`` (depth-first over simple paths), or None."""

    def known(u: int, v: int, w: int) -> bool:
        key = (min(u, w), v, max(u, w))
        return key in ordered and ordered[key] <= top

    def parent_of_c(v: int) -> bool:
        return bool(m[v, c] == ARROW and m[c, v] == TAIL)

    if not (m[b, a] == ARROW and parent_of_c(a)):
        return None
    # (node, its successor on the path towards b, nodes on path)
    stack: list[tuple[int, int, tuple[int, ...]]] = [(a, b, (c, b, a))]
    while stack:
        v, succ, path = stack.pop()
        if m[succ, v] != ARROW:  # v must be a collider on the path
            continue
        for u in np.flatnonzero(m[:, v] == ARROW).tolist():  # u *-> v
            if u in path or not known(u, v, succ):  # <u, v, succ> must be a collider with order
                continue
            if m[u, c] == NONE and u != c:
                return int(u)
            if parent_of_c(u):
                stack.append((u, v, (*path, u)))
    return None


def triples_with_order(mag: Graph) -> list[OrderedTriple]:
    """Every triple of ``mag`` that has an order (see the module docstring), order ascending."""
    m = mag.marks
    adj = m != NONE
    out: list[OrderedTriple] = []
    ordered: dict[tuple[int, int, int], int] = {}
    shielded = []
    for z in range(m.shape[0]):
        for x, y in combinations(np.flatnonzero(adj[z]).tolist(), 2):
            collider = bool(m[x, z] == ARROW and m[y, z] == ARROW)
            if adj[x, y]:
                shielded.append((x, z, y, collider))
                continue
            ordered[(x, z, y)] = 0
            out.append(OrderedTriple(x, z, y, 0, collider, (x, y)))
    k = 0
    while shielded:
        found = []
        for x, z, y, collider in shielded:
            for a, c in ((x, y), (y, x)):
                theta = _discriminating_end(m, a, z, c, ordered, k)
                if theta is not None:
                    found.append(OrderedTriple(x, z, y, k + 1, collider, (theta, c)))
                    break
        if not found:
            break
        for t in found:
            ordered[(t.x, t.z, t.y)] = t.order
        out += found
        done = {(t.x, t.z, t.y) for t in found}
        shielded = [s for s in shielded if s[:3] not in done]
        k += 1
    return out
