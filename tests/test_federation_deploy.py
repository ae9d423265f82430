"""A real deployment on 127.0.0.1: SuperLink + 3 SuperNodes (one CSV each) + ``flwr run`` FedPC.

The SuperLink/SuperNode subprocesses import the installed package; the FAB built from this repo's
pyproject.toml carries only the app manifest (staged in a directory with a valid app name, since
``flwr run`` validates the directory name and CI may clone the repo under any name). Every process
started here is ended by PID.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedcausal_flwr.data import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.discovery.pc import pc
from fedcausal_flwr.federation.deploy import LocalDeployment, _alive, descendants
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
    try:
        deployment.start()
        result = deployment.run(
            app_dir,
            {"method": "fedpc", "alpha": 0.05, "num-clients": 3, "connect-timeout": 60.0},
            timeout=170,
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
    # every process we started (and everything it spawned) is gone
    assert deployment.stopped_pids
    assert not [p for p in deployment.stopped_pids if _alive(p)]
    assert not any(descendants(p) for p in deployment.stopped_pids if _alive(p))
