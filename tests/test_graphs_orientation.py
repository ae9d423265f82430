"""Orientation rules: PC colliders and Meek, FCI R0-R10, textbook examples and causal-learn parity.

Node indices in the small examples follow the order of the ``names`` list of each graph.
"""

from __future__ import annotations

import itertools

import causallearn.search.ConstraintBased.FCI as cl_fci
import numpy as np
import pytest
from causallearn.graph.Edge import Edge
from causallearn.graph.Endpoint import Endpoint
from causallearn.graph.GeneralGraph import GeneralGraph
from causallearn.graph.GraphClass import CausalGraph
from causallearn.graph.GraphNode import GraphNode
from causallearn.utils.PCUtils import Meek, UCSepset

from fedcausal_flwr.graphs import (
    ARROW,
    CIRCLE,
    NONE,
    TAIL,
    Graph,
    apply_fci_rules,
    apply_meek,
    fci_orient_colliders,
    orient_colliders,
    orient_cpdag,
    triple_status,
)


def undirected(names: list[str], pairs: list[tuple[str, str]]) -> Graph:
    return Graph.from_edges(names, [(u, v, "tail", "tail") for u, v in pairs], kind="CPDAG")


def edge_set(g: Graph) -> list[tuple[str, str, str, str]]:
    return sorted(g.edges())


# ============================================================================ separating sets
def test_triple_status_rules():
    sets = [{1}, set(), {1, 2}]  # y = 1 is in 2 of 3 recorded sets, and in the first
    assert triple_status(sets, 1, "standard") == "noncollider"
    assert triple_status(sets, 1, "causallearn") == "noncollider"
    assert triple_status(sets, 1, "conservative") == "ambiguous"
    assert triple_status(sets, 1, "majority") == "noncollider"  # 2/3 > 1/2
    assert triple_status([set(), {2}], 1, "conservative") == "collider"
    assert triple_status([{1}, {1, 3}], 1, "conservative") == "noncollider"
    assert triple_status([{1}, set()], 1, "majority") == "ambiguous"  # exactly half
    assert triple_status([set(), {1}], 1, "standard") == "collider"  # first set only
    assert triple_status([set(), {1}], 1, "causallearn") == "noncollider"  # any set
    assert triple_status([{2}, set(), {1}], 1, "majority") == "collider"  # 1/3 < 1/2
    with pytest.raises(ValueError, match="unknown separating-set rule"):
        triple_status(sets, 1, "vote")
    with pytest.raises(ValueError, match="no separating set"):
        triple_status([], 1)


# ============================================================================ PC colliders
def test_orient_colliders_standard_and_conservative():
    # A - B - C and B - D - E with sepset(A, C) = [{}] (collider at B) and sepset(B, E) recorded
    # twice, [{D}, {}]: standard reads the first set (D separates: no collider), conservative finds
    # D in some but not all sets (ambiguous), causal-learn's rule needs D in none (no collider).
    names = ["A", "B", "C", "D", "E"]
    pairs = [("A", "B"), ("B", "C"), ("B", "D"), ("D", "E")]
    sepsets = {
        (0, 2): [set()],
        (0, 3): [{1}],
        (0, 4): [{1}],
        (1, 4): [{3}, set()],
        (2, 3): [{1}],
        (2, 4): [{1}],
    }
    g = undirected(names, pairs)
    result = orient_colliders(g, sepsets, rule="standard")
    assert result.colliders == [(0, 1, 2)] and result.ambiguous == []
    assert (1, 3, 4) in result.noncolliders
    assert g.is_directed(0, 1) and g.is_directed(2, 1) and g.is_undirected(3, 4)

    g = undirected(names, pairs)
    result = orient_colliders(g, sepsets, rule="conservative")
    assert result.ambiguous == [(1, 3, 4)]
    assert g.is_undirected(1, 3) and g.is_undirected(3, 4)


