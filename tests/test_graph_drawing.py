"""Graphs readable as causal graphs: arrowheads large enough to read an edge's direction at 100%
zoom, a title naming the drawn run and the scoring view its table uses, and p-values that
underflowed printed as a bound, not as "p 0"."""

import numpy as np
import pytest
from matplotlib.patches import FancyArrowPatch

from fedcausal_flwr.graphs.graph import ARROW, NONE, Graph
from fedcausal_flwr.graphs.truth import dag_to_cpdag
from fedcausal_flwr.plots import (
    ARROWHEAD_PT,
    ARROWHEAD_WIDTH,
    GRAPH_DPI,
    draw_graph_vs_truth,
    drawing_title,
    result_drawing,
)
from fedcausal_flwr.result import PVALUE_FLOOR, Result, confidence_labels, pvalue_text
from fedcausal_flwr.scoring import VIEW_TEXT, view_graphs


# ----------------------------------------------------------------------------- p-values
@pytest.mark.parametrize("p", [0.0, 1e-320, PVALUE_FLOOR / 2])
def test_an_underflowed_p_value_prints_as_a_bound(p):
    assert pvalue_text(p) == "< 1e-300"


@pytest.mark.parametrize("p", [PVALUE_FLOOR, 3.2e-12, 0.0123, 1.0])
def test_other_p_values_keep_two_significant_digits(p):
    assert pvalue_text(p) == f"{p:.2g}"


def test_the_edge_list_says_p_below_the_bound_for_a_zero_p_value():
    graph = Graph.from_edges(["a", "b", "c"], [("a", "b"), ("b", "c")], kind="CPDAG")
    extra = {"edge_pvalues": {"kept": [["a", "b", 0.0], ["b", "c", 0.0123]]}}
    labels = confidence_labels(extra)
    assert labels[frozenset("ab")] == "p < 1e-300" and labels[frozenset("bc")] == "p 0.012"
    lines = Result("fedpc", graph=graph, extra=extra).edge_lines(confidence=True)
    assert any(line.endswith("p < 1e-300") for line in lines)
    assert not any(line.endswith("p 0") for line in lines)


# ----------------------------------------------------------------------------- arrowheads
def _heads(drawing) -> list[FancyArrowPatch]:
    """The drawn arrowheads (the edges' lines are annotations without one)."""
    lines = [t.arrow_patch for t in drawing.figure.axes[0].texts if hasattr(t, "arrow_patch")]
    assert all(type(p.get_arrowstyle()).__name__ == "Curve" for p in lines)
    return [p for p in drawing.figure.axes[0].patches if isinstance(p, FancyArrowPatch)]


def test_arrowheads_are_drawn_at_the_stated_size_on_every_arrow_mark():
    truth = Graph.from_edges(["a", "b", "c", "d"], [("a", "b"), ("c", "b"), ("b", "d")])
    learned = Graph.from_edges(["a", "b", "c", "d"], [("a", "b"), ("b", "c")])  # one reversed
    drawing = draw_graph_vs_truth(learned, truth, "t")
    drawing.figure.canvas.draw()
    heads = _heads(drawing)
    # one head per arrowhead mark drawn: the learned graph's, and the truth's on a missing edge
    missing = truth.marks.copy()
    missing[learned.marks != NONE] = NONE
    assert len(heads) == int(np.count_nonzero(learned.marks == ARROW)) + int(
        np.count_nonzero(missing == ARROW)
    )
    for head in heads:
        assert head.get_mutation_scale() == ARROWHEAD_PT
        style = head.get_arrowstyle()
        assert style.head_length == 1 and style.head_width == ARROWHEAD_WIDTH / 2
        assert head.get_linestyle() == "solid"  # solid, also on a dotted (missing) edge
        # its drawn length in pixels is the stated size (the path: a shaft, then the head)
        corners = drawing.figure.axes[0].transData.transform(head.get_path().vertices[3:6])
        base = (corners[0] + corners[2]) / 2
        length = float(np.hypot(*(corners[1] - base)))
        assert length == pytest.approx(ARROWHEAD_PT * GRAPH_DPI / 72, rel=0.02)
    assert ARROWHEAD_PT * GRAPH_DPI / 72 >= 15  # at least 15 px long at 100% zoom


# ----------------------------------------------------------------------------- titles
def _record(view: str, metrics: dict, **extra) -> dict:
    return {"method": "fedecd", "network": "asia", "n": 1200, "K": 4, "seed": 3,
            "view": view, "metrics": metrics, "result": {"extra": extra}}  # fmt: skip


def test_a_drawing_title_names_its_run_and_its_tables_view():
    title = drawing_title(_record("CPDAG", {"shd": 5, "dag_shd": 7}))
    first, second = title.splitlines()
    assert first == "fedecd on asia, one run: seed 3, K = 4 clients, n = 1,200 rows: SHD 5"
    assert second == f"view: {VIEW_TEXT['CPDAG']}"  # the words of the table's view note
    assert "DAG against the true DAG" not in title
    view = "local structure: the target's edges"
    local = drawing_title(_record(view, {"shd": 2}, target="x"))
    assert "target x: SHD 2" in local and local.endswith(f"view: {view}")
    # a DAG output without an equivalence class has only DAG-view numbers: the title says so
    cyclic = drawing_title(_record("none (a directed cycle)", {"dag_shd": 9}))
    assert "SHD 9 in the DAG view" in cyclic and "view: none (a directed cycle)" in cyclic


def test_the_drawing_shows_the_graphs_its_table_compares_and_the_title_on_top():
    """A DAG output is drawn as its equivalence class against the true CPDAG (the table's view),
    and the figure's heading is the title."""
    dag = Graph.from_edges(["a", "b", "c"], [("a", "b"), ("b", "c")])
    learned, truth = view_graphs(dag, dag)
    assert (learned.kind, truth.kind) == ("CPDAG", "CPDAG") and truth == dag_to_cpdag(dag)
    result = Result("fedecd", config={"view": "CPDAG", "data": {"network": "toy", "clients": 2},
                                      "run": {"seed": 1}},
                    graph=dag, metrics={"shd": 0})  # fmt: skip
    drawn, reference, title = result_drawing(result, dag)
    assert drawn == learned and reference == truth
    assert title.startswith("fedecd on toy, one run: seed 1, K = 2 clients: SHD 0\n")
    heading = draw_graph_vs_truth(drawn, reference, title).heading.get_text()
    assert heading.splitlines() == title.splitlines()


def test_citest_prints_an_underflowed_p_value_as_a_bound(tmp_path, capsys):
    """Two columns that are one another's copy: the likelihood-ratio p-value underflows."""
    import numpy as np
    import pandas as pd

    from fedcausal_flwr.cli import main

    rng = np.random.default_rng(0)
    files = []
    for k in range(2):
        x = rng.normal(size=3000)
        files.append(str(tmp_path / f"s{k}.csv"))
        pd.DataFrame({"X": x, "Y": x + 1e-3 * rng.normal(size=3000)}).to_csv(files[-1], index=False)
    assert main(["citest", "--data", *files, "--x", "X", "--y", "Y"]) == 0
    assert "p-value: < 1e-300" in capsys.readouterr().out
