"""The thin Flower adapter: a legacy Flower ``Strategy`` around a method's protocol run.

The legacy ``Strategy`` + ``NumPyClient`` pair is the only route on which SecAgg+ works in Flower
1.42. :class:`FlowerStrategy` translates between it and the Flower-free
:class:`~fedcausal_flwr.federation.core.protocol.ProtocolRun`: a request becomes ``FitIns`` (action,
JSON payload, round, secure flag and secure bound in the config; arrays as parameters), replies come
back as ``FitRes`` (arrays; partition id and JSON meta in the metrics). It works under the project's
workflow (:mod:`~fedcausal_flwr.federation.runtime.workflow`, one round per protocol step, no
padding) and under Flower's own ``DefaultWorkflow`` (a fixed number of rounds: once the protocol is
finished, ``configure_fit`` selects nobody).
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from flwr.common import (
    Code,
    FitIns,
    FitRes,
    Parameters,
    ndarrays_to_parameters,
)
from flwr.server import ClientManager
from flwr.server.strategy import Strategy

from fedcausal_flwr.federation.core.membership import Answer
from fedcausal_flwr.federation.core.messages import (
    KEY_META,
    KEY_PARTITION,
    ClientFailure,
    ClientProtocolError,
    Failure,
    FederationError,
    RequestConfig,
    array_nbytes,
    encode_payload,
)
from fedcausal_flwr.federation.core.protocol import ProtocolRun, ProtocolStrategy, RunState


class FlowerStrategy(Strategy):
    """Flower's legacy ``Strategy`` driving one :class:`ProtocolStrategy` (see module docs).

    Under Flower's own ``DefaultWorkflow`` the run is bound here, with every connected node:
    ``min_sites`` (the method's registered minimum, ``MethodSpec.min_sites``) and
    ``entry_point`` are given with the adapter; the project's workflow binds the run itself."""

    def __init__(
        self, protocol: ProtocolStrategy, *, min_sites: int = 1, entry_point: str = "python"
    ):
        super().__init__()
        if not isinstance(protocol, ProtocolStrategy):
            raise TypeError(f"expected a ProtocolStrategy, got {type(protocol).__name__}")
        self.protocol = protocol
        self.min_sites, self.entry_point = min_sites, entry_point

    @property
    def run(self) -> ProtocolRun:
        return self.protocol.protocol_run

    # ------------------------------------------------------------------ Flower Strategy API
    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        # Non-None: the runtime does not ask a client for initial parameters.
        return ndarrays_to_parameters([])

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[Any, FitIns]]:
        protocol_run = self.run
        proxies = {p.node_id: p for p in client_manager.all().values()}
        if protocol_run.state is RunState.UNBOUND:  # Flower's own workflow: every node connected
            protocol_run.bind(
                num_clients=len(proxies), min_clients=None, secure=False,
                entry_point=self.entry_point, min_sites=self.min_sites,
            )  # fmt: skip
        if protocol_run.begun_round != server_round:  # Flower's own workflow drives the rounds
            protocol_run.begin_round(server_round)
        request = protocol_run.pending
        if request is None:
            return []
        targets = protocol_run.open_round(server_round, proxies)
        payload_json = encode_payload(request.payload, f"request {request.action!r}")
        params = ndarrays_to_parameters(request.arrays)
        per_client_down = array_nbytes(params.tensors) + len(payload_json) + len(request.action)
        bound = protocol_run.start_round(server_round, {node: per_client_down for node in targets})
        config = RequestConfig(
            request.action,
            payload_json,
            int(server_round),
            bool(request.secure),
            bool(request.secure and protocol_run.secure_mode),
            int(bound),
        ).to_config()
        ins = FitIns(params, config)
        return [(proxies[node], ins) for node in targets]

    def aggregate_fit(
        self,
        server_round: int,
        results: list[tuple[Any, FitRes]],
        failures: list[tuple[Any, FitRes] | BaseException],
    ) -> tuple[Parameters | None, dict]:
        failed_nodes, anonymous = failure_reasons(failures)
        if self.run.stopped_by_sites(server_round, [*failed_nodes.values(), *anonymous]):
            return None, {}
        self.run.raise_on_protocol_errors(server_round, [*failed_nodes.values(), *anonymous])
        answered = {
            int(proxy.node_id): answer_of(int(proxy.node_id), res) for proxy, res in results
        }
        self.run.close_round(server_round, answered, failed_nodes, anonymous)
        return None, {}

    def configure_evaluate(self, server_round, parameters, client_manager):
        return []

    def aggregate_evaluate(self, server_round, results, failures):
        return None, {}

    def evaluate(self, server_round, parameters):
        return None


