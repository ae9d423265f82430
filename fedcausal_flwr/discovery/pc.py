"""PC-stable over a batched CI oracle: skeleton depth by depth, then colliders and Meek's rules.

The defaults reproduce causal-learn 0.1.4.8's ``pc(data, alpha, test, stable=True)`` (``uc_rule=0``,
``uc_priority=2``): a triple ``x - y - z`` is a collider iff ``y`` is in none of the separating sets
found at the depth that removed ``x - z``; a collider is skipped if ``y --> x`` or ``y --> z`` is
already oriented; Meek's R1-R3 run in causal-learn's order with its cycle check.

``collider_rule="standard"`` uses the first separating set only (textbook PC).
``"conservative"`` (Ramsey et al. 2006) and ``"majority"`` (Colombo and Maathuis 2014) ask one
extra batch: ``x _||_ z | S`` for every subset ``S`` of ``adj(x) \\ {z}`` and of ``adj(z) \\ {x}``
in the final skeleton (up to ``max_depth``), for every unshielded triple; the separating sets found,
together with those of the skeleton phase, decide the triple. Ambiguous triples stay unoriented.

causal-learn's ``uc_rule`` and ``uc_priority`` keep their meanings (:mod:`~fedcausal_flwr.graphs.
pvalue_colliders`): ``uc_priority`` 0 (overwrite), 1 (bi-directed), 2 (existing colliders first,
the default), 3 (stronger colliders first), 4 (stronger* first), -1 (the rule's default: 3, or 4
for definiteMaxP); ``uc_rule`` 1 (maxP) and 2 (definiteMaxP, followed by causal-learn's
``definite_meek``). Priorities 3 and 4 and rules 1 and 2 read the p-values of every candidate
separating set of the unshielded triples: one more batch after the skeleton (subsets of at most
``max_depth`` variables when a cap is set; causal-learn's own caps only the skeleton).

``stable=False`` is causal-learn's order-dependent PC: within a depth, x's tests run in index
order on the live graph, so an edge removed for x changes the neighbours of later nodes. Every
test such a depth can ask is among the PC-stable depth's tests (adjacency only shrinks), so the
depth is still one batch; the answers are then read in causal-learn's order.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Literal

import numpy as np

from fedcausal_flwr.discovery.driver import Steps, drive
from fedcausal_flwr.discovery.edge_rounds import complete_pairs
from fedcausal_flwr.discovery.pair_record import (
    copy_sepsets,
)
from fedcausal_flwr.discovery.skeleton import DEPTH_BATCH, Skeleton, skeleton_steps
from fedcausal_flwr.graphs.causallearn_graph import CausalLearnAncestry
from fedcausal_flwr.graphs.colliders import (
    ColliderOrientation,
    orient_colliders,
    pc_unshielded_triples,
)
from fedcausal_flwr.graphs.graph import TAIL, Graph
from fedcausal_flwr.graphs.knowledge import Knowledge, KnowledgeMatrix, orient_by_knowledge
from fedcausal_flwr.graphs.meek import apply_meek, definite_meek
from fedcausal_flwr.graphs.pvalue_colliders import (
    PRIORITY_NAMES,
    candidate_queries,
    needs_pvalues,
    orient_by_strength,
    orient_definite_maxp,
    orient_maxp,
    resolve_priority,
)
from fedcausal_flwr.graphs.sepsets import sepsets_or_raise, triple_status
from fedcausal_flwr.stats.batch_oracle import CIOracle, Query, normalise_query

ColliderRule = Literal["causallearn", "standard", "conservative", "majority"]
COLLIDER_RULES = ("causallearn", "standard", "conservative", "majority")
#: Largest batch the p-value collider rules may ask (every subset of two neighbourhoods).
MAX_STRENGTH_TESTS = 2_000_000


@dataclass
class PCResult:
    graph: Graph  # CPDAG
    skeleton: Skeleton
    colliders: ColliderOrientation
    extra_tests: int = 0
    batches: list[dict] = field(default_factory=list)
    #: what background knowledge did: pairs "removed" untested, "required" edges kept untested,
    #: edges "oriented" before the colliders (variable positions; empty without knowledge)
    knowledge: dict[str, list] = field(default_factory=dict)

    @property
    def n_tests(self) -> int:
        return self.skeleton.n_tests + self.extra_tests


def undirected_graph(variables, adjacency: np.ndarray, kind: str = "CPDAG") -> Graph:
    marks = np.where(adjacency, TAIL, 0).astype(np.int8)
    return Graph(tuple(variables), marks, kind)


def unshielded_pairs(adjacency: np.ndarray) -> list[tuple[int, int]]:
    """Non-adjacent pairs (x < z) with a common neighbour."""
    a = adjacency.astype(np.float32)  # common-neighbour counts stay exact below 2**24
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
    uc_rule: int = 0,
    uc_priority: int = 2,
    stable: bool = True,
    knowledge: Knowledge | KnowledgeMatrix | None = None,
    depth_batch: int | None = None,
    edge_tests: str = "all",
):
    """Generator: the skeleton's depth batches, then one batch for the collider rules that read
    more tests (conservative/majority, ``uc_priority`` 3/4, ``uc_rule`` 1/2). A depth of more
    than ``depth_batch`` tests is asked in batches (:func:`~.skeleton.skeleton_steps`).

    ``edge_tests="until-removed"`` asks each depth edge by edge until the edge is removed
    (:mod:`.edge_rounds`), then the rest of the removal depth of every unshielded triple's pair,
    so the colliders read what the full depths record: the same CPDAG in fewer tests.

    ``knowledge`` (:mod:`~fedcausal_flwr.graphs.knowledge`): pairs forbidden both ways are never
    tested, required edges never tested nor removed, the edges it orients are oriented before the
    colliders, and no rule orients against it; the result's ``knowledge`` says what applied.
    """
    priority, knowledge, initial, keep = _checked_pc_options(
        variables, collider_rule, uc_rule, uc_priority, initial, knowledge
    )
    skeleton = yield from skeleton_steps(
        len(variables), alpha, max_depth, initial, stable, keep, depth_batch, edge_tests
    )
    extra = 0
    if skeleton.pools:  # until-removed depths: the colliders' pairs ask the rest of theirs
        pairs = unshielded_pairs(skeleton.adjacency)
        extra = yield from complete_pairs(skeleton, pairs, alpha, depth_batch or DEPTH_BATCH)
    sepsets = copy_sepsets(skeleton.sepsets)
    if collider_rule in ("conservative", "majority"):
        extra += yield from _triple_check_phase(skeleton.adjacency, sepsets, alpha, max_depth)
    graph = undirected_graph(variables, skeleton.adjacency)
    applied: dict[str, list] = {}
    if knowledge is not None:
        applied = knowledge_applied(knowledge, skeleton.adjacency)
        applied["oriented"] = orient_by_knowledge(graph.marks, knowledge)
    answers: dict[Query, float] = {}
    if needs_pvalues(uc_rule, priority):
        asked_for = strength_queries(graph, sepsets, collider_rule, uc_rule, priority, max_depth)
        answers, asked = yield from _strength_phase(asked_for)
        extra += asked
    ancestry = CausalLearnAncestry.from_marks(graph.marks)
    colliders = _orient_colliders_step(
        graph, sepsets, answers, alpha, collider_rule, uc_rule, priority, max_depth, knowledge,
        ancestry,
    )  # fmt: skip
    vetoed = None if knowledge is None else knowledge.vetoed
    apply_meek(graph, mode=meek, ancestry=ancestry, vetoed=vetoed)
    return PCResult(
        graph=graph, skeleton=skeleton, colliders=colliders, extra_tests=extra, knowledge=applied
    )


def _checked_pc_options(
    variables: Sequence[str],
    collider_rule: str,
    uc_rule: int,
    uc_priority: int,
    initial: np.ndarray | None,
    knowledge: Knowledge | KnowledgeMatrix | None,
) -> tuple[int, KnowledgeMatrix | None, np.ndarray | None, np.ndarray | None]:
    """:func:`pc_steps`' collider options checked, with the priority they resolve to, and its
    knowledge as a matrix over ``variables`` with what it does to the skeleton search: the
    starting adjacency without the pairs it forbids both ways, and the required edges to
    ``keep`` (None, None without knowledge)."""
    if collider_rule not in COLLIDER_RULES:
        raise ValueError(
            f"unknown collider rule {collider_rule!r}; expected one of {COLLIDER_RULES}"
        )
    priority = resolve_priority(uc_rule, uc_priority)
    if uc_rule != 0 and collider_rule != "causallearn":
        raise ValueError(
            f"uc_rule={uc_rule} decides colliders by p-values; it does not combine with "
            f"collider_rule={collider_rule!r} (use collider_rule='causallearn')"
        )
    if isinstance(knowledge, Knowledge):
        knowledge = knowledge.matrix(list(variables))
    if knowledge is not None and not knowledge_supported(collider_rule, uc_rule, uc_priority):
        raise ValueError(
            "background knowledge works with the separating-set colliders (collider_rule "
            "causallearn or standard, uc_rule 0, uc_priority 0-2), not with "
            f"collider_rule={collider_rule!r}, uc_rule={uc_rule}, uc_priority={uc_priority}"
        )
    keep = None
    if knowledge is not None:
        start = ~np.eye(len(variables), dtype=bool) if initial is None else np.asarray(initial)
        initial, keep = start & ~knowledge.no_edge, knowledge.kept
    return priority, knowledge, initial, keep


def _triple_check_phase(
    adjacency: np.ndarray, sepsets: MutableMapping, alpha: float, max_depth: int | None
) -> Steps[int]:
    """Generator: the conservative/majority rules' batch (:func:`triple_check_queries`); each
    set found independent joins its pair's separating sets. Returns the number of tests."""
    queries = triple_check_queries(adjacency, max_depth)
    if not queries:
        return 0
    pvalues = yield queries
    for (x, z, s), p in zip(queries, pvalues, strict=True):
        if p > alpha and s not in sepsets[(x, z)]:
            sepsets[(x, z)] = [*sepsets[(x, z)], s]
    return len(queries)


