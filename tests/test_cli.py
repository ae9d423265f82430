"""The command line as a user types it: method options as flags, help from the declarations,
errors naming the flag as typed, re-running a recorded result."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from fedcausal_flwr.cli import main
from fedcausal_flwr.data import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.federation.core.registry import get_method
from fedcausal_flwr.result import Result


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["run", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_run_fedlcs_with_target_reports_local_metrics(capsys):
    code, out, _ = run_cli(
        capsys, "--method", "fedlcs", "--target", "HR", "--network", "alarm", "--samples", "3000",
        "--clients", "3",
    )  # fmt: skip
    assert code == 0
    assert "running fedlcs on alarm, 3000 rows split iid into 3 clients; seed 0" in out
    assert "LOCAL" in out and "f1=" in out and "precision=" in out


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--method", "fedci-pc", "--network", "asia", "--site-effect", "random"],
         "method 'fedci-pc': option --site-effect: 'random' is not one of none, fixed, private"),
        (["--method", "fedecd", "--network", "asia", "--alhpa", "0.01"],
         "method 'fedecd' has no option '--alhpa' (did you mean --alpha?); its options: --alpha,"),
        (["--method", "fedpc-vote", "--network", "asia", "--ci", "sketch"],
         "method 'fedpc-vote' has no option '--ci'; its options: --alpha, --test"),
        (["--method", "fedpc", "--network", "asia", "--ci", "fedci"],
         "option --ci: 'fedci' is not one of exact, sketch"),
        (["--method", "fedpc", "--network", "asia", "--sampels", "10"],
         "unknown option '--sampels' (did you mean --samples?)"),
        (["--method", "fedpc", "--network", "asia", "--max-depth", "2.5"],
         "method 'fedpc': option --max-depth: expected an integer"),
        (["--method", "fedpc", "--network", "asia", "--sketch-length", "20"],
         "option --sketch-length applies only with --ci sketch (here --ci exact)"),
        (["--method", "fedpc-vote", "--network", "asia", "--secure"],
         "method 'fedpc-vote': --secure does not apply"),
        (["--method", "fedlcs", "--network", "asia"], "method 'fedlcs' needs option --target"),
        (["--method", "fedpc"], "give --network (a benchmark network or er:d=...) or --data"),
        (["--network", "asia"], "give --method NAME"),
        (["--method", "fedpcc", "--network", "asia"], "unknown method 'fedpcc' (did you mean"),
        (["--method", "fedpc", "--network", "asai"], "unknown network 'asai' (did you mean"),
        (["--method", "fedpc", "--network", "asia", "--partition", "dirichlet:alpah=2"],
         "partition 'dirichlet:alpah=2' has no option 'alpah' (did you mean alpha?)"),
        (["--method", "fedpc", "--network", "asia", "--secure", "maybe"],
         "run: option --secure: expected true or false"),
    ],
)  # fmt: skip
def test_bad_input_is_one_clear_error_naming_the_flag(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert message in err
    assert "Traceback" not in err and "running" not in out  # refused before anything ran


def test_network_settings_next_to_data_are_errors(capsys, tmp_path):
    files = []
    for k, part in enumerate(split_iid(load_network("asia").sample(600, seed=1), 2).clients):
        files.append(str(tmp_path / f"site{k}.csv"))
        part.to_csv(files[-1], index=False)
    for extra, flag in ((["--clients", "7"], "--clients"), (["--network", "asia"], "--network")):
        code, _, err = run_cli(capsys, "--method", "fedpc", "--data", *files, *extra)
        assert code == 2 and f"{flag} does not apply with --data" in err


def test_help_lists_the_methods_options_with_defaults_and_paper_values(capsys):
    assert main(["run", "--method", "fedecd", "--help"]) == 0
    out = capsys.readouterr().out
    assert "fedecd options:" in out
    text = " ".join(out.split())
    assert "--tau TAU restore an edge" in text
    assert "default 0.05; paper: 0.05 (Eq. 7); 0.10 in the code" in text
    assert "--bootstraps BOOTSTRAPS" in text and "default 15" in text


def test_methods_command_prints_one_methods_options(capsys):
    assert main(["methods", "fedpc-vote"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("fedpc-vote: layer-wise voting FedPC")
    assert "--ratio a number > 0.0 and <= 1.0; default 0.5" in out
    assert "[paper: 0.3 in the authors' code]" in out
    assert main(["methods"]) == 0
    assert "fedecd" in capsys.readouterr().out


def test_a_recorded_result_reruns_to_the_same_graph_and_checks_the_data(capsys, tmp_path):
    files = []
    pooled = load_network("asia").sample(1500, seed=4)
    for k, part in enumerate(split_iid(pooled, 3, seed=2).clients):
        files.append(tmp_path / f"site{k}.csv")
        part.to_csv(files[-1], index=False)
    first = tmp_path / "first.json"
    code, _, _ = run_cli(
        capsys, "--method", "fedpc-vote", "--data", *map(str, files), "--ratio", "0.6",
        "--max-depth", "-1", "--out", str(first),
    )  # fmt: skip
    assert code == 0
    recorded = json.loads(first.read_text())["config"]
    assert recorded["options"]["ratio"] == 0.6 and recorded["options"]["max_depth"] is None
    assert recorded["options"]["sep_depth"] == 3  # defaults are recorded too
    assert recorded["data"]["source"] == "files" and len(recorded["data"]["fingerprint"]) == 16
    assert recorded["versions"]["flwr"].startswith("1.42")

    again = tmp_path / "again.json"
    assert run_cli(capsys, "--config", str(first), "--out", str(again))[0] == 0
    a, b = Result.load(first), Result.load(again)
    assert a.graph == b.graph and a.config["options"] == b.config["options"]
    assert a.config["data"]["fingerprint"] == b.config["data"]["fingerprint"]

    # an override is an override; the recorded data must still be the data
    code, _, _ = run_cli(capsys, "--config", str(first), "--ratio", "1.0", "--out", str(again))
    assert code == 0 and Result.load(again).config["options"]["ratio"] == 1.0
    changed = pd.read_csv(files[0])
    first_value = changed.iloc[0, 0]
    changed.iloc[0, 0] = next(v for v in changed.iloc[:, 0].unique() if v != first_value)
    changed.to_csv(files[0], index=False)
    code, _, err = run_cli(capsys, "--config", str(first))
    assert code == 2 and "the data differs from the recorded run's" in err


def test_a_network_run_reruns_from_its_record(capsys, tmp_path):
    out = tmp_path / "r.json"
    code, _, _ = run_cli(
        capsys, "--method", "fedpc", "--network", "er:d=8", "--samples", "800", "--clients", "2",
        "--seed", "3", "--out", str(out),
    )  # fmt: skip
    assert code == 0
    import fedcausal_flwr

    again = fedcausal_flwr.rerun(out)
    first = Result.load(out)
    assert again.graph == first.graph and again.metrics == first.metrics
    assert again.config["data"] == first.config["data"]


def test_citest_spells_the_fisher_baseline_as_run_does(capsys, tmp_path):
    from fedcausal_flwr.data.synthetic import random_dag, simulate_mixed

    pooled = simulate_mixed(random_dag(4, 1.5, seed=1), 600, seed=1)
    files = []
    for k, part in enumerate(split_iid(pooled, 2, seed=0).clients):
        files.append(str(tmp_path / f"c{k}.csv"))
        part.to_csv(files[-1], index=False)
    x, y = pooled.columns[:2]
    assert main(["citest", "--data", *files, "--x", x, "--y", y, "--ci", "fisher"]) == 0
    assert "(fisher, site effect none)" in capsys.readouterr().out


def progress_at_once(monkeypatch, terminal: bool) -> None:
    """Progress lines from the first second on (normally after 2 s), stderr a terminal or not."""
    import sys

    import fedcausal_flwr.cli as cli

    quiet_for = cli.ProgressLines.__init__.__defaults__
    monkeypatch.setattr(cli.ProgressLines.__init__, "__defaults__", (0.0,))
    assert quiet_for == (2.0,)  # normally quiet for the first 2 s
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)


def round_lines(err: str) -> list[str]:
    return [line.strip() for line in err.splitlines() if line.strip().startswith("round ")]


FEDPC_ASIA = ("--method", "fedpc", "--network", "asia", "--samples", "600", "--clients", "3")


def test_a_slow_run_reports_each_round(capsys, monkeypatch):
    """On a terminal, progress lines appear once a run has taken a while (here: at once), one
    per round, with the round's batch and CI tests where its log counts them."""
    progress_at_once(monkeypatch, terminal=True)
    code, _, err = run_cli(capsys, *FEDPC_ASIA)
    assert code == 0
    lines = round_lines(err)
    assert lines[0].startswith("round 1: hello (3 of 3 clients)")
    assert lines[1].startswith("round 2: tables, depth 0, batch 0 (3 of 3 clients, ")
    assert all(line.split(" (")[1].split(")")[0].endswith(" CI tests") for line in lines[1:])


