"""Orientation rules shared by every engine: PC colliders and Meek, FCI R0-R10.

All functions work **in place** on a :class:`Graph` (``marks[i, j]`` is the mark at j on edge i-j).
Every rule set comes in two flavours:

* **textbook** (``mode="complete"`` for Meek, ``mode="zhang"`` for FCI): Meek (1995) R1-R4 and
  Zhang (2008) R1-R10 applied to closure. Rules only ever turn an undirected edge (PC) or a circle
  (FCI) into something more specific; a rule that would overwrite a non-circle mark is skipped.
* **causal-learn** (``mode="causallearn"``): a step-by-step reproduction of causal-learn 0.1.4.8
  (``UCSepset.uc_sepset`` with ``uc_priority`` 0/1/2, ``Meek.meek``, and the rule functions and main
  loop of ``FCI.fci``), including its visiting order, its incremental ancestor matrix ``dpath``
  (not a full transitive closure), its gating of R4 on a change by R1-R3 and its search shortcuts.
  It exists so that an engine can be compared with causal-learn edge by edge.

Separating sets are a mapping from the normalised pair ``(min(x, y), max(x, y))`` to a *list* of the
separating sets recorded for that pair (one for plain PC-stable; several when an engine keeps every
set that made the pair independent, as the conservative and majority rules need).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph

Sepsets = Mapping[tuple[int, int], Sequence[Collection[int]]]
Triple = tuple[int, int, int]
Independence = Callable[[int, int, tuple[int, ...]], bool]

SEPSET_RULES = ("standard", "causallearn", "conservative", "majority")
CONFLICT_POLICIES = ("existing", "overwrite", "bidirected")
MEEK_MODES = ("complete", "causallearn")
FCI_MODES = ("zhang", "causallearn")


# ============================================================================ separating sets
def pair_key(x: int, y: int) -> tuple[int, int]:
    """The normalised key of an unordered pair."""
    x, y = int(x), int(y)
    return (x, y) if x < y else (y, x)


def recorded_sepsets(sepsets: Sepsets, x: int, y: int) -> list[frozenset[int]] | None:
    """All separating sets recorded for ``{x, y}``, or None when the pair has no entry."""
    key = pair_key(x, y)
    if key in sepsets:
        value = sepsets[key]
    elif (key[1], key[0]) in sepsets:
        value = sepsets[(key[1], key[0])]
    else:
        return None
    if isinstance(value, (set, frozenset)):
        return [frozenset(int(v) for v in value)]
    if not isinstance(value, (list, tuple)):
        raise TypeError(
            f"sepsets[{key}] must be a list of separating sets (or one set), got {value!r}"
        )
    out = []
    for s in value:
        if isinstance(s, (int, np.integer)) or not isinstance(s, Collection):
            raise TypeError(
                f"sepsets[{key}] must be a list of separating sets, e.g. [(2,), (2, 3)]; "
                f"got the element {s!r} in {value!r}"
            )
        out.append(frozenset(int(v) for v in s))
    return out


def triple_status(sets: Sequence[Collection[int]], y: int, rule: str = "standard") -> str:
    """Classify the unshielded triple x - y - z from the separating sets of {x, z}.

    Returns ``"collider"``, ``"noncollider"`` or ``"ambiguous"``:

    * ``standard``: collider iff y is not in the *first* recorded set (textbook PC);
    * ``causallearn``: collider iff y is in *none* of the recorded sets (causal-learn's
      ``uc_sepset``/``rule0``, which look at every recorded set or their union);
    * ``conservative`` (Ramsey et al. 2006): collider if y is in none, non-collider if in all,
      ambiguous otherwise;
    * ``majority`` (Colombo and Maathuis 2014, as in pcalg): collider if y is in fewer than half of
      the sets, non-collider if in more than half, ambiguous at exactly half.
    """
    if rule not in SEPSET_RULES:
        raise ValueError(f"unknown separating-set rule {rule!r}; expected one of {SEPSET_RULES}")
    if len(sets) == 0:
        raise ValueError(f"no separating set recorded for the triple around node {y}")
    if rule == "standard":
        return "noncollider" if y in sets[0] else "collider"
    n_with = sum(1 for s in sets if y in s)
    if rule == "causallearn":
        return "noncollider" if n_with else "collider"
    if rule == "conservative":
        if n_with == 0:
            return "collider"
        return "noncollider" if n_with == len(sets) else "ambiguous"
    if 2 * n_with < len(sets):
        return "collider"
    return "noncollider" if 2 * n_with > len(sets) else "ambiguous"


def _sepsets_or_raise(sepsets: Sepsets | None, x: int, y: int) -> list[frozenset[int]]:
    if sepsets is None:
        raise ValueError(f"separating sets are needed to decide about the pair {pair_key(x, y)}")
    sets = recorded_sepsets(sepsets, x, y)
    if sets is None:
        raise KeyError(
            f"no separating set recorded for the non-adjacent pair {pair_key(x, y)}; every pair "
            "removed from the skeleton must have an entry"
        )
    return sets


# ============================================================================ small helpers
def _adjacent(m: np.ndarray, i: int, j: int) -> bool:
    return bool(m[i, j] != NONE)


def _neighbours(m: np.ndarray, i: int) -> list[int]:
    return np.flatnonzero(m[i] != NONE).tolist()


def _directed(m: np.ndarray, i: int, j: int) -> bool:
    """``i --> j``."""
    return bool(m[i, j] == ARROW and m[j, i] == TAIL)


def _undirected(m: np.ndarray, i: int, j: int) -> bool:
    return bool(m[i, j] == TAIL and m[j, i] == TAIL)


def _directed_matrix(m: np.ndarray) -> np.ndarray:
    return (m == ARROW) & (m.T == TAIL)


def _non_adjacent_matrix(m: np.ndarray) -> np.ndarray:
    na = m == NONE
    np.fill_diagonal(na, False)
    return na


def _set_if_circle(m: np.ndarray, i: int, j: int, mark: int) -> bool:
    """Put ``mark`` at j on edge i-j if that mark is a circle now; report whether it changed."""
    if m[i, j] == CIRCLE:
        m[i, j] = mark
        return True
    return False


# ============================================================================ causal-learn dpath
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
        self.dpath = np.eye(n_nodes, dtype=bool)

    @classmethod
    def from_marks(cls, marks: np.ndarray) -> CausalLearnAncestry:
        anc = cls(marks.shape[0])
        anc.reconstitute(marks)
        return anc

    def adjust(self, i: int, j: int) -> None:
        """Record the new edge ``i --> j`` exactly as ``GeneralGraph.adjust_dpath`` does."""
        d = self.dpath
        d[j, i] = True
        d[j, :] |= d[i, :]
        d[:, i] |= d[:, j]

    def reconstitute(self, marks: np.ndarray) -> None:
        """Rebuild from the directed edges of ``marks`` (``reconstitute_dpath``)."""
        self.dpath = np.eye(marks.shape[0], dtype=bool)
        rows, cols = np.nonzero(np.triu(marks != NONE, k=1))
        for i, j in zip(rows[::-1].tolist(), cols[::-1].tolist(), strict=True):
            if _directed(marks, i, j):
                self.adjust(i, j)
            elif _directed(marks, j, i):
                self.adjust(j, i)

    def is_ancestor(self, a: int, b: int) -> bool:
        """causal-learn's ``is_ancestor_of(a, b)``."""
        return bool(self.dpath[b, a])


