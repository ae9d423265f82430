"""A real deployment on 127.0.0.1: SuperLink + 3 SuperNodes (one CSV each) + ``flwr run`` (FedPC,
then FedLCS with its method options through ``--run-config``), and ``flwr run .`` on Flower's
default local simulation.

The SuperLink/SuperNode subprocesses import the installed package; the FAB built from this repo's
pyproject.toml carries only the app manifest (staged in a directory with a valid app name, since
``flwr run`` validates the directory name and CI may clone the repo under any name). Every process
started here is ended by PID.
"""

from __future__ import annotations

import os
import shutil
import subprocess
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
    finally:
        deployment.stop()

    # each site read its own CSV: the answer is pooled PC on the union of the three files
    union = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    levels = {v: sorted(union[v].unique()) for v in union.columns}
    codes = np.column_stack([np.searchsorted(levels[v], union[v]) for v in union.columns])
    cards = [len(levels[v]) for v in union.columns]
    reference = pc(DiscreteOracle(codes, cards, list(union.columns), test="chi2"), alpha=0.05)
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
