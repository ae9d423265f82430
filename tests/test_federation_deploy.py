"""A real deployment on 127.0.0.1: SuperLink + 3 SuperNodes (one CSV each) + ``flwr run`` (FedPC,
then FedLCS with its method options through ``--run-config``, then FedPC again with one SuperNode
killed after the hello round: a real dropout), and ``flwr run .`` on Flower's default local
simulation.

The SuperLink/SuperNode subprocesses import the installed package; the FAB built from this repo's
pyproject.toml carries only the app manifest (staged in a directory with a valid app name, since
``flwr run`` validates the directory name and CI may clone the repo under any name). Every process
started here is ended by PID.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fedcausal_flwr
from fedcausal_flwr.data import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.discovery.pc import pc
from fedcausal_flwr.federation.deploy import (
    NO_PHONING_OUT,
    LocalDeployment,
    _alive,
    descendants,
    end_processes,
    free_port,
    process_environment,
    processes_with_env,
)
from fedcausal_flwr.federation.messages import FederationError
from fedcausal_flwr.result import Result
from fedcausal_flwr.stats.oracles import DiscreteOracle

REPO_ROOT = Path(__file__).resolve().parents[1]
#: A round waits this long for replies in the dropout run (a dead SuperNode never replies; the
#: SuperLink itself only notices it after 2 missed 30 s heartbeats). Generous for a loaded
#: 2-core machine, where a round of the live nodes takes 6-15 s.
DROPOUT_ROUND_TIMEOUT = 30.0


def pooled_pc(frames: list[pd.DataFrame]):
    """Pooled PC (chi2, alpha 0.05) on the union of ``frames``."""
    union = pd.concat(frames, ignore_index=True)
    levels = {v: sorted(union[v].unique()) for v in union.columns}
    codes = np.column_stack([np.searchsorted(levels[v], union[v]) for v in union.columns])
    cards = [len(levels[v]) for v in union.columns]
    return pc(DiscreteOracle(codes, cards, list(union.columns), test="chi2"), alpha=0.05)


class KillWhenLogged(threading.Thread):
    """Kills a SuperNode (its process and every descendant, SIGKILL, by PID) as soon as its log,
    from ``offset`` on, shows ``pattern``: e.g. the moment it receives the message of round 2,
    before the ``flwr-clientapp`` process it starts for it can answer (the reply would go
    through the SuperNode, which is gone)."""

    def __init__(self, proc: subprocess.Popen, log: Path, pattern: str, timeout: float = 240.0):
        super().__init__(daemon=True)
        self.proc, self.log, self.pattern, self.timeout = proc, log, re.compile(pattern), timeout
        self.offset = log.stat().st_size if log.exists() else 0
        self.killed: list[int] = []
        self.done = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout
        while not self.done.is_set() and time.monotonic() < deadline:
            with open(self.log, "rb") as f:
                f.seek(self.offset)
                text = f.read().decode(errors="replace")
            if self.pattern.search(text):
                pids = [self.proc.pid, *descendants(self.proc.pid)]
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                self.proc.wait(timeout=10)
                self.killed = pids
                return
            time.sleep(0.05)


@pytest.mark.slow
def test_deployment_runs_fedpc_and_cleans_up(tmp_path):
    net = load_network("asia")
    pooled = net.sample(3_000, seed=11)
    sites = split_iid(pooled, 3, seed=0).clients
    data_dir = tmp_path / "sites"
    data_dir.mkdir()
    paths = []
    for k, site in enumerate(sites):
        paths.append(data_dir / f"site{k}.csv")
        site.to_csv(paths[-1], index=False)
    app_dir = tmp_path / "fedcausal-app"
    app_dir.mkdir()
    shutil.copy(REPO_ROOT / "pyproject.toml", app_dir / "pyproject.toml")

    nodes = [{"partition-id": k, "data-path": str(p)} for k, p in enumerate(paths)]
    deployment = LocalDeployment(tmp_path / "deploy", nodes)
    lcs_options = {"target": "either", "ratio": 1.0, "max_depth": 1, "extension_depth": 0}
    try:
        deployment.start()
        # nothing we started may phone out
        for proc in deployment.processes:
            env = process_environment(proc.pid)
            assert {k: env.get(k) for k in NO_PHONING_OUT} == NO_PHONING_OUT, proc.args
        result = deployment.run(
            app_dir,
            {"method": "fedpc", "options": "alpha=0.05", "num-clients": 3},
            timeout=170,
        )
        # a key the app does not declare is refused by the SuperLink itself ...
        with pytest.raises(FederationError, match="Key 'ratio' is not present"):
            deployment.run(app_dir, {"method": "fedlcs", "ratio": 1.0}, timeout=60)
        # ... so method options travel in the declared `options` key, and take effect
        assignments = " ".join(f"{k.replace('_', '-')}={v}" for k, v in lcs_options.items())
        lcs = deployment.run(
            app_dir, {"method": "fedlcs", "options": assignments, "num-clients": 3}, timeout=200
        )
        # a real dropout: SuperNode 1 (partition 1) dies when it receives round 2 (after hello)
        node1 = next(p for p in deployment.processes if str(deployment.workdir / "node1.toml")
                     in p.args)  # fmt: skip
        killer = KillWhenLogged(node1, deployment.workdir / "supernode1.log", r"ROUND 2\]")
        killer.start()
        started = time.perf_counter()
        try:
            dropout = deployment.run(
                app_dir,
                {"method": "fedpc", "options": "alpha=0.05", "num-clients": 3, "min-clients": 2,
                 "round-timeout": DROPOUT_ROUND_TIMEOUT},
                timeout=240,
            )  # fmt: skip
        finally:
            killer.done.set()
            killer.join()
        dropout_s = time.perf_counter() - started
    finally:
        deployment.stop()

    # each site read its own CSV: the answer is pooled PC on the union of the three files
    reference = pooled_pc([pd.read_csv(p) for p in paths])
    assert result.method == "fedpc"
    assert result.graph == reference.graph
    assert result.rounds <= result.extra["pc_levels"] + 2
    assert result.dropped_clients == []
    assert result.config["options"]["alpha"] == 0.05 and result.config["run"]["num_clients"] == 3

    # FedLCS got its target and options through the SuperLink: the same result as in-process
    assert lcs.extra["target"] == "either"
    assert {k: lcs.config["options"][k] for k in lcs_options} == lcs_options
    local = fedcausal_flwr.run("fedlcs", data=[pd.read_csv(p) for p in paths], **lcs_options)
    assert lcs.graph == local.graph and lcs.extra["targets"] == local.extra["targets"]
    assert lcs.config["data"]["fingerprint"] == local.config["data"]["fingerprint"]
    # the killed site is dropped in round 2 (its first tables request) and the run finishes on
    # the other two: pooled PC on their files, since site 1 sent nothing but its hello report
    print(f"\ndeployment dropout run: {dropout_s:.1f} s")
    assert killer.killed and node1.returncode == -signal.SIGKILL
    assert [(d["client"], d["round"], d["action"]) for d in dropout.dropped_clients] == [
        (1, 2, "tables")
    ], dropout.dropped_clients
    assert dropout.dropped_clients[0]["reason"] == f"no reply within {DROPOUT_ROUND_TIMEOUT} s"
    steps = [(e["action"], e["status"], e["n_clients"]) for e in dropout.log]
    assert steps[:3] == [("hello", "ok", 3), ("tables", "dropout", 3), ("tables", "ok", 2)]
    assert all(e["n_clients"] == 2 for e in dropout.log[2:])
    assert all(e["n_clients"] == 2 for e in dropout.ledger if e["round"] > 2)
    assert dropout.config["run"]["min_clients"] == 2
    assert dropout.graph == pooled_pc([pd.read_csv(paths[k]) for k in (0, 2)]).graph
    # every process we started (and everything it spawned) is gone
    assert deployment.stopped_pids
    assert not [p for p in deployment.stopped_pids if _alive(p)]
    assert not any(descendants(p) for p in deployment.stopped_pids if _alive(p))


@pytest.mark.slow
def test_flwr_run_dot_works_on_flowers_default_local_simulation(tmp_path):
    """`flwr run . --stream` as a Flower user first types it: the default local connection starts a
    simulation SuperLink with 2 SuperNodes; the app runs with the nodes that are there."""
    app_dir = tmp_path / "fedcausal-app"
    app_dir.mkdir()
    shutil.copy(REPO_ROOT / "pyproject.toml", app_dir / "pyproject.toml")
    home = tmp_path / "flwr_home"
    result_path = tmp_path / "result.json"
    env = {
        **os.environ,
        **NO_PHONING_OUT,
        "FLWR_HOME": str(home),  # a fresh home: Flower writes its default config.toml there
        "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(free_port()),
        "FLWR_LOCAL_CONTROL_API_PORT": str(free_port()),
    }
    try:
        done = subprocess.run(
            ["flwr", "run", ".", "--stream", "--run-config",
             f"samples=2000 truth='network' result-path='{result_path}'"],
            cwd=app_dir, env=env, capture_output=True, text=True, timeout=150,
        )  # fmt: skip
    finally:
        spawned = processes_with_env("FLWR_HOME", str(home))
        ended = end_processes(spawned)
    assert spawned, "flwr run started no local SuperLink"
    assert not [p for p in ended if _alive(p)]
    output = done.stdout + done.stderr
    assert "2 SuperNode(s) connected; running with all of them" in output, output[-3000:]
    result = Result.load(result_path)
    assert result.method == "fedpc" and result.config["data"]["clients"] == 2
    assert result.config["data"]["network"] == "asia" and "shd" in result.metrics
    reference = fedcausal_flwr.run("fedpc", network="asia", samples=2000, clients=2)
    assert result.graph == reference.graph  # the simulated sites split the sample as run() does
