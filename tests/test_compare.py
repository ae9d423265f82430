"""Comparison sweeps: same data for every method, resume after a kill, tidy CSV, plots, CLI and
the named paper experiments (CI-sized)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from causallearn.search.ConstraintBased.PC import pc as cl_pc
from helpers import assert_experiment_folder, padded_names

import fedcausal_flwr.compare as compare_module
from fedcausal_flwr.api import make_partition, run
from fedcausal_flwr.cli import main
from fedcausal_flwr.compare import compare, load_results
from fedcausal_flwr.data import load_network, sachs_discrete, sachs_discrete_truth
from fedcausal_flwr.discovery.fci import fci
from fedcausal_flwr.discovery.pc import pc
from fedcausal_flwr.experiments_registry import EXPERIMENTS, run_experiment
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.graphs.graph import ARROW, NONE
from fedcausal_flwr.options import OptionError
from fedcausal_flwr.plots import classify_pairs
from fedcausal_flwr.stats.oracles import DiscreteOracle
from fedcausal_flwr.study_runs import RunSpec, parse_int_list, partition_hash, plan_runs, run_data


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
    # the key hashes every effective option: one run spelled three ways has one hash (the
    # label as typed stays in the key, as in the results' method column)
    same = plan_runs(["fedpc:max-depth=-1", "fedpc:max_depth=none", "fedpc"], ["asia"], [2], 100)
    assert len({s.key.rsplit("__", 1)[1] for s in same}) == 1
    other = plan_runs(["fedpc:max_depth=2"], ["asia"], [2], 100)[0]
    assert other.key.rsplit("__", 1)[1] != same[0].key.rsplit("__", 1)[1]


@pytest.mark.slow  # 54 runs and their plots
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


@pytest.mark.slow  # two pools of fresh processes
def test_parallel_jobs_match_serial(tmp_path, monkeypatch):
    common = dict(methods=["fedpc", "pc-cit-vote"], networks=["er:d=6"], clients=[2, 3],
                  samples=600, seeds=[0], plots=False, progress=False)  # fmt: skip
    serial = compare(**common, out=tmp_path / "serial")
    # one run per worker: four runs on two workers take two pools of fresh processes
    monkeypatch.setattr(compare_module, "RUNS_PER_WORKER", 1)
    pools = []
    real_pool = compare_module._run_pool

    def counted(specs, *rest):
        pools.append(len(specs))
        return real_pool(specs, *rest)

    monkeypatch.setattr(compare_module, "_run_pool", counted)
    parallel = compare(**common, out=tmp_path / "parallel", jobs=2)
    assert parallel.n_run == 4 and parallel.n_failed == 0 and pools == [2, 2]
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


# ---------------------------------------------------------------------------- paper experiments
# Each experiment prints our numbers beside the papers'. Beyond "it ran", every test checks the
# printed numbers against something computed here independently: a reference implementation on
# the pooled rows (causal-learn, or our engine on one table for exact federated methods), the
# result files' own means, or a bound that holds for a stated reason.


def _codes(frame: pd.DataFrame) -> np.ndarray:
    """Integer codes per column (category codes, else sorted factorisation)."""
    columns = []
    for col in frame.columns:
        values = frame[col]
        if isinstance(values.dtype, pd.CategoricalDtype):
            columns.append(values.cat.codes.to_numpy())
        else:
            columns.append(pd.factorize(values, sort=True)[0])
    return np.column_stack(columns).astype(np.int64)


def _causallearn_pc(codes: np.ndarray, names) -> Graph:
    """causal-learn's PC-stable (chi2, alpha 0.05; padded node names keep index order)."""
    theirs = cl_pc(codes, 0.05, "chisq", stable=True, show_progress=False,
                   node_names=padded_names(codes.shape[1]))  # fmt: skip
    return Graph.from_causallearn(theirs.G.graph, list(names), "CPDAG")


