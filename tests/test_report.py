"""The study report (report.html): what compare and the experiments write, and `report DIR`."""

import json
import re
import shutil

import pandas as pd
import pytest
from helpers import assert_self_contained_html

from fedcausal_flwr.cli import main
from fedcausal_flwr.compare import compare, summarise
from fedcausal_flwr.report import build_report, ledger_summary, write_report

SECTIONS = (
    "Settings",
    "Summary",
    "Plots",
    "Learned graphs",
    "Rounds and bytes",
    "Failures",
    "What the server received",
)


def _sections(page: str) -> list[str]:
    return re.findall(r"<h2>(.*?)</h2>", page)


def _without_stamp(page: str) -> str:
    return re.sub(r"written \d{4}-\d\d-\d\d \d\d:\d\d UTC", "written <stamp>", page)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    bad = "fedlcs:target=nosuch"  # valid options, a target the data lacks: the run fails
    result = compare(
        ["fedpc", "pooled", bad], ["cancer"], [2, 3], samples=600, seeds=[0, 1],
        out=out, progress=False,
    )  # fmt: skip
    return out, result


def test_compare_writes_a_self_contained_report(study):
    out, result = study
    assert result.report == out / "report.html"
    page = result.report.read_text()
    assert_self_contained_html(page)
    assert _sections(page) == list(SECTIONS)
    for method in ("fedpc", "pooled", "fedlcs:target=nosuch"):
        assert method in page
    # the summary table holds the same means as the sweep's own summary
    summary = summarise(result.frame, ("shd",))
    row = summary[(summary["method"] == "fedpc") & (summary["K"] == 3)].iloc[0]
    assert f"{row['shd_mean']:.3g} ± " in page
    # every plot and one graph per successful method, inline
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == len(result.plots) - 1 + 2  # graph_vs_truth is shown per method
    assert all(len(b) > 1000 for b in images)
    # the failed runs with their error, and the learned edges in the user's notation
    assert page.count("fedlcs-target=nosuch__cancer") == 4 and "nosuch" in page
    assert re.search(r"<pre>[^<]*(--&gt;|---)[^<]*</pre>", page)
    # the PC methods' edges carry their confidence: each one's deciding p-value (<= alpha)
    graphs = page[page.index("<h2>Learned graphs</h2>") :]
    assert "edges (with each edge's confidence)</summary>" in graphs
    values = [float(v) for v in re.findall(r"(?:--&gt;|---) \S+   p ([0-9.e+-]+)", graphs)]
    assert values and all(0 <= v <= 0.05 for v in values)
    # the ledger in short: a compare run is plain, so exact FedPC's server held every client's
    # tables (and summed them itself), pooled the rows themselves
    ledger = page[page.index("<h2>What the server received</h2>") :]
    fedpc = ledger[ledger.index("<h3>fedpc") : ledger.index("<h3>pooled")]
    held = "each client&#x27;s, summed by the server"
    assert f"<td class='name'>tables</td><td class='name'>{held}</td>" in fedpc
    assert "Plain run (no SecAgg+)" in fedpc and "sum only" not in fedpc
    assert "<td class='name'>raw_rows</td><td class='name'>each client&#x27;s</td>" in ledger


def test_report_command_rebuilds_the_page_from_the_folder(study, tmp_path, capsys):
    out, result = study
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "report.html").unlink()
    shutil.rmtree(copy / "plots" / "graphs")
    assert main(["report", str(copy)]) == 0
    assert "report written to" in capsys.readouterr().out
    rebuilt = (copy / "report.html").read_text()
    first = result.report.read_text().replace(out.name, copy.name)
    assert _without_stamp(rebuilt) == _without_stamp(first)
    assert main(["report", str(copy), "--title", "My <study>"]) == 0
    assert "<h1>My &lt;study&gt;</h1>" in (copy / "report.html").read_text()


def test_report_shows_the_last_sweep_of_a_folder(study, tmp_path):
    out, _ = study
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    again = compare(["pc-vote"], ["cancer"], [2], samples=600, seeds=[0], out=copy,
                    progress=False, plots=False)  # fmt: skip
    page = again.report.read_text()
    settings = page[page.index("<h2>Settings</h2>") : page.index("<h2>Summary</h2>")]
    assert "pc-vote" in settings and "fedpc" not in settings
    assert json.loads((copy / "study.json").read_text())["methods"] == ["pc-vote"]


def test_report_of_a_folder_without_results_is_a_clear_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "report" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "holds no study" in err and str(tmp_path) in err


