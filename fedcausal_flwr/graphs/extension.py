"""A DAG extension of a PDAG (Dor and Tarsi 1992), for scoring a CPDAG or a voted graph as a DAG."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph


def pdag_to_dag(graph: Graph) -> tuple[Graph, bool]:
    """A DAG extension of a PDAG (directed ``-->`` and undirected ``---`` edges): Dor and Tarsi
    (1992), as the FedECD/FedPC evaluators' ``cpdag_to_dag`` do before scoring against a DAG.

    Repeatedly take the lowest-index node ``x`` that has no outgoing directed edge and whose
    undirected neighbours are adjacent to every other neighbour of ``x``, orient its undirected
    edges into ``x`` and remove it. Returns ``(dag, consistent)``. A CPDAG always has such an
    extension, but a voted graph may not: then the remaining undirected edges follow a topological
    order of the remaining directed edges (lowest index first; directed cycles are kept as they
    are) and ``consistent`` is False.
    """
    if np.any(np.isin(graph.marks, (CIRCLE,))):
        raise ValueError("pdag_to_dag needs a graph with tails and arrowheads only (no circles)")
    m = graph.marks.copy()
    p = len(graph.names)
    out = m.copy()
    alive = np.ones(p, dtype=bool)
    consistent = True
    while alive.any():
        sub = m[np.ix_(alive, alive)]
        idx = np.flatnonzero(alive)
        directed_out = (sub == ARROW) & (sub.T == TAIL)  # [a, b]: a --> b
        undirected = (sub == TAIL) & (sub.T == TAIL)
        adjacent = sub != NONE
        chosen = None
        for k in range(len(idx)):
            if directed_out[k].any():
                continue
            nbrs = np.flatnonzero(adjacent[k])
            und = np.flatnonzero(undirected[k])
            if all(adjacent[u, [v for v in nbrs if v != u]].all() for u in und):
                chosen = k
                break
        if chosen is None:
            consistent = False
            break
        x = idx[chosen]
        for u in idx[np.flatnonzero(undirected[chosen])]:
            out[u, x], out[x, u] = ARROW, TAIL
        alive[x] = False
    if not consistent:
        rest = np.flatnonzero(alive)
        order = _directed_order(m, rest)
        position = {v: k for k, v in enumerate(order)}
        for a, b in combinations(rest.tolist(), 2):
            if out[a, b] == TAIL and out[b, a] == TAIL:
                first, second = (a, b) if position[a] < position[b] else (b, a)
                out[first, second], out[second, first] = ARROW, TAIL
    return Graph(graph.names, out, "DAG"), consistent


def _directed_order(m: np.ndarray, nodes: np.ndarray) -> list[int]:
    """Kahn's order of ``nodes`` along their directed edges, lowest index first; nodes left on
    directed cycles follow in index order."""
    ids = [int(v) for v in nodes]
    indegree = {v: sum(m[u, v] == ARROW and m[v, u] == TAIL for u in ids) for v in ids}
    order: list[int] = []
    ready = sorted(v for v in ids if indegree[v] == 0)
    while ready:
        v = ready.pop(0)
        order.append(v)
        for w in ids:
            if m[v, w] == ARROW and m[w, v] == TAIL:
                indegree[w] -= 1
                if indegree[w] == 0:
                    ready.append(w)
                    ready.sort()
    return order + [v for v in ids if v not in order]
