"""Metrics on hand-made graphs with hand-computed answers, and SHD against causal-learn."""

from __future__ import annotations

import numpy as np
import pytest
from causallearn.graph.GeneralGraph import GeneralGraph
from causallearn.graph.GraphNode import GraphNode
from causallearn.graph.SHD import SHD as CausalLearnSHD

from fedcausal_flwr.graphs import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.metrics import (
    adjacency_metrics,
    align,
    arrowhead_metrics,
    edge_fdr,
    edge_type_accuracy,
    graph_metrics,
    local_metrics,
    mark_metrics,
    non_edge_fdr,
    normalised_shd,
    orientation_metrics,
    shd,
)

NAMES = ["A", "B", "C", "D"]


def truth_dag() -> Graph:
    # A -> B, B -> C, A -> D
    return Graph.from_edges(NAMES, [("A", "B"), ("B", "C"), ("A", "D")], kind="DAG")


def learned_cpdag() -> Graph:
    # A - B (undirected), C -> B (reversed), A -> D (correct), B -> D (extra)
    return Graph.from_edges(
        NAMES, [("A", "B", "tail", "tail"), ("C", "B"), ("A", "D"), ("B", "D")], kind="CPDAG"
    )


def test_shd_variants_by_hand():
    t, est = truth_dag(), learned_cpdag()
    # standard: A-B undirected vs directed 1, B-C reversed 1, B-D extra 1, A-D equal 0  -> 3
    assert shd(est, t) == 3
    # causal-learn 0.1.2.8: adjacency errors 1 (B-D); ordered pairs adjacent in both with a true
    # arrowhead at j and an estimated arrowhead at i: (B, C) only (truth B -> C, estimate C -> B);
    # A-B undirected costs nothing  -> 2
    assert shd(est, t, "causallearn-0.1.2.8") == 2
    # entries: A-B one end mark differs (at B: arrow vs tail) 1, B-C both ends 2, B-D extra 2 -> 5
    assert shd(est, t, "entries") == 5
    assert normalised_shd(est, t) == pytest.approx(3 / 6)
    assert normalised_shd(est, t, "entries") == pytest.approx(5 / 12)
    with pytest.raises(ValueError, match="unknown SHD variant"):
        shd(est, t, "hamming")


def test_shd_causallearn_0128_pag_cases():
    # a correct bidirected edge costs 2 (arrowheads at both ends are "penalised"), X --> Y vs
    # X <-> Y costs 1, and circles are never penalised.
    names = ["X", "Y"]
    bi = Graph.from_edges(names, [("X", "Y", "arrow", "arrow")], kind="PAG")
    directed = Graph.from_edges(names, [("X", "Y")], kind="PAG")
    circles = Graph.from_edges(names, [("X", "Y", "circle", "circle")], kind="PAG")
    assert shd(bi, bi, "causallearn-0.1.2.8") == 2
    assert shd(bi, directed, "causallearn-0.1.2.8") == 1
    assert shd(circles, directed, "causallearn-0.1.2.8") == 0
    assert shd(circles, directed) == 1


def test_adjacency_and_arrowhead_metrics_by_hand():
    t, est = truth_dag(), learned_cpdag()
    # adjacencies: learned {AB, BC, AD, BD}, true {AB, BC, AD}: TP 3, FP 1, FN 0
    adj = adjacency_metrics(est, t)
    assert (adj["tp"], adj["fp"], adj["fn"]) == (3, 1, 0)
    assert adj["precision"] == pytest.approx(0.75) and adj["recall"] == 1.0
    assert adj["f1"] == pytest.approx(2 * 0.75 / 1.75)
    # arrowheads: learned (C,B) (A,D) (B,D); true (A,B) (B,C) (A,D): TP 1, FP 2, FN 2; the
    # reversed B-C is one FP and one FN, the undirected A-B one FN
    arr = arrowhead_metrics(est, t)
    assert (arr["tp"], arr["fp"], arr["fn"]) == (1, 2, 2)
    assert arr["precision"] == pytest.approx(1 / 3) and arr["recall"] == pytest.approx(1 / 3)
    assert arr["f1"] == pytest.approx(1 / 3)
    summary = graph_metrics(est, t)
    assert summary["shd"] == 3 and summary["shd_cl0128"] == 2
    assert summary["shd_normalised"] == pytest.approx(0.5)
    assert summary["tpr"] == pytest.approx(1 / 3) and summary["fdr"] == pytest.approx(2 / 3)
    assert summary["adj_f1"] == pytest.approx(adj["f1"])
    assert summary["arrow_precision"] == pytest.approx(1 / 3)
    assert (summary["n_edges_learned"], summary["n_edges_true"]) == (4, 3)
    # commonly adjacent pairs AB, BC, AD: only AD has identical marks
    assert edge_type_accuracy(est, t) == pytest.approx(1 / 3)


def test_empty_graph_conventions():
    empty = Graph.empty(NAMES, "DAG")
    assert arrowhead_metrics(empty, empty)["f1"] == 1.0  # nothing predicted, nothing missed
    m = arrowhead_metrics(empty, truth_dag())
    assert (m["precision"], m["recall"], m["f1"]) == (0.0, 0.0, 0.0)
    m = adjacency_metrics(truth_dag(), empty)
    assert (m["precision"], m["recall"], m["f1"]) == (0.0, 0.0, 0.0)


