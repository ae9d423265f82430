"""Learned graphs exported to other tools' formats: conventions checked by hand, every file
format round-trips, and the ``run --draw`` / ``export`` doors."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fedcausal_flwr.cli import main
from fedcausal_flwr.graphs.export import (
    EXPORT_FORMATS,
    edge_lines,
    from_edge_lines,
    read_graph,
    to_amat,
    to_causallearn_graph,
    to_dot,
    to_marked_networkx,
    write_graph,
)
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.result import Result

NAMES = ["A", "B", "C", "D", "E"]


def cpdag() -> Graph:
    # written B <-- A on purpose: the directed edge must come out tail first
    return Graph.from_edges(
        NAMES,
        [("B", "A", "arrow", "tail"), ("B", "C", "tail", "tail"), ("C", "D", "tail", "arrow")],
        kind="CPDAG",
    )


def pag() -> Graph:
    return Graph.from_edges(
        NAMES,
        [
            ("A", "B", "circle", "arrow"),
            ("B", "C", "arrow", "arrow"),
            ("C", "D", "circle", "circle"),
            ("E", "D", "tail", "arrow"),
            ("A", "E", "tail", "tail"),
        ],
        kind="PAG",
    )


def test_edge_lines_read_as_a_person_would() -> None:
    assert edge_lines(cpdag()) == ["A --> B", "B --- C", "C --> D"]
    assert edge_lines(pag()) == ["A o-> B", "A --- E", "B <-> C", "C o-o D", "E --> D"]
    assert from_edge_lines("\n".join(edge_lines(pag())), NAMES, kind="PAG") == pag()


def test_amat_follows_pcalgs_two_codings() -> None:
    g = cpdag()
    a, b, c, d = (g.index(n) for n in "ABCD")
    amat = to_amat(g)  # amat.cpdag: the code refers to the row: a --> b is [a,b]=0, [b,a]=1
    assert (amat[a, b], amat[b, a]) == (0, 1)
    assert (amat[b, c], amat[c, b]) == (1, 1)  # undirected
    assert amat[a, d] == amat[d, a] == 0
    pag_amat = to_amat(pag())  # amat.pag: the code refers to the column; 1 o, 2 >, 3 -
    p = pag()
    a, b, e, d = (p.index(n) for n in "ABED")
    assert (pag_amat[a, b], pag_amat[b, a]) == (2, 1)  # a o-> b
    assert (pag_amat[e, d], pag_amat[d, e]) == (2, 3)  # e --> d
    with pytest.raises(ValueError, match="pag type"):
        to_amat(pag(), "cpdag")


def test_causallearn_general_graph_has_the_same_edges() -> None:
    pytest.importorskip("causallearn")  # a test-only dependency, installed with .[test]
    for graph in (cpdag(), pag()):
        general = to_causallearn_graph(graph)
        assert np.array_equal(general.graph, graph.to_causallearn())
        assert [n.get_name() for n in general.get_nodes()] == list(graph.names)
    edges = {str(e) for e in to_causallearn_graph(pag()).get_graph_edges()}
    assert "A o-> B" in edges and "B <-> C" in edges and "E --> D" in edges


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
@pytest.mark.parametrize("make", [cpdag, pag], ids=["cpdag", "pag"])
def test_every_format_round_trips(tmp_path, fmt, make) -> None:
    graph = make()
    if fmt == "amat" and graph.kind == "PAG":
        path = write_graph(graph, tmp_path / "g.csv", fmt)
        assert read_graph(path, fmt, kind="PAG") == graph
        return
    path = write_graph(graph, tmp_path / f"g.{fmt}", fmt)
    kind = graph.kind if fmt in ("edges", "amat", "causallearn") else None
    back = read_graph(path, fmt, kind=kind)
    assert back == graph and back.kind == graph.kind


def test_dot_quotes_awkward_names_and_gml_keeps_marks(tmp_path) -> None:
    import networkx as nx

    graph = Graph.from_edges(['say "hi"', "back\\slash", "x y"], [(0, 1), (1, 2)], kind="DAG")
    assert read_graph(write_graph(graph, tmp_path / "g.dot", "dot"), "dot") == graph
    assert '"say \\"hi\\""' in to_dot(graph)
    dg = to_marked_networkx(pag())
    nx.write_graphml(dg, tmp_path / "g.graphml")
    data = nx.read_graphml(tmp_path / "g.graphml").get_edge_data("A", "B")
    assert data == {"mark_at_source": "circle", "mark_at_target": "arrow"}


def test_bad_files_say_what_is_wrong(tmp_path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(",A,B\nA,0,5\nB,1,0\n")
    with pytest.raises(ValueError, match="0 or 1"):
        read_graph(bad, "amat")
    bad.write_text(",A,B\nB,0,1\nA,1,0\n")
    with pytest.raises(ValueError, match="row names differ"):
        read_graph(bad, "amat")
    lines = tmp_path / "e.txt"
    lines.write_text("A --> B\nA => C\n")
    with pytest.raises(ValueError, match="line 2"):
        read_graph(lines, "edges")
    with pytest.raises(ValueError, match="unknown format"):
        write_graph(cpdag(), tmp_path / "x", "png")


def test_run_prints_edges_draws_and_export_writes(tmp_path, capsys) -> None:
    out, drawing = tmp_path / "r.json", tmp_path / "g.svg"
    code = main(
        ["run", "--method", "fedpc", "--network", "asia", "--samples", "3000", "--clients", "2",
         "--out", str(out), "--draw", str(drawing)]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    result = Result.load(out)
    for line in edge_lines(result.graph):  # each followed by its confidence
        assert re.search(rf"^  {re.escape(line)}   p \S+$", printed, re.MULTILINE)
    assert f"{result.graph.n_edges()} edges" in printed
    assert drawing.read_text().lstrip().startswith("<?xml") and "<svg" in drawing.read_text()
    assert main(["export", str(out), "--format", "graphml"]) == 0
    assert read_graph(tmp_path / "r.graphml", "graphml") == result.graph
    assert main(["export", str(out), "--format", "amat", "--out", str(tmp_path / "a.csv")]) == 0
    assert read_graph(tmp_path / "a.csv", "amat", kind=result.graph.kind) == result.graph
    assert np.array_equal(result.to_amat(), to_amat(result.graph))


def test_draw_and_export_refuse_in_the_users_words(tmp_path, capsys) -> None:
    code = main(["run", "--method", "fedpc", "--network", "asia", "--draw", "g.jpg"])
    assert code == 2
    assert "--draw g.jpg: give a .png, .svg or .pdf" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "none.json"), "--format", "dot"]) == 2
    assert "no such file" in capsys.readouterr().err