def _causallearn_cpdag(dag: Graph) -> Graph:
    """The CPDAG of ``dag`` by causal-learn's dag2cpdag."""
    from causallearn.graph.Dag import Dag
    from causallearn.graph.GraphNode import GraphNode
    from causallearn.utils.DAG2CPDAG import dag2cpdag

    nodes = [GraphNode(n) for n in padded_names(dag.n_nodes)]
    cl_dag = Dag(nodes)
    for i, j in zip(*np.nonzero(dag.marks == ARROW), strict=True):  # arrowhead at j: i --> j
        cl_dag.add_directed_edge(nodes[i], nodes[j])
    return Graph.from_causallearn(dag2cpdag(cl_dag).graph, list(dag.names), "CPDAG")


def _mean_sd(values) -> tuple[float, float]:
    values = [float(v) for v in values]
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


@pytest.mark.slow
def test_experiment_synthetic_clients_quick(tmp_path, capsys):
    assert run_experiment("fedc2sl-synthetic-clients", quick=True, out=tmp_path) == 0
    text = capsys.readouterr().out
    assert "PC-Voting" in text and "paper (d=50; ours d=10)" in text
    assert "2.8" in text  # the paper's PC-Voting number at K = 2 is printed beside ours
    frame = pd.read_csv(tmp_path / "results.csv")
    from fedcausal_flwr.experiments_registry import QUICK_SKIPS, SWEEP_METHODS

    methods = [m for m in SWEEP_METHODS if m not in QUICK_SKIPS]
    assert "rfcd" in methods and set(frame["method"]) == set(methods)
    assert len(frame) == len(methods) * 2 * 2 and (frame["status"] == "ok").all()
    assert "RFCD" in text and "2.1" in text  # the paper's RFCD number at K = 2
    # pooled PC and exact FedPC agree run by run
    pivot = frame.pivot_table(index=["K", "seed"], columns="method", values="shd")
    assert (pivot["pooled"] == pivot["fedpc:ci=exact"]).all()
    # ... and both equal causal-learn's PC-stable on the union of the run's own client rows
    exact = frame[frame["method"] == "fedpc:ci=exact"]
    assert len(exact) == 4
    for _, row in exact.iterrows():
        spec = RunSpec("fedpc", "er:d=10", 2000, int(row["K"]), "iid", int(row["seed"]))
        part, _ = run_data(spec)
        assert partition_hash(part) == row["data_hash"]  # the rows the run saw
        pooled = pd.concat(part.clients, ignore_index=True)
        stored = json.loads((tmp_path / "runs" / f"{row['key']}.json").read_text())
        assert Graph.from_json(stored["result"]["graph"]) == _causallearn_pc(
            _codes(pooled), pooled.columns
        )
    # SHD(cl0128) <= SHD between CPDAGs: cl0128 charges a commonly adjacent pair at most once,
    # and only when its marks differ, which the standard SHD charges too
    assert (frame["shd_cl0128"] <= frame["shd"]).all() and frame["adj_f1"].between(0, 1).all()
    # the printed table is the CSV's mean ± sd (over seeds) of SHD(cl0128) per method and K
    table = text[text.index("SHD(cl0128), ours (mean ± sd)") :].splitlines()[3:8]
    for line in table:
        method = line.split()[0]
        cells = re.findall(r"(\d+\.\d)±(\d+\.\d) / ", line)
        assert len(cells) == 2, line
        for k, (mean, sd) in zip((2, 8), cells, strict=True):
            rows = frame[(frame["method"] == method) & (frame["K"] == k)]["shd_cl0128"]
            expected = _mean_sd(rows)
            assert (float(mean), float(sd)) == pytest.approx(expected, abs=0.051), (method, k)


