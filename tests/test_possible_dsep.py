"""FCI's Possible-D-Sep phase (``discovery/possible_dsep.py``) on hand-built PAGs.

Every expectation below was worked out by hand from the walk the module documents (causal-learn
0.1.4.8's ``getPossibleDsep`` / ``removeByPossibleDsep``); one test checks the same walk against
causal-learn's own function on random graphs.

The hand-built graph ``G1`` (marks: ``o`` circle, ``>`` arrow)::

    0 o-o 1      0 o-> 2 <-o 3      0 o-o 4 o-o 3      3 o-o 1

0 and 3 are not adjacent; 2 is a collider on 0 *-> 2 <-* 3.
"""

from __future__ import annotations

import numpy as np
import pytest

import fedcausal_flwr.discovery.possible_dsep as pds_module
from fedcausal_flwr.discovery.possible_dsep import (
    _semi_directed_path_exists,
    possible_dsep,
    remove_by_possible_dsep,
)
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.stats.batch_oracle import normalise_query


def build(d: int, edges) -> Graph:
    """A PAG over ``V0 ... V{d-1}`` from ``(i, j, mark_at_i, mark_at_j)`` rows."""
    graph = Graph.empty([f"V{k}" for k in range(d)], "PAG")
    for i, j, mi, mj in edges:
        graph.set_edge(i, j, mi, mj)
    return graph


def g1() -> Graph:
    return build(
        5,
        [
            (0, 1, CIRCLE, CIRCLE),
            (0, 2, CIRCLE, ARROW),
            (3, 2, CIRCLE, ARROW),
            (0, 4, CIRCLE, CIRCLE),
            (4, 3, CIRCLE, CIRCLE),
            (3, 1, CIRCLE, CIRCLE),
        ],
    )


def run(gen, answer):
    """Drive a Possible-D-Sep generator by hand: (batches asked, return value)."""
    batches = []
    try:
        batch = next(gen)
        while True:
            batches.append(list(batch))
            batch = gen.send([answer(q) for q in batch])
    except StopIteration as stop:
        return batches, stop.value


# ---------------------------------------------------------------------------- semi-directed paths
def test_semi_directed_paths_leave_each_node_without_an_arrowhead_there():
    # 0 --> 1 o-o 2 --> 3, and 3 <-> 4
    chain = build(
        5,
        [(0, 1, TAIL, ARROW), (1, 2, CIRCLE, CIRCLE), (2, 3, TAIL, ARROW), (3, 4, ARROW, ARROW)],
    ).marks
    assert _semi_directed_path_exists(chain, 0, 3)  # three edges long
    assert _semi_directed_path_exists(chain, 2, 1)  # a circle counts as "not an arrowhead"
    assert not _semi_directed_path_exists(chain, 3, 0)  # against the arrowheads
    assert not _semi_directed_path_exists(chain, 1, 0)  # the arrowhead at 1 blocks 1 -> 0
    assert not _semi_directed_path_exists(chain, 3, 4)  # <-> has an arrowhead at both ends
    assert not _semi_directed_path_exists(chain, 0, 4)
    marks = g1().marks
    assert _semi_directed_path_exists(marks, 1, 0) and _semi_directed_path_exists(marks, 4, 3)
    assert not _semi_directed_path_exists(marks, 2, 0)  # a pure collider reaches nothing
    assert not _semi_directed_path_exists(marks, 2, 3)


# ---------------------------------------------------------------------------- possible_dsep
def test_possible_dsep_walks_through_colliders_with_a_possible_parent():
    graph = g1()
    # 2 and 4 are neighbours of 0; 3 is reached through the collider 0 *-> 2 <-* 3 and kept
    # because 4, which also leads to 3, has a circle at 4 on 4 o-o 0 (a possible parent path);
    # y = 1 is never included; descending order
    assert possible_dsep(graph, 0, 1) == [4, 3, 2]
    # from the other end: 3 is 1's only other neighbour; 3 o-o 1 is no collider into 3
    assert possible_dsep(graph, 1, 0) == [3]
    # 1 is reachable from 0 through 0 o-o 1 when it is not the far end
    assert possible_dsep(graph, 0, 4) == [3, 2, 1]
    assert possible_dsep(graph, 3, 1) == [4, 2, 0]
    assert possible_dsep(graph, 0, 2) == [4, 1]  # no collider on 0 o-o 1 or 0 o-o 4


def test_possible_dsep_needs_the_possible_parent_path():
    # without 0 o-o 4 o-o 3 the collider 2 is the only way to 3, and 2 has arrowheads on both
    # edges: nothing reaching 3 can be an ancestor of 0 or 3, so 3 is left out
    graph = build(4, [(0, 1, CIRCLE, CIRCLE), (0, 2, CIRCLE, ARROW), (3, 2, CIRCLE, ARROW)])
    assert possible_dsep(graph, 0, 1) == [2]
    # a non-collider middle (0 o-o 2 o-o 3) does not extend the walk either
    plain = build(4, [(0, 1, CIRCLE, CIRCLE), (0, 2, CIRCLE, CIRCLE), (3, 2, CIRCLE, CIRCLE)])
    assert possible_dsep(plain, 0, 1) == [2]
    # no neighbour other than y: empty
    assert possible_dsep(build(3, [(0, 1, TAIL, ARROW)]), 0, 1) == []


