"""PC's collider orientations that read p-values: causal-learn 0.1.4.8's ``uc_priority`` 3 and 4
and its ``uc_rule`` 1 (maxP) and 2 (definiteMaxP).

Each reads ``p(x _||_ z | S)`` for every candidate separating set ``S`` of an unshielded triple
``x - y - z``: every subset of adj(x) and every subset of adj(z) in the skeleton
(:func:`candidate_sets`, causal-learn's ``find_cond_sets``), split into the sets with y and those
without. The engine asks those tests as one batch (:func:`candidate_queries`) and hands the answers
in as ``pvalue(x, z, S)``.

* ``uc_priority`` 3 (stronger colliders): the colliders of the separating-set rule are oriented in
  ascending order of ``max p`` over the sets *with* y, each only if no edge out of y is oriented;
  4 (stronger*): descending order of ``max p`` over the sets *without* y.
* maxP: a triple is a collider iff ``max p`` without y exceeds ``max p`` with y; priorities 0-2
  orient at once (as the separating-set rule does), 3 and 4 sort as above.
* definiteMaxP: a triple is a *definite* collider if no set with y says independent and (some set
  without y does, or ``max p`` without y exceeds ``max p`` with y); a *definite* non-collider if
  some set with y says independent and none without y does, or both sides are dependent and max p
  with y wins. Colliders are oriented in priority order (2: triple order, 3, 4 as above); the
  definite triples feed :func:`~.meek.definite_meek`.

Ties keep causal-learn's triple order (a stable sort), so the answer is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain, combinations

import numpy as np

from fedcausal_flwr.graphs.causallearn_graph import CausalLearnAncestry
from fedcausal_flwr.graphs.colliders import (
    ColliderOrientation,
    check_pc_graph,
    orient_collider,
    pc_unshielded_triples,
)
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.graphs.marks import Triple
from fedcausal_flwr.graphs.sepsets import Sepsets

#: causal-learn's ``uc_priority`` codes and the conflict policy each stands for.
PRIORITY_NAMES = {
    0: "overwrite",
    1: "bidirected",
    2: "existing",
    3: "stronger",
    4: "stronger*",
}
UC_RULES = {0: "separating sets", 1: "maxP", 2: "definiteMaxP"}
#: Priority -1 means "the rule's own default": causal-learn's uc_sepset and maxp default to 3,
#: definite_maxp to 4.
DEFAULT_PRIORITY = {0: 3, 1: 3, 2: 4}

PValue = Callable[[int, int, tuple[int, ...]], float]


def resolve_priority(uc_rule: int, uc_priority: int) -> int:
    """causal-learn's effective priority (``-1`` -> the rule's default); refuses what it refuses."""
    if uc_rule not in UC_RULES:
        raise ValueError(f"uc_rule must be 0, 1 or 2 (causal-learn's codes), got {uc_rule!r}")
    if uc_priority == -1:
        return DEFAULT_PRIORITY[uc_rule]
    if uc_priority not in PRIORITY_NAMES:
        raise ValueError(f"uc_priority must be -1, 0, 1, 2, 3 or 4, got {uc_priority!r}")
    if uc_rule == 2 and uc_priority < 2:
        raise ValueError(
            f"uc_rule=2 (definiteMaxP) takes uc_priority -1, 2, 3 or 4, not {uc_priority} "
            "(causal-learn's definite_maxp has no overwrite or bi-directed policy)"
        )
    return uc_priority


def needs_pvalues(uc_rule: int, priority: int) -> bool:
    """Whether orientation reads p-values of candidate sets (one more batch of tests)."""
    return uc_rule != 0 or priority in (3, 4)


def candidate_sets(adjacency: np.ndarray, x: int, z: int, max_size: int | None) -> list[tuple]:
    """Every subset of adj(x) and of adj(z) (up to ``max_size`` variables), each once."""

    def subsets(node: int) -> list[tuple[int, ...]]:
        pool = np.flatnonzero(adjacency[node]).tolist()
        top = len(pool) if max_size is None else min(len(pool), max_size)
        return list(chain.from_iterable(combinations(pool, r) for r in range(top + 1)))

    return list(dict.fromkeys(subsets(x) + subsets(z)))


def candidate_queries(
    adjacency: np.ndarray, triples: Sequence[Triple], max_size: int | None
) -> list[tuple[int, int, tuple[int, ...]]]:
    """The tests ``(x, z, S)`` the p-value rules read for ``triples`` (each pair once)."""
    out: dict[tuple[int, int, tuple[int, ...]], None] = {}
    for x, z in dict.fromkeys((x, z) for x, _, z in triples):
        for s in candidate_sets(adjacency, x, z, max_size):
            out[(x, z, s)] = None
    return list(out)


@dataclass
class _Strengths:
    """``max p`` with and without the middle node, per triple, from the answers."""

    adjacency: np.ndarray
    pvalue: PValue
    max_size: int | None
    by_pair: dict[tuple[int, int], list[tuple[tuple[int, ...], float]]] = field(
        default_factory=dict
    )

    def tests(self, x: int, z: int) -> list[tuple[tuple[int, ...], float]]:
        if (x, z) not in self.by_pair:
            sets = candidate_sets(self.adjacency, x, z, self.max_size)
            self.by_pair[(x, z)] = [(s, self.pvalue(x, z, s)) for s in sets]
        return self.by_pair[(x, z)]

    def with_mid(self, x: int, y: int, z: int) -> list[float]:
        return [p for s, p in self.tests(x, z) if y in s]

    def without_mid(self, x: int, y: int, z: int) -> list[float]:
        return [p for s, p in self.tests(x, z) if y not in s]


def _strengths_of(graph: Graph, pvalue: PValue, max_size: int | None) -> _Strengths:
    """The strengths of ``graph``'s triples, once it is checked to be a PC graph."""
    check_pc_graph(graph)
    return _Strengths(graph.adjacency(), pvalue, max_size)


