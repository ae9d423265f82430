"""Questions about one edge or node of a mark matrix, shared by every orientation rule.

``m[i, j]`` is the mark at j on edge i-j (:data:`~.graph.NONE` when i and j are not adjacent).
"""

from __future__ import annotations

import numpy as np

from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL

Triple = tuple[int, int, int]


def adjacent(m: np.ndarray, i: int, j: int) -> bool:
    return bool(m[i, j] != NONE)


def neighbours(m: np.ndarray, i: int) -> list[int]:
    return np.flatnonzero(m[i] != NONE).tolist()


def is_directed(m: np.ndarray, i: int, j: int) -> bool:
    """``i --> j``."""
    return bool(m[i, j] == ARROW and m[j, i] == TAIL)


def is_undirected(m: np.ndarray, i: int, j: int) -> bool:
    """``i --- j``."""
    return bool(m[i, j] == TAIL and m[j, i] == TAIL)


def directed_mask(m: np.ndarray) -> np.ndarray:
    """``[i, j]`` is True for ``i --> j``."""
    return (m == ARROW) & (m.T == TAIL)


def non_adjacent_mask(m: np.ndarray) -> np.ndarray:
    """``[i, j]`` is True for distinct, non-adjacent i and j."""
    na = m == NONE
    np.fill_diagonal(na, False)
    return na


def arrow_allowed(m: np.ndarray, x: int, y: int) -> bool:
    """causal-learn's ``is_arrow_point_allowed(x, y)`` without background knowledge."""
    return bool(m[x, y] in (ARROW, CIRCLE))