def test_pag_orientation_and_mark_metrics_by_hand():
    names = ["X1", "X2", "X3", "X4"]
    truth = Graph.from_edges(
        names,
        [("X1", "X2", "circle", "arrow"), ("X2", "X3", "arrow", "arrow")]
        + [("X4", "X3", "circle", "arrow")],
        kind="PAG",
    )
    learned = Graph.from_edges(
        names,
        [("X1", "X2", "circle", "arrow"), ("X3", "X2", "circle", "arrow")]
        + [("X3", "X4", "arrow", "arrow"), ("X1", "X4", "circle", "circle")],
        kind="PAG",
    )
    # true arrowheads (X1,X2) (X3,X2) (X2,X3) (X4,X3); learned (X1,X2) (X3,X2) (X4,X3) (X3,X4)
    o = orientation_metrics(learned, truth)
    assert (o["tp"], o["fp"], o["fn"]) == (3, 1, 1)
    assert o["precision"] == pytest.approx(0.75) and o["recall"] == pytest.approx(0.75)
    # circles: true (X2,X1) (X3,X4); learned (X2,X1) (X2,X3) (X1,X4) (X4,X1)
    c = mark_metrics(learned, truth, "circle")
    assert (c["tp"], c["fp"], c["fn"]) == (1, 3, 1)
    # standard SHD: X2-X3, X3-X4 marks differ, X1-X4 extra -> 3; entries: 1 + 1 + 2 = 4;
    # causal-learn 0.1.2.8: 1 (X1-X4) + (X2,X3) + (X4,X3) -> 3
    assert shd(learned, truth) == 3
    assert shd(learned, truth, "entries") == 4
    assert shd(learned, truth, "causallearn-0.1.2.8") == 3
    assert normalised_shd(learned, truth, "entries") == pytest.approx(4 / 12)


def test_edge_and_non_edge_fdr_by_hand():
    t, est = truth_dag(), learned_cpdag()
    assert edge_fdr(est, t) == pytest.approx(1 / 4)  # B-D of 4 learned adjacencies
    assert edge_fdr(est, t, pairs=[("A", "B"), ("D", "B")]) == pytest.approx(1 / 2)
    assert non_edge_fdr(est, t) == 0.0  # learned non-edges A-C, C-D are true non-edges
    missing_ad = est.copy()
    missing_ad.remove_edge(0, 3)
    # learned non-edges A-C, C-D, A-D; A-D is a true edge
    assert non_edge_fdr(missing_ad, t) == pytest.approx(1 / 3)
    mask = np.zeros((4, 4), dtype=bool)
    mask[3, 0] = True  # only the pair A-D, given as a (lower-triangle) boolean mask
    assert non_edge_fdr(missing_ad, t, pairs=mask) == 1.0
    assert edge_fdr(missing_ad, t, pairs=mask) == 0.0  # no learned adjacency among the pairs
    with pytest.raises(KeyError, match="unknown node"):
        edge_fdr(est, t, pairs=[("A", "Z")])


def test_local_metrics_by_hand():
    t, est = truth_dag(), learned_cpdag()
    # target B: learned parents {C}, children {D}, undirected {A}; true parents {A}, children {C}
    # hits = 0 -> precision 0/3, recall 0/2; all three incident pairs differ -> SHD 3
    b = local_metrics(est, t, "B")
    assert (b["precision"], b["recall"], b["f1"], b["shd"]) == (0.0, 0.0, 0.0, 3)
    # target A: learned children {D}, undirected {B}; true children {B, D}: hits 1 (D)
    a = local_metrics(est, t, "A")
    assert a["precision"] == 0.5 and a["recall"] == 0.5 and a["f1"] == 0.5 and a["shd"] == 1
    # an isolated target in both graphs: P = R = F1 = 1, SHD 0
    iso = Graph.from_edges(["A", "B", "E"], [("A", "B")])
    assert local_metrics(iso, iso, "E") == {
        "precision": 1.0,
        "recall": 1.0,
        "f1": 1.0,
        "tp": 0,
        "fp": 0,
        "fn": 0,
        "shd": 0,
    }


def test_alignment_by_name_and_mismatched_nodes():
    t = truth_dag()
    shuffled = learned_cpdag().subgraph(["D", "B", "A", "C"])
    assert shd(shuffled, t) == 3
    assert align(shuffled, t) == learned_cpdag()
    assert graph_metrics(shuffled, t) == graph_metrics(learned_cpdag(), t)
    other = Graph.from_edges(["A", "B", "C", "E"], [("A", "B")])
    with pytest.raises(ValueError, match=r"missing from the learned graph \['D'\].*\['E'\]"):
        shd(other, t)


def to_general_graph(g: Graph) -> GeneralGraph:
    gg = GeneralGraph([GraphNode(n) for n in g.names])
    gg.graph = g.to_causallearn().copy()
    return gg


def test_standard_shd_matches_causallearn_on_random_pairs():
    rng = np.random.default_rng(3)
    values = []
    for _ in range(200):
        p = int(rng.integers(3, 9))
        names = [f"V{i}" for i in range(p)]
        graphs = []
        for _ in range(2):
            adj = np.triu(rng.random((p, p)) < 0.5, 1)
            adj |= adj.T
            marks = np.where(adj, rng.choice([TAIL, ARROW, CIRCLE], size=(p, p)), NONE)
            graphs.append(Graph(names, marks, "PAG"))
        learned, truth = graphs
        order = list(rng.permutation(names))
        expected = CausalLearnSHD(
            to_general_graph(truth), to_general_graph(learned.subgraph(order))
        )
        values.append(shd(learned.subgraph(order), truth))
        assert values[-1] == expected.get_shd()
    assert len(set(values)) > 5