def test_orient_colliders_conflict_policies():
    # Chain X0 - X1 - X2 - X3 where both unshielded triples look like colliders. Triples are
    # visited middle node first: (0, 1, 2) orients X0 -> X1 <- X2; then (1, 2, 3) meets X2 -> X1.
    names = ["X0", "X1", "X2", "X3"]
    pairs = [("X0", "X1"), ("X1", "X2"), ("X2", "X3")]
    sepsets = {(0, 2): [set()], (1, 3): [set()], (0, 3): [set()]}

    g = undirected(names, pairs)  # existing: skip the second triple
    res = orient_colliders(g, sepsets, conflict="existing")
    assert res.conflicts == [(1, 2, 3)]
    assert edge_set(g) == [
        ("X0", "X1", "tail", "arrow"),
        ("X1", "X2", "arrow", "tail"),
        ("X2", "X3", "tail", "tail"),
    ]
    g = undirected(names, pairs)  # overwrite: X1 -> X2 <- X3 replaces X2 -> X1
    orient_colliders(g, sepsets, conflict="overwrite")
    assert edge_set(g) == [
        ("X0", "X1", "tail", "arrow"),
        ("X1", "X2", "tail", "arrow"),
        ("X2", "X3", "arrow", "tail"),
    ]
    g = undirected(names, pairs)  # bidirected: X2 -> X1 becomes X1 <-> X2
    orient_colliders(g, sepsets, conflict="bidirected")
    assert edge_set(g) == [
        ("X0", "X1", "tail", "arrow"),
        ("X1", "X2", "arrow", "arrow"),
        ("X2", "X3", "arrow", "tail"),
    ]


def test_orient_colliders_bad_input():
    g = undirected(["A", "B", "C"], [("A", "B"), ("B", "C")])
    with pytest.raises(KeyError, match=r"no separating set recorded .*\(0, 2\)"):
        orient_colliders(g, {})
    with pytest.raises(TypeError, match="list of separating sets"):
        orient_colliders(g, {(0, 2): [1]})
    with pytest.raises(ValueError, match="circle marks"):
        orient_colliders(g.skeleton(), {(0, 2): [set()]})
    with pytest.raises(ValueError, match="unknown conflict policy"):
        orient_colliders(g, {(0, 2): [set()]}, conflict="vote")
    # keys in either order and a bare set are accepted
    orient_colliders(g, {(2, 0): {1}})
    assert g.is_undirected(0, 1)


# ============================================================================ Meek
@pytest.mark.parametrize("mode", ["complete", "causallearn"])
def test_meek_r1(mode):
    # A -> B - C, A and C non-adjacent  =>  B -> C
    g = Graph.from_edges(["A", "B", "C"], [("A", "B"), ("B", "C", "tail", "tail")], kind="CPDAG")
    assert apply_meek(g, mode) == 1
    assert g.is_directed(1, 2)


@pytest.mark.parametrize("mode", ["complete", "causallearn"])
def test_meek_r2(mode):
    # A -> B -> C and A - C  =>  A -> C
    g = Graph.from_edges(
        ["A", "B", "C"], [("A", "B"), ("B", "C"), ("A", "C", "tail", "tail")], kind="CPDAG"
    )
    assert apply_meek(g, mode) == 1
    assert g.is_directed(0, 2)


@pytest.mark.parametrize("mode", ["complete", "causallearn"])
def test_meek_r3(mode):
    # A - B -> D, A - C -> D, B and C non-adjacent, A - D  =>  A -> D (A-B, A-C stay undirected)
    g = Graph.from_edges(
        ["A", "B", "C", "D"],
        [("A", "B", "tail", "tail"), ("A", "C", "tail", "tail"), ("B", "D"), ("C", "D")]
        + [("A", "D", "tail", "tail")],
        kind="CPDAG",
    )
    assert apply_meek(g, mode) == 1
    assert g.is_directed(0, 3) and g.is_undirected(0, 1) and g.is_undirected(0, 2)