def assert_sachs_quick(text: str, folder: Path) -> None:
    """What `fedcausal-flwr experiment fedc2sl-sachs --quick` prints (``text``) and writes
    (``folder``) on the packaged Sachs data; its run is the wheel's
    (tests/test_packaging.py), from outside the repository."""
    assert_experiment_folder(folder, "fedc2sl-sachs", "853 rows x 11 variables", "PC-Voting")
    assert "running: python -m fedcausal_flwr.experiments.fedc2sl_sachs --clients 2 64" in text
    assert "FedC2SL Sachs setting: 853 rows x 11 variables" in text
    assert "paper SHD(cl0128)" in text and "15.70" in text and "settings the paper" in text
    # the centralised line, recomputed: causal-learn's PC on the 853 pooled rows, scored by hand
    data, dag = sachs_discrete(), sachs_discrete_truth()
    learned = _causallearn_pc(data.to_numpy(dtype=np.int64), data.columns).subgraph(list(dag.names))
    truth = _causallearn_cpdag(dag)
    assert not np.any(truth.marks == ARROW) and truth.n_edges() == 17  # no v-structure
    la, ta = learned.marks != NONE, truth.marks != NONE
    adjacency_errors = int(np.count_nonzero(np.triu(la != ta, k=1)))
    oriented = (learned.marks == ARROW) | (learned.marks.T == ARROW)
    oriented_common = int(np.count_nonzero(np.triu(la & ta & oriented)))
    centralised = re.search(
        r"Centralised PC on the pooled rows: SHD\(cl0128\) (\d+), SHD\(std\) (\d+), (\d+) edges",
        text,
    )
    assert centralised is not None
    # cl0128 against a truth without arrowheads counts adjacency errors only; the standard SHD
    # also counts each commonly adjacent pair our PC oriented
    assert [int(v) for v in centralised.groups()] == [
        adjacency_errors, adjacency_errors + oriented_common, learned.n_edges()
    ]  # fmt: skip
    rows = re.findall(r"^\s*(\d+)\s+(\S+)\s+(\d+\.\d\d) \(\d+\.\d\d\)\s+(\d+\.\d\d) \(", text,
                      flags=re.M)  # fmt: skip
    assert {(int(k), m) for k, m, _, _ in rows} == {
        (k, m) for k in (2, 64) for m in ("FedPC-sketch", "PC-Voting", "PC-CIT-Voting")
    }
    for k, method, cl0128, std in rows:
        assert float(cl0128) <= float(std)  # the same reason, per row
        if (int(k), method) == (64, "PC-Voting"):
            # 13 rows per client: no majority of clients rejects an independence, so the vote
            # is the empty graph, missing all 17 true edges in either SHD
            assert float(cl0128) == float(std) == 17.0


@pytest.mark.slow
def test_experiment_fedlcs_quick(tmp_path, capfd):
    assert run_experiment("fedlcs-benchmarks", quick=True, out=tmp_path) == 0
    text = capfd.readouterr().out
    assert_experiment_folder(tmp_path, "fedlcs-benchmarks", "lcs-pooled", "fedpc-vote")
    for method in ("fedlcs", "lcs-avg", "lcs-best", "lcs-pooled", "fedpc-vote"):
        assert f" {method} " in text
    # the one-target block: the median / max line is the per-target lines' median / max
    per_target = re.findall(r"^\s+fedlcs (\S+)\s+tests\s+(\d+)\s+time\s+([\d.]+) s\s+rounds\s+"
                            r"\d+\s+F1 ([\d.]+)\s+SHD (\d+)$", text, flags=re.M)  # fmt: skip
    assert len(per_target) == 5 and per_target[0][0] == "HR"
    tests = [int(t[1]) for t in per_target]
    summary = re.search(r"fedlcs median over (\d+) targets: tests (\d+), time [\d.]+ s \(max (\d+) "
                        r"tests, ([\d.]+) s\)", text)  # fmt: skip
    assert summary is not None
    assert [int(v) for v in summary.groups()[:3]] == [5, int(np.median(tests)), max(tests)]
    assert summary.group(4) == max((t[2] for t in per_target), key=float)
    assert all(0 <= float(t[3]) <= 1 for t in per_target)
    # exact FedPC's distinct tests are pooled PC-stable's on the same 5000 ALARM rows, and every
    # client computes one table per distinct test
    exact = re.search(r"distinct tests (\d+), per-client tables (\d+)", text)
    net = load_network("alarm")
    oracle = DiscreteOracle(net.sample_codes(5000, seed=0).astype(np.int64), net.cards,
                            net.variables, test="chi2")  # fmt: skip
    pc(oracle, alpha=0.05)
    assert int(exact.group(1)) == oracle.n_computed and int(exact.group(2)) == 5 * oracle.n_computed
    # the table: F1 in [0, 1]; lcs-best (the best client, an oracle) >= lcs-avg (their mean)
    table = {
        (n, method): (float(f1), float(shd), int(tests))
        for n, method, f1, shd, tests in re.findall(
            r"^alarm\s+(\d+|all) (\S+)\s+([\d.]+)\s+([\d.]+)\s+\S+\s+(\d+)\s+\d+\s+\S+$",
            text,
            flags=re.M,
        )
    }
    # lcs-pooled searches the union of the clients' rows, the same whatever N: one row, N "all"
    assert {n for n, _ in table} == {"3", "5", "all"} and len(table) == 11
    assert [m for n, m in table if n == "all"] == ["lcs-pooled"]
    assert all(0 <= f1 <= 1 and shd >= 0 for f1, shd, _ in table.values())
    for n in ("3", "5"):
        assert table[(n, "lcs-best")][0] >= table[(n, "lcs-avg")][0]


