"""Shared test setup: Flower and Ray quiet, offline and writing only inside pytest's temp dir."""

import logging
import os

import pytest

# nothing a test starts phones out (the package sets these too; a test checks it does)
os.environ["FLWR_TELEMETRY_ENABLED"] = "0"
os.environ["FLWR_DISABLE_UPDATE_CHECK"] = "1"
os.environ["FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION"] = "1"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
# two test workers share the two cores: each counts and tests in one thread
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
for _name in ("flwr", "ray"):
    logging.getLogger(_name).setLevel(logging.ERROR)


@pytest.fixture(scope="session", autouse=True)
def _ray_tmpdir(tmp_path_factory):
    """Ray's session files go under pytest's temp dir, on a short path: Ray refuses a temp dir
    whose socket names would be too long, and an xdist worker's temp dir (``.../popen-gw0``)
    is; so a folder beside it, named by the worker."""
    base = tmp_path_factory.getbasetemp()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    root = base.parent if worker and base.name.startswith("popen-") else base
    folder = root / f"r{(worker or '').removeprefix('gw')}"  # r, r0, r1, ...: short
    folder.mkdir(exist_ok=True)
    os.environ["RAY_TMPDIR"] = str(folder)
    yield


@pytest.fixture(autouse=True)
def coordinator_folders(tmp_path, monkeypatch):
    """A coordinator's folders inside the test's temp dir: `result-path` is relative to
    tmp_path/results, truth files come from tmp_path/truth, no plugin is allowed (a test
    allowing one sets FEDCAUSAL_ALLOW_PLUGINS)."""
    monkeypatch.setenv("FEDCAUSAL_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("FEDCAUSAL_TRUTH_DIR", str(tmp_path / "truth"))
    monkeypatch.delenv("FEDCAUSAL_ALLOW_PLUGINS", raising=False)
    return tmp_path / "results"


@pytest.fixture(scope="module")
def asia_sites():
    """Three sites' frames: asia x 3000 (seed 4) split i.i.d. (seed 1)."""
    from fedcausal_flwr.data.networks import load_network
    from fedcausal_flwr.data.partition import split_iid

    return split_iid(load_network("asia").sample(3000, seed=4), 3, seed=1).clients
