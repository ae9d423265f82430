"""PC-stable over a batched CI oracle: skeleton level by level, then colliders and Meek's rules.

The defaults reproduce causal-learn 0.1.4.8's ``pc(data, alpha, test, stable=True)`` (``uc_rule=0``,
``uc_priority=2``): a triple ``x - y - z`` is a collider iff ``y`` is in none of the separating sets
found at the level that removed ``x - z``; a collider is skipped if ``y --> x`` or ``y --> z`` is
already oriented; Meek's R1-R3 run in causal-learn's order with its cycle check.

``collider_rule="standard"`` uses the first separating set only (textbook PC).
``"conservative"`` (Ramsey et al. 2006) and ``"majority"`` (Colombo and Maathuis 2014) ask one
extra batch: ``x _||_ z | S`` for every subset ``S`` of ``adj(x) \\ {z}`` and of ``adj(z) \\ {x}``
in
the final skeleton (up to ``max_depth``), for every unshielded triple; the separating sets found,
together with those of the skeleton phase, decide the triple. Ambiguous triples stay unoriented.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Literal

import numpy as np

from fedcausal_flwr.discovery.driver import drive
from fedcausal_flwr.discovery.skeleton import Skeleton, skeleton_steps
from fedcausal_flwr.graphs.colliders import ColliderOrientation
from fedcausal_flwr.graphs.graph import TAIL, Graph
from fedcausal_flwr.graphs.meek import orient_cpdag
from fedcausal_flwr.stats.oracle import CIOracle, Query

ColliderRule = Literal["causallearn", "standard", "conservative", "majority"]
COLLIDER_RULES = ("causallearn", "standard", "conservative", "majority")


@dataclass
class PCResult:
    graph: Graph  # CPDAG
    skeleton: Skeleton
    colliders: ColliderOrientation
    extra_tests: int = 0
    batches: list[dict] = field(default_factory=list)

    @property
    def n_tests(self) -> int:
        return self.skeleton.n_tests + self.extra_tests


def undirected_graph(variables, adjacency: np.ndarray, kind: str = "CPDAG") -> Graph:
    marks = np.where(adjacency, TAIL, 0).astype(np.int8)
    return Graph(tuple(variables), marks, kind)


def unshielded_pairs(adjacency: np.ndarray) -> list[tuple[int, int]]:
    """Non-adjacent pairs (x < z) with a common neighbour."""
    a = adjacency.astype(np.int64)
    common = (a @ a) > 0
    x, z = np.nonzero(np.triu(common & ~adjacency, k=1))
    return list(zip(x.tolist(), z.tolist(), strict=True))


def triple_check_queries(adjacency: np.ndarray, max_depth: int | None) -> list[Query]:
    """The conservative/majority rules' extra tests, in a fixed order."""
    out: list[Query] = []
    for x, z in unshielded_pairs(adjacency):
        for near, far in ((x, z), (z, x)):
            pool = [int(v) for v in np.flatnonzero(adjacency[near]) if v != far]
            top = len(pool) if max_depth is None else min(len(pool), max_depth)
            for size in range(top + 1):
                out.extend((x, z, s) for s in combinations(pool, size))
    return list(dict.fromkeys(out))


def pc_steps(
    variables,
    alpha: float = 0.05,
    max_depth: int | None = None,
    collider_rule: ColliderRule = "causallearn",
    meek: Literal["causallearn", "complete"] = "causallearn",
    initial: np.ndarray | None = None,
):
    """Generator: the skeleton's level batches (plus one batch for conservative/majority rules)."""
    if collider_rule not in COLLIDER_RULES:
        raise ValueError(
            f"unknown collider rule {collider_rule!r}; expected one of {COLLIDER_RULES}"
        )
    skeleton = yield from skeleton_steps(len(variables), alpha, max_depth, initial)
    sepsets = {pair: list(sets) for pair, sets in skeleton.sepsets.items()}
    extra = 0
    if collider_rule in ("conservative", "majority"):
        queries = triple_check_queries(skeleton.adjacency, max_depth)
        if queries:
            pvalues = yield queries
            extra = len(queries)
            for (x, z, s), p in zip(queries, pvalues, strict=True):
                if p > alpha and s not in sepsets[(x, z)]:
                    sepsets[(x, z)].append(s)
    graph = undirected_graph(variables, skeleton.adjacency)
    colliders = orient_cpdag(graph, sepsets, rule=collider_rule, conflict="existing", meek=meek)
    return PCResult(graph=graph, skeleton=skeleton, colliders=colliders, extra_tests=extra)


def pc(oracle: CIOracle, alpha: float = 0.05, **options) -> PCResult:
    """PC-stable on a local oracle (see :func:`pc_steps` for the options)."""
    return drive(pc_steps(oracle.variables, alpha, **options), oracle)
