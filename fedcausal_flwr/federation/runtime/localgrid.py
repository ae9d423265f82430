"""A synchronous in-process ``Grid``: the same ServerApp and ClientApp objects, no Ray, no threads.

Flower 1.42 has no Ray-free simulation backend. :class:`LocalGrid` implements the public ``Grid``
interface by calling the ClientApp (mods included, so SecAgg+ runs too) directly when the server
pulls replies. Like Flower's runtimes it deep-copies message content (no shared objects between
server and clients), keeps one ``Context`` per node (persisted only when the ClientApp succeeds) and
turns a ClientApp exception into an error reply. The non-public details it needs (the process-global
``TaskIdentity``, message ids, Flower's error code and reason text) come from
:mod:`~fedcausal_flwr.federation.runtime.flower_internals`.
"""

from __future__ import annotations

import copy
import logging
import secrets
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.federation.runtime.flower_internals import (
    CLIENT_APP_RAISED_EXCEPTION,
    client_app_error_reason,
    empty_run,
    set_message_routing,
    set_task_identity,
)

logger = logging.getLogger(__name__)

SERVER_NODE_ID = 0
FIRST_NODE_ID = 1001

ConfigValue = bool | float | int | str


class LocalGrid(Grid):
    """Delivers every message to a ClientApp in the calling thread (see the module docstring)."""

    def __init__(
        self,
        client_app: ClientApp,
        num_nodes: int,
        run_config: Mapping[str, ConfigValue] | None = None,
        node_configs: Sequence[Mapping[str, ConfigValue]] | None = None,
        run_id: int = 1,
    ):
        if num_nodes < 1:
            raise ValueError(f"num_nodes must be >= 1, got {num_nodes}")
        if node_configs is not None and len(node_configs) != num_nodes:
            raise ValueError(f"{len(node_configs)} node configs for {num_nodes} nodes")
        self._run = empty_run(run_id)
        self.client_app = client_app
        self.node_ids = list(range(FIRST_NODE_ID, FIRST_NODE_ID + num_nodes))
        self.contexts = {
            node: Context(
                run_id=run_id,
                node_id=node,
                node_config=dict(
                    node_configs[k]
                    if node_configs is not None
                    else {"partition-id": k, "num-partitions": num_nodes}
                ),
                state=RecordDict(),
                run_config=dict(run_config or {}),
            )
            for k, node in enumerate(self.node_ids)
        }
        self._inbox: dict[str, Message] = {}
        self._replies: dict[str, Message] = {}
        set_task_identity(run_id, SERVER_NODE_ID)

    # ------------------------------------------------------------------ Grid API
    def set_run(self, run: Any) -> None:
        self._run = run

    @property
    def run(self) -> Any:
        return self._run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):
        return Message(
            content, dst_node_id=dst_node_id, message_type=message_type, group_id=group_id, ttl=ttl
        )

    def get_node_ids(self) -> list[int]:
        return list(self.node_ids)

    def push_messages(self, messages: Iterable[Message]) -> list[str]:
        ids = []
        for msg in messages:
            if msg.metadata.dst_node_id not in self.contexts:
                raise ValueError(f"message for unknown node {msg.metadata.dst_node_id}")
            message_id = uuid.uuid4().hex
            set_message_routing(msg.metadata, message_id)
            self._inbox[message_id] = msg
            ids.append(message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> list[Message]:
        out = []
        for message_id in message_ids:
            if message_id in self._inbox:
                self._deliver(message_id)
            if message_id in self._replies:
                out.append(self._replies.pop(message_id))
        return out

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None):
        return self.pull_messages(self.push_messages(messages))

    # ------------------------------------------------------------------ delivery
    def _deliver(self, message_id: str) -> None:
        msg = self._inbox.pop(message_id)
        node = msg.metadata.dst_node_id
        # ignore: flwr 1.42's Message overloads leave out the metadata= form that its __init__
        # accepts and flwr itself uses to copy a message (make_message)
        incoming = Message(  # type: ignore[call-overload]
            content=copy.deepcopy(msg.content), metadata=copy.deepcopy(msg.metadata)
        )
        stored = self.contexts[node]
        context = Context(
            run_id=stored.run_id,
            node_id=node,
            node_config=stored.node_config,
            state=copy.deepcopy(stored.state),
            run_config=stored.run_config,
        )
        try:
            reply = self.client_app(incoming, context)
            self.contexts[node] = context
        except Exception as ex:
            reason = client_app_error_reason(ex)
            logger.debug("node %s raised %s", node, reason, exc_info=ex)
            reply = Message(
                Error(code=CLIENT_APP_RAISED_EXCEPTION, reason=reason),
                reply_to=incoming,
            )
        set_message_routing(reply.metadata, uuid.uuid4().hex, src_node_id=node)
        self._replies[message_id] = reply


def run_local(
    server_app: ServerApp,
    client_app: ClientApp,
    num_nodes: int,
    run_config: Mapping[str, ConfigValue] | None = None,
    node_configs: Sequence[Mapping[str, ConfigValue]] | None = None,
) -> Context:
    """Run a ServerApp against ``num_nodes`` ClientApps synchronously; the server Context. Each
    run gets a fresh run id, as a SuperLink gives one (sites key their audit logs by it)."""
    run_id = secrets.randbits(63) or 1
    grid = LocalGrid(client_app, num_nodes, run_config, node_configs, run_id=run_id)
    context = Context(
        run_id=grid.run.run_id,
        node_id=SERVER_NODE_ID,
        node_config={},
        state=RecordDict(),
        run_config=dict(run_config or {}),
    )
    server_app(grid=grid, context=context)
    return context
