"""FedPC on a running two-node Ray cluster (``ray_address`` / ``--ray-address``): the same graph as
in-process. Both nodes run on 127.0.0.1 with their own temp dir; the test ends exactly the
processes of that session (by PID, found by the session's temp dir), never other Ray instances."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fedcausal_flwr.api import run
from fedcausal_flwr.environment import NO_PHONING_OUT
from fedcausal_flwr.options import OptionError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _session_pids(temp_dir: Path) -> list[int]:
    """Processes of this cluster's session only: their command line names its temp dir, or they
    hold a file open under it (Ray's agents rename themselves, ``ray::DashboardAgent``, but keep
    their logs there open)."""
    mark = str(temp_dir)
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            found = mark.encode() in (entry / "cmdline").read_bytes()
            if not found:
                links = (os.readlink(fd) for fd in (entry / "fd").iterdir())
                found = any(link.startswith(mark) for link in links)
        except OSError:
            continue
        if found:
            pids.append(int(entry.name))
    return pids


def _end(temp_dir: Path) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _session_pids(temp_dir):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while _session_pids(temp_dir) and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.mark.slow
def test_fedpc_on_a_two_node_ray_cluster_equals_inprocess(monkeypatch):
    ray = Path(sys.executable).with_name("ray")
    assert ray.exists(), "Ray's command line comes with flwr[simulation]"
    # a short temp dir (Ray's socket paths must stay under 107 bytes), under the test's RAY_TMPDIR
    temp_dir = Path(os.environ["RAY_TMPDIR"]) / f"c{os.getpid() % 1000}"
    temp_dir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    address = f"127.0.0.1:{port}"
    env = {**os.environ, **NO_PHONING_OUT}
    env.pop("RAY_ADDRESS", None)
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats"]
    try:
        head = [str(ray), "start", "--head", f"--port={port}", f"--temp-dir={temp_dir}",
                "--include-dashboard=false", *common]  # fmt: skip
        started = subprocess.run(head, env=env, capture_output=True, text=True, timeout=180)
        assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
        worker = [str(ray), "start", f"--address={address}", *common]
        joined = subprocess.run(worker, env=env, capture_output=True, text=True, timeout=180)
        assert joined.returncode == 0, joined.stdout[-2000:] + joined.stderr[-2000:]
        nodes = subprocess.run(
            [sys.executable, "-c", "import ray; ray.init(address='" + address + "', "
             "logging_level='ERROR', log_to_driver=False); "
             "print(sum(n['Alive'] for n in ray.nodes()))"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert nodes.stdout.strip().splitlines()[-1] == "2", nodes.stderr[-2000:]

        settings = {"network": "asia", "samples": 2000, "clients": 4, "seed": 3}
        here = run("fedpc", **settings)
        there = run("fedpc", backend="ray", ray_address=address, **settings)
        assert np.array_equal(there.graph.marks, here.graph.marks)
        assert there.rounds == here.rounds and there.extra == here.extra
        assert there.config["run"]["backend"] == "ray"
        with pytest.raises(OptionError, match="ray_address .* needs backend ray"):
            run("fedpc", ray_address=address, **settings)
        monkeypatch.setenv("RAY_ADDRESS", address)  # Ray's own convention reaches it as well
        by_env = run("fedpc", backend="ray", **settings)
        assert np.array_equal(by_env.graph.marks, here.graph.marks)
    finally:
        _end(temp_dir)
    assert _session_pids(temp_dir) == []