def test_meek_r4_only_in_the_complete_mode():
    # A - B -> C -> D, A - D, A - C, B and D non-adjacent  =>  A -> D (R1-R3 do not apply:
    # every directed edge's tail is adjacent to the far end, and A has one "- b -> D" neighbour).
    # causal-learn's meek has no R4.
    edges = [("A", "B", "tail", "tail"), ("B", "C"), ("C", "D"), ("A", "D", "tail", "tail")]
    edges.append(("A", "C", "tail", "tail"))
    g = Graph.from_edges(["A", "B", "C", "D"], edges, kind="CPDAG")
    h = g.copy()
    assert apply_meek(g, "complete") == 1
    assert g.is_directed(0, 3) and g.is_undirected(0, 1) and g.is_undirected(0, 2)
    assert apply_meek(h, "causallearn") == 0


def test_meek_rejects_pags_and_unknown_modes():
    g = Graph.complete(["A", "B"], CIRCLE, "PAG")
    with pytest.raises(ValueError, match="circle marks"):
        apply_meek(g)
    with pytest.raises(ValueError, match="unknown Meek mode"):
        apply_meek(Graph.empty(["A"]), "textbook")


def causallearn_pc_orientation(adj: np.ndarray, sepsets: dict, priority: int) -> Graph:
    p = adj.shape[0]
    names = [f"X{i}" for i in range(p)]
    cg = CausalGraph(p, names)
    nodes = cg.G.get_nodes()
    for (i, j), sets in sepsets.items():
        cg.G.remove_edge(cg.G.get_edge(nodes[i], nodes[j]))
        cg.sepset[i, j] = [tuple(s) for s in sets]
        cg.sepset[j, i] = [tuple(s) for s in sets]
    out = Meek.meek(UCSepset.uc_sepset(cg, priority))
    return Graph.from_causallearn(out.G.graph, names, "CPDAG")


@pytest.mark.parametrize(
    "priority,conflict", [(2, "existing"), (0, "overwrite"), (1, "bidirected")]
)
def test_pc_orientation_matches_causallearn_uc_sepset_and_meek(priority, conflict):
    # Random skeletons with random (mostly inconsistent) separating sets, several per pair:
    # conflicts, causal-learn's visiting order and its incremental ancestor matrix all matter.
    rng = np.random.default_rng(100 + priority)
    n_oriented = 0
    for _ in range(120):
        p = int(rng.integers(4, 11))
        adj = np.triu(rng.random((p, p)) < rng.uniform(0.2, 0.6), 1)
        adj |= adj.T
        sepsets = {}
        for i, j in itertools.combinations(range(p), 2):
            if not adj[i, j]:
                others = [v for v in range(p) if v not in (i, j)]
                sepsets[(i, j)] = [
                    {v for v in others if rng.random() < 0.4}
                    for _ in range(int(rng.integers(1, 3)))
                ]
        expected = causallearn_pc_orientation(adj, sepsets, priority)
        g = Graph([f"X{i}" for i in range(p)], np.where(adj, TAIL, NONE), "CPDAG")
        orient_cpdag(g, sepsets, rule="causallearn", conflict=conflict, meek="causallearn")
        assert g == expected, f"{g}\n!=\n{expected}"
        n_oriented += int(np.count_nonzero(g.marks == ARROW))
    assert n_oriented > 100


# ============================================================================ FCI R0
def test_fci_r0_orients_unshielded_colliders_only():
    # A o-o B o-o C, A, C non-adjacent: a collider iff B is not in sepset(A, C).
    g = Graph.complete(["A", "B", "C"], CIRCLE, "PAG")
    g.remove_edge(0, 2)
    h = g.copy()
    res = fci_orient_colliders(g, {(0, 2): [set()]})
    assert res.colliders == [(0, 1, 2)]
    assert edge_set(g) == [("A", "B", "circle", "arrow"), ("B", "C", "arrow", "circle")]
    res = fci_orient_colliders(h, {(0, 2): [{1}]})
    assert res.noncolliders == [(0, 1, 2)] and np.all(h.marks[h.marks != NONE] == CIRCLE)


