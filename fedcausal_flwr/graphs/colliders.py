"""Unshielded colliders from separating sets: PC's (with causal-learn's conflict policies) and
FCI's R0."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations

import numpy as np

from fedcausal_flwr.graphs.causallearn_graph import (
    CausalLearnAncestry,
    as_triples,
    causallearn_unshielded_triples,
)
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.graphs.knowledge import KnowledgeMatrix
from fedcausal_flwr.graphs.marks import (
    Triple,
    adjacent,
    arrow_allowed,
    is_directed,
    is_undirected,
    neighbours,
)
from fedcausal_flwr.graphs.sepsets import (
    AMBIGUOUS,
    COLLIDER,
    NONCOLLIDER,
    SepsetIndex,
    Sepsets,
    sepsets_or_raise,
    triple_status,
)

CONFLICT_POLICIES = ("existing", "overwrite", "bidirected")


#: The list of :class:`ColliderOrientation` each :func:`~.sepsets.triple_status` goes to.
_LIST_OF_STATUS = {"collider": "colliders", "noncollider": "noncolliders", "ambiguous": "ambiguous"}


class ColliderOrientation:
    """What collider orientation did with every unshielded triple ``(x, y, z)`` (x < z): lists of
    ``colliders``, ``noncolliders``, ``ambiguous`` triples and ``conflicts`` (colliders that met
    an edge already oriented out of y). The fast path adds them as arrays, listed when read (a
    wide graph has millions)."""

    FIELDS = ("colliders", "noncolliders", "ambiguous", "conflicts")

    def __init__(
        self,
        colliders: list[Triple] | None = None,
        noncolliders: list[Triple] | None = None,
        ambiguous: list[Triple] | None = None,
        conflicts: list[Triple] | None = None,
    ):
        given = (colliders, noncolliders, ambiguous, conflicts)
        self._lists = {f: list(v or []) for f, v in zip(self.FIELDS, given, strict=True)}
        # (n, 3) arrays, or (middle, ends x, ends z) stacked when read
        self._blocks: dict[str, list] = {name: [] for name in self.FIELDS}
        # (middle, ends x, ends z, status codes): triples classified together, split when read
        self._classified: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []

    def add_classified(self, y: int, xs: np.ndarray, zs: np.ndarray, status: np.ndarray) -> None:
        """Append the triples ``xs[i] - y - zs[i]`` to the colliders, noncolliders and ambiguous
        lists by their status codes (:data:`~.sepsets.COLLIDER` ...), split when read."""
        if xs.size:  # int32: a wide skeleton has tens of millions of triples
            self._classified.append((y, _int32(xs), _int32(zs), status))

    def add_at_middle(self, name: str, y: int, xs: np.ndarray, zs: np.ndarray) -> None:
        """Append the triples ``xs[i] - y - zs[i]`` to the list ``name``, stacked when read."""
        if xs.size:
            self._blocks[name].append((y, _int32(xs), _int32(zs)))

    def _split_classified(self) -> None:
        if not self._classified:
            return
        ys = np.concatenate(
            [np.full(xs.size, y, dtype=np.int32) for y, xs, _, _ in self._classified]
        )
        xs = np.concatenate([xs for _, xs, _, _ in self._classified])
        zs = np.concatenate([zs for _, _, zs, _ in self._classified])
        status = np.concatenate([s for _, _, _, s in self._classified])
        self._classified.clear()
        triples = np.stack((xs, ys, zs), axis=1)
        for name, code in (
            ("colliders", COLLIDER),
            ("noncolliders", NONCOLLIDER),
            ("ambiguous", AMBIGUOUS),
        ):
            self.add_block(name, triples[status == code])

    def _listed(self, name: str) -> list[Triple]:
        if name != "conflicts":
            self._split_classified()
        blocks = self._blocks[name]
        if blocks:
            stacked = [b if isinstance(b, np.ndarray) else _at_middle(*b) for b in blocks]
            self._lists[name].extend(as_triples(np.concatenate(stacked)))
            blocks.clear()
        return self._lists[name]

    colliders = property(lambda self: self._listed("colliders"))
    noncolliders = property(lambda self: self._listed("noncolliders"))
    ambiguous = property(lambda self: self._listed("ambiguous"))
    conflicts = property(lambda self: self._listed("conflicts"))

    def add_block(self, name: str, triples: np.ndarray) -> None:
        """Append the rows of an (n, 3) array to the list ``name`` (after what it holds)."""
        if triples.size:
            self._blocks[name].append(triples.astype(np.int32, copy=False))

    def count(self, name: str) -> int:
        """The length of a list without listing it."""
        if name != "conflicts":
            self._split_classified()
        return len(self._lists[name]) + sum(_rows(b) for b in self._blocks[name])

    def record(self, triple: Triple, status: str) -> None:
        """List ``triple`` under its :func:`~.sepsets.triple_status`."""
        self._listed(_LIST_OF_STATUS[status]).append(triple)

    def decide(self, triple: Triple, sepsets: Sepsets | None, rule: str) -> bool:
        """Decide ``(x, y, z)`` by the separating sets of x and z under ``rule``, list it under
        its status, and say whether it is a collider."""
        x, y, z = triple
        status = triple_status(sepsets_or_raise(sepsets, x, z), y, rule)
        self.record(triple, status)
        return status == "collider"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ColliderOrientation):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self.FIELDS)

    def __repr__(self) -> str:
        counts = ", ".join(f"{f}={self.count(f)}" for f in self.FIELDS)
        return f"ColliderOrientation({counts})"


def _int32(ends: np.ndarray) -> np.ndarray:
    return ends.astype(np.int32, copy=False)


def _rows(block: np.ndarray | tuple) -> int:
    return len(block) if isinstance(block, np.ndarray) else block[1].size


def _at_middle(y: int, xs: np.ndarray, zs: np.ndarray) -> np.ndarray:
    """The (n, 3) rows ``(xs[i], y, zs[i])``."""
    return np.stack((xs, np.full(xs.size, y, dtype=np.int32), zs), axis=1)


def check_pc_graph(graph: Graph) -> None:
    """PC's rules read tails as undirected ends; circles would be silently misread."""
    if np.any(graph.marks == CIRCLE):
        raise ValueError(
            "PC orientation works on tail-marked (CPDAG-style) graphs, but this graph has circle "
            "marks; use fci_orient_colliders / apply_fci_rules for PAGs"
        )


