"""Learned graphs exported to other tools' formats: conventions checked by hand, every file
format round-trips, and the ``run --draw`` / ``export`` entry points."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from fedcausal_flwr.cli import main
from fedcausal_flwr.graphs.export import (
    EXPORT_FORMATS,
    edge_lines,
    from_dot,
    from_edge_lines,
    from_marked_networkx,
    graph_text,
    read_graph,
    to_amat,
    to_causallearn_graph,
    to_dot,
    to_marked_networkx,
)
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.outputs import write_graph
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


# --------------------------------------------------------------------------- other tools read it
@pytest.mark.parametrize("fmt", ["graphml", "gml"])
def test_networkx_reads_no_cpdag_or_pag_as_a_dag(tmp_path, fmt) -> None:
    """networkx has no mixed graphs: a ``---`` edge written once read back as ``A -> B`` and made
    any CPDAG a DAG. Only ``-->`` is one networkx edge; every other edge goes both ways."""
    import networkx as nx

    read = nx.read_graphml if fmt == "graphml" else nx.read_gml
    dg = read(write_graph(cpdag(), tmp_path / f"g.{fmt}", fmt))
    assert dg.is_directed() and not nx.is_directed_acyclic_graph(dg)
    assert sorted(dg.edges) == [("A", "B"), ("B", "C"), ("C", "B"), ("C", "D")]
    assert dg.edges["C", "B"] == {"mark_at_source": "tail", "mark_at_target": "tail"}
    pag_dg = read(write_graph(pag(), tmp_path / f"p.{fmt}", fmt))
    assert not nx.is_directed_acyclic_graph(pag_dg)
    assert pag_dg.edges["B", "A"] == {"mark_at_source": "arrow", "mark_at_target": "circle"}
    assert pag_dg.has_edge("E", "D") and not pag_dg.has_edge("D", "E")  # E --> D only
    dag = Graph.from_edges(NAMES, [("A", "B"), ("B", "C")], kind="DAG")
    assert nx.is_directed_acyclic_graph(read(write_graph(dag, tmp_path / f"d.{fmt}", fmt)))


def test_a_digraph_from_another_tool_reads_as_it_means() -> None:
    import networkx as nx

    plain = nx.DiGraph([("A", "B"), ("B", "C"), ("C", "B")])  # the usual CPDAG-as-DiGraph
    assert edge_lines(from_marked_networkx(plain)) == ["A --> B", "B --- C"]
    assert from_marked_networkx(to_marked_networkx(pag())) == pag()
    clash = to_marked_networkx(pag())
    clash.edges["B", "A"]["mark_at_source"] = "tail"
    with pytest.raises(ValueError, match="disagree"):
        from_marked_networkx(clash)


def test_dot_needs_no_pydot_and_graphviz_parsers_read_it(monkeypatch) -> None:
    with monkeypatch.context() as patched:
        patched.setitem(sys.modules, "pydot", None)  # `import pydot` now fails
        text = graph_text(pag(), "dot")
    pydot = pytest.importorskip("pydot")  # a test-only dependency
    (parsed,) = pydot.graph_from_dot_data(text)
    attrs = {
        (e.get_source().strip('"'), e.get_destination().strip('"')): e.get_attributes()
        for e in parsed.get_edges()
    }
    assert attrs[("A", "B")] == {"dir": "both", "arrowtail": "odot", "arrowhead": "normal"}
    assert attrs[("E", "D")] == {"dir": "both", "arrowtail": "none", "arrowhead": "normal"}
    assert from_dot(text) == pag()


def test_causallearn_general_graph_round_trips(tmp_path) -> None:
    pytest.importorskip("causallearn")
    from causallearn.graph.GeneralGraph import GeneralGraph
    from causallearn.graph.GraphNode import GraphNode

    for graph in (cpdag(), pag()):
        general = to_causallearn_graph(graph)
        assert {str(e) for e in general.get_graph_edges()} == set(edge_lines(graph))
        assert Graph.from_causallearn(general.graph, graph.names, graph.kind) == graph
        # the causallearn CSV is G.graph: load it into a GeneralGraph and back
        path = write_graph(graph, tmp_path / "cl.csv", "causallearn")
        matrix = np.loadtxt(path, delimiter=",", skiprows=1, usecols=range(1, 6), dtype=int)
        loaded = GeneralGraph([GraphNode(n) for n in graph.names])
        loaded.graph = matrix
        assert np.array_equal(loaded.graph, general.graph)
        assert read_graph(path, "causallearn", kind=graph.kind) == graph


def test_amat_cpdag_is_the_transposed_networkx_adjacency(tmp_path) -> None:
    """pcalg's amat.cpdag: ``amat[a, b] = 0, amat[b, a] = 1`` is ``a --> b``, so its transpose is
    the adjacency matrix of the DiGraph the GraphML file holds; the CSV round-trips."""
    import networkx as nx

    graph = cpdag()
    amat = to_amat(graph)
    from_amat_t = nx.relabel_nodes(
        nx.from_numpy_array(amat.T, create_using=nx.DiGraph), dict(enumerate(graph.names))
    )
    assert set(from_amat_t.edges) == set(to_marked_networkx(graph).edges)
    path = write_graph(graph, tmp_path / "amat.csv", "amat")
    assert path.read_text().splitlines()[:3] == [",A,B,C,D,E", "A,0,0,0,0,0", "B,1,0,1,0,0"]
    assert read_graph(path, "amat") == graph


@pytest.fixture(scope="module")
def result_json(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "r.json"
    code = main(["run", "--method", "fedpc", "--network", "asia", "--samples", "1500",
                 "--clients", "2", "--out", str(out), "--quiet"])  # fmt: skip
    assert code == 0
    return out


def test_export_edges_and_out_dash_go_to_stdout(result_json, tmp_path, capsys, monkeypatch):
    """No file beside the JSON, no file named '-': the graph alone on stdout, to pipe on."""
    import networkx as nx

    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    graph = Result.load(result_json).graph
    before = sorted(result_json.parent.iterdir())
    assert main(["export", str(result_json), "--format", "edges"]) == 0
    assert capsys.readouterr().out == graph_text(graph, "edges")
    assert main(["export", str(result_json), "--format", "graphml", "--out", "-"]) == 0
    printed = capsys.readouterr().out
    assert printed == graph_text(graph, "graphml")
    assert from_marked_networkx(nx.parse_graphml(printed)) == graph
    assert sorted(result_json.parent.iterdir()) == before and not (tmp_path / "-").exists()
    assert main(["export", str(result_json), "--format", "dot"]) == 0  # a file by default
    assert "written to" in capsys.readouterr().out
    assert read_graph(result_json.with_suffix(".dot"), "dot") == graph
