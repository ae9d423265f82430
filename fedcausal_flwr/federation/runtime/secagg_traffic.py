"""What SecAgg+ itself sends, counted apart from the method's payload.

In a secure round Flower's ``SecAggPlusWorkflow`` talks to the clients in four stages: ``setup``
(the server sends the protocol parameters, each client returns two public keys), ``share_keys``
(each client gets its neighbours' public keys and returns encrypted key shares),
``collect_masked_vectors`` (each client gets the shares addressed to it with the method's request
and returns its masked vector) and ``unmask`` (each client gets the lists of surviving and dropped
neighbours and returns the key shares that remove the masks). The method's payload (the request,
and the reply's metadata; a secure reply is charged the size of the vector it contributes, as a
plain reply would be) is counted by the run's bookkeeping as ``bytes_up`` / ``bytes_down``.
Everything SecAgg+ adds lives in one record of each message (Flower's ``secaggplus_configs``),
plus, for sites that sign their keys, the signatures and receipts (:mod:`.signed_secagg`);
:class:`SecAggTraffic` counts those records in every message of the four stages.

Bytes are counted as the run's payload is: the values, not the encoding around them. A bytes
value counts its length (public keys, encrypted shares, masked vectors as ``.npy`` bytes, key
shares), a string its UTF-8 length, a number 8 bytes, a boolean 1, a list the sum of its items;
record keys, message metadata and transport framing are not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flwr.app import ConfigRecord, Message

from fedcausal_flwr.federation.runtime.flower_internals import RECORD_KEY_CONFIGS
from fedcausal_flwr.federation.runtime.signed_secagg import RECORD_PREFIX

#: SecAgg+'s stages in the order the workflow runs them (Flower's stage names).
STAGES = ("setup", "share_keys", "collect_masked_vectors", "unmask")

Exchange = Callable[[list[Message], float | None], list[Message]]


def value_nbytes(value: Any) -> int:
    """Bytes of one record value (see the module docstring)."""
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bool):
        return 1
    if isinstance(value, int | float):
        return 8
    if isinstance(value, list | tuple):
        return sum(value_nbytes(v) for v in value)
    raise TypeError(f"unexpected SecAgg+ record value of type {type(value).__name__}")


def secagg_nbytes(message: Message) -> int:
    """Bytes of the SecAgg+ record of ``message`` and of the signing sites' records
    (:mod:`.signed_secagg`); 0 if it has none, e.g. an error reply."""
    if message.has_error():
        return 0
    return sum(
        value_nbytes(value)
        for name, record in message.content.items()
        if isinstance(record, ConfigRecord)
        and (name == RECORD_KEY_CONFIGS or name.startswith(RECORD_PREFIX))
        for value in record.values()
    )


@dataclass
class StageTraffic:
    """One SecAgg+ stage of one round: bytes sent to and received from each node."""

    stage: str
    down: dict[int, int] = field(default_factory=dict)
    up: dict[int, int] = field(default_factory=dict)


class SecAggTraffic:
    """A Grid for ``SecAggPlusWorkflow`` that counts the SecAgg+ record of every message it
    carries (see the module docstring). ``exchange(messages, timeout)`` sends and waits for the
    replies (the project's push/pull loop; Flower's own ``Grid.send_and_receive`` sleeps 3 s
    between pulls in a deployment); everything else is the wrapped grid's."""

    def __init__(self, grid: Any, exchange: Exchange):
        self._grid = grid
        self._exchange = exchange
        self.stages: list[StageTraffic] = []

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> list[Message]:
        messages = list(messages)
        traffic = StageTraffic(self._stage_of(messages))
        for message in messages:
            node = int(message.metadata.dst_node_id)
            traffic.down[node] = traffic.down.get(node, 0) + secagg_nbytes(message)
        replies = self._exchange(messages, timeout)
        for reply in replies:
            node = int(reply.metadata.src_node_id)
            traffic.up[node] = traffic.up.get(node, 0) + secagg_nbytes(reply)
        self.stages.append(traffic)
        return replies

    @staticmethod
    def _stage_of(messages: list[Message]) -> str:
        for message in messages:
            record = message.content.config_records.get(RECORD_KEY_CONFIGS)
            if record is not None and "stage" in record:
                return str(record["stage"])
        return "unknown"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)

    def by_stage(self, client_ids: Mapping[int, int | None]) -> list[dict]:
        """One entry per stage: bytes up and down in total and per client (partition id, as
        ``client_ids`` maps node ids)."""
        out = []
        for traffic in self.stages:
            clients: dict[int, dict[str, int]] = {}
            for direction, counts in (("up", traffic.up), ("down", traffic.down)):
                for node, n in counts.items():
                    pid = client_ids.get(node)
                    key = -1 if pid is None else int(pid)
                    entry = clients.setdefault(key, {"up": 0, "down": 0})
                    entry[direction] += int(n)
            out.append(
                {
                    "stage": traffic.stage,
                    "n_clients": len(traffic.down),
                    "n_replies": len(traffic.up),
                    "bytes_up": int(sum(traffic.up.values())),
                    "bytes_down": int(sum(traffic.down.values())),
                    "per_client": dict(sorted(clients.items())),
                }
            )
        return out
