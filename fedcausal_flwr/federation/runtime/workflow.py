"""The Flower ServerApp/ClientApp pair every method runs in (in-process, Ray, deployment).

Server side: a Message-API ``ServerApp`` whose ``main`` wraps the method's
:class:`~fedcausal_flwr.federation.core.protocol.ProtocolStrategy` in the Flower adapter
(:class:`~fedcausal_flwr.federation.runtime.adapter.FlowerStrategy`) inside a ``LegacyContext`` and
runs :class:`ProtocolWorkflow`: one Flower round per protocol step, until ``next_request()`` returns
``None`` (no padding rounds); :class:`RunSettings` holds how a run is carried out. Plain steps go
through a fit round with a short poll interval; secure steps of a secure run go through Flower's
``SecAggPlusWorkflow`` with the exact-integer-sum recipe. This is the route on which SecAgg+ works
in Flower 1.42 (legacy Strategy + NumPyClient).

Client side (:mod:`.clientside`, re-exported here): a compat ``ClientApp(client_fn=...)`` building
the method's :class:`~fedcausal_flwr.clients.base.ProtocolClient` for each message, with
:func:`secure_sum_mod`, which hands SecAgg+ stage messages to Flower's ``secaggplus_mod`` and lets
plain ones through.
"""

from __future__ import annotations

import threading
import time
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType
from flwr.common import Code, FitRes, Parameters
from flwr.server import LegacyContext, ServerConfig
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.federation.core.messages import (
    ClientFailure,
    Failure,
    FederationError,
    TooFewClientsError,
)
from fedcausal_flwr.federation.core.protocol import ProtocolRun, ProtocolStrategy
from fedcausal_flwr.federation.runtime.adapter import FlowerStrategy, failure_of
from fedcausal_flwr.federation.runtime.clientside import (  # noqa: F401 - re-exported (the client side)
    CLIENT_MODS,
    PARTITION_ID_KEY,
    ClientFactory,
    client_error_mod,
    make_client_app,
    partition_id_of,
    secure_sum_mod,
)
from fedcausal_flwr.federation.runtime.envelope import EnvelopeError, fitins_record, fitres_of
from fedcausal_flwr.federation.runtime.flower_internals import (
    MAIN_CONFIGS_RECORD,
    MAIN_PARAMS_RECORD,
    Key,
    TrackedSecAggPlusWorkflow,
    start_update_client_manager_thread,
    tune_grid_reply_pulls,
)
from fedcausal_flwr.federation.runtime.secagg_traffic import SecAggTraffic
from fedcausal_flwr.federation.runtime.signed_secagg import SignedSecAggRelay


@dataclass(frozen=True)
class SecureAggConfig:
    """SecAgg+ topology: each client shares its keys with ``num_shares`` neighbours (itself
    included) and ``reconstruction_threshold`` shares recover a dropped client's mask.

    ``None`` (default) is a full mesh (``1.0``: every client is every other's neighbour) with a
    majority threshold ``n // 2 + 1``: a site that signs its keys (:mod:`.signed_secagg`) must
    see every participant, and refuses a round where it does not. A full mesh costs n^2 (at 50
    simulated clients, minutes per round); ``num_shares=k`` (an odd int) gives a simulation
    without site policies Flower's n log n topology. Floats are fractions, as in Flower. The
    quantisation parameters are not configurable: they follow from the number of clients so
    that sums are exact (see :func:`~fedcausal_flwr.federation.core.messages.secure_bound_for`).
    """

    num_shares: int | float | None = None
    reconstruction_threshold: int | float | None = None
    timeout: float | None = None

    def topology(self, n_clients: int) -> tuple[int | float, int | float]:
        """``(num_shares, reconstruction_threshold)`` for a round with ``n_clients``."""
        shares = self.num_shares if self.num_shares is not None else 1.0
        if isinstance(shares, float):  # the neighbours Flower's workflow makes of a fraction
            k = round(shares * n_clients)
            k = n_clients if k <= 2 else k + int(k < n_clients and k % 2 == 0)
        else:
            k = min(int(shares), n_clients)
        threshold = self.reconstruction_threshold
        if threshold is None:
            threshold = k // 2 + 1
        return shares, threshold


@dataclass(frozen=True)
class RunSettings:
    """How a run is carried out, whatever the transport.

    ``num_clients``: nodes to wait for (``None``: every node connected once their number settles);
    ``min_clients``: how many must survive dropouts (default all); ``secure``: summed statistics
    through SecAgg+ (``secure_config`` its topology); ``connect_timeout``: seconds to wait for the
    nodes; ``round_timeout``: seconds a round waits for replies (``None``: no limit);
    ``max_rounds``: stop a protocol still running after this many rounds; ``progress``: hears
    what the server is waiting for; ``entry_point``: how the run was started (its errors spell
    options for it); ``min_sites``: the fewest sites the method declares it needs.
    """

    num_clients: int | None = None
    min_clients: int | None = None
    secure: bool = False
    secure_config: SecureAggConfig | None = None
    connect_timeout: float = 30.0
    round_timeout: float | None = None
    max_rounds: int = 10_000
    progress: Callable[[str], None] | None = None
    entry_point: str = "python"
    min_sites: int = 1


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


