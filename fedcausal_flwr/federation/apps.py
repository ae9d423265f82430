"""The Flower ServerApp/ClientApp pair every method runs in (in-process, Ray, deployment).

Server side: a Message-API ``ServerApp`` whose ``main`` wraps the method's
:class:`~fedcausal_flwr.strategies.base.ProtocolStrategy` in a ``LegacyContext`` and runs
:class:`ProtocolWorkflow`: one Flower round per protocol step, until ``next_request()`` returns
``None`` (no padding rounds). Plain steps go through a fit round with a short poll interval; secure
steps of a secure run go through Flower's ``SecAggPlusWorkflow`` with the exact-integer-sum recipe.
This is the route on which SecAgg+ works in Flower 1.42 (legacy Strategy + NumPyClient).

Client side: a compat ``ClientApp(client_fn=...)`` building the method's
:class:`~fedcausal_flwr.clients.base.ProtocolClient` for each message, with :func:`secure_sum_mod`,
which hands SecAgg+ stage messages to Flower's ``secaggplus_mod`` and lets plain ones through.
"""

from __future__ import annotations

import logging
import math
import time
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import flwr.compat.common.recorddict_compat as compat
from flwr.app import ArrayRecord, ConfigRecord, Context, Message
from flwr.app.message_type import MessageType
from flwr.client.mod import secaggplus_mod
from flwr.clientapp import ClientApp
from flwr.common import Code, Parameters
from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS
from flwr.server import LegacyContext, ServerConfig
from flwr.server.compat.app_utils import start_update_client_manager_thread
from flwr.server.workflow import SecAggPlusWorkflow
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD, Key
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.federation.messages import (
    UNKNOWN_CLIENT,
    ClientFailure,
    FederationError,
    ProtocolError,
    TooFewClientsError,
)

if TYPE_CHECKING:
    from fedcausal_flwr.clients.base import ProtocolClient
    from fedcausal_flwr.strategies.base import ProtocolStrategy

logger = logging.getLogger(__name__)

PARTITION_ID_KEY = "partition-id"
ClientFactory = Callable[[int, Context], "ProtocolClient"]


@dataclass(frozen=True)
class SecureAggConfig:
    """SecAgg+ topology: each client shares its keys with ``num_shares`` neighbours (itself
    included) and ``reconstruction_threshold`` shares recover a dropped client's mask.

    ``None`` (default) picks ``k = min(n, 2 * ceil(log2 n) + 1)`` neighbours and a majority
    threshold ``k // 2 + 1``: cost grows like n log n instead of n^2 (a full mesh at 50 clients
    takes minutes per round). Floats are fractions, as in Flower. The quantisation parameters are
    not configurable: they follow from the number of clients so that sums are exact (see
    :func:`~fedcausal_flwr.federation.messages.secure_clip`).
    """

    num_shares: int | float | None = None
    reconstruction_threshold: int | float | None = None
    timeout: float | None = None

    def topology(self, n_clients: int) -> tuple[int | float, int | float]:
        """``(num_shares, reconstruction_threshold)`` for a round with ``n_clients``."""
        k = min(n_clients, 2 * math.ceil(math.log2(max(n_clients, 2))) + 1)
        shares = self.num_shares if self.num_shares is not None else (1.0 if k >= n_clients else k)
        threshold = self.reconstruction_threshold
        if threshold is None:
            threshold = k // 2 + 1
        return shares, threshold


def secure_sum_mod(msg: Message, ctxt: Context, call_next: Callable) -> Message:
    """Client mod: SecAgg+ stage messages go to ``secaggplus_mod``; all others pass through."""
    if (
        msg.metadata.message_type == MessageType.TRAIN
        and RECORD_KEY_CONFIGS in msg.content.config_records
    ):
        return secaggplus_mod(msg, ctxt, call_next)
    return call_next(msg, ctxt)


def partition_id_of(context: Context) -> int:
    """The site's partition id from ``node_config`` (set by simulation, or passed per site)."""
    if PARTITION_ID_KEY not in context.node_config:
        raise ProtocolError(
            UNKNOWN_CLIENT,
            f"node_config of node {context.node_id} has no '{PARTITION_ID_KEY}'; start the "
            f"SuperNode with --node-config \"{PARTITION_ID_KEY}=<k> data-path='...'\" "
            "(a distinct integer per site)",
        )
    return int(context.node_config[PARTITION_ID_KEY])