# ============================================================================ FCI rules
#: the mark an edge written ``"A o-> B"`` has at an end: a circle, an arrowhead or a tail
END_MARKS = {"o": "circle", "<": "arrow", ">": "arrow", "-": "tail"}


def pag(names: list[str], *edges: str) -> Graph:
    """A PAG over ``names`` with edges written as in the comments (``"A o-> B"``, ``"A --- B"``):
    the first and last character of the link are the marks at the first and second node."""
    rows = []
    for edge in edges:
        u, link, v = edge.split()
        assert len(link) == 3 and link[1] == "-", edge
        rows.append((u, v, END_MARKS[link[0]], END_MARKS[link[2]]))
    return Graph.from_edges(names, rows, kind="PAG")


MODES = ["zhang", "causallearn"]


@pytest.mark.parametrize("mode", MODES)
def test_fci_r1(mode):
    # A *-> B o-o C, A, C non-adjacent  =>  B --> C
    g = pag(["A", "B", "C"], "A o-> B", "B o-o C")
    apply_fci_rules(g, {(0, 2): [set()]}, mode=mode)
    assert edge_set(g) == [("A", "B", "circle", "arrow"), ("B", "C", "tail", "arrow")]


@pytest.mark.parametrize("mode", MODES)
def test_fci_r2_both_variants(mode):
    # A --> B o-> C with A o-o C  =>  A o-> C
    g = pag(["A", "B", "C"], "A --> B", "B o-> C", "A o-o C")
    apply_fci_rules(g, {}, mode=mode)
    assert g.marks[0, 2] == ARROW and g.marks[2, 0] == CIRCLE
    # A o-> B --> C with A o-o C  =>  A o-> C
    g = pag(["A", "B", "C"], "A o-> B", "B --> C", "A o-o C")
    apply_fci_rules(g, {}, mode=mode)
    assert g.marks[0, 2] == ARROW and g.marks[2, 0] == CIRCLE


@pytest.mark.parametrize("mode", MODES)
def test_fci_r3(mode):
    # A o-> B <-o C, A o-o D o-o C, A and C non-adjacent, D o-o B  =>  D o-> B.
    # (causal-learn also wants D in sepset(A, C), which is true for a non-collider at D.)
    g = pag(["A", "B", "C", "D"], "A o-> B", "C o-> B", "A o-o D", "C o-o D", "D o-o B")
    counts = apply_fci_rules(g, {(0, 2): [{3}]}, mode=mode)
    assert g.marks[3, 1] == ARROW and g.marks[1, 3] == CIRCLE
    assert counts["R3"] >= 1
    assert int(np.count_nonzero(g.marks == ARROW)) == 3  # nothing else changed


def discriminating_state(after_r2: bool = True) -> Graph:
    """T o-> A <-o B, A --> C, B o-> C, T not adjacent to B or C: <T, A, B, C> is a discriminating
    path for B (A is a collider on it and a parent of C). Before R1/R2, A o-o C and B o-o C
    (R1: T *-> A o-o C gives A --> C; R2: B *-> A --> C gives B o-> C)."""
    ac, bc = ("A --> C", "B o-> C") if after_r2 else ("A o-o C", "B o-o C")
    return pag(["T", "A", "B", "C"], "T o-> A", "B o-> A", ac, bc)


SEPS_T_B = {(0, 2): [set()]}


@pytest.mark.parametrize("mode", MODES)
def test_fci_r4_noncollider_and_collider(mode):
    g = discriminating_state(after_r2=False)  # B in sepset(T, C)  =>  B --> C
    counts = apply_fci_rules(g, {**SEPS_T_B, (0, 3): [{1, 2}]}, mode=mode)
    assert g.is_directed(1, 3) and g.is_directed(2, 3)
    assert g.marks[2, 1] == ARROW and g.marks[1, 2] == CIRCLE and g.marks[1, 0] == CIRCLE
    assert counts["R4"] == 1
    g = discriminating_state(after_r2=False)  # B not in sepset(T, C)  =>  A <-> B <-> C
    apply_fci_rules(g, {**SEPS_T_B, (0, 3): [{1}]}, mode=mode)
    assert g.marks[1, 2] == ARROW and g.marks[2, 1] == ARROW
    assert g.marks[3, 2] == ARROW and g.marks[2, 3] == ARROW and g.is_directed(1, 3)