def _strength_phase(queries: list[Query]) -> Steps[tuple[dict[Query, float], int]]:
    """Generator: the p-value collider rules' batch (:func:`strength_queries`). Returns the
    answers by normalised query and the number of tests."""
    if not queries:
        return {}, 0
    pvalues = yield queries
    answers = {normalise_query(*q): float(p) for q, p in zip(queries, pvalues, strict=True)}
    return answers, len(queries)


def _orient_colliders_step(
    graph: Graph,
    sepsets: Mapping,
    answers: Mapping[Query, float],
    alpha: float,
    collider_rule: str,
    uc_rule: int,
    priority: int,
    max_depth: int | None,
    knowledge: KnowledgeMatrix | None,
    ancestry: CausalLearnAncestry,
) -> ColliderOrientation:
    """Orient the colliders of ``graph`` by the chosen rule: maxP (``uc_rule`` 1), definiteMaxP
    (2, its definite colliders and non-colliders then through causal-learn's definite_meek),
    collider strength (priority 3/4), else the separating sets."""

    def pvalue(x: int, z: int, s: tuple[int, ...]) -> float:
        return answers[normalise_query(x, z, s)]

    definite: tuple[list, list] | None = None
    if uc_rule == 1:
        colliders = orient_maxp(
            graph, pvalue, priority=priority, max_size=max_depth, ancestry=ancestry
        )
    elif uc_rule == 2:
        found = orient_definite_maxp(
            graph, pvalue, alpha, priority=priority, max_size=max_depth, ancestry=ancestry
        )
        colliders, definite = found.orientation, (found.colliders, found.noncolliders)
    elif priority in (3, 4):
        colliders = orient_by_strength(
            graph,
            sepsets,
            pvalue,
            rule=collider_rule,
            priority=priority,
            max_size=max_depth,
            ancestry=ancestry,
        )
    else:
        colliders = orient_colliders(
            graph, sepsets, collider_rule, PRIORITY_NAMES[priority], ancestry, knowledge
        )
    if definite is not None:
        definite_meek(graph, *definite, ancestry)
    return colliders