# ============================================================================ PC
def _set(
    m: np.ndarray, a: int, b: int, mark_ab: int, mark_ba: int, ancestry: CausalLearnAncestry | None
) -> None:
    """Set the edge ``a - b``; through ``ancestry`` when one is kept (it may need the old marks)."""
    if ancestry is None:
        m[a, b], m[b, a] = mark_ab, mark_ba
    else:
        ancestry.edit(m, a, b, mark_ab, mark_ba)


def _replace_with_directed(
    m: np.ndarray, a: int, y: int, ancestry: CausalLearnAncestry | None
) -> None:
    """causal-learn's "remove edge a-y, add a --> y" with its dpath side effects."""
    if ancestry is not None and (is_directed(m, a, y) or is_directed(m, y, a)):
        _set(m, a, y, NONE, NONE, ancestry)
        ancestry.reconstitute(m)
    _set(m, a, y, ARROW, TAIL, ancestry)
    if ancestry is not None:
        ancestry.adjust(a, y)


def _direct_or_bidirect(
    m: np.ndarray, a: int, y: int, ancestry: CausalLearnAncestry | None
) -> None:
    """causal-learn's ``uc_priority=1``: ``a - y`` becomes ``a --> y``, ``y --> a`` becomes
    ``a <-> y``, anything else is left."""
    if is_undirected(m, a, y):
        _set(m, a, y, ARROW, TAIL, ancestry)
        if ancestry is not None:
            ancestry.adjust(a, y)
    elif is_directed(m, y, a):
        _set(m, a, y, ARROW, ARROW, ancestry)
        if ancestry is not None:
            ancestry.reconstitute(m)


@dataclass(frozen=True)
class _ConflictPolicy:
    """How a collider ``x --> y <-- z`` treats edges that an earlier collider oriented out of y."""

    skips_triple: bool  # a triple that meets such an edge is left alone
    orient_edge: Callable[[np.ndarray, int, int, CausalLearnAncestry | None], None]