def test_fci_r4_runs_in_causallearn_only_after_a_change_by_r1_to_r3():
    # causal-learn's fci calls ruleR4B only in a sweep where R1-R3 changed something. From a state
    # where only R4 applies, it therefore never orients the discriminating path; Zhang's does.
    seps = {**SEPS_T_B, (0, 3): [{1, 2}]}
    g = discriminating_state()
    apply_fci_rules(g, seps, mode="causallearn")
    assert g == discriminating_state()
    apply_fci_rules(g, seps, mode="zhang")
    assert g.is_directed(2, 3)


@pytest.mark.parametrize("mode", MODES)
def test_fci_r4_independence_callback(mode):
    # causal-learn's procedure: T _||_ C | {A, B} -> non-collider, whatever the separating sets say.
    asked = []

    def independent(x, y, cond):
        asked.append((x, y, tuple(cond)))
        return set(cond) == {1, 2}

    g = discriminating_state(after_r2=False)
    apply_fci_rules(g, {**SEPS_T_B, (0, 3): [{1}]}, mode=mode, independence=independent)
    assert g.is_directed(2, 3)
    assert asked[0] == (0, 3, (1, 2))  # the path's inner nodes from T's side: A, then B


def test_fci_r4_needs_separating_sets_in_zhang_mode():
    g = discriminating_state()
    with pytest.raises(KeyError, match=r"\(0, 3\)"):
        apply_fci_rules(g, SEPS_T_B, mode="zhang")
    g = discriminating_state(after_r2=False)  # causal-learn skips a pair without separating sets
    apply_fci_rules(g, SEPS_T_B, mode="causallearn")
    assert g.marks[3, 2] == CIRCLE and g.marks[2, 3] == ARROW


def test_fci_r5_uncovered_circle_cycle_with_selection_bias():
    # A o-o B closing the uncovered circle path A o-o C o-o D o-o B (A, D and B, C non-adjacent):
    # R5 turns every edge of the cycle into a tail-tail edge, but only with selection bias.
    names = ["A", "B", "C", "D"]
    edges = ["A o-o B", "A o-o C", "C o-o D", "D o-o B"]
    g = pag(names, *edges)
    counts = apply_fci_rules(g, {(0, 3): [{2}], (1, 2): [{3}]}, selection_bias=True)
    assert counts["R5"] == 1
    assert np.all(g.marks[g.marks != NONE] == TAIL)
    g = pag(names, *edges)
    apply_fci_rules(g, {(0, 3): [{2}], (1, 2): [{3}]})
    assert np.all(g.marks[g.marks != NONE] == CIRCLE)
    g = pag(names, *edges)
    apply_fci_rules(g, {(0, 3): [{2}], (1, 2): [{3}]}, mode="causallearn")
    assert np.all(g.marks[g.marks != NONE] == TAIL)


@pytest.mark.parametrize("mode", MODES)
def test_fci_r6(mode):
    # A --- B o-o C  =>  B --o C (a tail at B)
    g = pag(["A", "B", "C"], "A --- B", "B o-o C")
    apply_fci_rules(g, {(0, 2): [{1}]}, mode=mode, selection_bias=True)
    assert g.marks[2, 1] == TAIL and g.marks[1, 2] == CIRCLE


