"""Unshielded colliders from separating sets: PC's (with causal-learn's conflict policies) and
FCI's R0."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from fedcausal_flwr.graphs.causallearn_graph import (
    CausalLearnAncestry,
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
from fedcausal_flwr.graphs.sepsets import Sepsets, sepsets_or_raise, triple_status

CONFLICT_POLICIES = ("existing", "overwrite", "bidirected")


@dataclass
class ColliderOrientation:
    """What collider orientation did with every unshielded triple ``(x, y, z)`` (x < z)."""

    colliders: list[Triple] = field(default_factory=list)
    noncolliders: list[Triple] = field(default_factory=list)
    ambiguous: list[Triple] = field(default_factory=list)
    conflicts: list[Triple] = field(default_factory=list)

    def record(self, triple: Triple, status: str) -> None:
        """List ``triple`` under its :func:`~.sepsets.triple_status`."""
        by_status = {
            "collider": self.colliders,
            "noncollider": self.noncolliders,
            "ambiguous": self.ambiguous,
        }
        by_status[status].append(triple)


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
    result = ColliderOrientation()
    for x, y, z in pc_unshielded_triples(m):
        if knowledge is not None and knowledge.no_edge[x, z]:
            result.record((x, y, z), "ambiguous")
            continue
        status = triple_status(sepsets_or_raise(sepsets, x, z), y, rule)
        result.record((x, y, z), status)
        if status != "collider":
            continue
        if knowledge is not None and (knowledge.vetoed[x, y] or knowledge.vetoed[z, y]):
            continue
        orient_collider(m, (x, y, z), conflict, ancestry, result)
    return result


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
        status = triple_status(sepsets_or_raise(sepsets, a, c), b, rule)
        result.record((a, b, c), status)
        if status != "collider":
            continue
        if arrow_allowed(m, a, b) and arrow_allowed(m, c, b):
            m[a, b] = ARROW
            m[c, b] = ARROW
        else:
            result.conflicts.append((a, b, c))
    return result