def test_experiment_folder_report_has_its_setting_output_and_figures(study, tmp_path):
    out, _ = study
    (tmp_path / "figs").mkdir()
    shutil.copy(out / "plots" / "shd_vs_K.png", tmp_path / "figs" / "my_figure.png")
    (tmp_path / "log.txt").write_text("ours 0.5 <b>paper</b> 0.4\n")
    meta = {"name": "demo", "version": 3, "paper": "Some paper", "description": "a demo",
            "ambiguities": ["rows: 100"], "command": "fedcausal-flwr experiment demo",
            "exit_code": 0, "wall_s": 12.0}  # fmt: skip
    (tmp_path / "experiment.json").write_text(json.dumps(meta))
    page = write_report(tmp_path).read_text()
    assert_self_contained_html(page)
    assert _sections(page) == ["Experiment", "Figures", "Console output"]
    assert "Experiment demo" in page and "version 3" in page and "rows: 100" in page
    assert "figs/my_figure.png" in page and page.count("data:image/png;base64,") == 1
    assert "&lt;b&gt;paper&lt;/b&gt;" in page and "<b>" not in page


def test_ledger_summary_counts_what_the_server_received():
    ledger = [
        {"round": 1, "kind": "hello", "secure": False, "summed": False, "n_clients": 3,
         "arrays": [], "meta_keys": ["n_rows", "levels"]},
        {"round": 2, "kind": "tables", "secure": True, "summed": True, "n_clients": 3,
         "arrays": [{"dtype": "int64", "shapes": [[10], [4, 6]]}], "meta_keys": []},
        {"round": 3, "kind": "tables", "secure": True, "summed": True, "n_clients": 2,
         "arrays": [{"dtype": "int64", "shapes": [[7]]}, {"dtype": "int64", "shapes": [[]]}],
         "meta_keys": []},
    ]  # fmt: skip
    rows = {row[0]: row[1:] for row in ledger_summary(ledger)}
    assert rows["hello"] == ["each client's", 1, 3, "0", "levels, n_rows"]
    # per round the largest reply of each array position: 24, then 7 + 1 (a scalar)
    assert rows["tables"] == ["sum only (SecAgg+)", 2, 3, "32", "–"]
    # a round outside SecAgg+ is its own row: the server held every client's reply there
    ledger[2]["secure"] = False
    assert [row[:3] for row in ledger_summary(ledger)[1:]] == [
        ["tables", "sum only (SecAgg+)", 1],
        ["tables", "each client's, summed by the server", 1],
    ]


def test_build_report_escapes_names(tmp_path):
    (tmp_path / "log.txt").write_text("x")
    page = build_report(tmp_path, title="<script>alert(1)</script>")
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_every_learned_graph_of_a_study_is_drawn_on_the_truths_layout(study, tmp_path, monkeypatch):
    import fedcausal_flwr.plots as plots

    out, _ = study
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    layouts, drawn = [], []
    real_layout, real_plot = plots.truth_layout, plots.plot_graph_vs_truth

    def layout(truth, *args, **kwargs):
        layouts.append(real_layout(truth, *args, **kwargs))
        return layouts[-1]

    def plot(*args, pos=None, **kwargs):
        drawn.append(pos)
        return real_plot(*args, pos=pos, **kwargs)

    monkeypatch.setattr(plots, "truth_layout", layout)
    monkeypatch.setattr(plots, "plot_graph_vs_truth", plot)
    page = build_report(copy)
    assert len(layouts) == 1 and len(drawn) == 2  # fedpc and pooled, one layout for both
    assert all(pos is layouts[0] for pos in drawn)
    assert "same node sits in the same place" in page


def test_rounds_show_as_whole_numbers_median_and_range():
    from fedcausal_flwr.report import costs_section

    rows = [
        {"status": "ok", "network": "asia", "method": "fedpc", "K": 2, "seed": seed,
         "rounds": rounds, "bytes_up": 1000.0, "bytes_down": 2000.0, "wall_s": 1.5}
        for seed, rounds in enumerate([5, 6, 7])
    ] + [
        {"status": "ok", "network": "asia", "method": "pooled", "K": 2, "seed": seed,
         "rounds": 1, "bytes_up": 10.0, "bytes_down": 0.0, "wall_s": 0.25}
        for seed in range(2)
    ]  # fmt: skip
    table = costs_section(pd.DataFrame(rows))
    assert "<td>6 (5–7)</td>" in table and "<td>1</td>" in table
    assert "6.5" not in table and "<td>1 kB</td><td>2 kB</td><td>1.50</td>" in table
    assert "median over seeds" in table
