"""What FCI's rules consult besides the marks: separating sets, and R4's decision on whether the
middle node of a discriminating path is a collider."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fedcausal_flwr.graphs.sepsets import (
    Sepsets,
    recorded_sepsets,
    sepsets_or_raise,
    triple_status,
)

#: ``independence(x, y, cond)``: True if x and y are independent given ``cond``.
Independence = Callable[[int, int, tuple[int, ...]], bool]


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
class FCIContext:
    """The inputs of one :func:`~.fci_rules.apply_fci_rules` call that the rules read.

    ``strict`` (Zhang's rules) makes a pair missing from ``sepsets`` an error; causal-learn's rules
    take it as "no decision".
    """

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
        sets: list[frozenset[int]] | None
        if self.strict:
            sets = sepsets_or_raise(self.sepsets, theta, c)
        else:
            sets = None if self.sepsets is None else recorded_sepsets(self.sepsets, theta, c)
            if sets is None:
                return None
        status = triple_status(sets, b, self.sepset_rule)
        return None if status == "ambiguous" else status == "noncollider"