class ProtocolWorkflow:
    """Runs a ProtocolStrategy round by round until it is done (see the module docstring)."""

    def __init__(self, settings: RunSettings, poll_interval: float = 0.05):
        self.settings = settings
        self.secure_config = settings.secure_config or SecureAggConfig()
        self.poll_interval = float(poll_interval)

    def __call__(self, grid: Grid, context: Context) -> None:
        if not isinstance(context, LegacyContext):
            raise TypeError(f"expected a LegacyContext, got {type(context).__name__}")
        adapter: FlowerStrategy = context.strategy  # type: ignore[assignment]
        protocol_run = adapter.run
        settings = self.settings
        thread, f_stop, c_done = start_update_client_manager_thread(grid, context.client_manager)
        c_done.wait()
        protocol_run.progress = settings.progress  # the strategy's report() lines go there too
        heartbeat = Heartbeat(settings.progress)
        try:
            nodes = wait_for_nodes(
                grid, settings.num_clients, settings.connect_timeout, progress=settings.progress
            )
            protocol_run.bind(
                num_clients=settings.num_clients or len(nodes),
                min_clients=settings.min_clients,
                secure=settings.secure,
                entry_point=settings.entry_point,
                min_sites=settings.min_sites,
            )
            context.client_manager.all()  # register the connected nodes now
            context.state.array_records[MAIN_PARAMS_RECORD] = ArrayRecord()
            cfg = ConfigRecord({Key.START_TIME: timeit.default_timer()})
            context.state.config_records[MAIN_CONFIGS_RECORD] = cfg
            server_round = 0
            while (request := protocol_run.begin_round(server_round + 1)) is not None:
                server_round += 1
                if server_round > settings.max_rounds:
                    raise FederationError(
                        f"protocol still running after max_rounds={settings.max_rounds} rounds "
                        f"(next action {request.action!r})"
                    )
                cfg[Key.CURRENT_ROUND] = server_round
                started = time.monotonic()
                heartbeat.begin(server_round, request.action)
                if request.secure and protocol_run.secure_mode:
                    self._secure_round(grid, context, protocol_run, server_round)
                else:
                    self._plain_round(grid, context, adapter, server_round)
                if settings.progress is not None:
                    settings.progress(round_summary(protocol_run, server_round, started))
        finally:
            heartbeat.stop()
            f_stop.set()
            thread.join()

    def _plain_round(
        self, grid: Grid, context: LegacyContext, adapter: FlowerStrategy, server_round: int
    ) -> None:
        instructions = adapter.configure_fit(
            server_round,
            Parameters(tensors=[], tensor_type="numpy.ndarray"),
            context.client_manager,
        )
        if not instructions:
            raise FederationError(f"round {server_round}: the strategy selected no clients")
        proxies = {proxy.node_id: proxy for proxy, _ in instructions}
        messages = [
            Message(
                content=fitins_record(fitins),
                dst_node_id=proxy.node_id,
                message_type=MessageType.TRAIN,
                group_id=str(server_round),
            )
            for proxy, fitins in instructions
        ]
        replies = send_and_receive(grid, messages, self.settings.round_timeout, self.poll_interval)
        results: list[tuple[Any, FitRes]] = []
        failures: list[tuple[Any, FitRes] | BaseException] = []
        seen = set()
        for reply in replies:
            node = reply.metadata.src_node_id
            seen.add(node)
            if reply.has_error():
                reason = reply.error.reason or "an error reply without a reason"
                failures.append(ClientFailure(node, reason, reply.error.code))
                continue
            try:
                fitres = fitres_of(reply.content)
            except EnvelopeError as err:  # a site's reply that is not what a site sends
                failures.append(ClientFailure(node, f"a malformed reply: {err}"))
                continue
            if fitres.status.code == Code.OK:
                results.append((proxies[node], fitres))
            else:
                failures.append((proxies[node], fitres))
        for node in proxies:
            if node not in seen:
                failures.append(
                    ClientFailure(node, f"no reply within {self.settings.round_timeout} s")
                )
        adapter.aggregate_fit(server_round, results, failures)

    def _secure_round(
        self, grid: Grid, context: LegacyContext, protocol_run: ProtocolRun, server_round: int
    ) -> None:
        bound = protocol_run.secure_bound
        sec = self.secure_config
        num_shares, threshold = sec.topology(protocol_run.planned_clients())
        workflow = TrackedSecAggPlusWorkflow(
            num_shares=num_shares,
            reconstruction_threshold=threshold,
            max_weight=1.0,
            clipping_range=float(bound),
            quantization_range=2 * bound,
            modulus_range=2**32,
            timeout=sec.timeout if sec.timeout is not None else self.settings.round_timeout,
        )
        poll = self.poll_interval
        traffic = SecAggTraffic(grid, lambda msgs, wait: send_and_receive(grid, msgs, wait, poll))
        try:  # the relay carries the signing sites' signatures (nothing for other nodes)
            workflow(SignedSecAggRelay(traffic), context)  # type: ignore[arg-type]  # a Grid
        finally:
            stages = traffic.by_stage(protocol_run.members.pid_of)
            protocol_run.recorder.record_secagg(server_round, stages)
        if protocol_run.awaiting_replies(server_round):
            state = workflow.last_state
            if state is None:
                raise FederationError(f"round {server_round}: SecAgg+ did not start")
            dead = sorted(state.sampled_node_ids - state.active_node_ids)
            failures = [failure_of(f) for f in state.failures]
            refusals = [f for f in failures if f.refusal is not None]
            text = "; ".join(f.reason for f in failures) or "left the SecAgg+ protocol"
            # SecAgg+ does not say which node an error reply came from: a refusal names its
            # client itself; any other failure is charged to every node that left the protocol
            protocol_run.report_failed_round(
                server_round,
                {node: Failure(None, text) for node in dead},
                refusals or failures,
            )


