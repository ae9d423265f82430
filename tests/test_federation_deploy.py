"""A real deployment on 127.0.0.1: SuperLink + 3 SuperNodes (one CSV each) + ``flwr run``.

Runs the test-only toy method through the module-level apps of ``fedcausal_flwr.federation.app``,
imported by the SuperLink/SuperNode subprocesses from the FAB built from this repo's
pyproject.toml (staged in a directory with a valid app name, since ``flwr run`` validates the
directory name and CI may clone the repo under any name).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

from fedcausal_flwr.federation.deploy import LocalDeployment, _alive, descendants
from tests.test_federation_toy import toy_partitions, toy_reference

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_deployment_runs_toy_protocol_and_cleans_up(tmp_path):
    data_dir = tmp_path / "sites"
    data_dir.mkdir()
    paths = []
    for k, part in enumerate(toy_partitions(3)):
        paths.append(data_dir / f"site{k}.csv")
        part.to_csv(paths[-1], index=False)
    app_dir = tmp_path / "fedcausal-app"
    app_dir.mkdir()
    shutil.copy(REPO_ROOT / "pyproject.toml", app_dir / "pyproject.toml")

    nodes = [{"partition-id": k, "data-path": str(p)} for k, p in enumerate(paths)]
    start = time.perf_counter()
    deployment = LocalDeployment(tmp_path / "deploy", nodes, env={"PYTHONPATH": str(REPO_ROOT)})
    try:
        deployment.start()
        result = deployment.run(
            app_dir,
            {"method": "toy", "plugins": "tests.test_federation_toy", "connect-timeout": 60.0},
            timeout=170,
        )
    finally:
        deployment.stop()
    elapsed = time.perf_counter() - start

    sites = {k: pd.read_csv(p) for k, p in enumerate(paths)}
    ref = toy_reference(sites, [0, 2])
    assert result.method == "toy" and result.rounds == 4
    assert result.extra["counts"] == ref["counts"]
    assert result.extra["colsums"] == {str(k): v for k, v in ref["colsums"].items()}
    assert result.extra["ssd"] == pytest.approx({str(k): v for k, v in ref["ssd"].items()})
    assert result.dropped_clients == []
    assert [e["action"] for e in result.log] == ["hello", "colsum", "counts", "ssd"]
    assert result.config["num_clients"] == 3
    # every process we started (and everything it spawned) is gone
    assert deployment.stopped_pids
    assert not [p for p in deployment.stopped_pids if _alive(p)]
    assert not any(descendants(p) for p in deployment.stopped_pids if _alive(p))
    assert elapsed < 180, f"deployment took {elapsed:.0f} s"