@pytest.mark.parametrize("mode", MODES)
def test_fci_r7(mode):
    # A --o B o-o C, A, C non-adjacent  =>  B --o C; then R6 is not triggered (no A --- B).
    g = pag(["A", "B", "C"], "A --o B", "B o-o C")
    apply_fci_rules(g, {(0, 2): [{1}]}, mode=mode, selection_bias=True)
    assert g.marks[2, 1] == TAIL and g.marks[1, 2] == CIRCLE
    assert g.marks[1, 0] == TAIL and g.marks[0, 1] == CIRCLE


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("first", ["A --> B", "A --o B"])
def test_fci_r8(mode, first):
    # A --> B --> C (or A --o B --> C) and A o-> C  =>  A --> C
    g = pag(["A", "B", "C"], first, "B --> C", "A o-> C")
    apply_fci_rules(g, {}, mode=mode, selection_bias=first == "A --o B")
    assert g.is_directed(0, 2)


@pytest.mark.parametrize("mode", MODES)
def test_fci_r9(mode):
    # A o-> C with the uncovered p.d. path A o-o B o-> D --> C (B, C and A, D non-adjacent)
    #  =>  A --> C
    g = pag(["A", "B", "C", "D"], "A o-> C", "A o-o B", "B o-> D", "D --> C")
    seps = {(1, 2): [{0, 3}], (0, 3): [{1}]}
    counts = apply_fci_rules(g, seps, mode=mode)
    assert g.is_directed(0, 2)
    assert counts["R9"] >= 1
    assert g.marks[0, 1] == CIRCLE and g.marks[1, 0] == CIRCLE  # the path itself is unchanged


@pytest.mark.parametrize("mode", MODES)
def test_fci_r10(mode):
    # A o-> C, B --> C <-- D, A o-o B and A o-o D with B, D non-adjacent: the uncovered p.d.
    # paths <A, B> and <A, D> start with distinct non-adjacent nodes  =>  A --> C.
    g = pag(["A", "B", "C", "D"], "A o-> C", "B --> C", "D --> C", "A o-o B", "A o-o D")
    counts = apply_fci_rules(g, {(1, 3): [{0, 2}]}, mode=mode)
    assert g.is_directed(0, 2)
    assert counts["R10"] >= 1


def test_fci_rules_reject_unknown_options():
    g = discriminating_state()
    with pytest.raises(ValueError, match="unknown FCI rule mode"):
        apply_fci_rules(g, {}, mode="pcalg")
    with pytest.raises(ValueError, match="unknown separating-set rule"):
        apply_fci_rules(g, {}, sepset_rule="vote")


# ============================================================================ causal-learn FCI
@pytest.fixture
def causallearn_children_in_index_order(monkeypatch):
    """causal-learn's R10 iterates a set of nodes (hash order); make it ascending like ours."""
    original = cl_fci.find_possible_children

    def ordered(graph, parent_node, en_nodes=None):
        found = original(graph, parent_node, en_nodes)
        return sorted(found, key=lambda n: graph.node_map[n])

    monkeypatch.setattr(cl_fci, "find_possible_children", ordered)


def causallearn_fci_loop(graph: GeneralGraph, nodes, sep_sets, p_value) -> None:
    """The orientation loop of causal-learn's ``fci`` after ``rule0`` (no background knowledge)."""
    change = True
    data = np.zeros((0, len(nodes)))
    while change:
        change = False
        change = cl_fci.rulesR1R2cycle(graph, None, change, False)
        change = cl_fci.ruleR3(graph, sep_sets, None, change, False)
        if change:
            change = cl_fci.ruleR4B(graph, -1, data, p_value, 0.05, sep_sets, change, None, False)
        change = cl_fci.ruleR5(graph, change, False)
        change = cl_fci.ruleR6(graph, change, False)
        change = cl_fci.ruleR7(graph, change, False)
        change = cl_fci.rule8(graph, nodes, change)
        change = cl_fci.rule9(graph, nodes, change)
        change = cl_fci.rule10(graph, change)