#: seconds a round runs before a progress line says it is still running (and again after as many)
HEARTBEAT_S = 10.0


class Heartbeat:
    """A line every ``every`` seconds while one round runs long (clients computing, Ray starting):
    a slow run is told from a hung one. A thread of its own, since in-process clients answer in
    the thread that waits; nothing without ``progress``."""

    def __init__(self, progress: Callable[[str], None] | None, every: float = HEARTBEAT_S):
        self.progress, self.every = progress, every
        self.round, self.action, self.since = 0, "", time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def begin(self, server_round: int, action: str) -> None:
        """A round starts: count from now (the first beat comes ``every`` s later)."""
        self.round, self.action, self.since = server_round, action, time.monotonic()
        if self.progress is not None and self._thread is None:
            self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _beat(self) -> None:
        last = (0, 0.0)  # (round, when) of the last beat
        while not self._stop.wait(min(1.0, self.every)):
            server_round, started, now = self.round, self.since, time.monotonic()
            latest = last[1] if last[0] == server_round else started
            if now - latest >= self.every and self.progress is not None:
                self.progress(
                    f"round {server_round} still running: {self.action}, "
                    f"{now - started:.0f} s so far"
                )
                last = (server_round, now)


#: Round-log annotations a progress line shows after the action (where a long run is), in order.
PROGRESS_FIELDS = (
    ("stage", "{}"),
    ("step", "{}"),
    ("depth", "depth {}"),
    ("batch", "batch {}"),
    ("models", "{:,} models"),
)


def round_summary(protocol_run: ProtocolRun, server_round: int, started: float) -> str:
    """One progress line per round: what was asked (and at which stage, depth or batch), of how
    many clients, how many CI tests where the round log counts them, how long it took."""
    entry = protocol_run.recorder.log[-1] if protocol_run.recorder.log else {}
    action = entry.get("action", "?")
    where = [text.format(entry[key]) for key, text in PROGRESS_FIELDS if key in entry]
    status = "" if entry.get("status", "ok") == "ok" else f", {entry['status']}"
    tests = f", {entry['tests']:,} CI tests" if isinstance(entry.get("tests"), int) else ""
    return (
        f"round {server_round}: {', '.join([action, *where])} ({entry.get('n_replies', 0)} of "
        f"{entry.get('n_clients', 0)} clients{tests}{status}) {time.monotonic() - started:.1f} s"
    )


def run_strategy(
    grid: Grid, context: Context, strategy: ProtocolStrategy, settings: RunSettings
) -> None:
    """Run ``strategy`` to completion on ``grid`` (the body of every ServerApp ``main``)."""
    problem = tune_grid_reply_pulls(grid)  # a deployment's Grid: replies are pulled sooner
    if problem and settings.progress is not None:
        settings.progress(problem)
    legacy = LegacyContext(
        context=context,
        config=ServerConfig(num_rounds=settings.max_rounds),
        strategy=FlowerStrategy(strategy),
    )
    ProtocolWorkflow(settings)(grid, legacy)


def make_server_app(
    strategy: ProtocolStrategy | Callable[[Context], ProtocolStrategy],
    settings: RunSettings | None = None,
    *,
    on_finish: Callable[[ProtocolStrategy, Context], None] | None = None,
    **fields: Any,
) -> ServerApp:
    """A ServerApp running ``strategy`` (an object, handed back by closure, or a factory).

    ``settings`` (or its fields as keywords, e.g. ``num_clients=3``) say how the run is carried
    out; ``on_finish(strategy, context)`` runs after the protocol ended, e.g. to write the result.
    """
    if settings is not None and fields:
        raise TypeError("give settings= or its fields as keywords, not both")
    settings = settings or RunSettings(**fields)
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        protocol = strategy if isinstance(strategy, ProtocolStrategy) else strategy(context)
        run_strategy(grid, context, protocol, settings)
        if on_finish is not None:
            on_finish(protocol, context)

    return app