@pytest.mark.slow
def test_experiment_fedecd_quick(tmp_path, capfd):
    assert run_experiment("fedecd-grid", quick=True, out=tmp_path, jobs=2) == 0
    text = capfd.readouterr().out
    assert "FedECD vs best non-oracle baseline" in text and "+7.53%" in text
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert set(summary["method"]) == {
        "fedecd", "fedpc-vote", "pc-vote", "local-avg", "local-best-oracle"
    }  # fmt: skip
    assert set(summary["K"]) == {10, 30}
    assert (tmp_path / "arrow_f1_vs_K_dag.png").stat().st_size > 0
    metrics = [c for c in summary.columns if c.startswith(("dag_", "cpdag_"))]
    assert summary[[c for c in metrics if "f1" in c or "tpr" in c]].stack().between(0, 1).all()
    # summary.csv is the mean over seeds of the per-run records
    records = [r for line in (tmp_path / "runs.jsonl").read_text().splitlines()
               for r in json.loads(line)["rows"]]  # fmt: skip
    runs = pd.DataFrame(records)
    means = runs.groupby(["network", "K", "method"])[metrics].mean()
    got = summary.set_index(["network", "K", "method"])[metrics]
    pd.testing.assert_frame_equal(got.sort_index(), means.sort_index(), check_dtype=False)
    # extending an output to a DAG or reducing it to its class keeps its skeleton (not for
    # local-best-oracle, which picks its client per view)
    chosen = runs[runs["method"] != "local-best-oracle"]
    assert len(chosen) == 8 and np.allclose(chosen["dag_adj_f1"], chosen["cpdag_adj_f1"])
    # local-best-oracle is the best client, local-avg the clients' mean
    for view in ("dag", "cpdag"):
        best = got.xs("local-best-oracle", level="method")[f"{view}_arrow_f1"]
        assert (best >= got.xs("local-avg", level="method")[f"{view}_arrow_f1"]).all()
    # each per-run line prints that run's (first row's) DAG Ar_F1; a "local" run's first row is
    # local-avg
    lines = re.findall(r"^\s+(child\|\d+\|\d+\|5000\|\S+)\s+[\d.]+ s\s+DAG Ar_F1 ([\d.]+)",
                       text, flags=re.M)  # fmt: skip
    assert len(lines) == 8
    for key, f1 in lines:
        _, k, seed, _, method = key.split("|")
        method = "local-avg" if method == "local" else method
        row = runs[(runs["K"] == int(k)) & (runs["seed"] == int(seed))
                   & (runs["method"] == method)]  # fmt: skip
        assert float(f1) == pytest.approx(row["dag_arrow_f1"].iloc[0], abs=5e-4), key
    # the printed gains, recomputed from summary.csv: FedECD against the best non-oracle baseline
    for view in ("dag", "cpdag"):
        col = got[f"{view}_arrow_f1"].unstack("method")
        best = col[["fedpc-vote", "pc-vote", "local-avg"]].max(axis=1)
        relative = 100 * float(((col["fedecd"] - best) / best).mean())
        absolute = 100 * float((col["fedecd"] - best).mean())
        wins = int((col["fedecd"] > best).sum())
        pattern = (rf"\({view.upper()} view\): mean relative gain ([+-][\d.]+)%, mean absolute "
                   r"gain ([+-][\d.]+) points.*best in (\d+) of (\d+)")  # fmt: skip
        line = re.search(pattern, text)
        assert line is not None, view
        assert float(line.group(1)) == pytest.approx(relative, abs=0.006)
        assert float(line.group(2)) == pytest.approx(absolute, abs=0.006)
        assert (int(line.group(3)), int(line.group(4))) == (wins, len(col))
    # a re-run finds every run cached
    assert run_experiment("fedecd-grid", quick=True, out=tmp_path, jobs=2) == 0
    assert "0 to do" in capfd.readouterr().out