_CONFLICT_POLICY = {
    "existing": _ConflictPolicy(skips_triple=True, orient_edge=_replace_with_directed),
    "overwrite": _ConflictPolicy(skips_triple=False, orient_edge=_replace_with_directed),
    "bidirected": _ConflictPolicy(skips_triple=False, orient_edge=_direct_or_bidirect),
}


def orient_colliders(
    graph: Graph,
    sepsets: Sepsets,
    rule: str = "standard",
    conflict: str = "existing",
    ancestry: CausalLearnAncestry | None = None,
    knowledge: KnowledgeMatrix | None = None,
) -> ColliderOrientation:
    """Orient the unshielded colliders of a PC skeleton: ``x --> y <-- z`` when y is not separating.

    Triples ``x - y - z`` (x, z non-adjacent, x < z) are visited in causal-learn's order (for an
    undirected skeleton: y ascending, then x, then z). ``rule`` is one of
    :data:`~.sepsets.SEPSET_RULES` (see :func:`~.sepsets.triple_status`); ambiguous triples
    (conservative/majority) are listed and left alone.

    ``conflict`` decides what happens when a collider meets edges already oriented by an earlier
    collider (causal-learn's ``uc_priority``):

    * ``existing`` (priority 2, causal-learn's default): skip the triple if ``y --> x`` or
      ``y --> z`` is already oriented; otherwise orient both edges into y;
    * ``overwrite`` (priority 0): orient both edges into y whatever they were;
    * ``bidirected`` (priority 1): an undirected edge becomes ``x --> y``; an edge ``y --> x``
      becomes ``x <-> y``; anything else is left.

    Triples that met an oriented edge are listed in ``conflicts``. Pass ``ancestry`` to track
    causal-learn's ``dpath`` for a later ``apply_meek(mode="causallearn")`` (or use
    :func:`~.meek.orient_cpdag`, which does both).

    With ``knowledge``, a collider whose orientation it vetoes (``x -> y`` or ``z -> y`` forbidden,
    ``y -> x`` or ``y -> z`` required) is not oriented (causal-learn's ``uc_sepset``), and a
    triple whose ends knowledge alone made non-adjacent is ambiguous: they were never tested, so
    no separating set says whether y is a collider (causal-learn reads an empty set: a collider).
    """
    check_conflict_policy(conflict)
    check_pc_graph(graph)
    m = graph.marks
    if (
        conflict != "bidirected"
        and sepsets is not None
        and (ancestry is None or not ancestry.pending_on(m))
        and bool(np.all((m == NONE) | ((m == TAIL) & (m.T == TAIL))))
    ):
        index = SepsetIndex(sepsets, m.shape[0])
        return _orient_by_middle(m, index, rule, conflict, ancestry, knowledge)
    return orient_triple_by_triple(m, sepsets, rule, conflict, ancestry, knowledge)


def orient_triple_by_triple(
    m: np.ndarray,
    sepsets: Sepsets | None,
    rule: str,
    conflict: str,
    ancestry: CausalLearnAncestry | None = None,
    knowledge: KnowledgeMatrix | None = None,
) -> ColliderOrientation:
    """:func:`orient_colliders` as causal-learn runs it, and its definition: each triple in
    causal-learn's order, decided and oriented on the marks ``m`` as the earlier ones left
    them (any graph, any conflict policy; a skeleton's fast path must equal it)."""
    result = ColliderOrientation()
    for x, y, z in pc_unshielded_triples(m):
        if knowledge is not None and knowledge.no_edge[x, z]:
            result.record((x, y, z), "ambiguous")
            continue
        if not result.decide((x, y, z), sepsets, rule):
            continue
        if knowledge is not None and (knowledge.vetoed[x, y] or knowledge.vetoed[z, y]):
            continue
        orient_collider(m, (x, y, z), conflict, ancestry, result)
    return result


