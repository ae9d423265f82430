"""Ground-truth graphs for evaluation: DAG -> CPDAG, DAG with latents -> MAG -> PAG, m-separation.

The PAG is built as in Zhang (2008): the MAG's skeleton with circles, the MAG's unshielded
colliders, then the FCI rules R1-R4 and R8-R10 to closure, where R4 reads off the MAG whether the
middle node of a discriminating path is a collider. No selection variables are modelled.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

import numpy as np

from fedcausal_flwr.graphs.fci_context import DiscriminatingPath
from fedcausal_flwr.graphs.fci_rules import apply_fci_rules
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.graphs.meek import apply_meek

NodeRef = int | str


def directed_matrix(graph: Graph) -> np.ndarray:
    """``out[i, j]`` is True for ``i --> j``."""
    m = graph.marks
    return (m == ARROW) & (m.T == TAIL)


def ancestor_matrix(graph: Graph) -> np.ndarray:
    """``out[i, j]`` is True when i is a proper ancestor of j along directed edges."""
    d = directed_matrix(graph)
    reach = d.copy()
    while True:
        step = reach | ((reach.astype(np.int64) @ d.astype(np.int64)) > 0)
        if np.array_equal(step, reach):
            return reach
        reach = step


def check_dag(graph: Graph) -> None:
    """Raise ValueError unless every edge is directed and there is no directed cycle."""
    m = graph.marks
    adj = m != NONE
    if np.any(adj & ~(directed_matrix(graph) | directed_matrix(graph).T)):
        bad = [e for e in graph.edges() if {e[2], e[3]} != {"tail", "arrow"}]
        raise ValueError(f"a DAG may only have directed edges; found {bad[:5]}")
    cyc = np.flatnonzero(np.diag(ancestor_matrix(graph)))
    if cyc.size:
        raise ValueError(f"the graph has a directed cycle through {[graph.names[i] for i in cyc]}")


def check_mag(graph: Graph) -> None:
    """Raise ValueError unless the graph is ancestral with directed and bidirected edges only."""
    m = graph.marks
    adj = m != NONE
    d = directed_matrix(graph)
    bidirected = (m == ARROW) & (m.T == ARROW)
    if np.any(adj & ~(d | d.T | bidirected)):
        ok = {("tail", "arrow"), ("arrow", "tail"), ("arrow", "arrow")}
        bad = [e for e in graph.edges() if (e[2], e[3]) not in ok]
        raise ValueError(f"a MAG (no selection) has only --> and <-> edges; found {bad[:5]}")
    anc = ancestor_matrix(graph)
    if np.any(np.diag(anc)):
        raise ValueError("the MAG has a directed cycle")
    if np.any(bidirected & anc):
        i, j = (int(v[0]) for v in np.nonzero(bidirected & anc))
        raise ValueError(
            f"not ancestral: {graph.names[i]} <-> {graph.names[j]} but {graph.names[i]} is an "
            f"ancestor of {graph.names[j]}"
        )


def _node_indices(graph: Graph, nodes: NodeRef | Iterable[NodeRef]) -> list[int]:
    if isinstance(nodes, (int, np.integer, str)):
        return [graph.index(nodes)]
    return [graph.index(v) for v in nodes]


def d_separated(
    graph: Graph,
    x: NodeRef | Iterable[NodeRef],
    y: NodeRef | Iterable[NodeRef],
    given: Iterable[NodeRef] = (),
) -> bool:
    """Whether x and y are d-separated (DAG) or m-separated (MAG) given ``given``.

    A reachability ("Bayes-ball") search over (node, arrived-with-an-arrowhead) states: a walk may
    pass a non-collider outside ``given`` and a collider that is an ancestor of (or in) ``given``.
    Latent variables of a DAG are simply never put in ``given``.
    """
    if np.any(graph.marks == CIRCLE):
        raise ValueError("d/m-separation needs a DAG or MAG; this graph has circle marks")
    xs, ys, zs = (
        _node_indices(graph, x),
        _node_indices(graph, y),
        _node_indices(graph, list(given)),
    )
    overlap = (set(xs) & set(ys)) | ((set(xs) | set(ys)) & set(zs))
    if overlap:
        raise ValueError(
            f"x, y and the conditioning set must be disjoint; "
            f"{[graph.names[i] for i in sorted(overlap)]} appear twice"
        )
    reach = Reachability(graph).reachable(xs, zs)
    return not bool(reach[ys].any())


class Reachability:
    """Reachability searches on one DAG/MAG, sharing its ancestor matrix and neighbour lists."""

    def __init__(self, graph: Graph):
        self.marks = graph.marks
        self.anc = ancestor_matrix(graph)
        self.neighbours = [np.flatnonzero(row != NONE).tolist() for row in self.marks]

    def reachable(self, sources: Sequence[int], given: Sequence[int]) -> np.ndarray:
        """Nodes connected to ``sources`` by a walk that is open given ``given``."""
        m = self.marks
        p = m.shape[0]
        in_given = np.zeros(p, dtype=bool)
        in_given[list(given)] = True
        anc_of_given = in_given | self.anc[:, in_given].any(axis=1)
        seen = np.zeros((p, 2), dtype=bool)
        reach = np.zeros(p, dtype=bool)
        queue: deque[tuple[int, int]] = deque()
        for s in sources:
            for w in self.neighbours[s]:
                into = int(m[s, w] == ARROW)
                if not seen[w, into]:
                    seen[w, into] = True
                    queue.append((w, into))
        while queue:
            v, into = queue.popleft()
            reach[v] = True
            for w in self.neighbours[v]:
                collider = into and m[w, v] == ARROW
                if anc_of_given[v] if collider else not in_given[v]:
                    nxt = int(m[v, w] == ARROW)
                    if not seen[w, nxt]:
                        seen[w, nxt] = True
                        queue.append((w, nxt))
        return reach


def dag_to_cpdag(dag: Graph) -> Graph:
    """The CPDAG (essential graph) of a DAG: its v-structures, then Meek's rules to closure."""
    check_dag(dag)
    d = directed_matrix(dag)
    adj = dag.marks != NONE
    marks = np.where(adj, TAIL, NONE).astype(np.int8)
    non_adj = ~adj
    np.fill_diagonal(non_adj, False)
    for y in range(dag.n_nodes):
        pa = np.flatnonzero(d[:, y])
        if pa.size < 2:
            continue
        in_v = non_adj[np.ix_(pa, pa)].any(axis=1)
        marks[pa[in_v], y] = ARROW
    cpdag = Graph(dag.names, marks, "CPDAG")
    apply_meek(cpdag, mode="complete")
    return cpdag


