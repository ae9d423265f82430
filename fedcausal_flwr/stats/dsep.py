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


def d_connected_nodes(adjacency: np.ndarray, x: int, s: Iterable[int] = ()) -> np.ndarray:
    """Mask of the nodes d-connected to ``x`` given ``S`` in the DAG ``adjacency[i, j] = i -> j``.

    Bayes-ball over (node, direction) states, one vectorised frontier step per path length:
    a node entered from a child ("up") passes on to parents and children unless conditioned on;
    a node entered from a parent ("down") passes to children unless conditioned on, and bounces
    to its parents if it is conditioned on or has a conditioned descendant (open collider).
    One call answers every query ``(x, ., S)``.
    """
    adj = np.asarray(adjacency, dtype=bool)
    p = adj.shape[0]
    if adj.shape != (p, p):
        raise ValueError(f"adjacency must be square, got shape {adj.shape}")
    x = int(x)
    cond = np.zeros(p, dtype=bool)
    cond[list(int(v) for v in s)] = True
    if cond[x]:
        raise ValueError(f"d-separation needs x={x} outside S")
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
    connected = (up | down) & ~cond
    connected[x] = False
    return connected


def d_connected_batch(adjacency: np.ndarray, xs: np.ndarray, cond: np.ndarray) -> np.ndarray:
    """Row ``i``: mask of nodes d-connected to ``xs[i]`` given the set ``cond[i]`` (bool Q x p).

    The same Bayes-ball as :func:`d_connected_nodes`, advanced for all Q queries at once with
    boolean matrix products, so a whole PC depth costs a few dozen numpy operations.
    """
    adj = np.asarray(adjacency, dtype=bool)
    cond = np.asarray(cond, dtype=bool)
    q, p = cond.shape
    rows = np.arange(q)
    if np.any(cond[rows, xs]):
        raise ValueError("d-separation needs every x outside its conditioning set")
    a = adj.astype(np.float32)  # float products run on BLAS

    def step(mask: np.ndarray, matrix: np.ndarray) -> np.ndarray:
        return (mask.astype(np.float32) @ matrix) > 0

    opens_collider = cond.copy()  # S and its ancestors, per row
    active = np.flatnonzero(cond.any(axis=1))
    frontier = cond[active]
    while active.size:
        frontier = step(frontier, a.T) & ~opens_collider[active]
        opens_collider[active] |= frontier
        keep = frontier.any(axis=1)
        active, frontier = active[keep], frontier[keep]
    up = np.zeros((q, p), dtype=bool)
    up[rows, xs] = True
    down = np.zeros((q, p), dtype=bool)
    active = rows
    frontier_up, frontier_down = up.copy(), down.copy()
    while active.size:
        c, oc = cond[active], opens_collider[active]
        through = frontier_up & ~c
        frontier_up = step(through | (frontier_down & oc), a.T) & ~up[active]
        frontier_down = step(through | (frontier_down & ~c), a) & ~down[active]
        up[active] |= frontier_up
        down[active] |= frontier_down
        keep = frontier_up.any(axis=1) | frontier_down.any(axis=1)
        active, frontier_up, frontier_down = active[keep], frontier_up[keep], frontier_down[keep]
    connected = (up | down) & ~cond
    connected[rows, xs] = False
    return connected


def d_separated(adjacency: np.ndarray, x: int, y: int, s: Iterable[int] = ()) -> bool:
    """Whether ``x`` and ``y`` are d-separated given ``S`` in the DAG ``adjacency[i, j] = i ->
    j``."""
    s = [int(v) for v in s]
    if int(x) == int(y) or int(y) in s:
        raise ValueError(f"d-separation needs distinct x={x}, y={y} outside S")
    return not bool(d_connected_nodes(adjacency, x, s)[int(y)])
