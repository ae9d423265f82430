"""The Flower-free protocol core: what a method implements and the run that drives it.

A method subclasses :class:`ProtocolStrategy` and writes three hooks:

* :meth:`~ProtocolStrategy.next_request` returns the next :class:`Request` (or ``None`` when done);
* :meth:`~ProtocolStrategy.handle_replies` consumes the replies to it, sorted by partition id (or
  one summed reply with ``client == SUMMED`` for a ``secure`` request);
* :meth:`~ProtocolStrategy.result_payload` returns the method's result (``graph``, ``variables``,
  ``metrics`` keys go into the :class:`Result`; everything else into ``Result.extra``).

Its :class:`ProtocolRun` (``strategy.protocol_run``) owns everything else, as separate
components: the built-in ``hello`` round and who takes part (:class:`~.membership.Membership`),
dropouts (the same request is re-issued to the survivors), exact sums (:mod:`.sums`), and bytes,
the per-round log and the privacy ledger (:class:`~.bookkeeping.RunRecorder`). A transport drives
the run with :meth:`ProtocolRun.begin_round`, :meth:`ProtocolRun.open_round` and
:meth:`ProtocolRun.close_round`; Flower's is :mod:`fedcausal_flwr.federation.runtime.adapter`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

import numpy as np

from fedcausal_flwr.data.fingerprint import combine_fingerprints
from fedcausal_flwr.evidence import Evidence
from fedcausal_flwr.federation.core.bookkeeping import RunRecorder
from fedcausal_flwr.federation.core.input_checks import InputNeeds, check_client_inputs
from fedcausal_flwr.federation.core.membership import Answer, Membership
from fedcausal_flwr.federation.core.messages import (
    CONTRIBUTORS,
    HELLO,
    SUMMED,
    UNKNOWN_CLIENT,
    ClientInfo,
    ClientProtocolError,
    Failure,
    FederationError,
    Reply,
    Request,
    SitePolicyError,
    TooFewClientsError,
    secure_bound_for,
)
from fedcausal_flwr.federation.core.records import HELLO_MAX_LEVELS, HelloRequest
from fedcausal_flwr.federation.core.site_policy import SEARCH_ENDING_KEYS
from fedcausal_flwr.federation.core.sums import decode_secure_mean, plain_sum
from fedcausal_flwr.result import Result


class RunState(enum.Enum):
    """Where a run is: not bound to a federation yet, in hello, running the method, finished."""

    UNBOUND = "unbound"
    HELLO = "hello"
    RUNNING = "running"
    FINISHED = "finished"


class ProtocolStrategy:
    """Base class of every method's server side (Flower-free). See the module docstring."""

    #: Method name stored in ``Result.method`` (defaults to the class name); a class attribute
    #: that a strategy may set per instance (e.g. ``pc-vote`` / ``fci-vote``).
    name: str = ""
    #: Clients report the level set of a non-float column only if it has at most this many values.
    hello_max_levels: ClassVar[int] = HELLO_MAX_LEVELS
    #: What the method needs of the clients' data, checked after hello before the first step
    #: (:mod:`~fedcausal_flwr.federation.core.input_checks`); a strategy whose needs depend on its
    #: options overrides :meth:`input_needs`. The base protocol tests nothing, so it does not
    #: refuse a constant column; a method's own declaration does (``InputNeeds()``'s default).
    needs: ClassVar[InputNeeds] = InputNeeds(varying=False)

    def __init__(self) -> None:
        self.protocol_run = ProtocolRun(self)

    @property
    def entry_point(self) -> str:
        """The entry point whose spelling this run's errors use for options (``python``,
        ``cli``, ``config``): a fact of the run, bound by the runtime before the first round."""
        return self.protocol_run.entry_point

    # ================================================================== hooks for subclasses
    def next_request(self) -> Request | None:
        """The next protocol step, or ``None`` when the protocol is finished."""
        raise NotImplementedError

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        """Consume the replies to ``request`` (sorted by partition id; one ``SUMMED`` if secure)."""
        raise NotImplementedError

    def result_payload(self) -> dict:
        """Method result: optional ``graph``/``variables``/``metrics`` plus any extra keys."""
        return {}

    def privacy_plan(self) -> dict[str, Any] | None:
        """What a differentially private run plans to spend at each site
        (:class:`~fedcausal_flwr.privacy.charges.PrivacyPlan`, encoded; sent with
        ``hello``). None: the run adds no noise."""
        return None

    def stop_search(self, refusal: str) -> bool:
        """A site refused the pending request for a reason that ends a search, not a run (it
        would cross the site's privacy budget, or sum without every site of the site's roster;
        ``refusal``: the site's words). True: the method ends its search with what it has
        learned (its next request is None); False (default): the refusal stops the run."""
        return False

    def input_needs(self) -> InputNeeds:
        """What this method (with its options) needs of the clients' data."""
        return self.needs

    def validate_clients(self, info: dict[int, ClientInfo]) -> None:
        """Method-specific checks of the hello reports, after the input check of
        :meth:`input_needs` passed; raise a clear error. Default: nothing more."""

    def on_clients_dropped(self, dropped: list[int]) -> None:
        """Called after clients dropped out, before the pending request is re-issued to the
        survivors. Default: nothing. Call :meth:`retract_request` here to rebuild it instead."""

    # ================================================================== helpers for subclasses
    @property
    def client_info(self) -> dict[int, ClientInfo]:
        """The hello reports by partition id."""
        return self.protocol_run.members.info

    @client_info.setter
    def client_info(self, info: dict[int, ClientInfo]) -> None:
        self.protocol_run.members.info = info

    @property
    def alive_clients(self) -> list[int]:
        """Partition ids still taking part, ascending."""
        return sorted(self.protocol_run.members.alive)

    @property
    def current_round(self) -> int:
        return self.protocol_run.round

    @property
    def variables(self) -> list[str]:
        """Column names of the first client (the common variable set for most methods)."""
        if not self.client_info:
            return []
        return list(self.client_info[min(self.client_info)].columns)

    @property
    def n_total(self) -> int:
        """Rows over all clients still alive."""
        return self.protocol_run.members.rows()

    @property
    def secure_bound(self) -> int:
        """C of the exact-sum recipe: the largest |value| a secure reply may hold."""
        return self.protocol_run.secure_bound

    @property
    def secure_mode(self) -> bool:
        """Whether this run sums its secure requests through SecAgg+."""
        return self.protocol_run.secure_mode

    @property
    def recorder(self) -> RunRecorder:
        return self.protocol_run.recorder

    @property
    def site_cell_cap(self) -> int | None:
        """The most cells one request may make any site allocate (their policies'
        ``max-request-cells``, reported in hello; None: no site caps it)."""
        caps = [i.max_request_cells for i in self.client_info.values() if i.max_request_cells]
        return min(caps, default=None)

    def global_levels(self) -> dict[str, list | None]:
        """Union of the clients' level sets per column (``None`` if any client reported none;
        a client without a value in the column adds nothing)."""
        merged: dict[str, list | None] = {}
        for pid in sorted(self.client_info):
            info = self.client_info[pid]
            for col, levels in info.levels.items():
                if col in merged and merged[col] is None:
                    continue
                if info.n_rows and info.n_missing.get(col, 0) == info.n_rows:
                    merged.setdefault(col, [])
                    continue
                if levels is None:
                    merged[col] = None
                else:
                    merged[col] = sorted(set(merged.get(col) or []) | set(levels))
        return merged

    def missing_report(self, mode: str) -> dict[str, Any]:
        """The result's record of missing values: the ``missing`` mode and, per client and
        column, how many values were missing (from the hello reports; columns without any are
        left out)."""
        counts = {
            str(pid): {col: n for col, n in info.n_missing.items() if n}
            for pid, info in sorted(self.client_info.items())
        }
        return {"missing": mode, "missing_values": {c: m for c, m in counts.items() if m}}

    def retract_request(self) -> None:
        """Drop the pending request; the next round calls :meth:`next_request` again."""
        self.protocol_run.pending = None

    def annotate(self, **fields: Any) -> None:
        """Add fields to the current round's log entry (call from :meth:`handle_replies`)."""
        self.protocol_run.annotations.update(fields)

    def report(self, line: str) -> None:
        """Tell whoever follows the run (the command line's progress lines) about a long step
        the server runs between rounds, such as IOD's enumeration; silent when no one listens."""
        if self.protocol_run.progress is not None:
            self.protocol_run.progress(line)

    def build_result(self, config: Mapping[str, Any] | None = None) -> Result:
        """The :class:`Result`: the method's payload plus the run's bookkeeping."""
        return self.protocol_run.build_result(config)


