"""Meek's rules after PC's colliders: the textbook R1-R4 closure and causal-learn's ``Meek.meek``.

``orient_cpdag`` runs the whole PC orientation phase, colliders then Meek.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fedcausal_flwr.graphs.causallearn_graph import (
    CausalLearnAncestry,
    as_triples,
    causallearn_kites,
    causallearn_paths,
    causallearn_triangles,
)
from fedcausal_flwr.graphs.colliders import ColliderOrientation, check_pc_graph, orient_colliders
from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL, Graph
from fedcausal_flwr.graphs.marks import (
    Triple,
    directed_mask,
    is_directed,
    is_undirected,
    non_adjacent_mask,
)
from fedcausal_flwr.graphs.sepsets import Sepsets

MEEK_MODES = ("complete", "causallearn")


def apply_meek(
    graph: Graph,
    mode: str = "complete",
    ancestry: CausalLearnAncestry | None = None,
    vetoed: np.ndarray | None = None,
) -> int:
    """Propagate orientations with Meek's rules; returns the number of edges oriented.

    ``complete``: Meek (1995) R1-R4 to closure (R4 only matters with background knowledge). Each
    pass applies one rule to all its matches at once; an undirected edge matched in both directions
    in the same pass is left undirected (this only happens on inconsistent input).

    * R1: ``a --> b - c``, a, c non-adjacent  =>  ``b --> c``
    * R2: ``a --> b --> c``, ``a - c``  =>  ``a --> c``
    * R3: ``a - b --> d``, ``a - c --> d``, b, c non-adjacent, ``a - d``  =>  ``a --> d``
    * R4: ``a - b --> c --> d``, ``a - d``, a adjacent to c, b, d non-adjacent  =>  ``a --> d``

    ``causallearn``: ``Meek.meek`` of causal-learn 0.1.4.8: unshielded triples, triangles and
    kites are computed once, then R1, R2, R3 sweep them in causal-learn's order until nothing
    changes; an edge ``j - k`` is not oriented ``j --> k`` if k is an ancestor of j according to
    causal-learn's ``dpath`` (pass the :class:`CausalLearnAncestry` kept during collider
    orientation; without it, one is rebuilt from the current directed edges).

    ``vetoed[a, b]`` (background knowledge: ``a -> b`` forbidden or ``b -> a`` required): no rule
    orients ``a --> b``.
    """
    if mode not in MEEK_MODES:
        raise ValueError(f"unknown Meek mode {mode!r}; expected one of {MEEK_MODES}")
    check_pc_graph(graph)
    if mode == "causallearn":
        return _meek_causallearn(graph.marks, ancestry, vetoed)
    return _meek_complete(graph.marks, vetoed)


def _orient_candidates(m: np.ndarray, cand: np.ndarray, vetoed: np.ndarray | None = None) -> int:
    """Orient each undirected ``i - j`` with ``cand[i, j]`` as ``i --> j`` (unless both ways or
    vetoed)."""
    if vetoed is not None:
        cand = cand & ~vetoed
    cand = cand & (m == TAIL) & (m.T == TAIL)
    cand &= ~cand.T
    rows, cols = np.nonzero(cand)
    m[rows, cols] = ARROW
    return int(rows.size)


def _meek_complete(m: np.ndarray, vetoed: np.ndarray | None = None) -> int:
    total = 0
    while True:
        changed = 0
        d = directed_mask(m).astype(np.int64)
        na = non_adjacent_mask(m).astype(np.int64)
        # R1: b - c with some a --> b, a not adjacent to c
        changed += _orient_candidates(m, (d.T @ na) > 0, vetoed)
        d = directed_mask(m).astype(np.int64)
        # R2: a - c with a --> b --> c
        changed += _orient_candidates(m, (d @ d) > 0, vetoed)
        changed += _meek_r3_r4(m, vetoed)
        total += changed
        if not changed:
            return total


def _meek_r3_r4(m: np.ndarray, vetoed: np.ndarray | None = None) -> int:
    und = (m == TAIL) & (m.T == TAIL)
    d = directed_mask(m)
    adj = m != NONE
    na = non_adjacent_mask(m)
    cand = np.zeros_like(und)
    for a, t in zip(*np.nonzero(und), strict=True):
        # R3: two non-adjacent b, c with a - b --> t and a - c --> t
        s = und[a] & d[:, t]
        if s.sum() >= 2 and na[np.ix_(s, s)].any():
            cand[a, t] = True
            continue
        # R4: a - b --> c --> t with a ~ c and b, t non-adjacent
        bs = und[a] & na[:, t]
        cs = adj[a] & d[:, t]
        if bs.any() and cs.any() and d[np.ix_(bs, cs)].any():
            cand[a, t] = True
    return _orient_candidates(m, cand, vetoed)


def _ancestry_orienter(
    m: np.ndarray, ancestry: CausalLearnAncestry, vetoed: np.ndarray | None = None
) -> Callable[[int, int], bool]:
    """causal-learn's orientation of ``a --> b`` in its Meek sweeps: refused (False) when b is an
    ancestor of a or the edge is vetoed, else made and the ancestry kept up to date (True)."""

    def orient(a: int, b: int) -> bool:
        if (vetoed is not None and vetoed[a, b]) or ancestry.is_ancestor(b, a):
            return False
        ancestry.edit(m, a, b, ARROW, TAIL)
        ancestry.adjust(a, b)
        return True

    return orient


def _causallearn_r2(
    m: np.ndarray, triangles: list[Triple], orient: Callable[[int, int], bool]
) -> int:
    """One R2 pass over ``triangles`` in their order: ``i --> j --> k`` and ``i - k`` orient
    ``i --> k``. Returns the number of edges oriented."""
    total = 0
    for i, j, k in triangles:
        if (
            is_directed(m, i, j)
            and is_directed(m, j, k)
            and is_undirected(m, i, k)
            and orient(i, k)
        ):
            total += 1
    return total


def _meek_causallearn(
    m: np.ndarray, ancestry: CausalLearnAncestry | None, vetoed: np.ndarray | None = None
) -> int:
    anc = ancestry if ancestry is not None else CausalLearnAncestry.from_marks(m)
    # Each rule orients an edge that is undirected now (nothing makes an edge undirected again),
    # so only the matches whose oriented edge is undirected on entry are listed, in causal-learn's
    # order: the sweeps see the same candidates in the same order, at the cost of the graph's
    # undirected part rather than of all its triples.
    undirected = (m == TAIL) & (m.T == TAIL)
    triples = as_triples(causallearn_paths(m, second=undirected, ends=m == NONE))
    # R2 orients i - k: both ends have an undirected edge
    loose = undirected.any(axis=1)
    triangles = as_triples(
        causallearn_paths(m, second=np.broadcast_to(loose, m.shape), ends=undirected, start=loose)
    )
    # R3 orients i - l of a kite (i, j, k, l) whose i - j and i - k stay undirected
    kites = causallearn_kites(m, [t for t in triangles if undirected[t[0], t[1]]])
    total = 0
    orient = _ancestry_orienter(m, anc, vetoed)
    loop = True
    while loop:
        loop = False
        for i, j, k in triples:
            if is_directed(m, i, j) and is_undirected(m, j, k) and orient(j, k):
                loop, total = True, total + 1
        oriented = _causallearn_r2(m, triangles, orient)
        loop, total = loop or oriented > 0, total + oriented
        for i, j, k, ell in kites:
            if (
                is_undirected(m, i, j)
                and is_undirected(m, i, k)
                and is_directed(m, j, ell)
                and is_directed(m, k, ell)
                and is_undirected(m, i, ell)
                and orient(i, ell)
            ):
                loop, total = True, total + 1
    return total


def orient_cpdag(
    graph: Graph,
    sepsets: Sepsets,
    rule: str = "standard",
    conflict: str = "existing",
    meek: str = "complete",
) -> ColliderOrientation:
    """PC's orientation phase: colliders then Meek, sharing causal-learn's ``dpath`` state.

    ``orient_cpdag(g, sepsets, rule="causallearn", conflict="existing", meek="causallearn")`` on an
    undirected skeleton reproduces ``uc_sepset(cg, 2)`` followed by ``meek`` of causal-learn's
    ``pc(..., uc_rule=0, uc_priority=2)``.
    """
    ancestry = CausalLearnAncestry.from_marks(graph.marks)
    result = orient_colliders(graph, sepsets, rule=rule, conflict=conflict, ancestry=ancestry)
    apply_meek(graph, mode=meek, ancestry=ancestry)
    return result


def definite_meek(
    graph: Graph,
    colliders: list[tuple[int, int, int]],
    noncolliders: list[tuple[int, int, int]],
    ancestry: CausalLearnAncestry,
) -> int:
    """causal-learn's ``Meek.definite_meek`` after definiteMaxP: R1 over the definite
    non-colliders only, R2 over triangles, and R3 over kites whose triples are definite; the
    triangles and kites are those of the graph on entry. Returns the number of edges oriented."""
    check_pc_graph(graph)
    m = graph.marks
    triangles = causallearn_triangles(m)
    kites = causallearn_kites(m, triangles)
    definite_colliders = set(colliders)
    definite_noncolliders = set(noncolliders)
    total = 0
    orient = _ancestry_orienter(m, ancestry)
    loop = True
    while loop:
        loop = False
        for i, j, k in noncolliders:
            if is_directed(m, i, j) and is_undirected(m, j, k):
                changed = orient(j, k)
            elif is_directed(m, k, j) and is_undirected(m, j, i):
                changed = orient(j, i)
            else:
                continue
            loop, total = loop or changed, total + int(changed)
        oriented = _causallearn_r2(m, triangles, orient)
        loop, total = loop or oriented > 0, total + oriented
        for i, j, k, ell in kites:
            if (
                ((j, ell, k) in definite_colliders or (k, ell, j) in definite_colliders)
                and ((j, i, k) in definite_noncolliders or (k, i, j) in definite_noncolliders)
                and is_undirected(m, i, ell)
                and orient(i, ell)
            ):
                loop, total = True, total + 1
    return total