def _orient_by_middle(
    m: np.ndarray,
    index: SepsetIndex,
    rule: str,
    conflict: str,
    ancestry: CausalLearnAncestry | None,
    knowledge: KnowledgeMatrix | None,
) -> ColliderOrientation:
    """:func:`orient_colliders` on an undirected skeleton, one middle node at a time.

    On an undirected skeleton causal-learn's triples come y ascending, and a collider at y only
    orients edges into y, so whether a triple at y meets an edge out of y is settled before y's
    turn: each y's triples are decided together. The ancestor matrix then stands where the
    triple-by-triple run leaves it: rebuilt from the graph as it was at the last re-oriented edge
    (the last rebuild causal-learn does), with every edge oriented after it added in order.
    """
    result = ColliderOrientation()
    overwrite = conflict == "overwrite"
    adjacent = m != NONE
    # per middle that oriented edges: (y, its edges' far ends in orientation order, the far ends
    # once each in first-touch order, their marks before)
    history: list[tuple[int, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]] = []
    last_rebuild: tuple[int, int] | None = None  # (history entry, position of its edge)
    first_at = np.zeros(m.shape[0], dtype=np.int64)  # scratch of _first_positions
    for y in range(m.shape[0]):
        near = np.flatnonzero(adjacent[y]).astype(np.int32)
        if near.size < 2:
            continue
        first, second = _pairs_of(near.size)
        xs, zs = near[first], near[second]
        unshielded = ~adjacent[xs, zs]
        xs, zs = xs[unshielded], zs[unshielded]
        if not xs.size:
            continue
        if knowledge is None:
            status = index.classify(xs, zs, y, rule)
        else:  # ends knowledge made non-adjacent were never tested: ambiguous
            untested = knowledge.no_edge[xs, zs]
            status = np.full(xs.size, AMBIGUOUS, dtype=np.int8)
            status[~untested] = index.classify(xs[~untested], zs[~untested], y, rule)
        result.add_classified(y, xs, zs, status)
        if knowledge is not None or np.any(status != COLLIDER):  # some triple not to orient
            collider = status == COLLIDER
            if knowledge is not None:
                collider &= ~(knowledge.vetoed[xs, y] | knowledge.vetoed[zs, y])
            xs, zs = xs[collider], zs[collider]
        out_of_y = (m[y] == ARROW) & (m[:, y] == TAIL)  # y --> a, oriented at an earlier middle
        meets = out_of_y[xs] | out_of_y[zs]
        if overwrite and meets.any():  # y --> a meets only the first collider at y touching a
            first_collider = _first_positions(_interleaved(xs, zs), near, first_at) // 2
            order = np.arange(xs.size)
            meets = (out_of_y[xs] & (first_collider[xs] == order)) | (
                out_of_y[zs] & (first_collider[zs] == order)
            )
        if meets.any():
            result.add_at_middle("conflicts", y, xs[meets], zs[meets])
        if not overwrite:
            xs, zs = xs[~meets], zs[~meets]
        if not xs.size:
            continue
        ends = _interleaved(xs, zs)  # x then z of each collider, in order
        at = _first_positions(ends, near, first_at)[near]
        first_touch = np.sort(at[at < ends.size])
        touched = ends[first_touch]
        # causal-learn removes and re-adds an edge already directed (either way): a rebuild
        rebuilds = np.ones(ends.size, dtype=bool)
        rebuilds[first_touch] = out_of_y[touched] | (
            (m[touched, y] == ARROW) & (m[y, touched] == TAIL)
        )
        before = (m[touched, y].copy(), m[y, touched].copy())
        m[touched, y], m[y, touched] = ARROW, TAIL
        history.append((y, ends, touched, before))
        if rebuilds.any():
            last_rebuild = (len(history) - 1, int(np.flatnonzero(rebuilds)[-1]))
    if ancestry is not None and history:
        _settle_ancestry(m, ancestry, history, last_rebuild)
    return result


