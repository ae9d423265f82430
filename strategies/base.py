"""``ProtocolStrategy``: a legacy Flower ``Strategy`` that drives a method's protocol state machine.

A method subclasses :class:`ProtocolStrategy` and writes three Flower-free hooks:

* :meth:`~ProtocolStrategy.next_request` returns the next :class:`Request` (or ``None`` when done);
* :meth:`~ProtocolStrategy.handle_replies` consumes the replies to it, sorted by partition id (or
  one summed reply with ``client == SUMMED`` for a ``secure`` request);
* :meth:`~ProtocolStrategy.result_payload` returns the method's result (``graph``, ``variables``,
  ``metrics`` keys go into the :class:`Result`; everything else into ``Result.extra``).

The base class owns everything else: the built-in ``hello`` round (``self.client_info``), the
mapping between Flower node ids and partition ids, dropouts (the same request is re-issued to the
survivors, so one protocol step never mixes client sets), exact summation (plain int64 or SecAgg+),
bytes, the per-round log and the privacy ledger. The runtime (``fedcausal_flwr.federation.apps``)
calls :meth:`begin_round` before every Flower round and stops when it returns ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from flwr.common import (
    Code,
    FitIns,
    FitRes,
    Parameters,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy

import fedcausal_flwr
from fedcausal_flwr.data.fingerprint import combine_fingerprints
from fedcausal_flwr.federation.bookkeeping import RunRecorder
from fedcausal_flwr.federation.messages import (
    HELLO,
    KEY_ACTION,
    KEY_CLIP,
    KEY_META,
    KEY_PARTITION,
    KEY_PAYLOAD,
    KEY_ROUND,
    KEY_SECURE,
    SUMMED,
    UNKNOWN_CLIENT,
    ClientFailure,
    ClientInfo,
    ClientProtocolError,
    FederationError,
    Reply,
    Request,
    TooFewClientsError,
    array_nbytes,
    encode_payload,
    parse_protocol_error,
    secure_clip,
)
from fedcausal_flwr.result import Result


def require_same_columns(info: Mapping[int, ClientInfo]) -> None:
    """Raise ``ValueError`` unless every client has the same columns in the same order."""
    pids = sorted(info)
    if not pids:
        return
    first = info[pids[0]]
    for pid in pids[1:]:
        if info[pid].columns != first.columns:
            raise ValueError(
                f"client {pid} has columns {info[pid].columns} but client {first.partition_id} "
                f"has {first.columns}"
            )


class ProtocolStrategy(Strategy):
    """Base class of every method's server side. See the module docstring."""

    #: Method name stored in ``Result.method`` (defaults to the class name).
    name: ClassVar[str] = ""
    #: Clients report the level set of a non-float column only if it has at most this many values.
    hello_max_levels: ClassVar[int] = 1000

    def __init__(self) -> None:
        super().__init__()
        self.min_clients = 1
        self.num_clients: int | None = None
        self.secure_mode = False
        self.client_info: dict[int, ClientInfo] = {}
        self.recorder = RunRecorder()
        self._alive: set[int] = set()
        self._node_of: dict[int, int] = {}
        self._pid_of: dict[int, int] = {}
        self._dead_nodes: set[int] = set()
        self._pending: Request | None = None
        self._asked: dict[int, int | None] = {}
        self._secure_bound = 0
        self._configured_round = 0
        self._aggregated_round = 0
        self._round = 0
        self._hello_done = False
        self._finished = False
        self._annotations: dict[str, Any] = {}

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

    def validate_clients(self, info: dict[int, ClientInfo]) -> None:
        """Check the hello reports; raise a clear error. Default: identical column lists."""
        require_same_columns(info)

    def on_clients_dropped(self, dropped: list[int]) -> None:
        """Called after clients dropped out, before the pending request is re-issued to the
        survivors. Default: nothing. Call :meth:`retract_request` here to rebuild it instead."""

    # ================================================================== helpers for subclasses
    @property
    def alive_clients(self) -> list[int]:
        """Partition ids still taking part, ascending."""
        return sorted(self._alive)

    @property
    def current_round(self) -> int:
        return self._round

    @property
    def variables(self) -> list[str]:
        """Column names of the first client (the common variable set for most methods)."""
        if not self.client_info:
            return []
        return list(self.client_info[min(self.client_info)].columns)

    @property
    def n_total(self) -> int:
        """Rows over all clients still alive."""
        return int(sum(self.client_info[p].n_rows for p in self._alive))

    def global_levels(self) -> dict[str, list | None]:
        """Union of the clients' level sets per column (``None`` if any client reported none)."""
        merged: dict[str, list | None] = {}
        for pid in sorted(self.client_info):
            for col, levels in self.client_info[pid].levels.items():
                if col in merged and merged[col] is None:
                    continue
                if levels is None:
                    merged[col] = None
                else:
                    merged[col] = sorted(set(merged.get(col) or []) | set(levels))
        return merged

    def retract_request(self) -> None:
        """Drop the pending request; the next round calls :meth:`next_request` again."""
        self._pending = None

    def annotate(self, **fields: Any) -> None:
        """Add fields to the current round's log entry (call from :meth:`handle_replies`)."""
        self._annotations.update(fields)

    # ================================================================== runtime interface
    @property
    def finished(self) -> bool:
        return self._finished

    def bind_run(self, *, num_clients: int, min_clients: int | None, secure: bool) -> None:
        """Set by the runtime before the first round."""
        if not hasattr(self, "recorder"):
            raise TypeError(f"{type(self).__name__}.__init__ must call super().__init__()")
        if num_clients < 1:
            raise ValueError(f"num_clients must be >= 1, got {num_clients}")
        self.num_clients = int(num_clients)
        self.min_clients = int(num_clients if min_clients is None else min_clients)
        if not 1 <= self.min_clients <= self.num_clients:
            raise ValueError(
                f"min_clients must be in 1..{self.num_clients}, got {self.min_clients}"
            )
        self.secure_mode = bool(secure)

    def begin_round(self, server_round: int) -> Request | None:
        """The request of this round: a re-issue after a dropout, hello, or ``next_request()``."""
        self.recorder.start_run()
        self._round = server_round
        if self._pending is None and not self._finished:
            if not self._hello_done:
                self._pending = Request(HELLO, {"max_levels": self.hello_max_levels})
            else:
                request = self.next_request()
                if request is not None and not isinstance(request, Request):
                    raise TypeError(
                        f"{type(self).__name__}.next_request must return a Request or None, "
                        f"got {type(request).__name__}"
                    )
                if request is not None and request.action == HELLO:
                    raise ValueError(f"action {HELLO!r} is reserved for the built-in hello round")
                self._pending = request
                if request is None:
                    self._finished = True
                    self.recorder.finish_run()
        return self._pending

    @property
    def pending_request(self) -> Request | None:
        return self._pending

    @property
    def secure_bound(self) -> int:
        """C of the exact-sum recipe: the largest |value| a secure reply may hold.

        Fixed after hello from the number of clients then (dropouts only make sums safer), and
        enforced identically in plain runs, so a method behaves the same with and without SecAgg+.
        """
        if not self._hello_done:
            raise FederationError("the secure bound is known only after the hello round")
        return self._secure_bound

    def planned_clients(self) -> int:
        """How many clients the pending request will ask (before any dropout in the round)."""
        request = self._pending
        if request is None:
            return 0
        if not self._hello_done:
            return self.num_clients or 0
        wanted = request.clients if request.clients is not None else self._alive
        return len([c for c in wanted if c in self._alive])

    def awaiting_replies(self, server_round: int) -> bool:
        """True if round ``server_round`` was configured but never aggregated (transport halted)."""
        return self._configured_round == server_round and self._aggregated_round < server_round

    def report_failed_round(
        self, server_round: int, failed_nodes: Mapping[int, str], reasons: list[str]
    ) -> None:
        """The transport could not complete a round (e.g. SecAgg+ halted): drop and re-issue."""
        self._raise_on_protocol_errors(server_round, list(failed_nodes.values()) + reasons)
        nodes = [n for n in failed_nodes if n in self._asked]
        if not nodes:
            raise FederationError(
                f"round {server_round} ({self._action()}) failed without an identifiable "
                f"client: {'; '.join(reasons) or 'no reason given'}"
            )
        self._drop(server_round, nodes, dict(failed_nodes), reasons, up_bytes={})

    def build_result(self, config: Mapping[str, Any] | None = None) -> Result:
        """Assemble the :class:`Result` (method payload + bookkeeping); ``config["data"]`` gains
        the number of clients and the data fingerprint the clients reported in hello."""
        payload = dict(self.result_payload())
        graph = payload.pop("graph", None)
        variables = payload.pop("variables", None)
        metrics = payload.pop("metrics", {})
        rec = self.recorder
        config = dict(config or {})
        data = dict(config.get("data") or {})
        data["clients"] = len(self.client_info)
        data["fingerprint"] = combine_fingerprints(
            self.client_info[pid].fingerprint for pid in sorted(self.client_info)
        )
        config["data"] = data
        return Result(
            method=self.name or type(self).__name__,
            config=config,
            variables=list(self.variables if variables is None else variables),
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
            bytes_per_client={k: dict(v) for k, v in sorted(rec.per_client.items())},
        )

    # ================================================================== Flower Strategy API
    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        # Non-None: the runtime does not ask a client for initial parameters.
        return ndarrays_to_parameters([])

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        request = self._pending
        if request is None:
            return []
        self._round = server_round
        self._annotations = {}
        proxies = {p.node_id: p for p in client_manager.all().values()}  # type: ignore[attr-defined]
        targets = self._targets(request, server_round, proxies)
        if request.secure and self.secure_mode and len(targets) < 2:
            raise FederationError(
                f"secure request {request.action!r} in round {server_round} needs at least 2 "
                f"clients for SecAgg+, but only {len(targets)} would take part"
            )
        clip = self._secure_bound if request.secure else 0
        payload_json = encode_payload(request.payload, f"request {request.action!r}")
        params = ndarrays_to_parameters(request.arrays)
        config = {
            KEY_ACTION: request.action,
            KEY_PAYLOAD: payload_json,
            KEY_ROUND: int(server_round),
            KEY_SECURE: bool(request.secure),
            KEY_CLIP: int(clip),
        }
        per_client_down = array_nbytes(params.tensors) + len(payload_json) + len(request.action)
        self._asked = {node: self._pid_of.get(node) for node in targets}
        self._configured_round = server_round
        self.recorder.start_round(server_round, {node: per_client_down for node in targets})
        ins = FitIns(params, config)
        return [(proxies[node], ins) for node in targets]

    def aggregate_fit(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, FitRes]],
        failures: list[tuple[ClientProxy, FitRes] | BaseException],
    ) -> tuple[Parameters | None, dict]:
        request = self._pending
        if request is None:
            raise FederationError(f"round {server_round}: replies arrived but nothing was asked")
        self._aggregated_round = server_round
        failed_nodes, reasons = self._failure_reasons(failures)
        self._raise_on_protocol_errors(server_round, list(failed_nodes.values()) + reasons)

        answered: dict[int, tuple[int, FitRes, dict, int]] = {}
        for proxy, res in results:
            node = int(proxy.node_id)  # type: ignore[attr-defined]
            if node not in self._asked:
                raise FederationError(f"round {server_round}: reply from node {node}, not asked")
            pid, meta, meta_len = self._decode_metrics(node, res)
            answered[node] = (pid, res, meta, meta_len)
        up_bytes = {
            node: array_nbytes(res.parameters.tensors) + meta_len
            for node, (_, res, _, meta_len) in answered.items()
        }
        missing = [node for node in self._asked if node not in answered]
        if missing:
            self._drop(server_round, missing, failed_nodes, reasons, up_bytes)
            return None, {}

        if request.action == HELLO:
            self._finish_hello(server_round, answered, up_bytes)
        else:
            replies = self._replies(server_round, request, answered)
            self.handle_replies(request, replies)
            self._close_round(server_round, "ok", up_bytes)
        self._pending = None
        return None, {}

    def configure_evaluate(self, server_round, parameters, client_manager):  # noqa: D102
        return []

    def aggregate_evaluate(self, server_round, results, failures):  # noqa: D102
        return None, {}

    def evaluate(self, server_round, parameters):  # noqa: D102
        return None

    # ================================================================== internals
    def _action(self) -> str:
        return repr(self._pending.action) if self._pending is not None else "no request"

    def _targets(self, request: Request, server_round: int, proxies: dict) -> list[int]:
        """Node ids to ask; nodes that vanished from the connection list count as dropped."""
        if not self._hello_done:
            nodes = sorted(n for n in proxies if n not in self._dead_nodes)
            if len(nodes) < self.min_clients:
                raise TooFewClientsError(
                    f"only {len(nodes)} clients connected for the hello round; "
                    f"min_clients={self.min_clients}"
                )
            return nodes
        wanted = request.clients if request.clients is not None else sorted(self._alive)
        unknown = [c for c in wanted if c not in self.client_info]
        if unknown:
            raise ValueError(
                f"request {request.action!r} asks unknown clients {unknown}; "
                f"known clients are {sorted(self.client_info)}"
            )
        gone = [c for c in wanted if c in self._alive and self._node_of[c] not in proxies]
        if gone:
            self._asked = {self._node_of[c]: c for c in gone}
            self.recorder.start_round(server_round, {})
            self._drop(
                server_round,
                [self._node_of[c] for c in gone],
                {self._node_of[c]: "node no longer connected" for c in gone},
                [],
                {},
            )
        targets = [c for c in wanted if c in self._alive]
        if not targets:
            raise TooFewClientsError(
                f"request {request.action!r} asks clients {wanted}, none of which is still alive"
            )
        return [self._node_of[c] for c in targets]

    @staticmethod
    def _failure_reasons(failures: list) -> tuple[dict[int, str], list[str]]:
        by_node: dict[int, str] = {}
        anonymous: list[str] = []
        for failure in failures:
            if isinstance(failure, ClientFailure):
                by_node[failure.node_id] = failure.reason
            elif isinstance(failure, tuple):
                proxy, res = failure
                by_node[int(proxy.node_id)] = (
                    f"status {res.status.code.name}: {res.status.message}"
                    if res.status.code != Code.OK
                    else "failed"
                )
            else:
                anonymous.append(str(failure))
        return by_node, anonymous

    def _raise_on_protocol_errors(self, server_round: int, reasons: list[str]) -> None:
        errors = [e for e in (parse_protocol_error(r) for r in reasons) if e is not None]
        if errors:
            text = "; ".join(
                f"{'client ' + str(c) if c != UNKNOWN_CLIENT else 'a client'}: {msg}"
                for c, msg in sorted(set(errors))
            )
            raise ClientProtocolError(f"round {server_round}, action {self._action()}: {text}")

    def _decode_metrics(self, node: int, res: FitRes) -> tuple[int, dict, int]:
        metrics = res.metrics or {}
        if KEY_PARTITION not in metrics:
            raise FederationError(
                f"node {node} replied without '{KEY_PARTITION}'; is it a ProtocolClient?"
            )
        pid = int(metrics[KEY_PARTITION])
        known = self._pid_of.get(node)
        if known is not None and known != pid:
            raise FederationError(f"node {node} was client {known} but now says client {pid}")
        meta_json = str(metrics.get(KEY_META, "{}"))
        return pid, json.loads(meta_json), len(meta_json)

    def _drop(
        self,
        server_round: int,
        nodes: list[int],
        failed_nodes: Mapping[int, str],
        reasons: list[str],
        up_bytes: Mapping[int, int],
    ) -> None:
        action = self._pending.action if self._pending is not None else ""
        fallback = "; ".join(reasons) if reasons else "no reply"
        dropped_pids: list[int] = []
        descriptions = []
        for node in sorted(nodes):
            pid = self._asked.get(node)
            reason = failed_nodes.get(node, fallback)
            self.recorder.record_dropout(pid, node, server_round, action, reason)
            self._dead_nodes.add(node)
            if pid is not None:
                self._alive.discard(pid)
                dropped_pids.append(pid)
            who = f"client {pid}" if pid is not None else f"node {node}"
            descriptions.append(f"{who} dropped in round {server_round} ({action!r}): {reason}")
        self._close_round(server_round, "dropout", up_bytes)
        remaining = (
            len(self._alive)
            if self._hello_done
            else len([n for n in self._asked if n not in self._dead_nodes])
        )
        if remaining < self.min_clients:
            raise TooFewClientsError(
                f"{remaining} clients remain but min_clients={self.min_clients}; "
                + "; ".join(descriptions)
            )
        if dropped_pids:
            self.on_clients_dropped(sorted(dropped_pids))

    def _close_round(self, server_round: int, status: str, up_bytes: Mapping[int, int]) -> None:
        request = self._pending
        self.recorder.finish_round(
            server_round,
            request.action if request else "",
            status,
            up_bytes,
            self._asked_pids(),
            secure=bool(request and request.secure and self.secure_mode),
            extra=self._annotations if status == "ok" else None,
        )
        self._annotations = {}

    def _asked_pids(self) -> dict[int, int | None]:
        return {node: self._pid_of.get(node, pid) for node, pid in self._asked.items()}

    def _replies(
        self,
        server_round: int,
        request: Request,
        answered: dict[int, tuple[int, FitRes, dict, int]],
    ) -> list[Reply]:
        by_pid = sorted(
            ((pid, res, meta) for pid, res, meta, _ in answered.values()), key=lambda t: t[0]
        )
        pids = [pid for pid, _, _ in by_pid]
        metas = {pid: meta for pid, _, meta in by_pid}
        meta_keys = sorted({k for m in metas.values() for k in m})
        if not request.secure:
            replies = [
                Reply(pid, parameters_to_ndarrays(res.parameters), meta)
                for pid, res, meta in by_pid
            ]
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
        if self.secure_mode:
            mean = parameters_to_ndarrays(by_pid[0][1].parameters)
            if len(mean) != 1:
                raise FederationError(f"SecAgg+ returned {len(mean)} arrays, expected 1")
            scaled = np.asarray(mean[0], dtype=np.float64) * len(by_pid)
            total = np.rint(scaled).astype(np.int64)
            err = float(np.max(np.abs(scaled - total))) if total.size else 0.0
            if err > 1e-3:
                raise FederationError(
                    f"SecAgg+ sum for {request.action!r} in round {server_round} is not integral "
                    f"(max deviation {err:.3g}); the exact-sum recipe was violated"
                )
        else:
            vectors = []
            for _, res, _ in by_pid:
                arrays = parameters_to_ndarrays(res.parameters)
                vectors.append(np.asarray(arrays[0]).astype(np.int64))
            lengths = {pid: v.shape[0] for pid, v in zip(pids, vectors, strict=True)}
            if len(set(lengths.values())) > 1:
                raise ClientProtocolError(
                    f"secure action {request.action!r} in round {server_round}: clients returned "
                    f"vectors of different lengths {lengths}"
                )
            total = np.sum(np.stack(vectors), axis=0, dtype=np.int64)
        meta = {"contributors": pids, "client_meta": {p: m for p, m in metas.items() if m}}
        self.recorder.record_ledger(
            server_round, request.action, self.secure_mode, True, len(pids), [[total]], meta_keys
        )
        return [Reply(SUMMED, [total], meta)]

    def _finish_hello(
        self,
        server_round: int,
        answered: dict[int, tuple[int, FitRes, dict, int]],
        up_bytes: Mapping[int, int],
    ) -> None:
        seen: dict[int, int] = {}
        for node, (pid, _, _, _) in sorted(answered.items()):
            if pid in seen:
                raise ValueError(
                    f"two clients report partition id {pid} (nodes {seen[pid]} and {node}); "
                    "every site needs a distinct partition-id"
                )
            seen[pid] = node
        info = {pid: ClientInfo.from_meta(meta) for pid, _, meta, _ in answered.values()}
        mine = fedcausal_flwr.__version__
        for pid in sorted(info):
            if info[pid].version != mine:
                raise ValueError(
                    f"client {pid} runs fedcausal-flwr {info[pid].version or '?'} but the server "
                    f"runs {mine}; install the same version on every site"
                )
        self._pid_of = {node: pid for pid, node in seen.items()}
        self._node_of = dict(seen)
        self._alive = set(seen)
        self.client_info = {pid: info[pid] for pid in sorted(info)}
        self._secure_bound = secure_clip(len(info))
        meta_keys = sorted({k for _, _, m, _ in answered.values() for k in m})
        self.recorder.record_ledger(server_round, HELLO, False, False, len(info), [], meta_keys)
        self._close_round(server_round, "ok", up_bytes)
        self._hello_done = True
        self.validate_clients(self.client_info)