def test_quiet_silences_progress(capsys, monkeypatch):
    progress_at_once(monkeypatch, terminal=True)
    code, out, err = run_cli(capsys, *FEDPC_ASIA, "--quiet")
    assert code == 0 and "learned" in out
    assert round_lines(err) == [] and err.strip() == ""


def test_no_progress_when_stderr_is_not_a_terminal(capsys, monkeypatch):
    """A pipe or a log file gets the result, never progress lines."""
    progress_at_once(monkeypatch, terminal=False)
    code, out, err = run_cli(capsys, *FEDPC_ASIA)
    assert code == 0 and "learned" in out
    assert round_lines(err) == [] and err.strip() == ""


def test_progress_flag_shows_progress_off_a_terminal_and_quiet_wins(capsys, monkeypatch):
    progress_at_once(monkeypatch, terminal=False)
    code, _, err = run_cli(capsys, *FEDPC_ASIA, "--progress")
    assert code == 0 and round_lines(err)[0].startswith("round 1: hello")
    code, _, err = run_cli(capsys, *FEDPC_ASIA, "--progress", "--quiet")
    assert code == 0 and err.strip() == ""


COMPARE = ("compare", "--methods", "fedpc", "--networks", "asia", "--clients", "2", "--samples",
           "500", "--no-plots")  # fmt: skip