def random_case(rng: np.random.Generator):
    p = int(rng.integers(4, 10))
    adj = np.triu(rng.random((p, p)) < rng.uniform(0.25, 0.7), 1)
    adj |= adj.T
    theirs, ours = {}, {}
    for i, j in itertools.combinations(range(p), 2):
        if not adj[i, j]:
            s = {v for v in range(p) if v not in (i, j) and rng.random() < 0.35}
            theirs[(i, j)] = theirs[(j, i)] = s
            ours[(i, j)] = [s]
    cache: dict = {}

    def p_value(x, y, cond):
        key = (min(x, y), max(x, y), tuple(sorted(cond)))
        if key not in cache:
            cache[key] = float(rng.random())
        return cache[key]

    def independent(x, y, cond):
        return p_value(x, y, cond) > 0.05

    return p, adj, theirs, ours, p_value, independent


@pytest.mark.usefixtures("causallearn_children_in_index_order")
def test_fci_causallearn_mode_matches_causallearn_from_r0():
    rng = np.random.default_rng(0)
    n_changed = 0
    for _ in range(150):
        p, adj, theirs, ours, p_value, independent = random_case(rng)
        nodes = [GraphNode(f"X{i}") for i in range(p)]
        ref = GeneralGraph(nodes)
        for i, j in zip(*np.nonzero(np.triu(adj)), strict=True):
            ref.add_edge(Edge(nodes[i], nodes[j], Endpoint.CIRCLE, Endpoint.CIRCLE))
        cl_fci.rule0(ref, nodes, theirs, None, False)
        g = Graph([n.get_name() for n in nodes], np.where(adj, CIRCLE, NONE), "PAG")
        fci_orient_colliders(g, ours, rule="causallearn")
        assert np.array_equal(g.to_causallearn(), ref.graph)
        after_r0 = g.marks.copy()
        causallearn_fci_loop(ref, nodes, theirs, p_value)
        apply_fci_rules(g, ours, mode="causallearn", independence=independent)
        assert np.array_equal(g.to_causallearn(), ref.graph)
        n_changed += int(np.any(g.marks != after_r0))
    assert n_changed > 50


