"""Runtime checks that had no test: the hello round's version check, byte counts and ledger of a
secure run measured against what the clients actually received and sent, and the Ray temp-dir
length check. In-process runs on the toy protocol only (no Ray)."""

from __future__ import annotations

import io
import os
import re

import numpy as np
import pytest

import fedcausal_flwr
import fedcausal_flwr.federation.runtime.runners as runners
from fedcausal_flwr.federation.core.messages import KEY_ACTION, KEY_META, KEY_PAYLOAD, KEY_ROUND
from fedcausal_flwr.federation.runtime.runners import (
    PartitionedClients,
    check_ray_tmpdir,
    run_protocol,
)
from tests.test_federation_toy import ToyClient, ToyStrategy, toy_partitions


@pytest.fixture(scope="module")
def parts3():
    return toy_partitions(3)


# ---------------------------------------------------------------------------- version check
class OtherVersionClient(ToyClient):
    """Client 1 reports another fedcausal-flwr version (or none) in hello; all record actions."""

    version: str | None = "0.0.0+other"
    seen: list[tuple[int, str]] = []

    def answer(self, name, payload, arrays):
        self.seen.append((self.partition_id, name))
        return super().answer(name, payload, arrays)

    def hello(self, payload):
        arrays, meta = super().hello(payload)
        if self.partition_id == 1:
            if self.version is None:
                del meta["version"]
            else:
                meta["version"] = self.version
        return arrays, meta


@pytest.mark.parametrize(("reported", "shown"), [("0.0.0+other", "0.0.0+other"), (None, "?")])
def test_a_client_on_another_version_stops_the_run_naming_both_versions(parts3, reported, shown):
    cls = type("Bound", (OtherVersionClient,), {"version": reported, "seen": []})
    factory = PartitionedClients(cls, parts3)
    mine = fedcausal_flwr.__version__
    assert mine and mine != reported
    expected = (
        f"client 1 runs fedcausal-flwr {re.escape(shown)} but the server runs {re.escape(mine)}; "
        "install the same version on every site"
    )
    with pytest.raises(ValueError, match=expected):
        run_protocol(ToyStrategy(), factory, 3)
    # the run stopped after hello: no client was asked anything else
    assert sorted(cls.seen) == [(0, "hello"), (1, "hello"), (2, "hello")]


def test_clients_on_the_same_version_pass_the_check(parts3):
    cls = type("Bound", (OtherVersionClient,), {"version": fedcausal_flwr.__version__, "seen": []})
    factory = PartitionedClients(cls, parts3)
    result = run_protocol(ToyStrategy(), factory, 3)
    assert result.rounds == 4
    assert {name for _, name in cls.seen} == {"hello", "colsum", "counts", "ssd"}


# ---------------------------------------------------------------------------- secure-mode bytes
def npy_bytes(arrays) -> int:
    """Bytes of arrays serialised as ``.npy`` (what a Flower ``Parameters`` tensor holds)."""
    total = 0
    for a in arrays:
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(a), allow_pickle=False)
        total += len(buffer.getvalue())
    return total


class WireClient(ToyClient):
    """Records, at the client, what each fit call received and what it returned."""

    wire: list[dict] = []

    def fit(self, parameters, config):
        arrays, n, metrics = super().fit(parameters, config)
        self.wire.append(
            {
                "round": int(config[KEY_ROUND]),
                "action": str(config[KEY_ACTION]),
                "client": self.partition_id,
                "down": npy_bytes(parameters) + len(config[KEY_PAYLOAD]) + len(config[KEY_ACTION]),
                "up": npy_bytes(arrays) + len(metrics[KEY_META]),
                "arrays": [(str(a.dtype), list(a.shape)) for a in arrays],
            }
        )
        return arrays, n, metrics


def wire_run(parts, secure):
    cls = type("Bound", (WireClient,), {"wire": []})
    factory = PartitionedClients(cls, parts)
    return run_protocol(ToyStrategy(), factory, len(parts), secure=secure), cls.wire