FEDCDNV_COLUMNS = ("adj_precision", "adj_recall", "adj_f1", "arrow_precision", "arrow_recall",
                   "arrow_f1", "arrow_mag_f1")  # fmt: skip


def _check_fedcdnv_table(text: str, heading: str, frame: pd.DataFrame) -> None:
    """The printed rows under ``heading`` are the CSV's mean ± sd per method (and mean edges)."""
    block = text[text.index(heading) :].split("\n\n")[0].splitlines()[2:]
    assert block, heading
    for line in block:
        method = line.split()[0]
        cells = re.findall(r"(\d+\.\d{3})±(\d+\.\d{3})", line)
        rows = frame[frame["method"] == method]
        assert len(cells) == len(FEDCDNV_COLUMNS) and len(rows), line
        for column, (mean, sd) in zip(FEDCDNV_COLUMNS, cells, strict=True):
            expected = _mean_sd(rows[column])
            assert (float(mean), float(sd)) == pytest.approx(expected, abs=5.1e-4), (method, column)
        edges = float(line.split()[1 + len(FEDCDNV_COLUMNS)])
        assert edges == pytest.approx(rows["n_edges"].mean(), abs=0.051), (method, "edges")


@pytest.mark.slow
def test_experiments_fedcdnv_quick(tmp_path, capfd):
    """Both FedCDnv settings, quick; Sachs from the packaged data."""
    assert run_experiment("fedcdnv-synthetic", quick=True, out=tmp_path / "synthetic") == 0
    text = capfd.readouterr().out
    assert "Table 2, FedCDnv" in text
    for method in ("fedcdnv", "fedcdnv-vote", "fci-base"):
        assert f"\n{method} " in text
    synthetic = pd.read_csv(tmp_path / "synthetic" / "results.csv")
    _check_fedcdnv_table(text, "== default setting", synthetic[synthetic["part"] == "default"])
    ours = synthetic[(synthetic["part"] == "default") & (synthetic["method"] == "fedcdnv")]
    fdrs = re.search(r"^\s+30\s+" + r"\s+".join([r"(\d\.\d{3})±(\d\.\d{3}) \| [\d.]+"] * 4),
                     text, flags=re.M)  # fmt: skip
    assert fdrs is not None
    for k, column in enumerate(("fdr_c", "fdr_dc", "fdr_nc", "fdr_dnc")):
        printed = (float(fdrs.group(2 * k + 1)), float(fdrs.group(2 * k + 2)))
        assert printed == pytest.approx(_mean_sd(ours[column]), abs=5.1e-4), column
    # with no pair never observed together no status is downgraded (Theorem 3.1 and the lemmas
    # need such a pair), so every pair of the d observed variables is definite: d (d - 1) / 2
    assert (synthetic["never_together"] == 0).all()
    for pairs in ours["definite_pairs"]:
        d = (1 + np.sqrt(1 + 8 * pairs)) / 2
        assert d == int(d) and 30 - 0.15 * 30 <= d <= 30, pairs

    assert run_experiment("fedcdnv-sachs", quick=True, out=tmp_path / "sachs") == 0
    text = capfd.readouterr().out
    assert "0.6967 / 0.2861" in text and "0.6800 / 0.3030" in text
    # the slowest baseline is capped in a quick run, and the output says so
    assert "--quick: notears-admm runs with max-iter=40 (default 200)" in text
    frame = pd.read_csv(tmp_path / "sachs" / "results.csv")
    assert {"fedcdnv", "fedcdnv-vote", "fci-base", "fedpc-vote", "fedfci"} <= set(frame["method"])
    _check_fedcdnv_table(text, "== Sachs, 6 IID clients, 9 of 11", frame[frame["part"] == "sachs"])
    _check_fedcdnv_table(text, "== Sachs, 6 IID clients, identical",
                         frame[frame["part"] == "sachs-identical"])  # fmt: skip
    # the Sachs PAG has no arrowhead: a method predicting any scores 0, one predicting none 1
    triples = frame[["arrow_precision", "arrow_recall", "arrow_f1"]].to_numpy()
    assert all(tuple(t) in {(0.0, 0.0, 0.0), (1.0, 1.0, 1.0)} for t in triples)
    # FedC2SL's fedfci sums the clients' tables: its skeleton is FCI's on the 853 pooled rows
    data, dag = sachs_discrete(), sachs_discrete_truth()
    codes = data.to_numpy(dtype=np.int64)
    oracle = DiscreteOracle(codes, codes.max(axis=0) + 1, list(data.columns), test="g2")
    pooled = fci(oracle, alpha=0.05).graph.subgraph(list(dag.names))
    la, ta = pooled.adjacency(), dag.adjacency()
    tp, n_learned, n_true = (int(np.count_nonzero(np.triu(m, k=1))) for m in (la & ta, la, ta))
    precision, recall = tp / n_learned, tp / n_true
    expected = {"adj_precision": precision, "adj_recall": recall, "n_edges": n_learned,
                "adj_f1": 2 * precision * recall / (precision + recall)}  # fmt: skip
    fedfci = frame[frame["method"] == "fedfci"]
    assert len(fedfci) == 2
    for column, value in expected.items():
        assert fedfci[column].to_numpy() == pytest.approx([value, value]), column


