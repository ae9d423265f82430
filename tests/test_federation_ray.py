"""One run on Flower's Ray simulation engine: same results as in-process, SecAgg+ included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fedcausal_flwr.federation.runtime.runners import run_method
from tests.test_federation_runtime import comparable
from tests.test_federation_toy import toy_partitions, toy_reference

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_ray_secure_run_equals_inprocess_runs(monkeypatch):
    # Ray workers import the test-only toy client by module name (tests.test_federation_toy).
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    parts = toy_partitions(3)
    inprocess_plain = run_method("toy", parts)
    inprocess_secure = run_method("toy", parts, secure=True)
    ray_secure = run_method("toy", parts, backend="ray", secure=True)  # RAY_TMPDIR: conftest
    assert ray_secure.config["run"].pop("backend") == "ray"  # provenance says where it ran
    inprocess_secure.config["run"].pop("backend")
    assert comparable(ray_secure) == comparable(inprocess_secure)
    assert ray_secure.extra == inprocess_plain.extra  # SecAgg+ sum == plain sum, exactly
    ref = toy_reference(dict(enumerate(parts)), [0, 2])
    assert ray_secure.extra["counts"] == ref["counts"]
    assert [e["secure"] for e in ray_secure.ledger] == [False, False, True, False]
    # every worker process Ray started served one of Flower's actors (none started ahead and
    # left idle): each worker's log names its actor
    logs = Path(os.environ["RAY_TMPDIR"]) / "ray" / "session_latest" / "logs"
    workers = {p.name.split("-")[1] for p in logs.glob("worker-*.out")}
    actors = {p.name.split("-")[1] for p in logs.glob("worker-*.out")
              if ":actor_name:ClientAppActor" in p.read_text()}  # fmt: skip
    assert workers and workers == actors, sorted(workers - actors)


@pytest.mark.slow
def test_a_refusal_reaches_the_server_typed_on_ray(monkeypatch):
    """A client's ProtocolError (here: counts beyond the exact-sum bound) arrives through Flower's
    Ray runtime as the typed refusal reply and stops the run naming the client."""
    from fedcausal_flwr.federation.core.messages import ClientProtocolError

    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    with pytest.raises(ClientProtocolError, match=r"action 'counts': client \d: secure action"):
        run_method("toy", toy_partitions(3), {"scale": 2**25}, backend="ray")
