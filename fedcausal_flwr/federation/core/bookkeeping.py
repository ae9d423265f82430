"""Run bookkeeping shared by all methods: round log, bytes, dropouts and the privacy ledger.

Flower-free so it can be unit-tested and reused by any driver. Bytes are counted as they travel:
serialised arrays (``Parameters.tensors``, i.e. ``.npy`` bytes) plus the JSON strings of the action,
payload and reply metadata: the method's payload (``bytes_up`` / ``bytes_down``; for a securely
summed reply each client is charged the size of the vector it contributes). What SecAgg+ itself
sends (public keys, encrypted key shares, masked vectors, unmasking shares) is counted apart, per
round and stage, as ``secagg_bytes_up`` / ``secagg_bytes_down``
(:mod:`fedcausal_flwr.federation.runtime.secagg_traffic` measures it).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def describe_arrays(per_client: Sequence[Sequence[np.ndarray]]) -> list[dict]:
    """Ledger view of replies: for each array position, its dtype(s) and distinct shapes."""
    width = max((len(a) for a in per_client), default=0)
    out = []
    for k in range(width):
        present = [arrs[k] for arrs in per_client if len(arrs) > k]
        shapes = [list(t) for t in sorted({tuple(int(s) for s in a.shape) for a in present})]
        dtypes = sorted({str(a.dtype) for a in present})
        out.append({"dtype": dtypes[0] if len(dtypes) == 1 else dtypes, "shapes": shapes})
    return out


@dataclass
class RunRecorder:
    """Accumulates everything a :class:`~fedcausal_flwr.result.Result` reports about a run."""

    log: list[dict] = field(default_factory=list)
    ledger: list[dict] = field(default_factory=list)
    dropped: list[dict] = field(default_factory=list)
    bytes_up: int = 0
    bytes_down: int = 0
    secagg: list[dict] = field(default_factory=list)
    secagg_bytes_up: int = 0
    secagg_bytes_down: int = 0
    per_client: dict[int, dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: {"up": 0, "down": 0})
    )
    rounds: int = 0
    _t_run: float | None = None
    wall_s: float = 0.0
    _t_round: float = 0.0
    _round_down: dict[int, int] = field(default_factory=dict)

    # ------------------------------------------------------------------ run
    def start_run(self) -> None:
        if self._t_run is None:
            self._t_run = time.perf_counter()

    def finish_run(self) -> None:
        if self._t_run is not None:
            self.wall_s = time.perf_counter() - self._t_run

    # ------------------------------------------------------------------ rounds
    def start_round(self, server_round: int, down_bytes: Mapping[int, int]) -> None:
        """``down_bytes``: bytes sent to each addressed client (keyed by client key)."""
        self.start_run()
        self.rounds = max(self.rounds, server_round)
        self._t_round = time.perf_counter()
        self._round_down = dict(down_bytes)
        self.bytes_down += int(sum(down_bytes.values()))

    def finish_round(
        self,
        server_round: int,
        action: str,
        status: str,
        up_bytes: Mapping[int, int],
        client_ids: Mapping[int, int | None],
        secure: bool,
        extra: Mapping | None = None,
    ) -> dict:
        """Close the round; ``client_ids`` maps the client keys used above to partition ids."""
        for key, n in self._round_down.items():
            pid = client_ids.get(key)
            if pid is not None:
                self.per_client[pid]["down"] += int(n)
        for key, n in up_bytes.items():
            pid = client_ids.get(key)
            if pid is not None:
                self.per_client[pid]["up"] += int(n)
        round_up = int(sum(up_bytes.values()))
        self.bytes_up += round_up
        entry = {
            "round": int(server_round),
            "action": action,
            "status": status,
            "secure": bool(secure),
            "n_clients": len(self._round_down),
            "n_replies": len(up_bytes),
            "seconds": round(time.perf_counter() - self._t_round, 6),
            "bytes_up": round_up,
            "bytes_down": int(sum(self._round_down.values())),
        }
        if extra:
            clash = set(extra) & set(entry)
            if clash:
                raise ValueError(f"log annotations may not overwrite {sorted(clash)}")
            entry.update(extra)
        self.log.append(entry)
        return entry

    def record_ledger(
        self,
        server_round: int,
        kind: str,
        secure: bool,
        summed: bool,
        n_clients: int,
        arrays: Sequence[Sequence[np.ndarray]],
        meta_keys: Sequence[str],
    ) -> None:
        """One entry per message kind the server received.

        ``summed``: the method reads only the sum over the clients; ``secure``: SecAgg+ summed
        it, so the server held the sum alone (``summed`` without ``secure``: the server received
        every client's reply and added them itself; :mod:`fedcausal_flwr.server_held` says which).
        """
        self.ledger.append(
            {
                "round": int(server_round),
                "kind": kind,
                "secure": bool(secure),
                "summed": bool(summed),
                "n_clients": int(n_clients),
                "arrays": describe_arrays(arrays),
                "meta_keys": sorted(meta_keys),
            }
        )

    def note_noise(self, server_round: int, kind: str, noise: Mapping[str, Any]) -> None:
        """The noise a differentially private run added to the sum it received in
        ``server_round`` (``mechanism``, ``variance`` per cell, the release's ``rho``): kept on
        that ledger entry, so the ledger says what the server saw and what it published."""
        for entry in reversed(self.ledger):
            if entry["round"] == server_round and entry["kind"] == kind:
                entry["noise"] = dict(noise)
                return
        raise ValueError(f"no ledger entry {kind!r} in round {server_round} to note noise on")

    def record_secagg(self, server_round: int, stages: Sequence[Mapping]) -> None:
        """SecAgg+'s own traffic in a secure round: one entry per stage (``stage``,
        ``n_clients``, ``n_replies``, ``bytes_up``, ``bytes_down``, ``per_client``)."""
        for stage in stages:
            self.secagg.append({"round": int(server_round), **stage})
            self.secagg_bytes_up += int(stage["bytes_up"])
            self.secagg_bytes_down += int(stage["bytes_down"])

    def record_dropout(
        self, client: int | None, node: int, server_round: int, action: str, reason: str
    ) -> None:
        self.dropped.append(
            {
                "client": client,
                "node": int(node),
                "round": int(server_round),
                "action": action,
                "reason": reason,
            }
        )