def answer_of(node: int, res: FitRes) -> Answer:
    """A client's ``FitRes`` as the protocol sees it."""
    metrics: Mapping[str, Any] = res.metrics or {}
    if KEY_PARTITION not in metrics:
        raise FederationError(
            f"node {node} replied without '{KEY_PARTITION}'; is it a ProtocolClient?"
        )
    meta_json = str(metrics.get(KEY_META, "{}"))
    pid = int(metrics[KEY_PARTITION])
    try:
        arrays = read_arrays(res.parameters.tensors)
    except ValueError as err:
        raise ClientProtocolError(f"client {pid} sent {err}") from None
    return Answer(
        pid=pid,
        arrays=arrays,
        meta=json.loads(meta_json),
        nbytes=array_nbytes(res.parameters.tensors) + len(meta_json),
    )


#: The .npy header readers by format version (version 3 only adds utf-8 field names).
_NPY_HEADERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}


def read_arrays(tensors: Sequence[bytes]) -> list[np.ndarray]:
    """A reply's arrays read in place from their ``.npy`` bytes (as Flower's
    ``parameters_to_ndarrays``, without its copy: a round's replies are hundreds of megabytes).
    The arrays are read-only views; an object array, a pickle or anything but one ``.npy``
    array per tensor is refused (``ValueError``)."""
    arrays = []
    for k, tensor in enumerate(tensors):
        stream = io.BytesIO(tensor)
        try:
            version = np.lib.format.read_magic(stream)
            read_header = _NPY_HEADERS.get(version)
            if read_header is None:
                raise ValueError(f"format version {version}")
            shape, fortran, dtype = read_header(stream)
            if dtype.hasobject:
                raise ValueError("an object array")
            array = np.frombuffer(tensor, dtype=dtype, count=math.prod(shape), offset=stream.tell())
        except ValueError as err:
            raise ValueError(f"array {k}, which is not a .npy array of numbers ({err})") from None
        arrays.append(array.reshape(shape, order="F" if fortran else "C"))
    return arrays


def failure_reasons(failures: list) -> tuple[dict[int, Failure], list[Failure]]:
    """Flower's failures as ``(node id -> Failure, failures without a node)``."""
    by_node: dict[int, Failure] = {}
    anonymous: list[Failure] = []
    for failure in failures:
        if isinstance(failure, ClientFailure):
            by_node[failure.node_id] = failure.failure
        elif isinstance(failure, tuple):
            proxy, res = failure
            by_node[int(proxy.node_id)] = Failure(
                None,
                f"status {res.status.code.name}: {res.status.message}"
                if res.status.code != Code.OK
                else "failed",
            )
        else:
            anonymous.append(failure_of(failure))
    return by_node, anonymous


def failure_of(error: BaseException) -> Failure:
    """A failure the transport reports as an exception; SecAgg+ wraps a client's error reply
    (Flower's ``Error``: code and reason) in one."""
    content = error.args[0] if error.args else None
    code, reason = getattr(content, "code", None), getattr(content, "reason", None)
    if isinstance(code, int) and isinstance(reason, str):
        return Failure(code, reason)
    return Failure(None, str(error))
