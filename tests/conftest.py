"""Shared test setup: Flower and Ray quiet, offline and writing only inside pytest's temp dir."""

import logging
import os

import pytest

# nothing a test starts phones out (the package sets these too; a test checks it does)
os.environ["FLWR_TELEMETRY_ENABLED"] = "0"
os.environ["FLWR_DISABLE_UPDATE_CHECK"] = "1"
os.environ["FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION"] = "1"
os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
for _name in ("flwr", "ray"):
    logging.getLogger(_name).setLevel(logging.ERROR)


@pytest.fixture(scope="session", autouse=True)
def _ray_tmpdir(tmp_path_factory):
    """Ray's session files go under pytest's temp dir (short path: Ray's socket names are long)."""
    os.environ["RAY_TMPDIR"] = str(tmp_path_factory.mktemp("ray"))
    yield