# ============================================================================ PC: colliders
@dataclass
class ColliderOrientation:
    """What collider orientation did with every unshielded triple ``(x, y, z)`` (x < z)."""

    colliders: list[Triple] = field(default_factory=list)
    noncolliders: list[Triple] = field(default_factory=list)
    ambiguous: list[Triple] = field(default_factory=list)
    conflicts: list[Triple] = field(default_factory=list)


def _causallearn_adjacency_list(marks: np.ndarray) -> list[tuple[int, int]]:
    """``CausalGraph.find_adj()``: (c, r) for every tail at r, then for every arrow at r."""
    out: list[tuple[int, int]] = []
    for code in (TAIL, ARROW):
        rows, cols = np.nonzero(marks.T == code)  # marks.T[r, c] is the mark at r on edge r-c
        out.extend(zip(cols.tolist(), rows.tolist(), strict=True))
    return out


def _causallearn_paths(marks: np.ndarray) -> list[Triple]:
    """Every path a0 - a1 - b1 (a0 != b1) over causal-learn's adjacency list, in its order."""
    adj = _causallearn_adjacency_list(marks)
    by_first: dict[int, list[int]] = {}
    for q, (a0, _) in enumerate(adj):
        by_first.setdefault(a0, []).append(q)
    out = []
    for a0, a1 in adj:
        for q in by_first.get(a1, ()):
            b1 = adj[q][1]
            if a0 != b1:
                out.append((a0, a1, b1))
    return out


def causallearn_unshielded_triples(marks: np.ndarray) -> list[Triple]:
    """``CausalGraph.find_unshielded_triples()`` in causal-learn's order (both (x,y,z) and (z,y,x)).

    On an undirected skeleton this is the order "y ascending, then x, then z".
    """
    return [(a, b, c) for a, b, c in _causallearn_paths(marks) if marks[a, c] == NONE]


def causallearn_triangles(marks: np.ndarray) -> list[Triple]:
    """``CausalGraph.find_triangles()`` in causal-learn's order."""
    # "(a0, b1) in Adj": a tail or an arrow at b1 on the edge a0-b1
    return [(a, b, c) for a, b, c in _causallearn_paths(marks) if marks[a, c] in (TAIL, ARROW)]


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


def _check_pc_graph(graph: Graph) -> None:
    if np.any(graph.marks == CIRCLE):
        raise ValueError(
            "PC orientation works on tail-marked (CPDAG-style) graphs, but this graph has circle "
            "marks; use fci_orient_colliders / apply_fci_rules for PAGs"
        )


def orient_colliders(
    graph: Graph,
    sepsets: Sepsets,
    rule: str = "standard",
    conflict: str = "existing",
    ancestry: CausalLearnAncestry | None = None,
) -> ColliderOrientation:
    """Orient the unshielded colliders of a PC skeleton: ``x --> y <-- z`` when y is not separating.

    Triples ``x - y - z`` (x, z non-adjacent, x < z) are visited in causal-learn's order (for an
    undirected skeleton: y ascending, then x, then z). ``rule`` is one of :data:`SEPSET_RULES` (see
    :func:`triple_status`); ambiguous triples (conservative/majority) are listed and left alone.

    ``conflict`` decides what happens when a collider meets edges already oriented by an earlier
    collider (causal-learn's ``uc_priority``):

    * ``existing`` (priority 2, causal-learn's default): skip the triple if ``y --> x`` or
      ``y --> z`` is already oriented; otherwise orient both edges into y;
    * ``overwrite`` (priority 0): orient both edges into y whatever they were;
    * ``bidirected`` (priority 1): an undirected edge becomes ``x --> y``; an edge ``y --> x``
      becomes ``x <-> y``; anything else is left.

    Triples that met an oriented edge are listed in ``conflicts``. Pass ``ancestry`` to track
    causal-learn's ``dpath`` for a later ``apply_meek(mode="causallearn")`` (or use
    :func:`orient_cpdag`, which does both).
    """
    if conflict not in CONFLICT_POLICIES:
        raise ValueError(
            f"unknown conflict policy {conflict!r}; expected one of {CONFLICT_POLICIES}"
        )
    _check_pc_graph(graph)
    m = graph.marks
    result = ColliderOrientation()
    triples = [(x, y, z) for (x, y, z) in causallearn_unshielded_triples(m) if x < z]
    for x, y, z in triples:
        status = triple_status(_sepsets_or_raise(sepsets, x, z), y, rule)
        if status == "noncollider":
            result.noncolliders.append((x, y, z))
            continue
        if status == "ambiguous":
            result.ambiguous.append((x, y, z))
            continue
        result.colliders.append((x, y, z))
        already = [_directed(m, a, y) or _directed(m, y, a) for a in (x, z)]
        if conflict == "existing":
            if _directed(m, y, x) or _directed(m, y, z):
                result.conflicts.append((x, y, z))
                continue
            for a, was_directed in zip((x, z), already, strict=True):
                _replace_with_directed(m, a, y, was_directed, ancestry)
        elif conflict == "overwrite":
            if _directed(m, y, x) or _directed(m, y, z):
                result.conflicts.append((x, y, z))
            for a, was_directed in zip((x, z), already, strict=True):
                _replace_with_directed(m, a, y, was_directed, ancestry)
        else:  # bidirected
            if _directed(m, y, x) or _directed(m, y, z):
                result.conflicts.append((x, y, z))
            for a in (x, z):
                if _undirected(m, a, y):
                    m[a, y], m[y, a] = ARROW, TAIL
                    if ancestry is not None:
                        ancestry.adjust(a, y)
                elif _directed(m, y, a):
                    m[a, y] = m[y, a] = ARROW
                    if ancestry is not None:
                        ancestry.reconstitute(m)
    return result