@lru_cache(maxsize=256)
def _pairs_of(size: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(size, 1)``: positions (i < j) of the pairs of ``size`` neighbours."""
    first, second = np.triu_indices(size, 1)
    first.setflags(write=False)
    second.setflags(write=False)
    return first, second


def _interleaved(xs: np.ndarray, zs: np.ndarray) -> np.ndarray:
    """``xs[0], zs[0], xs[1], zs[1], ...``"""
    return np.stack((xs, zs), axis=1).ravel()


def _first_positions(ends: np.ndarray, near: np.ndarray, first_at: np.ndarray) -> np.ndarray:
    """``first_at`` with, for each node ``a`` of ``near``, the first position of ``a`` in ``ends``
    (``ends.size`` if it is not there): ``np.unique(ends, return_index=True)`` without a sort."""
    first_at[near] = ends.size
    np.minimum.at(first_at, ends, np.arange(ends.size))
    return first_at


def _settle_ancestry(
    m: np.ndarray,
    ancestry: CausalLearnAncestry,
    history: list[tuple[int, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]],
    last_rebuild: tuple[int, int] | None,
) -> None:
    """Leave ``ancestry`` as the triple-by-triple run of :func:`_orient_by_middle` would."""
    if last_rebuild is None:
        for y, ends, _, _ in history:
            for a in ends.tolist():
                ancestry.adjust(a, y)
        return
    entry, position = last_rebuild
    graph = m.copy()  # the graph when the last rebuild was asked: undo what came after
    for y, _, touched, (mark_at_y, mark_at_a) in reversed(history[entry:]):
        graph[touched, y], graph[y, touched] = mark_at_y, mark_at_a
    y, ends, _, _ = history[entry]
    done = np.unique(ends[:position])
    graph[done, y], graph[y, done] = ARROW, TAIL
    a = int(ends[position])
    graph[a, y] = graph[y, a] = NONE
    added = [(a, y) for a in ends[position:].tolist()]
    for later_y, later_ends, _, _ in history[entry + 1 :]:
        added.extend((a, later_y) for a in later_ends.tolist())
    ancestry.rebuild_from(graph, added)


def check_conflict_policy(conflict: str) -> None:
    if conflict not in CONFLICT_POLICIES:
        raise ValueError(
            f"unknown conflict policy {conflict!r}; expected one of {CONFLICT_POLICIES}"
        )


def pc_unshielded_triples(m: np.ndarray) -> list[Triple]:
    """causal-learn's ``UT``: unshielded triples ``(x, y, z)`` with x < z, in its order."""
    return [(x, y, z) for (x, y, z) in causallearn_unshielded_triples(m) if x < z]


def orient_collider(
    m: np.ndarray,
    triple: Triple,
    conflict: str,
    ancestry: CausalLearnAncestry | None,
    result: ColliderOrientation,
) -> bool:
    """Orient ``x --> y <-- z`` under a conflict policy (see :func:`orient_colliders`); a triple
    that meets an edge out of y is listed in ``result.conflicts``. False if it was skipped."""
    x, y, z = triple
    policy = _CONFLICT_POLICY[conflict]
    meets_oriented_edge = is_directed(m, y, x) or is_directed(m, y, z)
    if meets_oriented_edge:
        result.conflicts.append(triple)
    if meets_oriented_edge and policy.skips_triple:
        return False
    for a in (x, z):
        policy.orient_edge(m, a, y, ancestry)
    return True


# ============================================================================ FCI: R0
def _unshielded_triples_by_middle(m: np.ndarray) -> Iterator[Triple]:
    """``(a, b, c)`` with a < c non-adjacent neighbours of b: b ascending, then pairs ascending."""
    for b in range(m.shape[0]):
        for a, c in combinations(neighbours(m, b), 2):
            if not adjacent(m, a, c):
                yield a, b, c


def fci_orient_colliders(
    graph: Graph, sepsets: Sepsets, rule: str = "standard", untested: np.ndarray | None = None
) -> ColliderOrientation:
    """FCI's R0: put arrowheads at y on ``x *-o y o-* z`` when y does not separate x and z.

    Call it on the circle-marked skeleton (``graph.skeleton()``-like marks). Visits y ascending
    and the pairs of y's neighbours in ascending order, as causal-learn's ``rule0``; triples already
    oriented as colliders, or with a tail at y, are skipped; only the marks at y change. A triple
    whose ends were never tested (``untested[x, z]``: background knowledge removed the pair) has
    no separating set to read: it is ambiguous.
    """
    m = graph.marks
    result = ColliderOrientation()
    for a, b, c in _unshielded_triples_by_middle(m):
        if m[a, b] == ARROW and m[c, b] == ARROW:
            continue
        if untested is not None and untested[a, c]:
            result.record((a, b, c), "ambiguous")
            continue
        if not result.decide((a, b, c), sepsets, rule):
            continue
        if arrow_allowed(m, a, b) and arrow_allowed(m, c, b):
            m[a, b] = ARROW
            m[c, b] = ARROW
        else:
            result.conflicts.append((a, b, c))
    return result
