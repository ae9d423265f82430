"""How often each edge and each orientation appears over a set of graphs (bootstrap replicates),
and the split of per-pair shares (vote shares) into the result's edges and its removed pairs.

Flower-free: the federated bootstrap (:mod:`fedcausal_flwr.federation.core.bootstrap`) learns one
graph per resample of the clients' rows; this module turns those graphs into one number per edge.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL, Graph


def edge_frequencies(graphs: Sequence[Graph], also: Graph | None = None) -> list[list]:
    """``[x, y, edge, x->y, y->x]`` for every pair adjacent in at least one of ``graphs`` (or in
    ``also``, the graph they are the confidence of, so each of its edges is listed, at 0 too).

    ``edge`` is the share of graphs with any edge between ``x`` and ``y``; ``x->y`` the share
    with the directed edge ``x --> y`` (an arrowhead at ``y``, a tail at ``x``). Undirected,
    bidirected and circle-marked edges count as edges but in neither direction, so
    ``x->y + y->x <= edge``. Pairs in node order (``x`` before ``y``).
    """
    if not graphs:
        raise ValueError("edge frequencies need at least one graph")
    names = graphs[0].names
    for g in graphs[1:]:
        if g.names != names:
            raise ValueError(
                f"the graphs have different nodes ({list(g.names)[:5]} vs {list(names)[:5]})"
            )
    marks = np.stack([g.marks for g in graphs])
    edge = (marks != NONE).mean(axis=0)
    directed = ((marks == ARROW) & (marks.transpose(0, 2, 1) == TAIL)).mean(axis=0)
    listed = edge > 0
    if also is not None:
        if also.names != names:
            raise ValueError("the graph `also` has other nodes than the graphs")
        listed |= also.marks != NONE
    rows, cols = np.nonzero(np.triu(listed, k=1))
    return [
        [names[a], names[b], float(edge[a, b]), float(directed[a, b]), float(directed[b, a])]
        for a, b in zip(rows.tolist(), cols.tolist(), strict=True)
    ]


def split_by_graph(
    names: Sequence[str], share: np.ndarray, listed: np.ndarray, adjacency: np.ndarray
) -> dict[str, list[list]]:
    """``[x, y, share]`` for every ``listed`` pair (node order, ``x`` before ``y``): ``kept`` if
    the pair is adjacent in the result, else ``removed`` (the methods' ``edge_votes``)."""
    kept: list[list] = []
    removed: list[list] = []
    for a, b in zip(*np.nonzero(np.triu(listed, k=1)), strict=True):
        row = [names[a], names[b], float(share[a, b])]
        (kept if adjacency[a, b] else removed).append(row)
    return {"kept": kept, "removed": removed}