def test_compare_shows_progress_off_a_terminal_only_with_progress(capsys, tmp_path):
    """A redirected stderr (here: captured, not a terminal) gets one line per run only when
    asked; --quiet wins."""
    assert main([*COMPARE, "--out", str(tmp_path / "plain")]) == 0
    assert capsys.readouterr().err == ""
    assert main([*COMPARE, "--out", str(tmp_path / "asked"), "--progress"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "1/1 runs" in lines[0] and "fedpc asia K=2 seed=0: ok" in lines[0]
    assert main([*COMPARE, "--out", str(tmp_path / "q"), "--progress", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_help_is_plain_text_and_lists_every_subcommand(capsys, monkeypatch):
    """Every subcommand the parser knows appears in ``--help`` with its help line; no
    reStructuredText markup."""
    import argparse

    helps: dict[str, str | None] = {}
    add_parser = argparse._SubParsersAction.add_parser

    def record(self, name, **kwargs):
        if self.dest == "command":
            helps[name] = kwargs.get("help")
        return add_parser(self, name, **kwargs)

    monkeypatch.setattr(argparse._SubParsersAction, "add_parser", record)
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out and "Federated causal discovery" in out
    assert {"run", "export", "report", "audit", "compare"} <= set(helps)
    for name, text in helps.items():
        assert text, f"subcommand {name} has no help line"
        first_words = " ".join(text.split()[:3])
        assert f"    {name} " in out or f"    {name}\n" in out
        assert first_words in " ".join(out.split()), name


def test_quiet_is_no_method_option():
    from fedcausal_flwr.cli import run_parser

    args = run_parser("fedecd").parse_args(["--method", "fedecd", "--quiet"])
    assert args.quiet is True
    assert "quiet" not in get_method("fedecd").options


def test_forced_progress_names_each_rounds_action_and_stage():
    """ProgressLines told to show everything at once: one line per round of the log, naming
    its action (and FedECD's depth: which layer a bootstrap round re-tests)."""
    from io import StringIO

    from fedcausal_flwr.api import execute
    from fedcausal_flwr.cli import ProgressLines

    stream = StringIO()
    settings = {"network": "asia", "samples": 1500, "clients": 3}
    result = execute("fedecd", settings, {}, progress=ProgressLines(0, stream=stream, enabled=True))
    lines = round_lines(stream.getvalue())
    assert len(lines) == len(result.log)
    for line, entry in zip(lines, result.log, strict=True):
        assert line.startswith(f"round {entry['round']}: {entry['action']}")
        if entry["action"] in ("prune", "bootstrap_weights"):
            assert f"{entry['action']}, depth {entry['depth']} (" in line
    assert {"hello", "prune", "orient"} <= {entry["action"] for entry in result.log}


def test_progress_lines_hold_back_rounds_but_not_a_slow_start():
    """Before ``after_s``, round lines are held back but ``starting Ray ...`` is shown; a
    disabled ProgressLines shows nothing."""
    from io import StringIO

    from fedcausal_flwr.cli import ProgressLines

    stream = StringIO()
    lines = ProgressLines(3600, stream=stream, enabled=True)
    lines("round 1: hello (3 of 3 clients) 0.1 s")
    lines("starting Ray ...")
    assert stream.getvalue() == "  starting Ray ...\n"
    off = StringIO()
    silent = ProgressLines(0, stream=off, enabled=False)
    silent("starting Ray ...")
    silent("round 1: hello (3 of 3 clients) 0.1 s")
    assert off.getvalue() == ""
    assert ProgressLines(0, stream=StringIO()).enabled is False  # not a terminal


def test_the_ray_backend_says_it_is_starting_ray(monkeypatch):
    """The line comes before the simulation starts (Ray itself is not started here)."""
    from fedcausal_flwr.federation.runtime import runners

    heard: list[str] = []

    def simulation(**kwargs):
        heard.append("simulation")

    monkeypatch.setattr(runners, "run_simulation_quietly", simulation)
    monkeypatch.setattr(runners, "make_client_app", lambda factory: None)
    runners._run_ray(None, None, 2, None, None, progress=heard.append)
    assert heard == ["starting Ray ...", "simulation"]


def test_iod_enumeration_lines_reach_the_runs_progress():
    """IOD's global phase runs on the server after the last round: its lines are forwarded."""
    from fedcausal_flwr.data.schema import Schema
    from fedcausal_flwr.federation.runtime.runners import run_method
    from tests.test_iod_federated import fig1_sites

    frames = fig1_sites(600, 2, seed=3)
    heard: list[str] = []
    result = run_method(
        "iod-fisher", frames, {"schema": Schema.infer(frames).dumps()}, progress=heard.append
    )
    assert result.extra["progress"] and set(result.extra["progress"]) <= set(heard)
    done = next(k for k, line in enumerate(heard) if line.startswith("IOD local phase done"))
    after = heard[done + 1 :]  # the enumeration's lines (if it took a second), the last round's
    assert after and after[-1].startswith(f"round {result.rounds}: local_lrt")


def test_a_graph_of_many_edges_is_counted_not_listed(monkeypatch, capsys, tmp_path):
    """Past MAX_LISTED_EDGES the edge list is one line naming how to get it; --all-edges
    lists every edge; with --no-edges the two contradict."""
    import fedcausal_flwr.cli as cli_module

    monkeypatch.setattr(cli_module, "MAX_LISTED_EDGES", 3)
    out = tmp_path / "r.json"
    args = ["run", "--method", "fedpc", "--network", "asia", "--samples", "2000", "--clients", "2"]
    assert cli_module.main([*args, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    counted = [line for line in printed.splitlines() if line.startswith("learned CPDAG")]
    assert len(counted) == 1 and "edges: not listed (over 3; --all-edges lists them" in counted[0]
    assert f"fedcausal-flwr export {out} --format edges" in counted[0]
    assert " --> " not in printed and " --- " not in printed
    assert cli_module.main([*args, "--all-edges"]) == 0
    listed = capsys.readouterr().out
    assert sum(line.startswith("  ") and " p " in line for line in listed.splitlines()) > 3
    assert cli_module.main([*args, "--all-edges", "--no-edges"]) == 2
    assert "--no-edges and --all-edges contradict" in capsys.readouterr().err