@pytest.mark.usefixtures("causallearn_children_in_index_order")
def test_fci_causallearn_mode_matches_causallearn_on_random_marks():
    # Random end marks (tails included) make every rule, R5-R10 too, fire on some graphs.
    rng = np.random.default_rng(1)
    fired: dict[str, int] = {}
    for _ in range(150):
        p, adj, theirs, ours, p_value, independent = random_case(rng)
        probs = rng.dirichlet([1.0, 1.0, 2.0])
        marks = rng.choice([TAIL, ARROW, CIRCLE], size=(p, p), p=probs)
        g = Graph([f"X{i}" for i in range(p)], np.where(adj, marks, NONE), "PAG")
        nodes = [GraphNode(n) for n in g.names]
        ref = GeneralGraph(nodes)
        ref.graph = g.to_causallearn().copy()
        causallearn_fci_loop(ref, nodes, theirs, p_value)
        counts = apply_fci_rules(g, ours, mode="causallearn", independence=independent)
        assert np.array_equal(g.to_causallearn(), ref.graph)
        for rule, n in counts.items():
            fired[rule] = fired.get(rule, 0) + (n > 0)
    assert all(fired[r] > 0 for r in ("R1R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "R10"))


# ============================================================================ PDAG -> DAG
def test_pdag_to_dag_extends_every_cpdag_into_its_class():
    import networkx as nx

    from fedcausal_flwr.data.synthetic import random_dag
    from fedcausal_flwr.graphs.extension import pdag_to_dag
    from fedcausal_flwr.graphs.truth import dag_to_cpdag

    for seed in range(25):
        dag = random_dag(12, expected_degree=3.0, seed=seed)
        cpdag = dag_to_cpdag(dag)
        extension, consistent = pdag_to_dag(cpdag)
        assert consistent
        assert nx.is_directed_acyclic_graph(extension.to_networkx())
        assert dag_to_cpdag(extension) == cpdag
        assert extension.adjacency().tolist() == dag.adjacency().tolist()


def test_pdag_to_dag_reports_a_pdag_without_extension():
    from fedcausal_flwr.graphs.extension import pdag_to_dag

    names = ["a", "b", "c", "d"]
    square = Graph.from_edges(
        names, [(u, v, "tail", "tail") for u, v in ["ab", "bc", "cd", "da"]], kind="CPDAG"
    )
    extension, consistent = pdag_to_dag(square)
    assert not consistent
    assert extension.n_edges() == 4
    assert all(
        extension.is_directed(*e) or extension.is_directed(*e[::-1])
        for e in [(0, 1), (1, 2), (2, 3), (3, 0)]
    )
    with pytest.raises(ValueError, match="circles"):
        pdag_to_dag(Graph.complete(names, kind="PAG"))


@pytest.mark.parametrize("dense_index", [True, False])
@pytest.mark.parametrize("conflict", ["existing", "overwrite"])
@pytest.mark.parametrize("rule", ["standard", "causallearn", "conservative", "majority"])
def test_colliders_by_middle_equal_the_triple_by_triple_run(
    rule, conflict, dense_index, monkeypatch
):
    """Marks, the four lists and causal-learn's ancestor matrix, on random skeletons whose
    separating sets sometimes hold the middle node (several sets for the counting rules), with
    and without background knowledge vetoing arrows; the separating-set index kept per pair
    (small graphs) or searched (large ones)."""
    from fedcausal_flwr.graphs import sepsets as sepsets_module
    from fedcausal_flwr.graphs.causallearn_graph import CausalLearnAncestry
    from fedcausal_flwr.graphs.colliders import orient_colliders, orient_triple_by_triple
    from fedcausal_flwr.graphs.knowledge import KnowledgeMatrix

    if not dense_index:
        monkeypatch.setattr(sepsets_module, "_DENSE_INDEX_CELLS", 0)

    rng = np.random.default_rng(7)
    for trial in range(60):
        n = int(rng.integers(4, 14))
        upper = np.triu(rng.random((n, n)) < rng.uniform(0.2, 0.7), k=1)
        adjacency = upper | upper.T
        marks = np.where(adjacency, TAIL, NONE).astype(np.int8)
        sepsets = {}
        for a in range(n):
            for b in range(a + 1, n):
                if adjacency[a, b]:
                    continue
                pool = [v for v in range(n) if v not in (a, b)]
                sets = [()]
                if rng.random() < 0.5:
                    sets = [
                        tuple(sorted(rng.choice(pool, size=int(rng.integers(1, 3)), replace=False)))
                        for _ in range(int(rng.integers(1, 4)))
                    ]
                sepsets[(a, b)] = [tuple(int(v) for v in s) for s in sets]
        knowledge = None
        if trial % 3 == 2:
            forbidden = rng.random((n, n)) < 0.1
            np.fill_diagonal(forbidden, False)
            knowledge = KnowledgeMatrix(forbidden=forbidden, required=np.zeros((n, n), dtype=bool))
        graph = Graph(tuple(f"V{i}" for i in range(n)), marks.copy(), "CPDAG")
        fast_marks, slow_marks = graph.marks, marks.copy()
        fast_anc = CausalLearnAncestry.from_marks(fast_marks)
        slow_anc = CausalLearnAncestry.from_marks(slow_marks)
        fast = orient_colliders(graph, sepsets, rule, conflict, fast_anc, knowledge)
        slow = orient_triple_by_triple(slow_marks, sepsets, rule, conflict, slow_anc, knowledge)
        assert np.array_equal(fast_marks, slow_marks)
        assert fast == slow
        assert np.array_equal(fast_anc.dpath, slow_anc.dpath)


def test_colliders_by_middle_raise_as_the_triple_by_triple_run():
    """A pair with no entry, or with no set, raises the error the rules raise."""
    g = undirected(["A", "B", "C"], [("A", "B"), ("B", "C")])
    with pytest.raises(KeyError, match="no separating set recorded for the non-adjacent pair"):
        orient_colliders(g, {})
    with pytest.raises(ValueError, match="no separating set recorded for the triple"):
        orient_colliders(g, {(0, 2): []})
    with pytest.raises(TypeError, match="must be a list of separating sets"):
        orient_colliders(g, {(0, 2): [1]})
