"""Self-contained d-separation on a boolean DAG adjacency (Bayes-ball reachability).

Used by the d-separation oracle, which feeds engines perfect CI answers. With latent nodes, asking
only about observed x, y, S in the full DAG gives m-separation in the marginal MAG.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def ancestors_of(adjacency: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Boolean mask of ``nodes`` (a mask) and all their ancestors; ``adjacency[i, j]``: i -> j."""
    found = nodes.copy()
    frontier = nodes.copy()
    while frontier.any():
        frontier = adjacency[:, frontier].any(axis=1) & ~found
        found |= frontier
    return found


def d_separated(adjacency: np.ndarray, x: int, y: int, s: Iterable[int] = ()) -> bool:
    """Whether ``x`` and ``y`` are d-separated given ``S`` in the DAG ``adjacency[i, j] = i -> j``.

    Bayes-ball over (node, direction) states, one vectorised frontier step per path length:
    a node entered from a child ("up") passes on to parents and children unless conditioned on;
    a node entered from a parent ("down") passes to children unless conditioned on, and bounces
    to its parents if it is conditioned on or has a conditioned descendant (open collider).
    """
    adj = np.asarray(adjacency, dtype=bool)
    p = adj.shape[0]
    if adj.shape != (p, p):
        raise ValueError(f"adjacency must be square, got shape {adj.shape}")
    x, y = int(x), int(y)
    cond = np.zeros(p, dtype=bool)
    cond[list(int(v) for v in s)] = True
    if x == y or cond[x] or cond[y]:
        raise ValueError(f"d-separation needs distinct x={x}, y={y} outside S")
    opens_collider = ancestors_of(adj, cond)
    up = np.zeros(p, dtype=bool)
    down = np.zeros(p, dtype=bool)
    up[x] = True
    frontier_up, frontier_down = up.copy(), down.copy()
    while frontier_up.any() or frontier_down.any():
        through = frontier_up & ~cond
        to_parents = through | (frontier_down & opens_collider)
        to_children = through | (frontier_down & ~cond)
        frontier_up = adj[:, to_parents].any(axis=1) & ~up
        frontier_down = adj[to_children].any(axis=0) & ~down
        up |= frontier_up
        down |= frontier_down
        if up[y] or down[y]:
            return False
    return True
