"""FCI over a batched CI oracle: adjacency search, R0, Possible-D-Sep, then the FCI rules.

The defaults reproduce causal-learn 0.1.4.8's ``fci(data, test, alpha)``: the PC-stable adjacency
search (its ``fas``, same as our skeleton phase), R0 with the union of the removal depth's
separating sets, the sequential Possible-D-Sep phase, R0 again, then its rule loop in which R4
runs two extra CI tests per discriminating path. Those extra tests are asked through
:func:`~.driver.replay`, so a federated run pays one round per batch of them.

Options: ``possible_dsep="stable"`` (one batch per subset size, see :mod:`.possible_dsep`) or
``"off"`` (FedC2SL's code drops the phase's deletions); ``rules="zhang"`` for Zhang's (2008)
complete rule set with R4 decided from separating sets (no extra tests); ``max_depth`` caps the
conditioning sets of the adjacency search (FedC2SL's FedFCI uses 4).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from fedcausal_flwr.discovery.driver import PValues, Steps, drive, replay
from fedcausal_flwr.discovery.pair_record import copy_sepsets
from fedcausal_flwr.discovery.pc import knowledge_applied
from fedcausal_flwr.discovery.possible_dsep import remove_by_possible_dsep
from fedcausal_flwr.discovery.skeleton import Skeleton, keep_largest, pair_key, skeleton_steps
from fedcausal_flwr.graphs.colliders import fci_orient_colliders
from fedcausal_flwr.graphs.fci_rules import apply_fci_rules
from fedcausal_flwr.graphs.graph import CIRCLE, Graph
from fedcausal_flwr.graphs.knowledge import Knowledge, KnowledgeMatrix, mark_pag_by_knowledge
from fedcausal_flwr.stats.batch_oracle import CIOracle


@dataclass
class FCIResult:
    graph: Graph  # PAG
    skeleton: Skeleton
    sepsets: MutableMapping
    pds_removed: list[tuple[int, int]]
    orientation_tests: int = 0
    #: the largest p of each pair's Possible-D-Sep tests (the skeleton's are in ``skeleton``)
    pds_max_pvalue: dict[tuple[int, int], float] = field(default_factory=dict)
    #: what background knowledge did: pairs "removed" untested, "required" edges kept untested,
    #: edges "oriented" and "arrowheads" set before R0, as in :class:`~.pc.PCResult`
    knowledge: dict[str, list] = field(default_factory=dict)

    @property
    def n_tests(self) -> int:
        return self.skeleton.n_tests + self.orientation_tests


def circle_graph(variables, adjacency: np.ndarray) -> Graph:
    return Graph(tuple(variables), np.where(adjacency, CIRCLE, 0).astype(np.int8), "PAG")


def fci_steps(
    variables,
    alpha: float = 0.05,
    max_depth: int | None = None,
    possible_dsep: Literal["sequential", "stable", "off"] = "sequential",
    pds_max_size: int | None = None,
    max_path_length: int = -1,
    rules: Literal["causallearn", "zhang"] = "zhang",
    initial: np.ndarray | None = None,
    knowledge: Knowledge | KnowledgeMatrix | None = None,
    depth_batch: int | None = None,
):
    """Generator: skeleton depth batches, Possible-D-Sep batches, then R4's test batches. A
    skeleton depth of more than ``depth_batch`` tests is asked in batches
    (:func:`~.skeleton.skeleton_steps`; a later phase asks such a depth's tests again).

    ``knowledge`` (Zhang's rules only): pairs forbidden both ways are never tested, required
    edges never tested nor removed (Possible-D-Sep included), and its marks
    (:func:`~fedcausal_flwr.graphs.knowledge.mark_pag_by_knowledge`) are set before R0, which
    with the rules never overwrites a mark that is not a circle.
    """
    knowledge, initial, keep = _checked_fci_options(
        variables, possible_dsep, rules, initial, knowledge
    )
    sepset_rule = "causallearn" if rules == "causallearn" else "standard"
    skeleton = yield from skeleton_steps(
        len(variables), alpha, max_depth, initial, keep=keep, depth_batch=depth_batch
    )
    sepsets: MutableMapping = copy_sepsets(skeleton.sepsets)
    applied: dict[str, list] = {}
    if knowledge is not None:
        applied = knowledge_applied(knowledge, skeleton.adjacency)
    graph = _marked_r0(variables, skeleton.adjacency, sepsets, sepset_rule, knowledge, applied)
    removed: list[tuple[int, int]] = []
    pds_tests = 0
    pds_max: dict[tuple[int, int], float] = {}
    if possible_dsep != "off":
        removed, pds_tests, pds_max = yield from _possible_dsep_phase(
            graph, sepsets, alpha, possible_dsep, pds_max_size, max_path_length, keep
        )
        graph = _marked_r0(variables, graph.adjacency(), sepsets, sepset_rule, knowledge, applied)
    orient = _rule_orientation(
        graph, sepsets, rules, sepset_rule, alpha, max_path_length, knowledge is not None
    )
    cache: dict = {}
    pag = yield from replay(orient, cache)
    return FCIResult(
        graph=pag,
        skeleton=skeleton,
        sepsets=sepsets,
        pds_removed=removed,
        orientation_tests=pds_tests + len(cache),
        pds_max_pvalue=pds_max,
        knowledge=applied,
    )


def _checked_fci_options(
    variables: Sequence[str],
    possible_dsep: str,
    rules: str,
    initial: np.ndarray | None,
    knowledge: Knowledge | KnowledgeMatrix | None,
) -> tuple[KnowledgeMatrix | None, np.ndarray | None, np.ndarray | None]:
    """:func:`fci_steps`' options checked, and its knowledge as a matrix over ``variables``
    with what it does to the adjacency search: the starting adjacency without the pairs it
    forbids both ways, and the required edges to ``keep`` (None, None without knowledge)."""
    if possible_dsep not in ("sequential", "stable", "off"):
        raise ValueError(f"unknown possible_dsep {possible_dsep!r}; expected sequential|stable|off")
    if rules not in ("causallearn", "zhang"):
        raise ValueError(f"unknown FCI rule set {rules!r}; expected causallearn|zhang")
    if isinstance(knowledge, Knowledge):
        knowledge = knowledge.matrix(list(variables))
    keep = None
    if knowledge is not None:
        if rules != "zhang":
            raise ValueError(
                "background knowledge works with FCI's Zhang rules (rules='zhang'), which never "
                "overwrite a mark; causal-learn's rule set does"
            )
        start = ~np.eye(len(variables), dtype=bool) if initial is None else np.asarray(initial)
        initial, keep = start & ~knowledge.no_edge, knowledge.kept
    return knowledge, initial, keep


def _marked_r0(
    variables: Sequence[str],
    adjacency: np.ndarray,
    sepsets: MutableMapping,
    sepset_rule: str,
    knowledge: KnowledgeMatrix | None,
    applied: dict[str, list],
) -> Graph:
    """The circle graph of ``adjacency`` with the knowledge's marks (recorded in ``applied``),
    then R0 (the colliders from the separating sets)."""
    graph = circle_graph(variables, adjacency)
    if knowledge is not None:
        applied["oriented"], applied["arrowheads"] = mark_pag_by_knowledge(graph.marks, knowledge)
    untested = None if knowledge is None else knowledge.no_edge
    fci_orient_colliders(graph, sepsets, rule=sepset_rule, untested=untested)
    return graph


def _possible_dsep_phase(
    graph: Graph,
    sepsets: MutableMapping,
    alpha: float,
    possible_dsep: str,
    pds_max_size: int | None,
    max_path_length: int,
    keep: np.ndarray | None,
) -> Steps[tuple[list[tuple[int, int]], int, dict[tuple[int, int], float]]]:
    """Generator: the Possible-D-Sep phase's batches (:func:`.remove_by_possible_dsep`, which
    removes edges from ``graph``). Returns the removed pairs, the number of tests asked and each
    tested pair's largest p-value."""
    pds = remove_by_possible_dsep(
        graph, sepsets, alpha, possible_dsep, pds_max_size, max_path_length, keep
    )
    pds_tests = 0
    pds_max: dict[tuple[int, int], float] = {}
    try:
        batch = next(pds)
        while True:
            pds_tests += len(batch)
            answers = yield batch
            for (x, y, _), p in zip(batch, answers, strict=True):
                keep_largest(pds_max, pair_key(x, y), p)
            batch = pds.send(answers)
    except StopIteration as stop:
        removed = stop.value
    return removed, pds_tests, pds_max


def _rule_orientation(
    after_r0: Graph,
    sepsets: MutableMapping,
    rules: str,
    sepset_rule: str,
    alpha: float,
    max_path_length: int,
    untested_pairs: bool,
) -> Callable[[PValues], Graph]:
    """The orientation step :func:`~.driver.replay` runs: the FCI rules on a copy of the graph
    after R0; with causal-learn's rules, R4 decides independence by the p-values asked."""

    def orient(pv: PValues) -> Graph:
        g = after_r0.copy()
        independence = None
        if rules == "causallearn":

            def independence(x: int, y: int, cond: tuple[int, ...]) -> bool:
                return pv(x, y, cond) > alpha

        apply_fci_rules(
            g,
            sepsets,
            mode=rules,
            sepset_rule=sepset_rule,
            independence=independence,
            max_path_length=max_path_length,
            untested_pairs=untested_pairs,
        )
        return g

    return orient


def fci(oracle: CIOracle, alpha: float = 0.05, **options) -> FCIResult:
    """FCI on a local oracle (see :func:`fci_steps` for the options)."""
    return drive(fci_steps(oracle.variables, alpha, **options), oracle)