def test_separate_labels_opens_dense_clusters_and_leaves_spread_nodes():
    from fedcausal_flwr.plots import separate_labels

    rng = np.random.default_rng(0)
    crowded = {v: rng.normal(scale=0.05, size=2) for v in range(30)}  # a dense cluster
    widths = rng.uniform(0.1, 0.4, size=30)
    height = 0.05
    pos = separate_labels(crowded, widths, height)
    xy = np.array([pos[v] for v in range(30)])
    i, j = np.triu_indices(30, k=1)
    overlap_x = (widths[i] + widths[j]) / 2 - np.abs(xy[j, 0] - xy[i, 0])
    overlap_y = height - np.abs(xy[j, 1] - xy[i, 1])
    assert not ((overlap_x > 1e-9) & (overlap_y > 1e-9)).any()
    before = np.array([crowded[v] for v in range(30)])
    overlapped_x = (widths[i] + widths[j]) / 2 > np.abs(before[j, 0] - before[i, 0])
    assert (overlapped_x & (height > np.abs(before[j, 1] - before[i, 1]))).sum() > 100
    spread = {v: np.array([v * 1.0, 0.0]) for v in range(5)}
    kept = separate_labels(spread, np.full(5, 0.5), 0.1)
    assert all(np.array_equal(kept[v], spread[v]) for v in range(5))


