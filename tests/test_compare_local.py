"""A local-structure method (fedlcs) in a comparison: scored and drawn against its target's true
neighbourhood (the edges at the target: its parents and children), in compare's tables, summary,
plots and report, beside methods that keep their whole-graph view; and a report that cannot be
built leaves no page from an earlier run."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from fedcausal_flwr.cli import main
from fedcausal_flwr.compare import compare
from fedcausal_flwr.data.specs import network_for
from fedcausal_flwr.discovery.lcs_payload import full_graph
from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL, Graph
from fedcausal_flwr.graphs.truth import dag_to_cpdag
from fedcausal_flwr.metrics import graph_metrics, local_metrics, shd, target_neighbourhood
from fedcausal_flwr.study_files import learned_and_truth

TARGET = "either"  # asia: parents tub and lung, children xray and dysp
METHODS = ["fedpc", f"fedlcs:target={TARGET}"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    result = compare(METHODS, ["asia"], [2], samples=300, seeds=[0], out=out, progress=False)
    return out, result


def _record(out, method: str) -> dict:
    frame = pd.read_csv(out / "results.csv")
    key = frame.loc[frame["method"] == method, "key"].iloc[0]
    return json.loads((out / "runs" / f"{key}.json").read_text())


def test_the_neighbourhood_is_the_pairs_at_the_target_local_metrics_scores():
    dag = network_for("asia", 0).dag
    t = dag.index(TARGET)
    true_pc = {dag.names[i] for i in np.flatnonzero(dag.marks[t] != NONE)}
    # a local graph over part of the variables: one right parent, one child undirected, one
    # extra neighbour, and an edge between two others (not at the target: not scored)
    names = ("tub", TARGET, "xray", "smoke", "bronc")
    learned = Graph.empty(names, "LOCAL")
    for a, b, at_a, at_b in ((0, 1, TAIL, ARROW), (1, 2, TAIL, TAIL), (1, 3, TAIL, TAIL),
                             (3, 4, TAIL, ARROW)):  # fmt: skip
        learned.marks[b, a], learned.marks[a, b] = at_a, at_b
    drawn, truth = target_neighbourhood(learned, dag, TARGET)
    assert drawn.names == truth.names
    assert set(truth.names) == true_pc | {"smoke", TARGET}
    assert "bronc" not in drawn.names  # the smoke - bronc edge is no claim about the target
    # the truth keeps exactly the true edges at the target, the learned graph its own
    assert truth.n_edges() == len(true_pc) and drawn.n_edges() == 3
    full = full_graph(learned, dag.names)
    assert shd(drawn, truth) == local_metrics(full, dag, TARGET)["shd"]
    # adjacency F1 of the neighbourhood is the F1 of the learned parents-and-children set
    found = {"tub", "xray", "smoke"}
    precision, recall = len(found & true_pc) / len(found), len(found & true_pc) / len(true_pc)
    f1 = 2 * precision * recall / (precision + recall)
    assert graph_metrics(drawn, truth)["adj_f1"] == pytest.approx(f1)
    with pytest.raises(ValueError, match="nosuch"):
        target_neighbourhood(learned, dag, "nosuch")


def test_fedlcs_rows_are_scored_on_the_neighbourhood_and_fedpc_keeps_its_view(study):
    out, result = study
    assert not result.not_written and result.n_failed == 0
    dag = network_for("asia", 0).dag
    frame = pd.read_csv(out / "results.csv")
    local = _record(out, METHODS[1])
    learned = Graph.from_json(local["result"]["graph"])
    assert learned.kind == "LOCAL" and set(learned.names) != set(dag.names)
    expected = graph_metrics(*target_neighbourhood(learned, dag, TARGET))
    row = frame[frame["method"] == METHODS[1]].iloc[0]
    for metric in ("shd", "adj_f1", "arrow_f1", "adj_precision", "arrow_recall"):
        assert row[metric] == pytest.approx(expected[metric]), metric
    # FedLCS's own numbers stay, and its SHD is the neighbourhood's
    own = local_metrics(full_graph(learned, dag.names), dag, TARGET)
    assert row["f1"] == pytest.approx(own["f1"]) and row["shd"] == own["shd"]
    assert "parents and children" in row["view"]
    fedpc = _record(out, "fedpc")
    cpdag = Graph.from_json(fedpc["result"]["graph"])
    assert fedpc["view"] == "CPDAG"
    for metric, value in graph_metrics(cpdag, dag_to_cpdag(dag)).items():
        assert fedpc["metrics"][metric] == pytest.approx(value), metric
    # the summary: every default column has a number for both, each beside its view
    summary = (out / "summary.txt").read_text()
    assert "nan" not in summary
    assert summary.count("[local structure] the target's parents and children") == 3
    assert len(re.findall(r"fedlcs:target=either \[local structure\] +\S", summary)) == 3


def test_the_drawing_and_the_report_show_the_neighbourhood_in_its_view(study):
    out, result = study
    local = _record(out, METHODS[1])
    drawn, truth, _ = learned_and_truth(out, local["key"])
    dag = network_for("asia", 0).dag
    t = dag.index(TARGET)
    assert set(truth.names) >= {TARGET} | {dag.names[i] for i in np.flatnonzero(dag.marks[t])}
    assert truth.n_edges() == int(np.count_nonzero(dag.marks[t]))
    page = (out / "report.html").read_text()
    assert page.count("<figcaption>") >= 2  # fedpc and fedlcs drawn
    caption = f"{METHODS[1]} on asia, one run: seed 0, K = 2 clients, n = 300 rows, target {TARGET}"
    assert caption in page and "over its target's neighbourhood only" in page
    assert (out / "plots" / "graphs" / f"{local['key']}.png").stat().st_size > 1000
    assert {p.name for p in result.plots} >= {"shd_vs_K.png", "graph_vs_truth.png"}


def test_the_command_line_compares_and_reports_fedlcs(tmp_path, capsys):
    args = ["compare", "--methods", "fedpc,fedlcs:target=lung", "--networks", "asia",
            "--clients", "2", "--samples", "300", "--out", str(tmp_path), "--quiet"]  # fmt: skip
    assert main([*args, "--no-plots"]) == 0
    assert "fedlcs:target=lung [local structure]" in capsys.readouterr().out
    assert (tmp_path / "report.html").exists()
    assert main(args) == 0  # with plots: the runs are kept, the drawing is made
    assert (tmp_path / "plots" / "graph_vs_truth.png").exists()
    assert main(["report", str(tmp_path)]) == 0
    assert "report written to" in capsys.readouterr().out


def test_a_report_that_cannot_be_built_leaves_no_stale_page(study, tmp_path, capsys, monkeypatch):
    import shutil

    import fedcausal_flwr.report as report

    out, _ = study
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    assert (copy / "report.html").exists()

    def broken(*args, **kwargs):
        raise ValueError("cannot compare graphs over different nodes")

    monkeypatch.setattr(report, "summary_section", broken)
    assert main(["report", str(copy)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert f"report {copy}: cannot compare graphs" in err and "old report.html was removed" in err
    assert not (copy / "report.html").exists()
    # compare keeps its runs and tables and says in one line that the page was not written
    (copy / "report.html").write_text("stale")
    lines = []
    again = compare(METHODS, ["asia"], [2], samples=300, seeds=[0], out=copy, progress=False,
                    plots=False, warn=lines.append)  # fmt: skip
    assert again.n_skipped == 2 and again.report is None and "report.html" in again.not_written
    assert len(lines) == 1 and "not written" in lines[0] and "cannot compare graphs" in lines[0]
    assert not (copy / "report.html").exists() and (copy / "results.csv").exists()


def test_a_spec_without_its_required_option_says_how_to_give_it(tmp_path, capsys):
    from fedcausal_flwr.cli import main

    args = ["compare", "--methods", "fedpc,fedlcs", "--networks", "asia", "--clients", "2"]
    assert main([*args, "--samples", "300", "--out", str(tmp_path / "s"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert "method 'fedlcs' needs option target" in err
    assert "give it in the method spec: fedlcs:target=VALUE" in err


def test_the_study_plan_records_the_sweeps_own_lists(tmp_path):
    """study.json says what the sweep ran: its clients and seeds, not one run's defaults."""
    import json

    from fedcausal_flwr.compare import compare

    out = tmp_path / "s"
    compare(["pc-vote"], ["asia"], [3], samples=300, seeds=[0, 2], out=out, plots=False,
            report=False, progress=False)  # fmt: skip
    plan = json.loads((out / "study.json").read_text())
    assert (plan["clients"], plan["seeds"], plan["networks"]) == ([3], [0, 2], ["asia"])
    assert plan["samples"] == 300 and "seed" not in plan and "network" not in plan