def _orient_sorted(
    m: np.ndarray,
    scores: dict[Triple, float],
    descending: bool,
    ancestry: CausalLearnAncestry | None,
    result: ColliderOrientation,
) -> list[Triple]:
    """Orient triples by score (a stable sort), skipping those meeting an edge out of y."""
    order = sorted(scores, key=scores.__getitem__, reverse=descending)
    return [t for t in order if orient_collider(m, t, "existing", ancestry, result)]


def orient_by_strength(
    graph: Graph,
    sepsets: Sepsets,
    pvalue: PValue,
    *,
    rule: str = "causallearn",
    priority: int = 3,
    max_size: int | None = None,
    ancestry: CausalLearnAncestry | None = None,
) -> ColliderOrientation:
    """causal-learn's ``uc_sepset`` with priority 3 or 4: the separating-set rule's colliders,
    oriented strongest first (see the module docstring)."""
    if priority not in (3, 4):
        raise ValueError(f"orient_by_strength takes priority 3 or 4, got {priority}")
    strengths = _strengths_of(graph, pvalue, max_size)
    m = graph.marks
    result = ColliderOrientation()
    scores: dict[Triple, float] = {}
    for x, y, z in pc_unshielded_triples(m):
        if not result.decide((x, y, z), sepsets, rule):
            continue
        sets = strengths.with_mid(x, y, z) if priority == 3 else strengths.without_mid(x, y, z)
        scores[(x, y, z)] = max(sets)
    _orient_sorted(m, scores, priority == 4, ancestry, result)
    return result


def orient_maxp(
    graph: Graph,
    pvalue: PValue,
    *,
    priority: int = 3,
    max_size: int | None = None,
    ancestry: CausalLearnAncestry | None = None,
) -> ColliderOrientation:
    """causal-learn's ``maxp``: a collider iff max p without y > max p with y."""
    strengths = _strengths_of(graph, pvalue, max_size)
    m = graph.marks
    result = ColliderOrientation()
    scores: dict[Triple, float] = {}
    for x, y, z in pc_unshielded_triples(m):
        with_y = max(strengths.with_mid(x, y, z))
        without_y = max(strengths.without_mid(x, y, z))
        collider = without_y > with_y
        result.record((x, y, z), "collider" if collider else "noncollider")
        if not collider:
            continue
        if priority in (0, 1, 2):
            orient_collider(m, (x, y, z), PRIORITY_NAMES[priority], ancestry, result)
        else:
            scores[(x, y, z)] = with_y if priority == 3 else without_y
    _orient_sorted(m, scores, priority == 4, ancestry, result)
    return result


@dataclass
class DefiniteTriples:
    """definiteMaxP's outcome: the colliders it oriented and the definite non-colliders."""

    orientation: ColliderOrientation
    colliders: list[Triple]
    noncolliders: list[Triple]


def orient_definite_maxp(
    graph: Graph,
    pvalue: PValue,
    alpha: float,
    *,
    priority: int = 4,
    max_size: int | None = None,
    ancestry: CausalLearnAncestry | None = None,
) -> DefiniteTriples:
    """causal-learn's ``definite_maxp`` (see the module docstring)."""
    if priority not in (2, 3, 4):
        raise ValueError(f"definiteMaxP takes priority 2, 3 or 4, got {priority}")
    strengths = _strengths_of(graph, pvalue, max_size)
    m = graph.marks
    result = ColliderOrientation()
    scores: dict[Triple, float] = {}
    noncolliders: list[Triple] = []
    for x, y, z in pc_unshielded_triples(m):
        with_y = strengths.with_mid(x, y, z)
        without_y = strengths.without_mid(x, y, z)
        with_y_dependent = all(p <= alpha for p in with_y)
        without_y_dependent = all(p <= alpha for p in without_y)
        best_with = max([0.0, *with_y])  # causal-learn's running maxima start at 0
        best_without = max([0.0, *without_y])
        if with_y_dependent and (not without_y_dependent or best_without > best_with):
            scores[(x, y, z)] = best_without if priority == 4 else best_with
            result.record((x, y, z), "collider")
        elif without_y_dependent:
            noncolliders.append((x, y, z))
            result.record((x, y, z), "noncollider")
        else:
            result.record((x, y, z), "ambiguous")
    if priority == 2:
        oriented = [t for t in scores if orient_collider(m, t, "existing", ancestry, result)]
    else:
        oriented = _orient_sorted(m, scores, priority == 4, ancestry, result)
    return DefiniteTriples(result, oriented, noncolliders)
