"""Comparison sweeps: same data for every method, resume after a kill, tidy CSV, plots, CLI and
the named paper experiments (CI-sized)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from fedcausal_flwr.api import make_partition, run
from fedcausal_flwr.cli import main
from fedcausal_flwr.compare import (
    RunSpec,
    compare,
    load_results,
    parse_int_list,
    partition_hash,
    plan_runs,
    run_data,
)
from fedcausal_flwr.data import load_network
from fedcausal_flwr.experiments_registry import EXPERIMENTS, run_experiment
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.options import OptionError
from fedcausal_flwr.plots import classify_pairs


def _png(path: Path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_parsers_and_the_plan_validates_every_spec_before_running():
    assert parse_int_list("0-2,7,2") == [0, 1, 2, 7]
    assert parse_int_list([5, 10]) == [5, 10]
    with pytest.raises(ValueError, match="4-1"):
        parse_int_list("4-1")
    with pytest.raises(OptionError, match="key=value"):
        plan_runs(["fedpc:sketch"], ["asia"], [2], 100)
    with pytest.raises(KeyError):
        plan_runs(["no-such-method"], ["asia"], [2], 100)
    with pytest.raises(ValueError, match="unknown network"):
        plan_runs(["fedpc"], ["no-such-network"], [2], 100)
    with pytest.raises(OptionError, match="method 'pc-vote': option alpha: expected a number > 0"):
        plan_runs(["pc-vote:alpha=7"], ["asia"], [2], 100)
    with pytest.raises(OptionError, match="has no option 'alhpa' \\(did you mean alpha\\?\\)"):
        plan_runs(["pc-vote:alhpa=0.1"], ["asia"], [2], 100)
    with pytest.raises(OptionError, match="unknown partition 'dirichlett'"):
        plan_runs(["fedpc"], ["asia"], [2], 100, partition="dirichlett")
    # a common option applies where declared; the others are told, not silently changed
    warnings: list[str] = []
    specs = plan_runs(["fedpc", "fedci-pc"], ["asia"], [2], 100, options={"test": "g2"},
                      warn=warnings.append)  # fmt: skip
    assert warnings == [
        "--test does not apply to fedci-pc (it has no such option); it runs without"
    ]
    assert specs[0].effective_options()["test"] == "g2" and "test" not in specs[1].run_options
    # the key digests every effective option: one run spelled three ways has one digest (the
    # label as typed stays in the key, as in the results' method column)
    same = plan_runs(["fedpc:max-depth=-1", "fedpc:max_depth=none", "fedpc"], ["asia"], [2], 100)
    assert len({s.key.rsplit("__", 1)[1] for s in same}) == 1
    other = plan_runs(["fedpc:max_depth=2"], ["asia"], [2], 100)[0]
    assert other.key.rsplit("__", 1)[1] != same[0].key.rsplit("__", 1)[1]


def test_sweep_same_data_resume_csv_and_plots(tmp_path):
    """3 methods x 2 networks x 3 K x 3 seeds; a re-run skips all; every method sees one data."""
    args = dict(
        methods=["fedpc", "pc-vote", "local"],
        networks=["asia", "cancer"],
        clients="2-4",
        samples=1000,
        seeds="0-2",
        out=tmp_path,
        progress=False,
    )
    study = compare(**args)
    assert (study.n_planned, study.n_run, study.n_skipped, study.n_failed) == (54, 54, 0, 0)
    frame = pd.read_csv(tmp_path / "results.csv")
    # one row per run plus local-avg / local-best-oracle per local run
    assert len(frame) == 54 + 2 * 18
    assert set(frame["method"]) == {"fedpc", "pc-vote", "local", "local-avg", "local-best-oracle"}
    for col in ("shd", "adj_f1", "arrow_f1", "rounds", "bytes_up", "bytes_down", "wall_s"):
        assert frame[col].notna().all(), col
    assert (frame["status"] == "ok").all()
    best = frame[frame["method"] == "local-best-oracle"].set_index("key")
    avg = frame[frame["method"] == "local-avg"].set_index("key")
    assert (best["arrow_f1"] >= avg["arrow_f1"] - 1e-12).all()

    # same (network, K, seed) -> identical client data for every method; other seeds differ
    hashes = frame.groupby(["network", "K", "seed"])["data_hash"].nunique()
    assert (hashes == 1).all()
    assert frame.groupby(["network", "K"])["data_hash"].nunique().eq(3).all()
    # ... and it is the data api.run derives from (network, samples, seed, partition, clients)
    row = frame[(frame["network"] == "asia") & (frame["K"] == 3) & (frame["seed"] == 1)].iloc[0]
    pooled = load_network("asia").sample(1000, seed=1)
    assert partition_hash(make_partition(pooled, 3, "iid", 1)) == row["data_hash"]
    stored = json.loads((tmp_path / "runs" / f"{row['key']}.json").read_text())
    direct = run(stored["run_method"], network="asia", samples=1000, clients=3, seed=1,
                 backend="inprocess")  # fmt: skip
    assert direct.graph == Graph.from_json(stored["result"]["graph"])
    assert direct.metrics["shd"] == stored["metrics"]["shd"]

    # summary: mean per method x K equals the CSV's
    summary = study.summary.set_index(["network", "method", "K"])
    by_hand = frame[(frame["network"] == "cancer") & (frame["method"] == "pc-vote")]
    assert summary.loc[("cancer", "pc-vote", 4), "shd_mean"] == pytest.approx(
        by_hand[by_hand["K"] == 4]["shd"].mean()
    )
    assert "cancer: shd" in study.summary_text()

    names = {p.name for p in study.plots}
    assert names == {
        "shd_vs_K.png", "adj_f1_vs_K.png", "arrow_f1_vs_K.png", "costs_vs_K.png",
        "graph_vs_truth.png",
    }  # fmt: skip
    assert all(_png(p) for p in study.plots)

    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "runs").glob("*.json")}
    again = compare(**args, plots=False)
    assert (again.n_run, again.n_skipped) == (0, 54)
    after = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "runs").glob("*.json")}
    assert after == before
    assert len(pd.read_csv(tmp_path / "results.csv")) == len(frame)


def test_killed_sweep_resumes_without_duplicates(tmp_path):
    """A real CLI process killed mid-sweep; the re-run completes it with one row per run."""
    out = tmp_path / "sweep"
    argv = [
        "compare", "--methods", "fedpc,pooled", "--networks", "asia", "--clients", "2,3,4",
        "--seeds", "0-2", "--samples", "800", "--out", str(out), "--no-plots",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fedcausal_flwr.cli", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + 60
    runs = out / "runs"
    while time.monotonic() < deadline and len(list(runs.glob("*.json"))) < 3:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    partial = len(list(runs.glob("*.json")))
    assert 3 <= partial < 18, f"the sweep was not interrupted midway ({partial} runs stored)"

    seen = []
    study = compare(
        ["fedpc", "pooled"], ["asia"], [2, 3, 4], samples=800, seeds="0-2", out=out,
        plots=False, progress=False, on_run_done=seen.append,
    )  # fmt: skip
    assert study.n_skipped == partial and study.n_run == 18 - partial == len(seen)
    frame = pd.read_csv(out / "results.csv")
    assert len(frame) == 18
    assert not frame.duplicated(["method", "network", "n", "K", "partition", "seed"]).any()
    assert (frame["status"] == "ok").all()
    # FedPC exact equals pooled PC on the same data: evidence both saw the same rows
    pivot = frame.pivot_table(index=["K", "seed"], columns="method", values="shd")
    assert (pivot["fedpc"] == pivot["pooled"]).all()


def test_failing_run_is_recorded_and_sweep_goes_on(tmp_path):
    # options are valid, so the plan accepts it; the target is no variable of the data
    bad = "fedlcs:target=nosuch"
    study = compare(
        ["pc-vote", bad], ["cancer"], [2], samples=500, seeds=[0, 1],
        out=tmp_path, plots=False, progress=False,
    )  # fmt: skip
    assert study.n_failed == 2
    frame = load_results(tmp_path)
    failed = frame[frame["status"] == "failed"]
    assert set(failed["method"]) == {bad} and len(failed) == 2
    assert failed["error"].str.contains("nosuch").all()
    assert (frame.loc[frame["status"] == "ok", "method"] == "pc-vote").sum() == 2
    # failed runs are skipped on a re-run unless asked to retry
    assert compare([bad], ["cancer"], [2], samples=500, seeds=[0, 1],
                   out=tmp_path, plots=False, progress=False).n_run == 0  # fmt: skip
    retried = compare([bad], ["cancer"], [2], samples=500, seeds=[0, 1],
                      out=tmp_path, plots=False, progress=False, retry_failed=True)  # fmt: skip
    assert retried.n_run == 2 and len(load_results(tmp_path)) == 4


def test_parallel_jobs_match_serial(tmp_path):
    common = dict(methods=["fedpc", "pc-cit-vote"], networks=["er:d=6"], clients=[2, 3],
                  samples=600, seeds=[0], plots=False, progress=False)  # fmt: skip
    serial = compare(**common, out=tmp_path / "serial")
    parallel = compare(**common, out=tmp_path / "parallel", jobs=2)
    assert parallel.n_run == 4 and parallel.n_failed == 0
    cols = ["key", "data_hash", "shd", "arrow_f1", "rounds", "bytes_up"]
    pd.testing.assert_frame_equal(serial.frame[cols], parallel.frame[cols])
    # a synthetic network is redrawn per seed
    spec = RunSpec("fedpc", "er:d=6", 600, 2, "iid", 1)
    assert partition_hash(run_data(spec)[0]) not in set(serial.frame["data_hash"])


def test_classify_pairs_styles():
    truth = Graph.from_edges(["a", "b", "c", "d"], [("a", "b"), ("b", "c"), ("c", "d")])
    learned = Graph.from_edges(["a", "b", "c", "d"], [("a", "b"), ("c", "b"), ("a", "d")])
    groups = classify_pairs(learned, truth)
    assert groups["correct"] == [(0, 1)]
    assert groups["reversed"] == [(1, 2)]
    assert groups["extra"] == [(0, 3)]
    assert groups["missing"] == [(2, 3)]


def test_cli_compare_and_experiment_list(tmp_path, capsys):
    code = main([
        "compare", "--methods", "pc-vote,pooled", "--networks", "cancer", "--clients", "2",
        "--seeds", "0", "--samples", "500", "--out", str(tmp_path), "--quiet",
    ])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0 and "cancer: shd" in text and "2 runs planned" in text
    assert _png(tmp_path / "plots" / "graph_vs_truth.png")
    assert main(["experiment", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in EXPERIMENTS)
    assert main(["experiment", "no-such-experiment"]) == 2


def test_experiment_synthetic_clients_quick(tmp_path, capsys):
    assert run_experiment("fedc2sl-synthetic-clients", quick=True, out=tmp_path) == 0
    text = capsys.readouterr().out
    assert "PC-Voting" in text and "paper (d=50; ours d=10)" in text
    assert "2.8" in text  # the paper's PC-Voting number at K = 2 is printed beside ours
    frame = pd.read_csv(tmp_path / "results.csv")
    assert len(frame) == 5 * 2 * 2 and (frame["status"] == "ok").all()
    # pooled PC and exact FedPC agree run by run
    pivot = frame.pivot_table(index=["K", "seed"], columns="method", values="shd")
    assert (pivot["pooled"] == pivot["fedpc:ci=exact"]).all()


def test_experiment_sachs_quick(capfd):
    """Runs the installed script on the packaged Sachs data."""
    assert run_experiment("fedc2sl-sachs", quick=True) == 0
    text = capfd.readouterr().out
    assert "running: python -m fedcausal_flwr.experiments.fedc2sl_sachs --clients 2 64" in text
    assert "853 rows x 11 variables" in text
    assert "paper SHD(cl0128)" in text and "15.70" in text and "settings the paper" in text


def test_experiment_fedlcs_quick(capfd):
    assert run_experiment("fedlcs-benchmarks", quick=True) == 0
    text = capfd.readouterr().out
    for method in ("fedlcs", "lcs-avg", "lcs-best", "lcs-pooled", "fedpc-vote"):
        assert f" {method} " in text
    assert "tests" in text


def test_experiment_fedecd_quick(tmp_path, capfd):
    assert run_experiment("fedecd-grid", quick=True, out=tmp_path, jobs=2) == 0
    text = capfd.readouterr().out
    assert "FedECD vs best non-oracle baseline" in text and "+7.53%" in text
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert set(summary["method"]) == {
        "fedecd", "fedpc-vote", "pc-vote", "local-avg", "local-best-oracle"
    }  # fmt: skip
    assert set(summary["K"]) == {10, 30}
    assert summary["dag_arrow_f1"].between(0, 1).all()
    assert (tmp_path / "arrow_f1_vs_K_dag.png").stat().st_size > 0
    # a re-run finds every run cached
    assert run_experiment("fedecd-grid", quick=True, out=tmp_path, jobs=2) == 0
    assert "0 to do" in capfd.readouterr().out


def test_experiments_fedcdnv_quick(tmp_path, capfd):
    """Both FedCDnv settings, quick; Sachs from the packaged data."""
    assert run_experiment("fedcdnv-synthetic", quick=True, out=tmp_path / "synthetic") == 0
    text = capfd.readouterr().out
    assert "Table 2, FedCDnv" in text
    for method in ("fedcdnv", "fedcdnv-vote", "fci-base"):
        assert f"\n{method} " in text
    assert run_experiment("fedcdnv-sachs", quick=True, out=tmp_path / "sachs") == 0
    text = capfd.readouterr().out
    assert "0.6967 / 0.2861" in text and "0.6800 / 0.3030" in text
    frame = pd.read_csv(tmp_path / "sachs" / "results.csv")
    assert {"fedcdnv", "fedcdnv-vote", "fci-base", "fedpc-vote", "fedfci"} <= set(frame["method"])