def test_possible_dsep_path_length_cap():
    graph = g1()
    assert possible_dsep(graph, 0, 1, max_path_length=-1) == [4, 3, 2]
    assert possible_dsep(graph, 0, 1, max_path_length=2) == [4, 3, 2]
    # causal-learn's distance counter: a cap of 0 or 1 keeps the neighbours only
    assert possible_dsep(graph, 0, 1, max_path_length=1) == [4, 2]
    assert possible_dsep(graph, 0, 1, max_path_length=0) == [4, 2]


class _InsertionOrderedSet:
    """``set`` with insertion order, for causal-learn's walk (see the test below)."""

    def __init__(self, items=()):
        self._items = dict.fromkeys(items)

    def add(self, item):
        self._items[item] = None

    def remove(self, item):
        del self._items[item]

    def __contains__(self, item):
        return item in self._items

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)


def test_possible_dsep_equals_causallearn_on_random_graphs(monkeypatch):
    """An independent implementation: causal-learn's getPossibleDsep on its own graph objects.

    causal-learn iterates x's neighbours as a Python ``set`` of nodes (hash order, which changes
    the walk's ``previous`` sets); with an insertion-ordered set it walks them in index order,
    as this module does, and the two must agree on every (x, y)."""
    import causallearn.search.ConstraintBased.FCI as cl_fci
    from causallearn.graph.Edge import Edge
    from causallearn.graph.Endpoint import Endpoint
    from causallearn.graph.GeneralGraph import GeneralGraph
    from causallearn.graph.GraphNode import GraphNode

    monkeypatch.setattr(cl_fci, "set", _InsertionOrderedSet, raising=False)
    endpoint = {TAIL: Endpoint.TAIL, ARROW: Endpoint.ARROW, CIRCLE: Endpoint.CIRCLE}
    kinds = [(CIRCLE, CIRCLE), (CIRCLE, ARROW), (ARROW, CIRCLE), (TAIL, ARROW), (ARROW, TAIL),
             (ARROW, ARROW)]  # fmt: skip
    rng = np.random.default_rng(0)
    checked = extended = 0
    for _ in range(120):
        d = 7
        graph = Graph.empty([f"X{k:03d}" for k in range(d)], "PAG")
        for i in range(d):
            for j in range(i + 1, d):
                if rng.random() < 0.35:
                    graph.set_edge(i, j, *kinds[rng.integers(len(kinds))])
        nodes = [GraphNode(n) for n in graph.names]
        theirs = GeneralGraph(nodes)
        for i, j in zip(*np.nonzero(np.triu(graph.marks != NONE)), strict=True):
            mark_i, mark_j = graph.marks[j, i], graph.marks[i, j]
            theirs.add_edge(Edge(nodes[i], nodes[j], endpoint[mark_i], endpoint[mark_j]))
        for x in range(d):
            for y in np.flatnonzero(graph.marks[x]).tolist():
                ours = possible_dsep(graph, x, y)
                expected = [nodes.index(n) for n in cl_fci.getPossibleDsep(nodes[x], nodes[y],
                                                                           theirs, -1)]  # fmt: skip
                assert ours == expected, (graph.marks.tolist(), x, y)
                checked += 1
                extended += len(set(ours) - set(np.flatnonzero(graph.marks[x]).tolist()))
    assert checked > 500 and extended > 50  # the walk went beyond the neighbours often


# ---------------------------------------------------------------------------- removal
NEVER = {}  # no independence anywhere: p = 0 for every query


def pvalue(table):
    known = {normalise_query(*key): p for key, p in table.items()}
    return lambda q: known.get(normalise_query(q[0], q[1], tuple(q[2])), 0.0)


ONE_BATCH_PER_SIDE_AND_SIZE = [
    [(0, 1, (4, 3)), (0, 1, (3, 2))],  # (4, 2) lies inside adj(0) = {1, 2, 4}
    [(0, 1, (4, 3, 2))],
    [(0, 4, (3, 2)), (0, 4, (3, 1))],  # Possible-D-Sep(0, 4) = [3, 2, 1]
    [(0, 4, (3, 2, 1))],
    [(1, 3, (4, 0)), (1, 3, (2, 0))],  # from 3's side: [4, 2, 0]; (4, 2) inside adj(3)
    [(1, 3, (4, 2, 0))],
    [(3, 4, (2, 0)), (3, 4, (1, 0))],  # from 3's side: [2, 1, 0]; (2, 1) inside adj(3)
    [(3, 4, (2, 1, 0))],
]


def _normalised(batches):
    return [[normalise_query(*q) for q in batch] for batch in batches]


