"""What `federation up` tells a newcomer: a `flwr run` command its own sites accept (checked with
the guard each site applies, and run in process on sites set up as `up` sets them up), a note when
a --site-policy refuses it, `--tuned` recommended where the user chooses; and a refusal that
reaches the submitter as one line, without Flower's traceback, in a run that still ends failed.

Fast: no process is started (the deployment is a stand-in; the runs use the in-process grid). What
`flwr run --stream` shows of a refusal in a real deployment, and the run's status at the
SuperLink: tests/test_deploy_secure.py (the refused raw-row runs).
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import re
import shlex
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from fedcausal_flwr import flwr_app
from fedcausal_flwr.data.specs import sample_partition
from fedcausal_flwr.federation.core.messages import SitePolicyError
from fedcausal_flwr.federation.core.site_identity import make_federation_keys
from fedcausal_flwr.federation.core.site_policy import SitePolicy
from fedcausal_flwr.federation.deployment import local_deployment, localhost
from fedcausal_flwr.federation.deployment.localhost import (
    PRINTED_METHOD,
    PRINTED_OPTIONS,
    TUNED_HINT,
    policy_refusal,
    run_command,
)
from fedcausal_flwr.federation.runtime.localgrid import run_local
from fedcausal_flwr.flwr_app import merged_refusals
from fedcausal_flwr.result import Result

SITES = 3


def run_config_of(command: str) -> dict:
    """The run config of a printed `flwr run` command, read as `flwr run` reads it."""
    from flwr.common.config import parse_config_args

    return parse_config_args([shlex.split(command)[-1]])


def printed_config(tmp_path: Path) -> dict:
    """The run config of the command `federation up` prints."""
    deployment = SimpleNamespace(node_configs=[{}] * SITES, flwr_home=tmp_path)
    return run_config_of(run_command(deployment, tmp_path / "app", PRINTED_METHOD, PRINTED_OPTIONS))


def up_sites(tmp_path: Path, **policy) -> list[dict]:
    """Three sites' node configs as `federation up` writes them: a CSV, a signing key and the
    roster each, the default policy (plus ``policy``)."""
    part, _ = sample_partition("asia", 900, SITES, "iid", 0)
    identities = make_federation_keys(tmp_path / "keys", [f"site{k}" for k in range(SITES)])
    nodes = []
    for k, frame in enumerate(part.clients):
        path = tmp_path / f"site{k}.csv"
        frame.to_csv(path, index=False)
        nodes.append({"partition-id": k, "data-path": str(path), **identities[k], **policy})
    return nodes


def audit(node: dict) -> list[dict]:
    path = Path(node["data-path"]).with_name(Path(node["data-path"]).stem + ".audit.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# ------------------------------------------------------------------- the printed command
def test_the_printed_run_passes_the_sites_default_policy(tmp_path):
    config = printed_config(tmp_path)
    assert config["method"] == PRINTED_METHOD and config["secure"] is True
    nodes = up_sites(tmp_path)
    policies = [SitePolicy.of_node(node) for node in nodes]
    assert all(p is not None and not p.allow_plain_statistics for p in policies)
    assert policy_refusal(config, policies) is None
    # the check is the site's: the same run without SecAgg+ is refused, in the site's words
    plain = {k: v for k, v in config.items() if k != "secure"}
    refusal = policy_refusal(plain, policies)
    assert re.fullmatch(
        r"site 0 refuses action '(tables|margins|sketch)': its policy has "
        r"allow-plain-statistics = false; the site's audit log has the full reason",
        refusal or "",
    )
    assert not any(audit(node) for node in nodes)  # a check before the run logs nothing


def test_the_printed_run_completes_on_sites_set_up_as_up_sets_them_up(tmp_path):
    """The printed run config, as the sites' own ClientApps answer it (in-process grid): every
    site answers, and its audit log shows metadata and SecAgg+ sums only."""
    nodes = up_sites(tmp_path)
    config = {**printed_config(tmp_path), "result-path": "printed.json"}
    run_local(flwr_app.server_app, flwr_app.client_app, SITES, config, nodes)
    result = Result.load(tmp_path / "results" / "printed.json")
    assert result.method == PRINTED_METHOD and result.graph is not None
    for node in nodes:
        sent = {(e["class"], e["secure"], e["outcome"]) for e in audit(node)}
        assert sent == {("metadata", False, "sent"), ("summed", True, "sent")}


@pytest.mark.parametrize(
    ("policy", "key"),
    [({"allow-methods": "pc-vote"}, "allow-methods"), ({"dp-epsilon": 1.0}, "dp-epsilon")],
)
def test_a_site_policy_the_printed_run_does_not_fit_is_named(tmp_path, policy, key):
    policies = [SitePolicy.of_node(node) for node in up_sites(tmp_path, **policy)]
    refusal = policy_refusal(printed_config(tmp_path), policies)
    assert refusal is not None and refusal.startswith("site 0 refuses") and key in refusal


class StandInDeployment:
    """What `federation up` reads of a LocalDeployment, without starting a process."""

    def __init__(self, workdir, nodes, **_):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.node_configs = [dict(n) for n in nodes]
        self.flwr_home = self.workdir / "flwr_home"
        self.credentials_dir = self.workdir / "credentials"
        self.signing_dir = self.credentials_dir / "signing"
        self.results_dir = self.workdir / "results"
        self.port = 9092
        self.registered_node_ids: dict[int, int] = {}
        self.processes = [SimpleNamespace(pid=100 + k, poll=lambda: None) for k in range(4)]

    def start(self) -> None:
        keys = make_federation_keys(self.signing_dir, [f"site{k}" for k in range(SITES)])
        for node, identity in zip(self.node_configs, keys, strict=True):
            node.update(identity)

    def supernode_process(self, k: int):
        return self.processes[k + 1]

    def stop(self) -> None:
        pass


def federation_up_output(tmp_path, monkeypatch, capsys, *extra: str) -> str:
    monkeypatch.setattr(local_deployment, "LocalDeployment", StandInDeployment)
    monkeypatch.setattr(localhost, "_early_failures", lambda deployment, n: [])
    tmp_path.mkdir(parents=True, exist_ok=True)
    sites = [n["data-path"] for n in up_sites(tmp_path)]
    parser = argparse.ArgumentParser()
    localhost.add_federation_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["federation", "up", "--sites", *sites, "--workdir", str(tmp_path / "fed"), "--detach",
         *extra]
    )  # fmt: skip
    assert localhost.federation_up(args, flwr_app.DEFAULT_RUN_CONFIG) == 0
    return capsys.readouterr().out


def test_federation_up_prints_the_accepted_run_and_recommends_tuned(tmp_path, monkeypatch, capsys):
    out = federation_up_output(tmp_path, monkeypatch, capsys)
    command = next(line.strip() for line in out.splitlines() if " flwr run " in line)
    assert run_config_of(command) == printed_config(tmp_path)
    assert "NOTE" not in out
    tip = next(line for line in out.splitlines() if "TIP" in line)
    assert "--tuned" in tip and "6.5 min" in tip and "49 s" in tip
    # with --tuned chosen there is nothing to recommend
    tuned = federation_up_output(tmp_path / "tuned", monkeypatch, capsys, "--tuned")
    assert "TIP" not in tuned and " flwr run " in tuned


def test_federation_up_says_when_its_sites_policy_refuses_the_printed_run(
    tmp_path, monkeypatch, capsys
):
    policy = tmp_path / "policy.toml"
    policy.write_text('allow-methods = ["pc-vote"]\n')
    out = federation_up_output(tmp_path, monkeypatch, capsys, "--site-policy", str(policy))
    note = next(line for line in out.splitlines() if "NOTE" in line)
    assert "site 0 refuses" in note and "allow-methods" in note


def test_the_tuned_help_recommends_it_for_secure_runs(capsys):
    from fedcausal_flwr.cli import main

    with pytest.raises(SystemExit):
        main(["federation", "up", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--tuned faster rounds" in text and "recommended for secure runs" in text
    assert "6.5 min" in text and "49 s" in text and "6.5 min" in TUNED_HINT


# ------------------------------------------------------------------- a refusal in one line
#: what the submitter reads when the sites' default policy refuses a plain FedPC run
PLAIN_REFUSED = (
    "sites 0, 1, 2: each refuses action 'tables': its policy has allow-plain-statistics = false; "
    "each site's audit log has the full reason"
)


def test_refusals_for_one_reason_are_said_once():
    one = "site 0 refuses action 'hello': its policy has max-levels = 100"
    reason = "; the site's audit log has the full reason"
    assert merged_refusals(one + reason) == one + reason
    two = f"{one}{reason}; {one.replace('site 0', 'site 4')}{reason}"
    assert merged_refusals(two) == (
        "sites 0, 4: each refuses action 'hello': its policy has max-levels = 100; each site's "
        "audit log has the full reason"
    )
    assert merged_refusals("a coordinator error") == "a coordinator error"


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_refusal_reaches_the_submitter_as_one_line_and_fails_the_run(tmp_path, capsys):
    from flwr.supercore import log
    from flwr.superlink.runtime import run_serverapp

    nodes = up_sites(tmp_path)
    with pytest.raises(SitePolicyError) as caught:
        run_local(flwr_app.server_app, flwr_app.client_app, SITES, {"method": "fedpc"}, nodes)
    said = [line for line in capsys.readouterr().out.splitlines() if "error" in line]
    assert said == [f"fedcausal-flwr: error: {PLAIN_REFUSED}"]
    assert str(caught.value).count("allow-plain-statistics") == SITES  # the error keeps each
    # Flower logs an exception of the ServerApp with its traceback and marks the run failed; a
    # said error's record is dropped, any other keeps its traceback
    source = inspect.getsource(run_serverapp)  # the function the flwr-serverapp process runs
    assert 'log(ERROR, "%s raised an exception", exc_entity, exc_info=ex)' in source
    assert "sub_status = SubStatus.FAILED" in source
    handler = Records()
    logging.getLogger("flwr").addHandler(handler)
    try:
        log(logging.ERROR, "%s raised an exception", "ServerApp", exc_info=caught.value)
        assert handler.records == []
        other = RuntimeError("a bug")
        log(logging.ERROR, "%s raised an exception", "ServerApp", exc_info=other)
        assert [r.exc_info[1] for r in handler.records] == [other]
    finally:
        logging.getLogger("flwr").removeHandler(handler)


def test_down_while_a_foreground_up_cleans_up_ends_quietly(tmp_path, monkeypatch, capsys):
    """`federation down` against a foreground `up`: ending the processes makes `up` remove its
    record first, which is no error (a newcomer saw exit 2 naming the missing file)."""
    import os
    import sys

    from fedcausal_flwr.cli import main

    workdir = tmp_path / "fed"
    workdir.mkdir()
    env = {**os.environ, "FLWR_HOME": str(workdir / "flwr_home")}
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    record = workdir / localhost.FEDERATION_FILE
    record.write_text(json.dumps({"pids": [sleeper.pid]}))
    real_end = local_deployment.end_processes

    def ended_and_up_cleaned(pids):
        done = real_end(pids)
        record.unlink()  # what the foreground `up` does once its processes end
        return done

    monkeypatch.setattr(local_deployment, "end_processes", ended_and_up_cleaned)
    try:
        assert main(["federation", "down", "--workdir", str(workdir)]) == 0
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
        sleeper.wait()
    printed = capsys.readouterr()
    assert f"federation down: ended pids {sleeper.pid}" in printed.out, printed
    assert "error" not in printed.err