# ----------------------------------------------------------------------------- scoring views
def test_a_comparison_scores_every_method_in_one_view_per_column(tmp_path):
    """fedpc (a CPDAG) beside three DAG-output methods on child: every common-view number in
    results.csv is the run's graph, reduced to its equivalence class by causal-learn's dag2cpdag
    (after a Dor-Tarsi extension where a vote left edges undirected), against the true CPDAG;
    DAG-view columns only for the DAG outputs; the summary and the report state the view."""
    from fedcausal_flwr.data.specs import network_for
    from fedcausal_flwr.graphs.extension import pdag_to_dag
    from fedcausal_flwr.graphs.truth import dag_to_cpdag
    from fedcausal_flwr.metrics import graph_metrics
    from fedcausal_flwr.study_files import DEFAULT_METRICS

    methods = ["fedpc", "fedecd", "notears-admm:max_iter=4", "fedcsl"]
    result = compare(methods, ["child"], [2], 2000, seeds=[0], out=tmp_path)
    frame = pd.read_csv(tmp_path / "results.csv")
    assert (frame["status"] == "ok").all() and set(frame["view"]) == {"CPDAG"}
    true_dag = network_for("child", 0).dag
    true_cpdag = _causallearn_cpdag(true_dag)
    assert true_cpdag == dag_to_cpdag(true_dag)
    for _, row in frame.iterrows():
        stored = json.loads((tmp_path / "runs" / f"{row['key']}.json").read_text())
        learned = Graph.from_json(stored["result"]["graph"])
        if learned.kind == "DAG":
            extension, consistent = pdag_to_dag(learned)
            assert consistent, row["method"]
            common = graph_metrics(_causallearn_cpdag(extension), true_cpdag)
            dag_view = graph_metrics(learned, true_dag)
            for metric, value in dag_view.items():
                assert row[f"dag_{metric}"] == pytest.approx(value), (row["method"], metric)
        else:
            common = graph_metrics(learned, true_cpdag)
            assert all(pd.isna(row[c]) for c in frame.columns if c.startswith("dag_"))
        for metric, value in common.items():
            assert row[metric] == pytest.approx(value), (row["method"], metric)
    dag_methods = set(frame[frame["dag_shd"].notna()]["method"])
    assert dag_methods == {"fedecd", "notears-admm:max_iter=4", "fedcsl"}
    summary = (tmp_path / "summary.txt").read_text()
    assert summary.count("view: CPDAG against the true CPDAG") == len(DEFAULT_METRICS)
    html = (tmp_path / "report.html").read_text()
    tables = html.split("<h2>Summary</h2>")[1].split("<h2>")[0]  # the drawings state it too
    assert tables.count("view: CPDAG against the true CPDAG") == len(DEFAULT_METRICS)
    assert "One view per column" in html and "(1 seed)" in html
    assert result.frame["view"].tolist() == frame["view"].tolist()


def test_a_slow_run_in_a_sweep_gets_a_heartbeat_line(tmp_path, monkeypatch, capsys):
    """Progress forced to a redirected stderr (``progress=True``): a run that takes longer than
    the heartbeat's period is announced as still running, then the finished line follows."""
    import time

    from fedcausal_flwr import compare as compare_module

    monkeypatch.setattr(compare_module, "HEARTBEAT_S", 0.2)

    def slow_run(spec):
        time.sleep(0.7)
        return {"key": spec.key, "method": spec.method, "network": spec.network, "K": 2,
                "seed": spec.seed, "status": "ok"}  # fmt: skip

    monkeypatch.setattr(compare_module, "execute_run", slow_run)
    monkeypatch.setattr(compare_module, "write_record", lambda out, record: None)
    spec = compare_module.RunSpec("fedpc", "asia", 100, 2, "iid", 0)
    assert compare_module.run_sweep([spec], tmp_path, progress=True) == (1, 0, 0)
    lines = capsys.readouterr().err.splitlines()
    beats = [line for line in lines if "still running" in line]
    assert beats and beats[0].startswith("0/1 runs, ") and "since the last run ended" in beats[0]
    assert lines[-1].startswith("[") and "1/1 runs" in lines[-1] and lines[-1].endswith(": ok")