def wait_for_nodes(
    grid: Grid,
    required: int | None,
    timeout: float,
    poll: float = 0.1,
    settle: float = 1.0,
    progress: Callable[[str], None] | None = None,
    report_every: float = 5.0,
) -> list[int]:
    """Node ids once ``required`` nodes are connected, else :class:`TooFewClientsError`.

    ``required=None``: every node that connects, once at least one is there and their number has
    not changed for ``settle`` seconds. ``progress`` hears at once how many are awaited, then
    every ``report_every`` seconds how many are connected.
    """
    start = time.monotonic()
    wanted = f"{required}" if required else "any"
    if progress is not None:
        progress(f"waiting up to {timeout:g} s for {wanted} SuperNode(s)")
    last_report = start
    count, since = -1, start
    while True:
        nodes = sorted(grid.get_node_ids())
        now = time.monotonic()
        if len(nodes) != count:
            count, since = len(nodes), now
        if required and len(nodes) >= required:
            return nodes
        if not required and nodes and now - since >= settle:
            if progress is not None:
                progress(f"{len(nodes)} SuperNode(s) connected; running with all of them")
            return nodes
        if now - start >= timeout:
            raise TooFewClientsError(
                f"{len(nodes)} of {wanted} required clients connected after {timeout:g} s"
            )
        if progress is not None and now - last_report >= report_every:
            progress(f"{len(nodes)} of {wanted} SuperNode(s) connected")
            last_report = now
        time.sleep(poll)


def send_and_receive(
    grid: Grid, messages: list[Message], timeout: float | None, poll: float
) -> list[Message]:
    """Push, then pull until every reply is in or ``timeout`` passes (``poll`` s between pulls).

    Replaces ``Grid.send_and_receive``, whose deployment implementation sleeps 3 s between pulls.
    """
    pending = set(grid.push_messages(messages))
    deadline = None if timeout is None else time.monotonic() + timeout
    replies: list[Message] = []
    while pending:
        for reply in grid.pull_messages(list(pending)):
            pending.discard(reply.metadata.reply_to_message_id)
            replies.append(reply)
        if not pending or (deadline is not None and time.monotonic() >= deadline):
            break
        time.sleep(poll)
    return replies


class _TrackedSecAggPlus(SecAggPlusWorkflow):
    """SecAgg+ that keeps its last state, so a halted round's dropped nodes can be named."""

    last_state: Any = None

    def setup_stage(self, grid, context, state):  # noqa: D102
        self.last_state = state
        return super().setup_stage(grid, context, state)


class ProtocolWorkflow:
    """Runs a ProtocolStrategy round by round until it is done (see the module docstring)."""

    def __init__(
        self,
        *,
        num_clients: int | None,
        min_clients: int | None = None,
        secure: bool = False,
        connect_timeout: float = 30.0,
        round_timeout: float | None = None,
        max_rounds: int = 10_000,
        secure_config: SecureAggConfig | None = None,
        poll_interval: float = 0.05,
        progress: Callable[[str], None] | None = None,
    ):
        self.num_clients = None if not num_clients else int(num_clients)
        self.min_clients = min_clients
        self.secure = bool(secure)
        self.progress = progress
        self.connect_timeout = float(connect_timeout)
        self.round_timeout = round_timeout
        self.max_rounds = int(max_rounds)
        self.secure_config = secure_config or SecureAggConfig()
        self.poll_interval = float(poll_interval)

    def __call__(self, grid: Grid, context: Context) -> None:
        if not isinstance(context, LegacyContext):
            raise TypeError(f"expected a LegacyContext, got {type(context).__name__}")
        strategy: ProtocolStrategy = context.strategy  # type: ignore[assignment]
        thread, f_stop, c_done = start_update_client_manager_thread(grid, context.client_manager)
        c_done.wait()
        try:
            nodes = wait_for_nodes(
                grid, self.num_clients, self.connect_timeout, progress=self.progress
            )
            strategy.bind_run(
                num_clients=self.num_clients or len(nodes),
                min_clients=self.min_clients,
                secure=self.secure,
            )
            context.client_manager.all()  # register the connected nodes now
            context.state.array_records[MAIN_PARAMS_RECORD] = ArrayRecord()
            cfg = ConfigRecord({Key.START_TIME: timeit.default_timer()})
            context.state.config_records[MAIN_CONFIGS_RECORD] = cfg
            server_round = 0
            while (request := strategy.begin_round(server_round + 1)) is not None:
                server_round += 1
                if server_round > self.max_rounds:
                    raise FederationError(
                        f"protocol still running after max_rounds={self.max_rounds} rounds "
                        f"(next action {request.action!r})"
                    )
                cfg[Key.CURRENT_ROUND] = server_round
                if request.secure and strategy.secure_mode:
                    self._secure_round(grid, context, strategy, server_round)
                else:
                    self._plain_round(grid, context, strategy, server_round)
        finally:
            f_stop.set()
            thread.join()

    def _plain_round(
        self, grid: Grid, context: LegacyContext, strategy: ProtocolStrategy, server_round: int
    ) -> None:
        instructions = strategy.configure_fit(
            server_round,
            Parameters(tensors=[], tensor_type="numpy.ndarray"),
            context.client_manager,
        )
        if not instructions:
            raise FederationError(f"round {server_round}: the strategy selected no clients")
        proxies = {proxy.node_id: proxy for proxy, _ in instructions}  # type: ignore[attr-defined]
        messages = [
            Message(
                content=compat.fitins_to_recorddict(fitins, True),
                dst_node_id=proxy.node_id,  # type: ignore[attr-defined]
                message_type=MessageType.TRAIN,
                group_id=str(server_round),
            )
            for proxy, fitins in instructions
        ]
        replies = send_and_receive(grid, messages, self.round_timeout, self.poll_interval)
        results, failures = [], []
        seen = set()
        for reply in replies:
            node = reply.metadata.src_node_id
            seen.add(node)
            if reply.has_error():
                failures.append(ClientFailure(node, reply.error.reason))
                continue
            fitres = compat.recorddict_to_fitres(reply.content, keep_input=False)
            if fitres.status.code == Code.OK:
                results.append((proxies[node], fitres))
            else:
                failures.append((proxies[node], fitres))
        for node in proxies:
            if node not in seen:
                failures.append(ClientFailure(node, f"no reply within {self.round_timeout} s"))
        strategy.aggregate_fit(server_round, results, failures)

    def _secure_round(
        self, grid: Grid, context: LegacyContext, strategy: ProtocolStrategy, server_round: int
    ) -> None:
        clip = strategy.secure_bound
        sec = self.secure_config
        num_shares, threshold = sec.topology(strategy.planned_clients())
        workflow = _TrackedSecAggPlus(
            num_shares=num_shares,
            reconstruction_threshold=threshold,
            max_weight=1.0,
            clipping_range=float(clip),
            quantization_range=2 * clip,
            modulus_range=2**32,
            timeout=sec.timeout if sec.timeout is not None else self.round_timeout,
        )
        workflow(grid, context)
        if strategy.awaiting_replies(server_round):
            state = workflow.last_state
            if state is None:
                raise FederationError(f"round {server_round}: SecAgg+ did not start")
            dead = sorted(state.sampled_node_ids - state.active_node_ids)
            reasons = [str(f) for f in state.failures] or ["left the SecAgg+ protocol"]
            strategy.report_failed_round(
                server_round, {node: "; ".join(reasons) for node in dead}, reasons
            )