def dag_to_mag(dag: Graph, latent: Iterable[NodeRef]) -> Graph:
    """The MAG over the observed nodes of a DAG whose ``latent`` nodes are marginalised out.

    Observed x, y are adjacent iff no set of observed nodes d-separates them (an inducing path
    relative to the latents), tested with the set ``(An(x) | An(y)) & O - {x, y}``, which separates
    them whenever any set does. The edge is ``x --> y`` if x is an ancestor of y in the DAG,
    ``y --> x`` if y is an ancestor of x, and ``x <-> y`` otherwise.
    """
    check_dag(dag)
    lat = set(_node_indices(dag, list(latent)))
    obs = [i for i in range(dag.n_nodes) if i not in lat]
    search = Reachability(dag)
    anc = search.anc
    anc_refl = anc | np.eye(dag.n_nodes, dtype=bool)
    obs_mask = np.zeros(dag.n_nodes, dtype=bool)
    obs_mask[obs] = True
    k = len(obs)
    marks = np.zeros((k, k), dtype=np.int8)
    for a in range(k):
        for b in range(a + 1, k):
            x, y = obs[a], obs[b]
            cond = obs_mask & (anc_refl[:, x] | anc_refl[:, y])
            cond[[x, y]] = False
            if search.reachable([x], np.flatnonzero(cond).tolist())[y]:
                if anc[x, y]:
                    marks[a, b], marks[b, a] = ARROW, TAIL
                elif anc[y, x]:
                    marks[b, a], marks[a, b] = ARROW, TAIL
                else:
                    marks[a, b] = marks[b, a] = ARROW
    return Graph(tuple(dag.names[i] for i in obs), marks, "MAG")


def mag_to_pag(mag: Graph) -> Graph:
    """The PAG (maximally informative, Zhang 2008) of the Markov equivalence class of a MAG."""
    check_mag(mag)
    mm = mag.marks
    adj = mm != NONE
    pag_marks = np.where(adj, CIRCLE, NONE).astype(np.int8)
    non_adj = ~adj
    np.fill_diagonal(non_adj, False)
    for y in range(mag.n_nodes):
        into = np.flatnonzero(mm[:, y] == ARROW)  # x *-> y in the MAG
        if into.size < 2:
            continue
        in_collider = non_adj[np.ix_(into, into)].any(axis=1)
        pag_marks[into[in_collider], y] = ARROW
    pag = Graph(mag.names, pag_marks, "PAG")

    def noncollider_in_mag(dp: DiscriminatingPath) -> bool:
        return not (mm[dp.a, dp.b] == ARROW and mm[dp.c, dp.b] == ARROW)

    apply_fci_rules(pag, None, mode="zhang", discriminating_decision=noncollider_in_mag)
    return pag


def dag_to_pag(dag: Graph, latent: Iterable[NodeRef]) -> Graph:
    """The PAG over the observed nodes of a DAG with ``latent`` nodes (no selection)."""
    return mag_to_pag(dag_to_mag(dag, latent))