class ProtocolRun:
    """The state machine that drives one :class:`ProtocolStrategy` (see the module docstring).

    One run per strategy object. A transport calls, every round: :meth:`begin_round` (the request,
    or ``None`` when finished), :meth:`open_round` (whom to ask), then :meth:`close_round` with the
    answers and failures, or :meth:`report_failed_round` when the transport itself gave up.
    """

    def __init__(self, protocol: ProtocolStrategy):
        self.protocol = protocol
        self.members = Membership()
        self.recorder = RunRecorder()
        self.state = RunState.UNBOUND
        self.secure_mode = False
        self.pending: Request | None = None
        self.round = 0
        self.begun_round = 0
        self.opened_round = 0
        self.closed_round = 0
        self.asked: dict[int, int | None] = {}  # node id -> partition id (None before hello)
        self.annotations: dict[str, Any] = {}
        #: set by the transport: hears :meth:`ProtocolStrategy.report` lines
        self.progress: Callable[[str], None] | None = None
        self._secure_bound = 0
        #: how the run was started (its errors spell options for it) and the fewest sites the
        #: method declares: bound with the run
        self.entry_point = "python"
        self.min_sites = 1

    # ================================================================== set-up
    def bind(
        self, *, num_clients: int, min_clients: int | None, secure: bool,
        entry_point: str = "python", min_sites: int = 1,
    ) -> None:  # fmt: skip
        """Set by the runtime before the first round."""
        self.members.bind(num_clients, min_clients)
        self.secure_mode = bool(secure)
        self.entry_point, self.min_sites = entry_point, int(min_sites)
        if self.state is RunState.UNBOUND:
            self.state = RunState.HELLO

    def follow(self, leader: ProtocolRun) -> None:
        """Run as one part of ``leader``'s run (a replicate of the federated bootstrap): the same
        clients, hello reports, secure mode and bound, and past hello."""
        self.members = leader.members
        self.secure_mode = leader.secure_mode
        self.entry_point, self.min_sites = leader.entry_point, leader.min_sites
        self._secure_bound = leader._secure_bound
        self.state = RunState.RUNNING

    @property
    def finished(self) -> bool:
        return self.state is RunState.FINISHED

    @property
    def secure_bound(self) -> int:
        """C of the exact-sum recipe, fixed after hello from the number of clients then (dropouts
        only make sums safer), and enforced identically in plain runs."""
        if self.state in (RunState.UNBOUND, RunState.HELLO):
            raise FederationError("the secure bound is known only after the hello round")
        return self._secure_bound

    # ================================================================== rounds
    def begin_round(self, server_round: int) -> Request | None:
        """The request of this round: a re-issue after a dropout, hello, or ``next_request()``."""
        if self.state is RunState.UNBOUND:
            raise FederationError("bind the run to a federation (bind()) before the first round")
        self.recorder.start_run()
        self.round = server_round
        self.begun_round = server_round
        if self.pending is None and self.state is not RunState.FINISHED:
            if self.state is RunState.HELLO:
                self.pending = Request(
                    HELLO,
                    HelloRequest(
                        self.protocol.hello_max_levels, privacy=self.protocol.privacy_plan()
                    ),
                )
            else:
                request = self.protocol.next_request()
                if request is not None and not isinstance(request, Request):
                    raise TypeError(
                        f"{type(self.protocol).__name__}.next_request must return a Request or "
                        f"None, got {type(request).__name__}"
                    )
                if request is not None and request.action == HELLO:
                    raise ValueError(f"action {HELLO!r} is reserved for the built-in hello round")
                self.pending = request
                if request is None:
                    self.state = RunState.FINISHED
                    self.recorder.finish_run()
        return self.pending

    def planned_clients(self) -> int:
        """How many clients the pending request will ask (before any dropout in the round)."""
        request = self.pending
        if request is None:
            return 0
        if self.state is RunState.HELLO:
            return self.members.num_clients or 0
        wanted = request.clients if request.clients is not None else self.members.alive
        return len([c for c in wanted if c in self.members.alive])

    def awaiting_replies(self, server_round: int) -> bool:
        """True if round ``server_round`` was opened but never closed (transport halted)."""
        return self.opened_round == server_round and self.closed_round < server_round

    def open_round(self, server_round: int, connected: Iterable[int]) -> list[int]:
        """The node ids to ask this round (nodes that left the connection list are dropped)."""
        request = self.pending
        if request is None:
            return []
        self.round = server_round
        self.annotations = {}
        connected = list(connected)
        if self.state is RunState.HELLO:
            return self.members.hello_nodes(connected)
        wanted = self.members.wanted(request)
        gone = self.members.vanished(wanted, connected)
        if gone:
            self.asked = {self.members.node_of[c]: c for c in gone}
            self.recorder.start_round(server_round, {})
            self._drop(
                server_round,
                [self.members.node_of[c] for c in gone],
                {self.members.node_of[c]: Failure(None, "node no longer connected") for c in gone},
                [],
                {},
            )
        targets = [c for c in wanted if c in self.members.alive]
        if not targets:
            raise TooFewClientsError(
                f"request {request.action!r} asks clients {wanted}, none of which is still alive"
            )
        return [self.members.node_of[c] for c in targets]

    def start_round(self, server_round: int, down_bytes: Mapping[int, int]) -> int:
        """Record that the pending request went to the nodes of ``down_bytes`` (bytes each);
        returns the secure bound the clients must respect (0 for a plain request)."""
        request = self.pending
        if request is None:
            raise FederationError(f"round {server_round}: nothing to send")
        if request.secure and self.secure_mode and len(down_bytes) < 2:
            raise FederationError(
                f"secure request {request.action!r} in round {server_round} needs at least 2 "
                f"clients for SecAgg+, but only {len(down_bytes)} would take part"
            )
        self.asked = {node: self.members.pid_of.get(node) for node in down_bytes}
        self.opened_round = server_round
        self.recorder.start_round(server_round, down_bytes)
        return self._secure_bound if request.secure else 0

    def close_round(
        self,
        server_round: int,
        answered: Mapping[int, Answer],
        failed_nodes: Mapping[int, Failure],
        anonymous: list[Failure],
    ) -> None:
        """Consume a round's answers (node id -> :class:`Answer`) and failures (node id ->
        :class:`Failure`, plus failures whose node is unknown). A refusal stops the run; any
        other failure drops its client; a malformed reply stops the run naming its client."""
        request = self.pending
        if request is None:
            raise FederationError(f"round {server_round}: replies arrived but nothing was asked")
        self.closed_round = server_round
        failures = [*failed_nodes.values(), *anonymous]
        if self.stopped_by_sites(server_round, failures):
            return
        self.raise_on_protocol_errors(server_round, failures)
        for node, answer in answered.items():
            if node not in self.asked:
                raise FederationError(f"round {server_round}: reply from node {node}, not asked")
            known = self.members.pid_of.get(node)
            if known is not None and known != answer.pid:
                raise FederationError(
                    f"node {node} was client {known} but now says client {answer.pid}"
                )
        up_bytes = {node: a.nbytes for node, a in answered.items()}
        missing = [node for node in self.asked if node not in answered]
        if missing:
            self._drop(server_round, missing, failed_nodes, anonymous, up_bytes)
            return
        if request.action == HELLO:
            self._finish_hello(server_round, answered, up_bytes)
        else:
            self.check_answers(server_round, request, answered)
            replies = self._replies(server_round, request, answered)
            self.protocol.handle_replies(request, replies)
            self._close(server_round, "ok", up_bytes)
        self.pending = None

    def report_failed_round(
        self, server_round: int, failed_nodes: Mapping[int, Failure], anonymous: list[Failure]
    ) -> None:
        """The transport could not complete a round (e.g. SecAgg+ halted): drop and re-issue."""
        failures = [*failed_nodes.values(), *anonymous]
        if self.stopped_by_sites(server_round, failures):
            return
        self.raise_on_protocol_errors(server_round, failures)
        nodes = [n for n in failed_nodes if n in self.asked]
        if not nodes:
            action = repr(self.pending.action) if self.pending is not None else "no request"
            reasons = "; ".join(f.text for f in anonymous) or "no reason given"
            raise FederationError(
                f"round {server_round} ({action}) failed without an identifiable client: {reasons}"
            )
        self._drop(server_round, nodes, dict(failed_nodes), anonymous, up_bytes={})

    # ================================================================== result
    def build_result(self, config: Mapping[str, Any] | None = None) -> Result:
        """Assemble the :class:`Result` (method payload + bookkeeping); ``config["data"]`` gains
        the number of clients and the data fingerprint the clients reported in hello."""
        payload = dict(self.protocol.result_payload())
        graph = payload.pop("graph", None)
        variables = payload.pop("variables", None)
        metrics = payload.pop("metrics", {})
        # a search's per-pair evidence (a method's own "evidence" output, if any, stays in extra)
        evidence = payload.get("evidence")
        evidence = payload.pop("evidence") if isinstance(evidence, Evidence) else None
        rec = self.recorder
        info = self.members.info
        config = dict(config or {})
        data = dict(config.get("data") or {})
        data["clients"] = len(info)
        data["fingerprint"] = combine_fingerprints(info[pid].fingerprint for pid in sorted(info))
        config["data"] = data
        return Result(
            method=self.protocol.name or type(self.protocol).__name__,
            config=config,
            variables=list(self.protocol.variables if variables is None else variables),
            graph=graph,
            metrics=dict(metrics),
            rounds=rec.rounds,
            bytes_up=rec.bytes_up,
            bytes_down=rec.bytes_down,
            wall_s=rec.wall_s,
            dropped_clients=list(rec.dropped),
            ledger=list(rec.ledger),
            log=list(rec.log),
            extra=payload,
            evidence=evidence,
            bytes_per_client={k: dict(v) for k, v in sorted(rec.per_client.items())},
            secagg_bytes_up=rec.secagg_bytes_up,
            secagg_bytes_down=rec.secagg_bytes_down,
            secagg=list(rec.secagg),
        )

    # ================================================================== internals
    def _action(self) -> str:
        return repr(self.pending.action) if self.pending is not None else "no request"

    def stopped_by_sites(self, server_round: int, failures: list[Failure]) -> bool:
        """Sites refused the pending request only for reasons that end a search (their privacy
        budget; a secure sum without every roster site) and the method ends its search with
        what it has: the round closes as ``budget`` and nothing is re-asked (a dropout in the
        same round does not matter any more)."""
        request = self.pending
        refusals = [f for f in failures if f.refusal is not None]
        if (
            request is None
            or request.action == HELLO
            or not refusals
            or any(f.policy not in SEARCH_ENDING_KEYS for f in refusals)
            or not self.protocol.stop_search("; ".join(sorted({f.text for f in refusals})))
        ):
            return False
        self.closed_round = server_round
        self._close(server_round, "budget", {})
        self.pending = None
        return True

    def raise_on_protocol_errors(self, server_round: int, failures: Iterable[Failure]) -> None:
        """A client's refusal (its data or the request is invalid: a typed error reply) stops the
        run; every other failure is a dropout. A site's policy refusal stops it with the site's
        own one-line words (they name the site and the policy key)."""
        failures = list(failures)
        policy = sorted({f.text for f in failures if f.policy is not None})
        if policy:
            raise SitePolicyError("; ".join(policy))
        errors = [r for r in (f.refusal for f in failures) if r is not None]
        if errors:
            text = "; ".join(
                f"{'client ' + str(c) if c != UNKNOWN_CLIENT else 'a client'}: {msg}"
                for c, msg in sorted(set(errors))
            )
            raise ClientProtocolError(f"round {server_round}, action {self._action()}: {text}")

    def _drop(
        self,
        server_round: int,
        nodes: list[int],
        failed_nodes: Mapping[int, Failure],
        anonymous: list[Failure],
        up_bytes: Mapping[int, int],
    ) -> None:
        action = self.pending.action if self.pending is not None else ""
        fallback = "; ".join(f.text for f in anonymous) if anonymous else "no reply"
        dropped_pids: list[int] = []
        descriptions = []
        for node in sorted(nodes):
            failure = failed_nodes.get(node)
            pid = self.asked.get(node)
            if pid is None and failure is not None:
                pid = failure.client  # a failure in hello names its client itself
            reason = failure.text if failure is not None else fallback
            self.recorder.record_dropout(pid, node, server_round, action, reason)
            self.members.drop_node(node, pid)
            if pid is not None:
                dropped_pids.append(pid)
            who = f"client {pid}" if pid is not None else f"node {node}"
            descriptions.append(f"{who} dropped in round {server_round} ({action!r}): {reason}")
        self._close(server_round, "dropout", up_bytes)
        remaining = self.members.remaining(self.state is RunState.RUNNING, self.asked)
        if remaining < self.members.min_clients:
            raise TooFewClientsError(
                f"{remaining} clients remain but min_clients={self.members.min_clients}; "
                + "; ".join(descriptions)
            )
        if dropped_pids:
            self.protocol.on_clients_dropped(sorted(dropped_pids))

    def _close(self, server_round: int, status: str, up_bytes: Mapping[int, int]) -> None:
        request = self.pending
        self.recorder.finish_round(
            server_round,
            request.action if request else "",
            status,
            up_bytes,
            {node: self.members.pid_of.get(node, pid) for node, pid in self.asked.items()},
            secure=bool(request and request.secure and self.secure_mode),
            extra=self.annotations if status == "ok" else None,
        )
        self.annotations = {}

    def check_answers(
        self, server_round: int, request: Request, answered: Mapping[int, Answer]
    ) -> None:
        """A malformed reply never reaches a sum or a method: numbers only, no infinity, NaN only
        where the request allows it, and a secure reply one integer vector within the bound,
        of one length for all. A violation stops the run naming the client (a faulty client is
        a bug or an attack, not a dropout: re-asking the others would hide it)."""
        bound = self._secure_bound
        lengths: dict[int, int] = {}
        for answer in sorted(answered.values(), key=lambda a: a.pid):
            problem = None
            for k, array in enumerate(answer.arrays):
                array = np.asarray(array)
                if array.dtype.kind not in "biuf":
                    problem = f"array {k} has dtype {array.dtype}"
                elif array.dtype.kind == "f" and np.isinf(array).any():
                    problem = f"array {k} holds an infinity"
                elif array.dtype.kind == "f" and not request.nan_ok and np.isnan(array).any():
                    problem = f"array {k} holds NaN"
                if problem:
                    break
            if problem is None and request.secure and not self.secure_mode:
                vector = np.asarray(answer.arrays[0]) if len(answer.arrays) == 1 else None
                if vector is None or vector.ndim != 1 or vector.dtype.kind not in "biu":
                    problem = "a secure reply must be one flat integer vector"
                elif vector.size and max(-int(vector.min()), int(vector.max())) > bound:
                    problem = f"its secure vector exceeds the bound |value| <= {bound}"
                else:
                    lengths[answer.pid] = int(vector.shape[0])
            if problem:
                raise ClientProtocolError(
                    f"round {server_round}, action {request.action!r}: client {answer.pid} sent "
                    f"a malformed reply ({problem}); it was not used"
                )
        if len(set(lengths.values())) > 1:
            raise ClientProtocolError(
                f"round {server_round}, action {request.action!r}: clients returned secure "
                f"vectors of different lengths {lengths}"
            )

    def _replies(
        self, server_round: int, request: Request, answered: Mapping[int, Answer]
    ) -> list[Reply]:
        by_pid = sorted(answered.values(), key=lambda a: a.pid)
        pids = [a.pid for a in by_pid]
        meta_keys = sorted({k for a in by_pid for k in a.meta})
        if not request.secure:
            replies = [Reply(a.pid, list(a.arrays), a.meta) for a in by_pid]
            self.recorder.record_ledger(
                server_round,
                request.action,
                False,
                False,
                len(replies),
                [r.arrays for r in replies],
                meta_keys,
            )
            return replies
        if self.secure_mode:  # every answer carries SecAgg+'s mean of the clients' vectors
            total = decode_secure_mean(by_pid[0].arrays, len(by_pid), request.action, server_round)
        else:
            vectors = [a.arrays[0] for a in by_pid]
            total = plain_sum(vectors, pids, request.action, server_round)
        metas = {a.pid: a.meta for a in by_pid}
        meta = {CONTRIBUTORS: pids, "client_meta": {p: m for p, m in metas.items() if m}}
        self.recorder.record_ledger(
            server_round, request.action, self.secure_mode, True, len(pids), [[total]], meta_keys
        )
        return [Reply(SUMMED, [total], meta)]

    def _finish_hello(
        self, server_round: int, answered: Mapping[int, Answer], up_bytes: Mapping[int, int]
    ) -> None:
        info = self.members.register(answered)
        self._secure_bound = secure_bound_for(len(info))
        meta_keys = sorted({k for a in answered.values() for k in a.meta})
        self.recorder.record_ledger(server_round, HELLO, False, False, len(info), [], meta_keys)
        self._close(server_round, "ok", up_bytes)
        self.state = RunState.RUNNING
        protocol = self.protocol
        check_client_inputs(
            self.members.info,
            protocol.input_needs(),
            method=protocol.name or type(protocol).__name__,
            min_sites=self.min_sites,
            entry_point=self.entry_point,
        )
        # a method that combines the clients' own results never continues on fewer than it needs
        self.members.min_clients = max(self.members.min_clients, self.min_sites)
        protocol.validate_clients(self.members.info)