def run_strategy(
    grid: Grid,
    context: Context,
    strategy: ProtocolStrategy,
    *,
    num_clients: int | None,
    min_clients: int | None = None,
    secure: bool = False,
    secure_config: SecureAggConfig | None = None,
    connect_timeout: float = 30.0,
    round_timeout: float | None = None,
    max_rounds: int = 10_000,
    progress: Callable[[str], None] | None = None,
) -> None:
    """Run ``strategy`` to completion on ``grid`` (the body of every ServerApp ``main``).

    ``num_clients=None``: run with every node connected once their number settles.
    """
    legacy = LegacyContext(
        context=context, config=ServerConfig(num_rounds=max_rounds), strategy=strategy
    )
    ProtocolWorkflow(
        num_clients=num_clients,
        min_clients=min_clients,
        secure=secure,
        connect_timeout=connect_timeout,
        round_timeout=round_timeout,
        max_rounds=max_rounds,
        secure_config=secure_config,
        progress=progress,
    )(grid, legacy)


def make_server_app(
    strategy: ProtocolStrategy | Callable[[Context], ProtocolStrategy],
    *,
    num_clients: int,
    min_clients: int | None = None,
    secure: bool = False,
    secure_config: SecureAggConfig | None = None,
    connect_timeout: float = 30.0,
    round_timeout: float | None = None,
    max_rounds: int = 10_000,
    on_finish: Callable[[ProtocolStrategy, Context], None] | None = None,
) -> ServerApp:
    """A ServerApp running ``strategy`` (an object, handed back by closure, or a factory).

    ``on_finish(strategy, context)`` runs after the protocol ended, e.g. to write the result.
    """
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        strat = strategy if hasattr(strategy, "begin_round") else strategy(context)  # type: ignore[operator]
        run_strategy(
            grid,
            context,
            strat,  # type: ignore[arg-type]
            num_clients=num_clients,
            min_clients=min_clients,
            secure=secure,
            secure_config=secure_config,
            connect_timeout=connect_timeout,
            round_timeout=round_timeout,
            max_rounds=max_rounds,
        )
        if on_finish is not None:
            on_finish(strat, context)  # type: ignore[arg-type]

    return app


def make_client_app(client_factory: ClientFactory) -> ClientApp:
    """A ClientApp building ``client_factory(partition_id, context)`` for every message."""

    def client_fn(context: Context):
        partition_id = partition_id_of(context)
        client = client_factory(partition_id, context)
        if getattr(client, "partition_id", None) != partition_id:
            raise ValueError(
                f"client factory returned {type(client).__name__} with partition_id "
                f"{getattr(client, 'partition_id', None)} for partition {partition_id}"
            )
        if client.context is None:
            client.context = context
        return client.to_client()

    return ClientApp(client_fn=client_fn, mods=[secure_sum_mod])
