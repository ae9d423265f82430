"""``federation/core/bookkeeping.py`` alone (no Flower): the ledger's array view and the recorder's
byte totals, per-client charges, round log, dropouts and timing, against hand-computed values."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import fedcausal_flwr.federation.core.bookkeeping as bookkeeping
from fedcausal_flwr.federation.core.bookkeeping import RunRecorder, describe_arrays


def test_describe_arrays_lists_each_position_once():
    assert describe_arrays([]) == []
    assert describe_arrays([[], []]) == []
    replies = [
        [np.zeros(3, np.int64), np.zeros((2, 2))],
        [np.zeros(10, np.int64)],  # a shorter reply: position 1 is described from client 0 only
        [np.zeros(9, np.int64), np.zeros((2, 2))],
    ]
    assert describe_arrays(replies) == [
        {"dtype": "int64", "shapes": [[3], [9], [10]]},  # numeric order, duplicates once
        {"dtype": "float64", "shapes": [[2, 2]]},
    ]
    # mixed dtypes at one position are all listed (sorted); a scalar has the empty shape
    mixed = [[np.zeros(2, np.int64)], [np.zeros(2, np.int32)], [np.float32(1.5)]]
    assert describe_arrays(mixed) == [{"dtype": ["float32", "int32", "int64"], "shapes": [[], [2]]}]


def fake_clock(monkeypatch, *ticks: float) -> None:
    values = iter(ticks)
    monkeypatch.setattr(bookkeeping, "time", SimpleNamespace(perf_counter=lambda: next(values)))


def test_recorder_totals_per_client_charges_and_log(monkeypatch):
    # clock: start_run, round 1 start / end, round 2 start / end, finish_run
    fake_clock(monkeypatch, 100.0, 101.0, 101.25, 102.0, 102.5, 104.75)
    rec = RunRecorder()
    rec.start_run()
    # round 1: nodes 7 and 9 (clients 1 and 0) get 120 B each and answer 30 B and 45 B
    rec.start_round(1, {7: 120, 9: 120})
    assert (rec.bytes_down, rec.bytes_up, rec.rounds) == (240, 0, 1)
    entry = rec.finish_round(1, "hello", "ok", {7: 30, 9: 45}, {7: 1, 9: 0}, secure=False)
    assert entry == {
        "round": 1, "action": "hello", "status": "ok", "secure": False, "n_clients": 2,
        "n_replies": 2, "seconds": 0.25, "bytes_up": 75, "bytes_down": 240,
    }  # fmt: skip
    # round 2: three nodes asked (50 B each; node 5 has no partition id yet), node 9 drops out
    rec.start_round(2, {5: 50, 7: 50, 9: 50})
    entry = rec.finish_round(
        2, "tables", "dropout", {5: 11, 7: 13}, {5: None, 7: 1, 9: 0}, secure=True,
        extra={"level": 3},
    )  # fmt: skip
    assert entry["n_clients"] == 3 and entry["n_replies"] == 2 and entry["secure"] is True
    assert (entry["bytes_up"], entry["bytes_down"], entry["seconds"]) == (24, 150, 0.5)
    assert entry["level"] == 3
    rec.finish_run()
    assert rec.wall_s == pytest.approx(4.75)  # from start_run, not from the first round
    assert (rec.bytes_down, rec.bytes_up, rec.rounds) == (390, 99, 2)
    # the node without a partition id counts in the totals only; a dropped client that was
    # sent bytes is charged for them
    assert dict(rec.per_client) == {
        1: {"up": 30 + 13, "down": 120 + 50},
        0: {"up": 45, "down": 120 + 50},
    }
    assert [e["round"] for e in rec.log] == [1, 2]


def test_rounds_is_the_highest_round_and_annotations_cannot_overwrite(monkeypatch):
    fake_clock(monkeypatch, *np.arange(20.0))
    rec = RunRecorder()
    rec.start_round(3, {})
    rec.start_round(2, {1: 4})  # a late re-issue does not lower the round count
    assert rec.rounds == 3 and rec.bytes_down == 4
    with pytest.raises(ValueError, match=r"may not overwrite \['bytes_up', 'status'\]"):
        rec.finish_round(2, "x", "ok", {}, {}, False, extra={"status": "fine", "bytes_up": 0})
    rec.finish_run()  # ticks: start_run 0, two round starts 1 and 2, the refused close 3
    assert rec.wall_s == 4.0 and rec.log == []


def test_ledger_and_dropouts_record_what_was_seen():
    rec = RunRecorder()
    arrays = [[np.zeros(4, np.int64)], [np.zeros(4, np.int64)]]
    rec.record_ledger(2, "tables", True, True, 2, arrays, ["n", "contributors"])
    rec.record_ledger(3, "prune", False, False, 3, [], [])
    assert rec.ledger == [
        {"round": 2, "kind": "tables", "secure": True, "summed": True, "n_clients": 2,
         "arrays": [{"dtype": "int64", "shapes": [[4]]}], "meta_keys": ["contributors", "n"]},
        {"round": 3, "kind": "prune", "secure": False, "summed": False, "n_clients": 3,
         "arrays": [], "meta_keys": []},
    ]  # fmt: skip
    rec.record_dropout(None, 12, 4, "prune", "no reply")
    rec.record_dropout(2, 13, 4, "prune", "site lost")
    assert rec.dropped == [
        {"client": None, "node": 12, "round": 4, "action": "prune", "reason": "no reply"},
        {"client": 2, "node": 13, "round": 4, "action": "prune", "reason": "site lost"},
    ]
    assert rec.bytes_up == rec.bytes_down == rec.rounds == 0  # the ledger moves no bytes