def test_secure_run_counts_the_bytes_and_arrays_the_clients_exchanged(parts3):
    plain, plain_wire = wire_run(parts3, secure=False)
    secure, wire = wire_run(parts3, secure=True)
    counts = [e for e in secure.log if e["action"] == "counts"]
    assert len(counts) == 1 and counts[0]["secure"]  # the summed step went through SecAgg+
    asked = sorted((w["round"], w["client"]) for w in wire)
    assert asked == sorted((w["round"], w["client"]) for w in plain_wire)
    assert asked == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2), (3, 0), (3, 1), (3, 2),
                     (4, 0), (4, 2)]  # fmt: skip
    # per round: what the clients received and returned, measured at the clients
    for entry in secure.log:
        here = [w for w in wire if w["round"] == entry["round"]]
        assert {w["action"] for w in here} == {entry["action"]}
        assert entry["bytes_down"] == sum(w["down"] for w in here), entry["action"]
        assert entry["bytes_up"] == sum(w["up"] for w in here), entry["action"]
        assert entry["n_replies"] == len(here)
    assert secure.bytes_down == sum(w["down"] for w in wire)
    assert secure.bytes_up == sum(w["up"] for w in wire)
    for client, charged in secure.bytes_per_client.items():
        assert charged == {
            "up": sum(w["up"] for w in wire if w["client"] == client),
            "down": sum(w["down"] for w in wire if w["client"] == client),
        }
    # the secure vector is one int64 count vector per client: 3 x its npy size + meta "{}"
    sent = [w for w in wire if w["action"] == "counts"]
    assert [w["arrays"] for w in sent] == [[("int64", [10])]] * 3
    assert counts[0]["bytes_up"] == 3 * (npy_bytes([np.zeros(10, np.int64)]) + len("{}"))
    # ... and the same totals, log and ledger as the plain run, but for the secure flags
    assert (secure.bytes_up, secure.bytes_down) == (plain.bytes_up, plain.bytes_down)
    assert secure.bytes_per_client == plain.bytes_per_client

    def without(entries, *keys):
        return [{k: v for k, v in e.items() if k not in keys} for e in entries]

    assert without(secure.log, "seconds", "secure") == without(plain.log, "seconds", "secure")
    assert without(secure.ledger, "secure") == without(plain.ledger, "secure")
    assert [e["secure"] for e in secure.ledger] == [False, False, True, False]
    ledger = next(e for e in secure.ledger if e["kind"] == "counts")
    assert ledger["summed"] and ledger["n_clients"] == len(sent)
    assert ledger["arrays"] == [{"dtype": "int64", "shapes": [[10]]}]


# ---------------------------------------------------------------------------- Ray temp dir
def test_ray_tmpdir_length_is_checked_in_bytes_of_the_absolute_path(tmp_path, monkeypatch):
    # Ray's socket names add 70 bytes under its temp dir and a Unix socket path holds 107:
    # at most 37 bytes of directory
    assert runners.RAY_SOCKET_SUFFIX == 70
    check_ray_tmpdir("/tmp/r")
    check_ray_tmpdir("/tmp/" + "r" * 32)  # 37 bytes
    with pytest.raises(ValueError, match=r"too long \(38 bytes\).*at most 37 bytes"):
        check_ray_tmpdir("/tmp/" + "r" * 33)
    # bytes, not characters: 'é' is two bytes in UTF-8
    check_ray_tmpdir("/tmp/" + "r" * 30 + "é")  # 36 characters, 37 bytes
    with pytest.raises(ValueError, match=r"\(38 bytes\)"):
        check_ray_tmpdir("/tmp/" + "r" * 29 + "éé")  # 36 characters, 38 bytes
    # a relative path counts from the working directory
    deep = tmp_path / ("d" * 40)
    deep.mkdir()
    monkeypatch.chdir(deep)
    assert len(os.fsencode(os.path.abspath("r"))) > 37
    with pytest.raises(ValueError, match=r"Ray temp dir 'r' is too long"):
        check_ray_tmpdir("r")


def test_a_ray_run_refuses_a_long_tmpdir_before_starting_ray(parts3, tmp_path, monkeypatch):
    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was about to start")

    monkeypatch.setattr(runners, "run_simulation_quietly", no_ray)
    factory = PartitionedClients(ToyClient, parts3)
    long_dir = tmp_path / ("t" * 60)
    with pytest.raises(ValueError, match="too long"):
        run_protocol(ToyStrategy(), factory, 3, backend="ray", ray_tmpdir=long_dir)
    assert not long_dir.exists()  # refused before anything was created