def knowledge_supported(collider_rule: str, uc_rule: int, uc_priority: int) -> bool:
    """Whether background knowledge combines with these orientation rules: only colliders
    decided by separating sets (the p-value rules, ``uc_priority`` -1's default 3 included,
    read tests knowledge may have skipped)."""
    priority = resolve_priority(uc_rule, uc_priority)
    return collider_rule in ("causallearn", "standard") and not needs_pvalues(uc_rule, priority)


def knowledge_applied(knowledge: KnowledgeMatrix, adjacency: np.ndarray) -> dict[str, list]:
    """The pairs knowledge removed untested and the required edges it kept untested."""
    removed = np.argwhere(np.triu(knowledge.no_edge, k=1)).tolist()
    kept = np.argwhere(knowledge.required & adjacency).tolist()
    return {"removed": [tuple(p) for p in removed], "required": [tuple(p) for p in kept]}


def strength_queries(
    graph: Graph,
    sepsets: Mapping,
    collider_rule: str,
    uc_rule: int,
    priority: int,
    max_depth: int | None,
) -> list[Query]:
    """The candidate-set tests the p-value collider rules read (one batch)."""
    triples = pc_unshielded_triples(graph.marks)
    if uc_rule == 0:  # only the separating-set rule's colliders are ranked
        triples = [
            (x, y, z)
            for x, y, z in triples
            if triple_status(sepsets_or_raise(sepsets, x, z), y, collider_rule) == "collider"
        ]
    queries = candidate_queries(graph.adjacency(), triples, max_depth)
    if len(queries) > MAX_STRENGTH_TESTS:
        raise ValueError(
            f"uc_rule={uc_rule}, uc_priority={priority} would ask {len(queries):,} CI tests "
            "(every subset of the neighbours of the unshielded triples' ends); cap the subsets "
            "with max_depth"
        )
    return queries


def pc(oracle: CIOracle, alpha: float = 0.05, **options) -> PCResult:
    """PC-stable on a local oracle (see :func:`pc_steps` for the options)."""
    return drive(pc_steps(oracle.variables, alpha, **options), oracle)
