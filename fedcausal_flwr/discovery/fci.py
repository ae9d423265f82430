"""FCI over a batched CI oracle: adjacency search, R0, Possible-D-Sep, then the FCI rules.

The defaults reproduce causal-learn 0.1.4.8's ``fci(data, test, alpha)``: the PC-stable adjacency
search (its ``fas``, same as our skeleton phase), R0 with the union of the removal level's
separating
sets, the sequential Possible-D-Sep phase, R0 again, then its rule loop in which R4 runs two extra
CI
tests per discriminating path. Those extra tests are asked through :func:`~.driver.replay`, so a
federated run pays one round per batch of them.

Options: ``possible_dsep="stable"`` (one batch per subset size, see :mod:`.possible_dsep`) or
``"off"`` (FedC2SL's code drops the phase's deletions); ``rules="zhang"`` for Zhang's (2008)
complete rule set with R4 decided from separating sets (no extra tests); ``max_depth`` caps the
conditioning sets of the adjacency search (FedC2SL's FedFCI uses 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from fedcausal_flwr.discovery.driver import PValues, drive, replay
from fedcausal_flwr.discovery.possible_dsep import remove_by_possible_dsep
from fedcausal_flwr.discovery.skeleton import Skeleton, skeleton_steps
from fedcausal_flwr.graphs.colliders import fci_orient_colliders
from fedcausal_flwr.graphs.fci_rules import apply_fci_rules
from fedcausal_flwr.graphs.graph import CIRCLE, Graph
from fedcausal_flwr.stats.oracle import CIOracle


@dataclass
class FCIResult:
    graph: Graph  # PAG
    skeleton: Skeleton
    sepsets: dict
    pds_removed: list[tuple[int, int]]
    orientation_tests: int = 0

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
):
    """Generator: skeleton level batches, Possible-D-Sep batches, then R4's test batches."""
    if possible_dsep not in ("sequential", "stable", "off"):
        raise ValueError(f"unknown possible_dsep {possible_dsep!r}; expected sequential|stable|off")
    if rules not in ("causallearn", "zhang"):
        raise ValueError(f"unknown FCI rule set {rules!r}; expected causallearn|zhang")
    sepset_rule = "causallearn" if rules == "causallearn" else "standard"
    skeleton = yield from skeleton_steps(len(variables), alpha, max_depth, initial)
    sepsets: dict = {pair: list(sets) for pair, sets in skeleton.sepsets.items()}
    graph = circle_graph(variables, skeleton.adjacency)
    fci_orient_colliders(graph, sepsets, rule=sepset_rule)
    removed: list[tuple[int, int]] = []
    pds_tests = 0
    if possible_dsep != "off":
        pds = remove_by_possible_dsep(
            graph, sepsets, alpha, possible_dsep, pds_max_size, max_path_length
        )
        try:
            batch = next(pds)
            while True:
                pds_tests += len(batch)
                batch = pds.send((yield batch))
        except StopIteration as stop:
            removed = stop.value
        graph = circle_graph(variables, graph.adjacency())
        fci_orient_colliders(graph, sepsets, rule=sepset_rule)
    after_r0 = graph

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
        )
        return g

    cache: dict = {}
    pag = yield from replay(orient, cache)
    return FCIResult(
        graph=pag,
        skeleton=skeleton,
        sepsets=sepsets,
        pds_removed=removed,
        orientation_tests=pds_tests + len(cache),
    )


def fci(oracle: CIOracle, alpha: float = 0.05, **options) -> FCIResult:
    """FCI on a local oracle (see :func:`fci_steps` for the options)."""
    return drive(fci_steps(oracle.variables, alpha, **options), oracle)