def test_sequential_schedule_asks_every_side_by_subset_size(monkeypatch):
    # without speculation: edges in index order, both sides, subsets of size >= 2 of the
    # descending Possible-D-Sep list, skipping subsets inside adj(a) or adj(b); one batch per
    # (side, size)
    monkeypatch.setattr(pds_module, "SPECULATIVE_TESTS", 0)
    graph, sepsets = g1(), {}
    batches, removed = run(remove_by_possible_dsep(graph, sepsets, 0.05), pvalue(NEVER))
    assert _normalised(batches) == _normalised(ONE_BATCH_PER_SIDE_AND_SIZE)
    assert removed == [] and sepsets == {} and graph == g1()
    capped, _ = run(remove_by_possible_dsep(g1(), {}, 0.05, max_size=2), pvalue(NEVER))
    assert _normalised(capped) == _normalised(ONE_BATCH_PER_SIDE_AND_SIZE[::2])


def test_sequential_schedule_speculates_the_tests_it_will_ask_in_one_batch():
    graph, sepsets = g1(), {}
    batches, removed = run(remove_by_possible_dsep(graph, sepsets, 0.05), pvalue(NEVER))
    # the same tests in the same order, one round
    assert _normalised(batches) == [sum(_normalised(ONE_BATCH_PER_SIDE_AND_SIZE), [])]
    assert removed == [] and sepsets == {} and graph == g1()


@pytest.mark.parametrize("speculate,rounds", [(0, 3), (3, 2), (20_000, 1)])
def test_sequential_removal_changes_later_possible_dsep_sets(monkeypatch, speculate, rounds):
    monkeypatch.setattr(pds_module, "SPECULATIVE_TESTS", speculate)
    graph, sepsets = g1(), {}
    independent = pvalue({(0, 1, (3, 2)): 0.9})
    batches, removed = run(remove_by_possible_dsep(graph, sepsets, 0.05), independent)
    assert removed == [(0, 1)] and sepsets == {(0, 1): {2, 3}}
    assert not graph.adjacent(0, 1) and int(np.sum(graph.adjacency())) == 2 * 5
    # 0 - 1 gone: 3 reaches 0 and 4 only through the collider 2 (no possible parent via 1), so
    # edges 0 - 4 and 3 - 4 get no candidate sets any more; 1 - 3 is asked as before
    needed = [
        [(0, 1, (4, 3)), (0, 1, (3, 2))],
        [(1, 3, (4, 0)), (1, 3, (2, 0))],
        [(1, 3, (4, 2, 0))],
    ]
    asked = sum(_normalised(batches), [])
    assert set(sum(_normalised(needed), [])) <= set(asked)
    if speculate == 0:
        assert _normalised(batches) == _normalised(needed)
    # speculated on the graph before the removal: the needed tests come in fewer rounds
    assert len(batches) == rounds


def test_stable_schedule_fixes_the_sets_and_removes_at_the_end():
    graph, sepsets = g1(), {}
    independent = pvalue({(0, 1, (3, 2)): 0.9, (3, 4, (2, 1, 0)): 0.5})
    gen = remove_by_possible_dsep(graph, sepsets, 0.05, schedule="stable")
    batches, removed = run(gen, independent)
    # one batch per subset size over all edges; sets from the graph at the start, so 0 - 4 and
    # 3 - 4 keep their candidates although 0 - 1 is found separable at size 2
    assert batches == [
        [(0, 1, (4, 3)), (0, 1, (3, 2)), (0, 4, (3, 2)), (0, 4, (3, 1)),
         (1, 3, (4, 0)), (1, 3, (2, 0)), (3, 4, (2, 0)), (3, 4, (1, 0))],
        [(0, 4, (3, 2, 1)), (1, 3, (4, 2, 0)), (3, 4, (2, 1, 0))],
    ]  # fmt: skip
    assert removed == [(0, 1), (3, 4)]
    assert sepsets == {(0, 1): {2, 3}, (3, 4): {0, 1, 2}}
    assert not graph.adjacent(0, 1) and not graph.adjacent(3, 4) and graph.adjacent(0, 4)


def test_first_separating_subset_wins_and_bad_settings_are_errors(monkeypatch):
    graph, sepsets = g1(), {}
    both = pvalue({(0, 1, (4, 3)): 0.06, (0, 1, (3, 2)): 0.9})
    batches, removed = run(remove_by_possible_dsep(graph, sepsets, 0.05), both)
    assert sepsets[(0, 1)] == {3, 4}  # the first subset above alpha, not the largest p-value
    assert removed == [(0, 1)] and batches[0][:2] == [(0, 1, (3, 4)), (0, 1, (2, 3))]
    # p == alpha is dependence
    _, removed = run(remove_by_possible_dsep(g1(), {}, 0.05), pvalue({(0, 1, (4, 3)): 0.05}))
    assert removed == []
    with pytest.raises(ValueError, match="unknown Possible-D-Sep schedule 'fast'"):
        next(remove_by_possible_dsep(g1(), {}, 0.05, schedule="fast"))
    monkeypatch.setattr(pds_module, "MAX_BATCH", 1)
    with pytest.raises(RuntimeError, match="would ask 2 CI tests in one batch.*pds_max_size"):
        next(remove_by_possible_dsep(g1(), {}, 0.05))
