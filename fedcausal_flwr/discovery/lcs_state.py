"""FedLCS's vocabulary: the search options, the two request kinds, the shared knowledge and a
target's result.

Apart from the search so that every part of it (the skeleton and separating-set phases, the
orientation, the payload encoding, the client that answers requests) reads the same types
without importing the search itself. :func:`adjacent` is here because it is how
:class:`Knowledge`'s edge rule is read, by the search and by the orientation alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from fedcausal_flwr.discovery.sepset_choice import SEP_RULES, SepsetJob
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.graphs.sepsets import SEPSET_RULES

SEP_STOPS = ("after_found", "first_empty", "first_found")
EDGE_RULES = ("and", "or")
Pair = tuple[int, int]
PruneJob = tuple[int, tuple[int, ...], int]  # (variable, candidates, depth)


@dataclass(frozen=True)
class LCSOptions:
    """Search options (their meaning and defaults: :mod:`fedcausal_flwr.strategies.fedlcs`)."""

    alpha: float = 0.05
    max_level: int = 6
    stable: bool = True
    stop_unchanged: bool = True
    sep_depth: int = 3
    sep_stop: str = "after_found"
    sep_rule: str = "votes"
    edge_rule: str = "and"
    collider_rule: str = "standard"
    extension_depth: int = 2
    random_orient: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        for name in ("max_level", "sep_depth", "extension_depth"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.sep_stop not in SEP_STOPS:
            raise ValueError(f"unknown sep_stop {self.sep_stop!r}; expected one of {SEP_STOPS}")
        if self.sep_rule not in SEP_RULES:
            raise ValueError(f"unknown sep_rule {self.sep_rule!r}; expected one of {SEP_RULES}")
        if self.edge_rule not in EDGE_RULES:
            raise ValueError(f"unknown edge_rule {self.edge_rule!r}; expected one of {EDGE_RULES}")
        if self.collider_rule not in SEPSET_RULES:
            raise ValueError(
                f"unknown collider_rule {self.collider_rule!r}; expected one of {SEPSET_RULES}"
            )


@dataclass(frozen=True)
class PruneRequest:
    """One FLSke layer for several variables: keep flags per candidate are wanted."""

    jobs: list[PruneJob]

    def __len__(self) -> int:  # one answer (the kept candidates) per job
        return len(self.jobs)


@dataclass(frozen=True)
class SepsetRequest:
    """One depth of the consistent separating-set search for several pairs."""

    jobs: list[SepsetJob]

    def __len__(self) -> int:  # one answer (a choice or None) per job
        return len(self.jobs)


@dataclass
class Knowledge:
    """What the search has learned so far (shared by all targets)."""

    pc: dict[int, tuple[int, ...]] = field(default_factory=dict)
    layers: dict[int, list[dict]] = field(default_factory=dict)
    sepsets: dict[Pair, dict | None] = field(default_factory=dict)
    edge_rule: str = "and"  # LCSOptions.edge_rule: how two learned PC sets make an edge
    collider_rule: str = "standard"  # LCSOptions.collider_rule: which sets decide a triple


@dataclass
class LocalStructure:
    """FedLCS output for one target (indices into the variable list)."""

    target: int
    parents: list[int]
    children: list[int]
    undirected: list[int]
    nodes: list[int]  # variables touched, ascending
    marks: np.ndarray  # marks over ``nodes``
    colliders: list[tuple[int, int, int]]
    undecided_pairs: list[Pair]
    depth_reached: int
    randomly_oriented: list[int] = field(default_factory=list)

    def graph(self, names: Sequence[str]) -> Graph:
        """The local graph over the touched variables (kind ``LOCAL``)."""
        return Graph(tuple(names[v] for v in self.nodes), self.marks, "LOCAL")


def adjacent(kb: Knowledge, known: set[int], u: int, v: int) -> bool:
    """AND rule where both PC sets are learned (OR with ``edge_rule="or"``); one-sided where only
    one is."""
    in_u = u in known and v in kb.pc[u]
    in_v = v in known and u in kb.pc[v]
    if u in known and v in known and kb.edge_rule == "and":
        return in_u and in_v
    return in_u or in_v
