"""Who takes part in a run (Flower-free): Flower node ids <-> partition ids, the clients still
alive, the hello reports, and dropouts.

Partition ids are the project's names for clients (sums and logs are in partition order); node ids
are the transport's. A dropped client never comes back within a run: the same request is re-issued
to the survivors, so one protocol step never mixes client sets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fedcausal_flwr.environment import VERSION
from fedcausal_flwr.federation.core.messages import ClientInfo, Request, TooFewClientsError


@dataclass
class Answer:
    """One client's reply as the protocol sees it: partition id, arrays, meta, and the bytes it
    took on the wire (serialised arrays plus the meta JSON)."""

    pid: int
    arrays: list
    meta: dict
    nbytes: int


@dataclass
class Membership:
    """The clients of one run (see the module docstring)."""

    num_clients: int | None = None
    min_clients: int = 1
    info: dict[int, ClientInfo] = field(default_factory=dict)
    alive: set[int] = field(default_factory=set)
    node_of: dict[int, int] = field(default_factory=dict)  # partition id -> node id
    pid_of: dict[int, int] = field(default_factory=dict)  # node id -> partition id
    dead_nodes: set[int] = field(default_factory=set)

    def bind(self, num_clients: int, min_clients: int | None) -> None:
        """How many clients are expected and how many must survive dropouts."""
        if num_clients < 1:
            raise ValueError(f"num_clients must be >= 1, got {num_clients}")
        self.num_clients = int(num_clients)
        self.min_clients = int(num_clients if min_clients is None else min_clients)
        if not 1 <= self.min_clients <= self.num_clients:
            raise ValueError(
                f"min_clients must be in 1..{self.num_clients}, got {self.min_clients}"
            )

    def register(self, answered: Mapping[int, Answer]) -> dict[int, ClientInfo]:
        """The hello reports: one distinct partition id per node, the same package version."""
        seen: dict[int, int] = {}
        for node, answer in sorted(answered.items()):
            if answer.pid in seen:
                raise ValueError(
                    f"two clients report partition id {answer.pid} (nodes {seen[answer.pid]} and "
                    f"{node}); every site needs a distinct partition-id"
                )
            seen[answer.pid] = node
        info = {a.pid: ClientInfo.from_meta(a.meta) for a in answered.values()}
        mine = VERSION
        for pid in sorted(info):
            if info[pid].version != mine:
                raise ValueError(
                    f"client {pid} runs fedcausal-flwr {info[pid].version or '?'} but the server "
                    f"runs {mine}; install the same version on every site"
                )
        self.pid_of = {node: pid for pid, node in seen.items()}
        self.node_of = dict(seen)
        self.alive = set(seen)
        self.info = {pid: info[pid] for pid in sorted(info)}
        return self.info

    def hello_nodes(self, connected: Iterable[int]) -> list[int]:
        """Every connected node not known dead: the hello round asks them all."""
        nodes = sorted(n for n in connected if n not in self.dead_nodes)
        if len(nodes) < self.min_clients:
            raise TooFewClientsError(
                f"only {len(nodes)} clients connected for the hello round; "
                f"min_clients={self.min_clients}"
            )
        return nodes

    def wanted(self, request: Request) -> list[int]:
        """The partition ids a request asks (its ``clients`` or every client alive)."""
        wanted = request.clients if request.clients is not None else sorted(self.alive)
        unknown = [c for c in wanted if c not in self.info]
        if unknown:
            raise ValueError(
                f"request {request.action!r} asks unknown clients {unknown}; "
                f"known clients are {sorted(self.info)}"
            )
        return list(wanted)

    def vanished(self, wanted: Iterable[int], connected: Iterable[int]) -> list[int]:
        """Alive clients of ``wanted`` whose node left the connection list."""
        nodes = set(connected)
        return [c for c in wanted if c in self.alive and self.node_of[c] not in nodes]

    def drop_node(self, node: int, pid: int | None) -> None:
        self.dead_nodes.add(node)
        if pid is not None:
            self.alive.discard(pid)

    def remaining(self, hello_done: bool, asked: Iterable[int]) -> int:
        """Clients left after a dropout (before hello: asked nodes not dead)."""
        if hello_done:
            return len(self.alive)
        return len([n for n in asked if n not in self.dead_nodes])

    def rows(self) -> int:
        """Rows over all clients still alive."""
        return int(sum(self.info[p].n_rows for p in self.alive))

    def describe(self) -> dict[str, Any]:
        return {"clients": len(self.info), "alive": sorted(self.alive)}
