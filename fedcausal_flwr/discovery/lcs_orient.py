"""FedLCS's orientation: the local graph rebuilt from what the search knows.

:func:`orient_local` puts the learned adjacencies of the known variables into a graph, orients
the colliders the separating sets decide and applies Meek's rules; :func:`collider_list` and
:func:`undirected_at` read the result, :func:`orient_randomly` is the paper's random completion.
Apart from the search because it asks nothing: it is a pure function of the knowledge, redone
after every ring of the extension.
"""

from __future__ import annotations

import numpy as np

from fedcausal_flwr.discovery.lcs_state import Knowledge, Pair, adjacent
from fedcausal_flwr.graphs.colliders import orient_colliders
from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL, Graph
from fedcausal_flwr.graphs.meek import apply_meek
from fedcausal_flwr.graphs.sepsets import pair_key, triple_status


def orient_local(
    kb: Knowledge, known: set[int], examined: set[Pair]
) -> tuple[list[int], np.ndarray]:
    """Rebuild the local graph from the skeleton knowledge: colliders, then Meek R1-R4."""
    nodes = sorted(known | {v for c in known for v in kb.pc[c]})
    index = {v: i for i, v in enumerate(nodes)}
    n = len(nodes)
    marks = np.zeros((n, n), dtype=np.int8)
    for c in sorted(known):
        for v in kb.pc[c]:
            if adjacent(kb, known, c, v):
                marks[index[c], index[v]] = marks[index[v], index[c]] = TAIL
    graph = Graph(tuple(str(v) for v in nodes), marks, "LOCAL")
    adj = (marks != NONE).astype(np.int64)
    candidates = np.triu(((adj @ adj) > 0) & (adj == 0), k=1)
    np.fill_diagonal(candidates, False)
    everyone = tuple(range(n))
    decisions: dict[Pair, list[tuple[int, ...]]] = {}
    for i, j in zip(*np.nonzero(candidates), strict=True):
        # undecided marker: with the conservative rule every centre is "ambiguous"
        decisions[(int(i), int(j))] = [tuple(v for v in everyone if v not in (i, j)), ()]
    for a, b in sorted(examined):
        choice = kb.sepsets.get((a, b))
        if choice is not None and a in index and b in index:
            sets = _deciding_sets(kb, choice)
            decisions[pair_key(index[a], index[b])] = [tuple(index[v] for v in z) for z in sets]
    orient_colliders(graph, decisions, rule=_triple_rule(kb), conflict="existing")
    apply_meek(graph, mode="complete")
    return nodes, graph.marks


def _deciding_sets(kb: Knowledge, choice: dict) -> list[tuple[int, ...]]:
    """The sets that decide a pair's triples: the chosen one (``standard``), or every set found
    independent at the searched depths (the chosen one among them)."""
    return [choice["set"]] if kb.collider_rule == "standard" else choice["independent"]


def _triple_rule(kb: Knowledge) -> str:
    """:func:`~fedcausal_flwr.graphs.sepsets.triple_status`'s rule over :func:`_deciding_sets`
    (one set under ``conservative`` is the standard rule, and leaves the undecided marker alone)."""
    return "conservative" if kb.collider_rule == "standard" else kb.collider_rule


def undirected_at(nodes: list[int], marks: np.ndarray, t: int) -> list[int]:
    i = nodes.index(t)
    return [nodes[j] for j in np.flatnonzero((marks[i] == TAIL) & (marks[:, i] == TAIL))]


def collider_list(
    nodes: list[int], marks: np.ndarray, kb: Knowledge, examined: set[Pair]
) -> list[tuple[int, int, int]]:
    out = []
    index = {v: i for i, v in enumerate(nodes)}
    rule = _triple_rule(kb)
    for a, b in sorted(examined):
        choice = kb.sepsets.get((a, b))
        if choice is None or a not in index or b not in index:
            continue
        ia, ib = index[a], index[b]
        for ic in np.flatnonzero((marks[ia] != NONE) & (marks[ib] != NONE)):
            if marks[ia, ic] != ARROW or marks[ib, ic] != ARROW:
                continue
            if triple_status(_deciding_sets(kb, choice), nodes[ic], rule) == "collider":
                out.append((a, nodes[ic], b))
    return out


def orient_randomly(nodes: list[int], marks: np.ndarray, t: int, seed: int) -> list[int]:
    """The paper's completion: orient T's undirected edges at random, never closing a cycle."""
    rng = np.random.default_rng([seed, t])
    i = nodes.index(t)
    done = []
    for v in undirected_at(nodes, marks, t):
        j = nodes.index(v)
        if marks[i, j] != TAIL or marks[j, i] != TAIL:
            continue  # oriented by Meek after an earlier random choice
        first = (i, j) if rng.random() < 0.5 else (j, i)
        for a, b in (first, first[::-1]):
            if not _reaches(marks, b, a):
                marks[a, b], marks[b, a] = ARROW, TAIL
                break
        done.append(v)
        graph = Graph(tuple(map(str, nodes)), marks, "LOCAL")
        apply_meek(graph, mode="complete")
        marks[:] = graph.marks
    return done


def _reaches(marks: np.ndarray, start: int, goal: int) -> bool:
    """Is there a directed path start --> ... --> goal?"""
    directed = (marks == ARROW) & (marks.T == TAIL)
    seen, stack = {start}, [start]
    while stack:
        u = stack.pop()
        if u == goal:
            return True
        for w in np.flatnonzero(directed[u]):
            if int(w) not in seen:
                seen.add(int(w))
                stack.append(int(w))
    return False