def _replace_with_directed(
    m: np.ndarray, a: int, y: int, was_directed: bool, ancestry: CausalLearnAncestry | None
) -> None:
    """causal-learn's "remove edge a-y, add a --> y" with its dpath side effects."""
    if ancestry is not None and was_directed:
        m[a, y] = m[y, a] = NONE
        ancestry.reconstitute(m)
    m[a, y], m[y, a] = ARROW, TAIL
    if ancestry is not None:
        ancestry.adjust(a, y)


# ============================================================================ PC: Meek
def apply_meek(
    graph: Graph, mode: str = "complete", ancestry: CausalLearnAncestry | None = None
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
    """
    if mode not in MEEK_MODES:
        raise ValueError(f"unknown Meek mode {mode!r}; expected one of {MEEK_MODES}")
    _check_pc_graph(graph)
    if mode == "causallearn":
        return _meek_causallearn(graph.marks, ancestry)
    return _meek_complete(graph.marks)


def _orient_candidates(m: np.ndarray, cand: np.ndarray) -> int:
    """Orient each undirected ``i - j`` with ``cand[i, j]`` as ``i --> j`` (unless both ways)."""
    cand = cand & (m == TAIL) & (m.T == TAIL)
    cand &= ~cand.T
    rows, cols = np.nonzero(cand)
    m[rows, cols] = ARROW
    return int(rows.size)


def _meek_complete(m: np.ndarray) -> int:
    total = 0
    while True:
        changed = 0
        d = _directed_matrix(m).astype(np.int64)
        na = _non_adjacent_matrix(m).astype(np.int64)
        # R1: b - c with some a --> b, a not adjacent to c
        changed += _orient_candidates(m, (d.T @ na) > 0)
        d = _directed_matrix(m).astype(np.int64)
        # R2: a - c with a --> b --> c
        changed += _orient_candidates(m, (d @ d) > 0)
        changed += _meek_r3_r4(m)
        total += changed
        if not changed:
            return total


def _meek_r3_r4(m: np.ndarray) -> int:
    und = (m == TAIL) & (m.T == TAIL)
    d = _directed_matrix(m)
    adj = m != NONE
    na = _non_adjacent_matrix(m)
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
    return _orient_candidates(m, cand)


def _meek_causallearn(m: np.ndarray, ancestry: CausalLearnAncestry | None) -> int:
    anc = ancestry if ancestry is not None else CausalLearnAncestry.from_marks(m)
    triples = causallearn_unshielded_triples(m)
    triangles = causallearn_triangles(m)
    kites = causallearn_kites(m, triangles)
    total = 0

    def orient(a: int, b: int) -> bool:
        if anc.is_ancestor(b, a):
            return False
        m[a, b], m[b, a] = ARROW, TAIL
        anc.adjust(a, b)
        return True

    loop = True
    while loop:
        loop = False
        for i, j, k in triples:
            if _directed(m, i, j) and _undirected(m, j, k) and orient(j, k):
                loop, total = True, total + 1
        for i, j, k in triangles:
            if _directed(m, i, j) and _directed(m, j, k) and _undirected(m, i, k) and orient(i, k):
                loop, total = True, total + 1
        for i, j, k, ell in kites:
            if (
                _undirected(m, i, j)
                and _undirected(m, i, k)
                and _directed(m, j, ell)
                and _directed(m, k, ell)
                and _undirected(m, i, ell)
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


# ============================================================================ FCI: R0
def _arrow_allowed(m: np.ndarray, x: int, y: int) -> bool:
    """causal-learn's ``is_arrow_point_allowed(x, y)`` without background knowledge."""
    return bool(m[x, y] in (ARROW, CIRCLE))


def fci_orient_colliders(
    graph: Graph, sepsets: Sepsets, rule: str = "standard"
) -> ColliderOrientation:
    """FCI's R0: put arrowheads at y on ``x *-o y o-* z`` when y does not separate x and z.

    Call it on the circle-marked skeleton (``graph.skeleton()``-like marks). Visits y ascending
    and the pairs of y's neighbours in ascending order, as causal-learn's ``rule0``; triples already
    oriented as colliders, or with a tail at y, are skipped; only the marks at y change.
    """
    m = graph.marks
    result = ColliderOrientation()
    for b in range(m.shape[0]):
        nb = _neighbours(m, b)
        for a, c in combinations(nb, 2):
            if _adjacent(m, a, c):
                continue
            if m[a, b] == ARROW and m[c, b] == ARROW:
                continue
            status = triple_status(_sepsets_or_raise(sepsets, a, c), b, rule)
            if status == "noncollider":
                result.noncolliders.append((a, b, c))
                continue
            if status == "ambiguous":
                result.ambiguous.append((a, b, c))
                continue
            result.colliders.append((a, b, c))
            if not (_arrow_allowed(m, a, b) and _arrow_allowed(m, c, b)):
                result.conflicts.append((a, b, c))
                continue
            m[a, b] = ARROW
            m[c, b] = ARROW
    return result


# ============================================================================ FCI: R1-R10
@dataclass(frozen=True)
class DiscriminatingPath:
    """``path = (theta, v1, ..., a, b, c)``: every v between theta and b is a collider and a parent
    of c, theta is not adjacent to c. R4 decides whether b is a collider on it."""

    path: tuple[int, ...]

    @property
    def theta(self) -> int:
        return self.path[0]

    @property
    def a(self) -> int:
        return self.path[-3]

    @property
    def b(self) -> int:
        return self.path[-2]

    @property
    def c(self) -> int:
        return self.path[-1]


#: Returns True if b is a non-collider (b -> c), False if a collider (a <-> b <-> c), None to skip.
DiscriminatingDecision = Callable[[DiscriminatingPath], "bool | None"]


@dataclass
class _FCIContext:
    sepsets: Sepsets | None
    sepset_rule: str
    independence: Independence | None
    decision: DiscriminatingDecision | None
    strict: bool
    max_path_length: int

    def noncollider_on_path(self, path: tuple[int, ...]) -> bool | None:
        """R4's question for ``path = (theta, ..., a, b, c)``: is b a non-collider?

        A ``decision`` callback answers directly. Otherwise, with an ``independence`` callback, the
        causal-learn procedure: test theta _||_ c given the path's inner nodes with and without b;
        independent with b -> non-collider, independent only without b -> collider. Otherwise (or
        if both tests say dependent) b's membership in the separating sets of (theta, c).
        """
        if self.decision is not None:
            return self.decision(DiscriminatingPath(tuple(path)))
        theta, b, c = path[0], path[-2], path[-1]
        if self.independence is not None:
            inner = tuple(path[1:-1])  # causal-learn's order: theta's neighbour, ..., a, b
            if self.independence(theta, c, inner):
                return True
            if self.independence(theta, c, tuple(v for v in inner if v != b)):
                return False
        if self.strict:
            sets = _sepsets_or_raise(self.sepsets, theta, c)
        else:
            sets = None if self.sepsets is None else recorded_sepsets(self.sepsets, theta, c)
            if sets is None:
                return None
        status = triple_status(sets, b, self.sepset_rule)
        return None if status == "ambiguous" else status == "noncollider"


def apply_fci_rules(
    graph: Graph,
    sepsets: Sepsets | None = None,
    *,
    mode: str = "zhang",
    sepset_rule: str | None = None,
    independence: Independence | None = None,
    discriminating_decision: DiscriminatingDecision | None = None,
    selection_bias: bool = False,
    max_path_length: int = -1,
) -> dict[str, int]:
    """Apply FCI's orientation rules after R0 until nothing changes; returns changes per rule
    (``zhang``: orientations per rule; ``causallearn``: changed end marks per rule function).

    ``mode="zhang"``: Zhang (2008) R1-R4 and R8-R10, plus R5-R7 when ``selection_bias`` is True.
    Rules only turn circles into arrowheads or tails. R3 reads marks only; R4 asks
    :meth:`_FCIContext.noncollider_on_path` (a ``discriminating_decision`` callback, else the
    ``independence`` callback procedure, else the separating sets, which must then cover every
    discriminating pair). Searches for uncovered paths (R5, R9, R10) are exhaustive over simple
    paths.

    ``mode="causallearn"``: causal-learn 0.1.4.8's ``fci`` loop after ``rule0``: ``rulesR1R2cycle``,
    ``ruleR3`` (which also requires the middle node in a separating set), ``ruleR4B`` only when
    R1-R3 changed something in this sweep, then R5, R6, R7, R8, R9, R10 (always, selection bias or
    not), each with causal-learn's visiting order and path searches (breadth-first with a visited
    set, so some uncovered paths are missed). R10 pairs possible children in ascending index order;
    causal-learn iterates a ``set`` of nodes there, whose order follows Python's string hashing.
    A pair missing from ``sepsets`` means "no decision", as in causal-learn.

    ``sepset_rule`` (see :func:`triple_status`) defaults to ``standard`` for ``zhang`` and to
    ``causallearn`` (b in any recorded set) for ``causallearn``.
    ``independence(x, y, cond) -> bool`` (True if independent) lets R4 run causal-learn's two extra
    CI tests on a discriminating path; ``max_path_length`` (-1: unlimited) bounds causal-learn's
    discriminating-path search.
    """
    if mode not in FCI_MODES:
        raise ValueError(f"unknown FCI rule mode {mode!r}; expected one of {FCI_MODES}")
    if sepset_rule is None:
        sepset_rule = "causallearn" if mode == "causallearn" else "standard"
    if sepset_rule not in SEPSET_RULES:
        raise ValueError(f"unknown separating-set rule {sepset_rule!r}; expected {SEPSET_RULES}")
    ctx = _FCIContext(
        sepsets,
        sepset_rule,
        independence,
        discriminating_decision,
        strict=(mode == "zhang"),
        max_path_length=max_path_length,
    )
    if mode == "causallearn":
        return _fci_causallearn(graph.marks, ctx)
    return _fci_zhang(graph.marks, ctx, selection_bias)


# ---------------------------------------------------------------------------- Zhang (2008)
def _fci_zhang(m: np.ndarray, ctx: _FCIContext, selection_bias: bool) -> dict[str, int]:
    rules: list[tuple[str, Callable[[], int]]] = [
        ("R1", lambda: _zhang_r1(m)),
        ("R2", lambda: _zhang_r2(m)),
        ("R3", lambda: _zhang_r3(m)),
        ("R4", lambda: _zhang_r4(m, ctx)),
    ]
    if selection_bias:
        rules += [
            ("R5", lambda: _zhang_r5(m)),
            ("R6", lambda: _zhang_r6(m)),
            ("R7", lambda: _zhang_r7(m)),
        ]
    rules += [
        ("R8", lambda: _zhang_r8(m)),
        ("R9", lambda: _zhang_r9(m)),
        ("R10", lambda: _zhang_r10(m)),
    ]
    counts = {name: 0 for name, _ in rules}
    while True:
        changed = 0
        for name, rule in rules:
            n = rule()
            counts[name] += n
            changed += n
        if not changed:
            return counts


def _zhang_r1(m: np.ndarray) -> int:
    """``a *-> b o-* c``, a, c non-adjacent  =>  ``b --> c``."""
    arrow_in = (m == ARROW).astype(np.int64)  # [a, b]: arrowhead at b on a-b
    na = _non_adjacent_matrix(m).astype(np.int64)
    # cand[b, c]: circle at b on b-c, not a tail at c, some a *-> b with a, c non-adjacent
    cand = ((arrow_in.T @ na) > 0) & (m.T == CIRCLE) & (m != TAIL) & (m != NONE)
    cand &= ~cand.T
    b_idx, c_idx = np.nonzero(cand)
    m[c_idx, b_idx] = TAIL
    m[b_idx, c_idx] = ARROW
    return int(b_idx.size)


def _zhang_r2(m: np.ndarray) -> int:
    """``a --> b *-> c`` or ``a *-> b --> c``, and ``a *-o c``  =>  ``a *-> c``."""
    d = _directed_matrix(m).astype(np.int64)
    arrow = (m == ARROW).astype(np.int64)
    cand = (((d @ arrow) > 0) | ((arrow @ d) > 0)) & (m == CIRCLE)
    rows, cols = np.nonzero(cand)
    m[rows, cols] = ARROW
    return int(rows.size)


def _zhang_r3(m: np.ndarray) -> int:
    """``a *-> b <-* c``, ``a *-o d o-* c``, a, c non-adjacent, ``d *-o b``  =>  ``d *-> b``."""
    na = _non_adjacent_matrix(m)
    n = 0
    for d, b in zip(*np.nonzero(m == CIRCLE), strict=True):
        s = (m[:, b] == ARROW) & (m[:, d] == CIRCLE)
        if s.sum() >= 2 and na[np.ix_(s, s)].any():
            m[d, b] = ARROW
            n += 1
    return n


def _find_discriminating_path(m: np.ndarray, a: int, b: int, c: int) -> tuple[int, ...] | None:
    """Breadth-first search back from a for theta: returns ``(theta, ..., a, b, c)`` or None.

    Interior nodes are parents of c and colliders on the path; reachability over them is local, so
    the search finds a discriminating path whenever one exists (shortest first, lowest index first).
    """
    prev = {a: b}
    queue = deque([a])
    while queue:
        v = queue.popleft()
        for theta in np.flatnonzero(m[:, v] == ARROW).tolist():
            if theta in prev or theta == c:
                continue
            if m[c, theta] == NONE:
                path = [theta, v]
                while path[-1] != b:
                    path.append(prev[path[-1]])
                return (*path, c)
            # theta becomes an interior node: parent of c and a collider (arrowhead from v's side)
            if _directed(m, theta, c) and m[v, theta] == ARROW:
                prev[theta] = v
                queue.append(theta)
    return None


def _zhang_r4(m: np.ndarray, ctx: _FCIContext) -> int:
    """Discriminating path ``<theta, ..., a, b, c>`` with ``b o-* c``: ``b --> c`` if b is a
    non-collider, else ``a <-> b <-> c``."""
    n = 0
    for c in range(m.shape[0]):
        for b in np.flatnonzero(m[c] == CIRCLE).tolist():  # circle at b on c-b
            parents = np.flatnonzero((m[:, c] == ARROW) & (m[c, :] == TAIL)).tolist()
            for a in parents:
                if a == b or m[b, a] != ARROW:
                    continue
                path = _find_discriminating_path(m, a, b, c)
                if path is None:
                    continue
                noncollider = ctx.noncollider_on_path(path)
                if noncollider is None:
                    continue
                if noncollider:
                    m[c, b] = TAIL
                    _set_if_circle(m, b, c, ARROW)
                else:
                    m[c, b] = ARROW
                    _set_if_circle(m, a, b, ARROW)
                    _set_if_circle(m, b, c, ARROW)
                n += 1
                break
    return n


def _uncovered_path_exists(
    m: np.ndarray,
    start: list[int],
    target: int,
    step_ok: Callable[[int, int], bool],
    final_ok: Callable[[list[int]], bool] | None = None,
) -> list[int] | None:
    """Depth-first search for a simple uncovered path extending ``start`` to ``target``.

    ``step_ok(u, v)`` says whether the edge u-v may be walked from u to v; "uncovered" means every
    two nodes two apart on the path are non-adjacent. Returns the path or None.
    """
    if len(start) >= 2 and start[-1] == target:
        return start if final_ok is None or final_ok(start) else None
    stack = [(list(start), iter(_neighbours(m, start[-1])))]
    on_path = set(start)
    while stack:
        path, it = stack[-1]
        advanced = False
        for w in it:
            if w in on_path or not step_ok(path[-1], w):
                continue
            if len(path) >= 2 and m[path[-2], w] != NONE:
                continue
            new_path = [*path, w]
            if w == target:
                if final_ok is None or final_ok(new_path):
                    return new_path
                continue
            on_path.add(w)
            stack.append((new_path, iter(_neighbours(m, w))))
            advanced = True
            break
        if not advanced:
            stack.pop()
            on_path.discard(path[-1])
    return None


def _circle_cycle_path(m: np.ndarray, a: int, b: int) -> list[int] | None:
    """An uncovered circle path ``<a, c, ..., d, b>`` with c, b and a, d non-adjacent, or None."""

    def circle_step(u: int, v: int) -> bool:
        return m[u, v] == CIRCLE and m[v, u] == CIRCLE

    def closes_cycle(path: list[int]) -> bool:
        return len(path) >= 4 and not _adjacent(m, path[-2], a)

    for c in _neighbours(m, a):
        if c == b or not circle_step(a, c) or _adjacent(m, c, b):
            continue
        path = _uncovered_path_exists(m, [a, c], b, circle_step, final_ok=closes_cycle)
        if path is not None:
            return path
    return None


def _zhang_r5(m: np.ndarray) -> int:
    """``a o-o b`` closing an uncovered circle cycle  =>  every edge on the cycle becomes a - b."""
    n = 0
    for a, b in zip(*np.nonzero(np.triu((m == CIRCLE) & (m.T == CIRCLE))), strict=True):
        if not (m[a, b] == CIRCLE and m[b, a] == CIRCLE):
            continue
        path = _circle_cycle_path(m, int(a), int(b))
        if path is None:
            continue
        m[a, b] = m[b, a] = TAIL
        for u, v in zip(path[:-1], path[1:], strict=True):
            m[u, v] = m[v, u] = TAIL
        n += 1
    return n


def _zhang_r6(m: np.ndarray) -> int:
    """``a - b o-* c``  =>  ``b -* c``."""
    has_undirected = ((m == TAIL) & (m.T == TAIL)).any(axis=0)
    cand = (m == CIRCLE) & has_undirected[None, :]  # [c, b]: circle at b on c-b
    rows, cols = np.nonzero(cand)
    m[rows, cols] = TAIL
    return int(rows.size)


def _zhang_r7(m: np.ndarray) -> int:
    """``a -o b o-* c``, a, c non-adjacent  =>  ``b -* c``."""
    tail_circle = ((m.T == TAIL) & (m == CIRCLE)).astype(np.int64)  # [a, b]: a -o b
    na = _non_adjacent_matrix(m).astype(np.int64)
    cand = ((tail_circle.T @ na) > 0) & (m.T == CIRCLE)  # [b, c]: circle at b on b-c
    b_idx, c_idx = np.nonzero(cand)
    m[c_idx, b_idx] = TAIL
    return int(b_idx.size)


def _zhang_r8(m: np.ndarray) -> int:
    """``a --> b --> c`` or ``a -o b --> c``, and ``a o-> c``  =>  ``a --> c``."""
    d = _directed_matrix(m).astype(np.int64)
    first = ((m.T == TAIL) & ((m == ARROW) | (m == CIRCLE))).astype(np.int64)
    cand = ((first @ d) > 0) & (m == ARROW) & (m.T == CIRCLE)
    a_idx, c_idx = np.nonzero(cand)
    m[c_idx, a_idx] = TAIL
    return int(a_idx.size)


def _pd_step(m: np.ndarray) -> Callable[[int, int], bool]:
    """A potentially directed step u *-> v: no arrowhead at u, no tail at v."""
    return lambda u, v: m[v, u] != ARROW and m[u, v] != TAIL


class _PdPaths:
    """Uncovered potentially directed paths out of a node, with a cheap walk-based pre-filter.

    ``walk_reach(a, mu)`` is every node reachable by an uncovered p.d. *walk* ``<a, mu, ...>``
    (a superset of the path ends, found breadth-first over (previous, current) pairs); the exact
    depth-first search over simple paths only runs for targets in it. Cached per marks state.
    """

    def __init__(self, m: np.ndarray):
        self.m = m
        self.step = _pd_step(m)
        self._walk: dict[tuple[int, int], set[int]] = {}
        self._path: dict[tuple[int, int, int], bool] = {}

    def walk_reach(self, a: int, mu: int) -> set[int]:
        if (a, mu) not in self._walk:
            m, step = self.m, self.step
            seen = {(a, mu)}
            queue = deque([(a, mu)])
            reach = {mu}
            while queue:
                prev, cur = queue.popleft()
                for w in _neighbours(m, cur):
                    if w == prev or m[prev, w] != NONE or not step(cur, w) or (cur, w) in seen:
                        continue
                    seen.add((cur, w))
                    reach.add(w)
                    queue.append((cur, w))
            self._walk[(a, mu)] = reach
        return self._walk[(a, mu)]

    def exists(self, a: int, mu: int, target: int) -> bool:
        """Is there an uncovered p.d. path ``<a, mu, ..., target>`` (``<a, mu>`` if mu = target)?"""
        if not self.step(a, mu) or target not in self.walk_reach(a, mu):
            return False
        key = (a, mu, target)
        if key not in self._path:
            found = _uncovered_path_exists(self.m, [a, mu], target, self.step)
            self._path[key] = found is not None
        return self._path[key]


def _zhang_r9(m: np.ndarray) -> int:
    """``a o-> c``, an uncovered p.d. path ``<a, b, ..., c>``, b, c non-adjacent  =>  a --> c."""
    n = 0
    paths = _PdPaths(m)  # R9 only changes circles at a on a-c into tails: p.d. steps stay valid
    for a, c in zip(*np.nonzero((m == ARROW) & (m.T == CIRCLE)), strict=True):
        for b in _neighbours(m, a):
            if b == c or _adjacent(m, b, c):
                continue
            if paths.exists(int(a), b, int(c)):
                m[c, a] = TAIL
                n += 1
                break
    return n


def _zhang_r10(m: np.ndarray) -> int:
    """``a o-> c``, ``b --> c <-- d``, uncovered p.d. paths a..b and a..d whose first nodes after a
    are distinct and non-adjacent  =>  ``a --> c``."""
    n = 0
    paths = _PdPaths(m)  # R10 only changes circles at a on a-c into tails: p.d. steps stay valid
    for a, c in zip(*np.nonzero((m == ARROW) & (m.T == CIRCLE)), strict=True):
        into_c = np.flatnonzero((m[:, c] == ARROW) & (m[c, :] == TAIL)).tolist()
        if len(into_c) < 2:
            continue
        mus = [mu for mu in _neighbours(m, a) if paths.step(a, mu)]
        pairs = [(mu, om) for mu, om in combinations(mus, 2) if not _adjacent(m, mu, om)]
        if any(
            (paths.exists(a, mu, b) and paths.exists(a, om, d))
            or (paths.exists(a, om, b) and paths.exists(a, mu, d))
            for b, d in combinations(into_c, 2)
            for mu, om in pairs
        ):
            m[c, a] = TAIL
            n += 1
    return n


# ---------------------------------------------------------------------------- causal-learn
def _fci_causallearn(m: np.ndarray, ctx: _FCIContext) -> dict[str, int]:
    counts = dict.fromkeys(("R1R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "R10"), 0)

    def run(name: str, fn: Callable[[bool], bool], flag: bool) -> bool:
        before = m.copy()
        flag = fn(flag)
        counts[name] += int(np.count_nonzero(before != m))
        return flag

    change = True
    while change:
        change = False
        change = run("R1R2", lambda f: _cl_r1r2(m, f), change)
        change = run("R3", lambda f: _cl_r3(m, ctx, f), change)
        if change:
            change = run("R4", lambda f: _cl_r4(m, ctx, f), change)
        change = run("R5", lambda f: _cl_r5(m, f), change)
        change = run("R6", lambda f: _cl_r6(m, f), change)
        change = run("R7", lambda f: _cl_r7(m, f), change)
        change = run("R8", lambda f: _cl_r8(m, f), change)
        change = run("R9", lambda f: _cl_r9(m, f), change)
        change = run("R10", lambda f: _cl_r10(m, f), change)
    return counts


def _cl_r1(m: np.ndarray, a: int, b: int, c: int, flag: bool) -> bool:
    if _adjacent(m, a, c):
        return flag
    if m[a, b] == ARROW and m[c, b] == CIRCLE:
        if not _arrow_allowed(m, b, c):
            return flag
        m[b, c], m[c, b] = ARROW, TAIL
        flag = True
    return flag


def _cl_r2(m: np.ndarray, a: int, b: int, c: int, flag: bool) -> bool:
    if _adjacent(m, a, c) and m[a, c] == CIRCLE:
        if m[a, b] == ARROW and m[b, c] == ARROW and (m[b, a] == TAIL or m[c, b] == TAIL):
            if not _arrow_allowed(m, a, c):
                return flag
            m[a, c] = ARROW
            flag = True
    return flag


def _cl_r1r2(m: np.ndarray, flag: bool) -> bool:
    for b in range(m.shape[0]):
        adj = _neighbours(m, b)
        for a, c in combinations(adj, 2):
            flag = _cl_r1(m, a, b, c, flag)
            flag = _cl_r1(m, c, b, a, flag)
            flag = _cl_r2(m, a, b, c, flag)
            flag = _cl_r2(m, c, b, a, flag)
    return flag


def _cl_noncollider(ctx: _FCIContext, a: int, d: int, c: int) -> bool:
    if ctx.sepsets is None:
        return False
    sets = recorded_sepsets(ctx.sepsets, a, c)
    return sets is not None and triple_status(sets, d, ctx.sepset_rule) == "noncollider"


def _cl_r3(m: np.ndarray, ctx: _FCIContext, flag: bool) -> bool:
    for b in range(m.shape[0]):
        into_arrows = np.flatnonzero(m[:, b] == ARROW).tolist()
        into_circles = np.flatnonzero(m[:, b] == CIRCLE).tolist()
        for d in into_circles:
            if len(into_arrows) < 2:
                continue
            for a, c in combinations(into_arrows, 2):
                if _adjacent(m, a, c):
                    continue
                if not _adjacent(m, a, d) or not _adjacent(m, c, d):
                    continue
                if not _cl_noncollider(ctx, a, d, c):
                    continue
                if m[a, d] != CIRCLE or m[c, d] != CIRCLE:
                    continue
                if not _arrow_allowed(m, d, b):
                    continue
                m[d, b] = ARROW
                flag = True
    return flag


def _cl_r4(m: np.ndarray, ctx: _FCIContext, flag: bool) -> bool:
    for b in range(m.shape[0]):
        poss_a = np.flatnonzero(m[b] == ARROW).tolist()  # b *-> a
        poss_c = np.flatnonzero(m[:, b] == CIRCLE).tolist()  # c *-o b
        for a in poss_a:
            for c in poss_c:
                if not _directed(m, a, c):
                    continue
                if m[b, c] != ARROW:
                    continue
                flag = _cl_ddp_orient(m, ctx, a, b, c, flag)
    return flag


def _cl_ddp_orient(m: np.ndarray, ctx: _FCIContext, a: int, b: int, c: int, flag: bool) -> bool:
    """causal-learn's ``ddpOrient``: breadth-first search back from a for a discriminating path."""
    queue = deque([a])
    visited = {a, b}
    e = None
    distance = 0
    previous: dict[int, int] = {a: b}
    c_parents = set(np.flatnonzero((m[:, c] == ARROW) & (m[c, :] == TAIL)).tolist())
    limit = 1000 if ctx.max_path_length == -1 else ctx.max_path_length
    while queue:
        t = queue.popleft()
        if e is None or e == t:
            e = t
            distance += 1
            if distance > 0 and distance > limit:
                return flag
        for d in np.flatnonzero(m[:, t] == ARROW).tolist():
            if d in visited:
                continue
            previous[d] = t
            p = previous[t]
            if not (m[d, t] == ARROW and m[p, t] == ARROW):
                continue
            if not _adjacent(m, d, c) and d != c:
                done, flag = _cl_do_ddp(m, ctx, d, a, b, c, previous, flag)
                if done:
                    return flag
            if d in c_parents:
                queue.append(d)
                visited.add(d)
    return flag


def _cl_do_ddp(
    m: np.ndarray,
    ctx: _FCIContext,
    d: int,
    a: int,
    b: int,
    c: int,
    previous: dict[int, int],
    flag: bool,
) -> tuple[bool, bool]:
    inner = [previous[d]]  # d's neighbour on the path ... a, b
    while inner[-1] in previous:
        inner.append(previous[inner[-1]])
    noncollider = ctx.noncollider_on_path((d, *inner, c))
    if noncollider is None:
        return False, flag
    if noncollider:
        m[c, b] = TAIL
        return True, True
    if not _arrow_allowed(m, a, b) or not _arrow_allowed(m, c, b):
        return False, flag
    m[a, b] = ARROW
    m[c, b] = ARROW
    return True, True


def _cl_uncovered(m: np.ndarray, path: Sequence[int]) -> bool:
    return all(m[path[i], path[i + 2]] == NONE for i in range(len(path) - 2))


def _cl_circle_paths(m: np.ndarray, start: int, target: int, exclude: tuple[int, int]) -> Iterator:
    """causal-learn's ``GetUncoveredCirclePath`` (a lazy generator over a changing graph)."""
    queue: deque = deque()
    visited: set[int] = set()
    for u in _neighbours(m, start):
        if u in exclude:
            continue
        if not (m[start, u] == CIRCLE and m[u, start] == CIRCLE):
            continue
        if u not in visited:
            visited.add(u)
            queue.append((u, [start, u]))
    while queue:
        t, path = queue.popleft()
        if t == target and _cl_uncovered(m, path):
            yield path
        for u in _neighbours(m, t):
            if not (m[t, u] == CIRCLE and m[u, t] == CIRCLE) or u in exclude:
                continue
            if u not in visited:
                visited.add(u)
                queue.append((u, [*path, u]))


def _cl_r5(m: np.ndarray, flag: bool) -> bool:
    for b in range(m.shape[0]):
        into_circles = np.flatnonzero(m[:, b] == CIRCLE).tolist()
        for a in into_circles:
            found = []
            if m[b, a] != CIRCLE:
                continue
            a_circ = [
                n
                for n in _neighbours(m, a)
                if n not in (a, b) and m[n, a] == CIRCLE and m[a, n] == CIRCLE
            ]
            b_circ = [
                n
                for n in _neighbours(m, b)
                if n not in (a, b) and m[n, b] == CIRCLE and m[b, n] == CIRCLE
            ]
            for c in a_circ:
                if _adjacent(m, b, c):
                    continue
                for d in b_circ:
                    if _adjacent(m, a, d):
                        continue
                    found.append(_cl_circle_paths(m, c, d, (a, b)))
            for paths in found:
                for path in paths:
                    flag = True
                    m[a, b] = m[b, a] = TAIL
                    m[a, path[0]] = m[path[0], a] = TAIL
                    m[b, path[-1]] = m[path[-1], b] = TAIL
                    for u, v in zip(path[:-1], path[1:], strict=True):
                        m[u, v] = m[v, u] = TAIL
    return flag


def _cl_r6(m: np.ndarray, flag: bool) -> bool:
    for b in range(m.shape[0]):
        into_tails = np.flatnonzero(m[:, b] == TAIL).tolist()
        if not any(m[b, a] == TAIL for a in into_tails):
            continue
        for c in np.flatnonzero(m[:, b] == CIRCLE).tolist():
            flag = True
            m[c, b] = TAIL
    return flag


def _cl_r7(m: np.ndarray, flag: bool) -> bool:
    for b in range(m.shape[0]):
        into_circles = np.flatnonzero(m[:, b] == CIRCLE).tolist()
        a_list = [n for n in into_circles if m[b, n] == TAIL]
        for c in into_circles:
            for a in a_list:
                if a == c:
                    continue
                if not _adjacent(m, a, c):
                    flag = True
                    m[c, b] = TAIL
    return flag


def _cl_r8(m: np.ndarray, flag: bool) -> bool:
    for b in range(m.shape[0]):
        for a, c in combinations(_neighbours(m, b), 2):
            b_to_c = _directed(m, b, c)
            a_oto_c = _adjacent(m, a, c) and m[a, c] == ARROW and m[c, a] == CIRCLE
            first = m[b, a] == TAIL and m[a, b] in (ARROW, CIRCLE)
            if first and b_to_c and a_oto_c:
                m[a, c], m[c, a] = ARROW, TAIL
                flag = True
    return flag


def _cl_pd_path(m: np.ndarray, start: int, nxt: int, target: int) -> bool:
    """causal-learn's ``existsUncoveredPdPath`` (breadth-first, visited nodes never revisited)."""
    visited = {start, nxt}
    queue: deque = deque()

    def pd(t: int, u: int) -> bool:
        return m[u, t] in (TAIL, CIRCLE) and m[t, u] in (ARROW, CIRCLE)

    for u in _neighbours(m, nxt):
        if pd(nxt, u) and u not in visited:
            visited.add(u)
            queue.append((u, [start, nxt, u]))
    while queue:
        t, path = queue.popleft()
        if t == target and _cl_uncovered(m, path):
            return True
        for u in _neighbours(m, t):
            if pd(t, u) and u not in visited:
                visited.add(u)
                queue.append((u, [*path, u]))
    return False


def _cl_semidirected(m: np.ndarray, start: int, target: int) -> bool:
    """causal-learn's ``existsSemiDirectedPath``: only the mark at the node left is checked."""
    visited: set[int] = set()
    queue: deque = deque()
    for u in _neighbours(m, start):
        if m[u, start] in (TAIL, CIRCLE) and u not in visited:
            visited.add(u)
            queue.append(u)
    while queue:
        t = queue.popleft()
        if t == target:
            return True
        for u in _neighbours(m, t):
            if m[u, t] in (TAIL, CIRCLE) and u not in visited:
                visited.add(u)
                queue.append(u)
    return False


def _cl_possible_children(m: np.ndarray, a: int, candidates: list[int]) -> list[int]:
    return [n for n in candidates if n != a and _adjacent(m, a, n) and m[n, a] != ARROW]


def _cl_r9(m: np.ndarray, flag: bool) -> bool:
    for c in range(m.shape[0]):
        for a in np.flatnonzero(m[:, c] == ARROW).tolist():
            if m[c, a] != CIRCLE:
                continue
            candidates = [n for n in _neighbours(m, a) if n not in (a, c)]
            for b in _cl_possible_children(m, a, candidates):
                if _adjacent(m, b, c):
                    continue
                if _cl_pd_path(m, a, b, c):
                    m[a, c], m[c, a] = ARROW, TAIL
                    flag = True
                    break
    return flag


def _cl_r10(m: np.ndarray, flag: bool) -> bool:
    for c in range(m.shape[0]):
        into_arrows = np.flatnonzero(m[:, c] == ARROW).tolist()
        if len(into_arrows) < 2:
            continue
        a_nodes = [a for a in into_arrows if m[c, a] == CIRCLE]
        for a in a_nodes:
            kids = _cl_possible_children(m, a, [i for i in _neighbours(m, a) if i != c])
            if len(kids) < 2:
                continue
            for b, d in combinations(into_arrows, 2):
                if m[c, b] != TAIL or m[c, d] != TAIL:
                    continue
                for k1, k2 in combinations(kids, 2):
                    if not _cl_semidirected(m, k1, b) or not _cl_semidirected(m, k2, d):
                        continue
                    if not _adjacent(m, k1, k2):
                        m[a, c], m[c, a] = ARROW, TAIL
                        flag = True
                        break
    return flag


# ============================================================================ PDAG -> DAG
def pdag_to_dag(graph: Graph) -> tuple[Graph, bool]:
    """A DAG extension of a PDAG (directed ``-->`` and undirected ``---`` edges): Dor and Tarsi
    (1992), as the FedECD/FedPC evaluators' ``cpdag_to_dag`` do before scoring against a DAG.

    Repeatedly take the lowest-index node ``x`` that has no outgoing directed edge and whose
    undirected neighbours are adjacent to every other neighbour of ``x``, orient its undirected
    edges into ``x`` and remove it. Returns ``(dag, consistent)``. A CPDAG always has such an
    extension, but a voted graph may not: then the remaining undirected edges follow a topological
    order of the remaining directed edges (lowest index first; directed cycles are kept as they
    are) and ``consistent`` is False.
    """
    if np.any(np.isin(graph.marks, (CIRCLE,))):
        raise ValueError("pdag_to_dag needs a graph with tails and arrowheads only (no circles)")
    m = graph.marks.copy()
    p = len(graph.names)
    out = m.copy()
    alive = np.ones(p, dtype=bool)
    consistent = True
    while alive.any():
        sub = m[np.ix_(alive, alive)]
        idx = np.flatnonzero(alive)
        directed_out = (sub == ARROW) & (sub.T == TAIL)  # [a, b]: a --> b
        undirected = (sub == TAIL) & (sub.T == TAIL)
        adjacent = sub != NONE
        chosen = None
        for k in range(len(idx)):
            if directed_out[k].any():
                continue
            nbrs = np.flatnonzero(adjacent[k])
            und = np.flatnonzero(undirected[k])
            if all(adjacent[u, [v for v in nbrs if v != u]].all() for u in und):
                chosen = k
                break
        if chosen is None:
            consistent = False
            break
        x = idx[chosen]
        for u in idx[np.flatnonzero(undirected[chosen])]:
            out[u, x], out[x, u] = ARROW, TAIL
        alive[x] = False
    if not consistent:
        rest = np.flatnonzero(alive)
        order = _directed_order(m, rest)
        position = {v: k for k, v in enumerate(order)}
        for a, b in combinations(rest.tolist(), 2):
            if out[a, b] == TAIL and out[b, a] == TAIL:
                first, second = (a, b) if position[a] < position[b] else (b, a)
                out[first, second], out[second, first] = ARROW, TAIL
    return Graph(graph.names, out, "DAG"), consistent


def _directed_order(m: np.ndarray, nodes: np.ndarray) -> list[int]:
    """Kahn's order of ``nodes`` along their directed edges, lowest index first; nodes left on
    directed cycles follow in index order."""
    nodes = [int(v) for v in nodes]
    indegree = {v: sum(m[u, v] == ARROW and m[v, u] == TAIL for u in nodes) for v in nodes}
    order: list[int] = []
    ready = sorted(v for v in nodes if indegree[v] == 0)
    while ready:
        v = ready.pop(0)
        order.append(v)
        for w in nodes:
            if m[v, w] == ARROW and m[w, v] == TAIL:
                indegree[w] -= 1
                if indegree[w] == 0:
                    ready.append(w)
                    ready.sort()
    return order + [v for v in nodes if v not in order]
