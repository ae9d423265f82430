"""A malformed reply never corrupts a sum or reaches a method; a client's refusal is a typed error
reply, not text parsed from Flower's error string (in-process; the same ClientApp and mods run on
Ray and in a deployment)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedcausal_flwr.clients.base import ProtocolClient, action
from fedcausal_flwr.federation.core.messages import (
    REFUSAL_CODE,
    ClientProtocolError,
    ProtocolError,
    Request,
    TooFewClientsError,
)
from fedcausal_flwr.federation.runtime.runners import PartitionedClients, run_protocol
from fedcausal_flwr.strategies.base import ProtocolStrategy
from tests.test_federation_toy import ToyClient, ToyStrategy, toy_partitions, toy_reference


class Ask(ProtocolStrategy):
    """Asks ``request`` once and keeps the replies."""

    def __init__(self, request: Request):
        super().__init__()
        self.request = request
        self.replies: list | None = None

    def next_request(self):
        return None if self.replies is not None else self.request

    def handle_replies(self, request, replies):
        self.replies = replies


class Answers(ProtocolClient):
    """Answers ``vector``: a well-formed reply, except client 1, which sends ``bad``."""

    bad: np.ndarray = np.array([0.0])

    @action("vector")
    def vector(self, payload, arrays):
        if self.partition_id == 1:
            return [np.asarray(self.bad)], {}
        return [np.array([1.0, 2.0])], {}

    @action("counts")
    def counts(self, payload, arrays):
        if self.partition_id == 1:
            return [np.asarray(self.bad)], {}
        return [np.array([1, 2], dtype=np.int64)], {}


def run_with(bad: np.ndarray, request: Request, secure: bool = False):
    parts = [pd.DataFrame({"v": [1, 2, 3 + k]}) for k in range(3)]  # (one site twice: refused)
    client = type("Bad", (Answers,), {"bad": bad})
    strategy = Ask(request)
    result = run_protocol(strategy, PartitionedClients(client, parts), 3, secure=secure)
    return strategy, result


@pytest.mark.parametrize(
    "bad,problem",
    [
        (np.array([1.0, np.nan]), "array 0 holds NaN"),
        (np.array([np.inf, 1.0]), "array 0 holds an infinity"),
        (np.array([1 + 2j, 0j]), "array 0 has dtype complex128"),
        (np.array(["a", "b"]), "array 0 has dtype <U1"),
    ],
)
def test_a_malformed_plain_reply_stops_the_run_naming_the_client(bad, problem):
    with pytest.raises(ClientProtocolError, match=f"client 1 sent a malformed reply \\({problem}"):
        run_with(bad, Request("vector"))


def test_nan_is_accepted_where_the_request_allows_it_but_never_an_infinity():
    strategy, _ = run_with(np.array([np.nan, 1.0]), Request("vector", nan_ok=True))
    assert np.isnan(strategy.replies[1].arrays[0][0])
    with pytest.raises(ClientProtocolError, match="infinity"):
        run_with(np.array([np.inf, 1.0]), Request("vector", nan_ok=True))


@pytest.mark.parametrize(
    "bad,problem",
    [
        (np.array([1.5, 2.0]), "one flat integer vector"),
        (np.array([[1, 2]]), "one flat integer vector"),
        (np.array([1, 2**31]), "exceeds the bound"),
        (np.array([1, 2, 3]), "different lengths"),
    ],
)
def test_a_malformed_secure_reply_never_reaches_the_sum(bad, problem, monkeypatch):
    # a client that skips its own check (modified or faulty): with plain summing (secure=False)
    # the server sees each vector and refuses the bad one before any sum
    monkeypatch.setattr("fedcausal_flwr.clients.base.check_secure_vector", lambda *a: None)
    with pytest.raises(ClientProtocolError, match=problem):
        run_with(bad, Request("counts", secure=True))


def test_a_refusal_is_a_typed_reply_that_stops_the_run_and_names_the_client():
    class Refusing(ToyClient):
        def colsum(self, payload, arrays):
            if self.partition_id == 2:
                raise ProtocolError(2, "column 'x' is not numeric here")
            return super().colsum(payload, arrays)

    refusing = {"colsum": Refusing.colsum}  # the action registry keeps the method's name
    client = type("RefusingToy", (ToyClient,), refusing)
    with pytest.raises(
        ClientProtocolError, match="round 2, action 'colsum': client 2: column 'x' is not numeric"
    ):
        run_protocol(ToyStrategy(), PartitionedClients(client, toy_partitions(3)), 3)


def test_the_refusal_travels_as_an_error_code_not_as_text():
    """What the server receives: Flower's Error with our code and a JSON reason."""
    from flwr.app import Context, Message, RecordDict
    from flwr.common import ndarrays_to_parameters
    from flwr.common.typing import FitIns

    from fedcausal_flwr.federation.runtime.flower_internals import (
        fitins_to_recorddict,
        set_task_identity,
    )
    from fedcausal_flwr.federation.runtime.workflow import make_client_app

    class AlwaysRefuses(ToyClient):
        @action("colsum")
        def colsum(self, payload, arrays):
            raise ProtocolError(0, "no")

    set_task_identity(1, 0)
    app = make_client_app(PartitionedClients(AlwaysRefuses, toy_partitions(1)))
    ins = FitIns(ndarrays_to_parameters([]), {"action": "colsum", "payload": "{}", "round": 2,
                                              "secure": False, "secure_bound": 0})  # fmt: skip
    msg = Message(fitins_to_recorddict(ins, True), dst_node_id=1, message_type="train")
    context = Context(1, 1, {"partition-id": 0, "num-partitions": 1}, RecordDict(), {})
    reply = app(msg, context)
    assert reply.has_error() and reply.error.code == REFUSAL_CODE
    assert reply.error.reason == '{"client": 0, "message": "no"}'


def test_an_ordinary_exception_is_a_dropout_not_a_refusal():
    class Crashing(ToyClient):
        @action("ssd")
        def ssd(self, payload, arrays):
            if self.partition_id == 0:
                raise RuntimeError("out of memory")
            return super().ssd(payload, arrays)

    parts = toy_partitions(3)
    result = run_protocol(ToyStrategy(), PartitionedClients(Crashing, parts), 3, min_clients=1)
    assert [(d["client"], d["action"]) for d in result.dropped_clients] == [(0, "ssd")]
    assert "out of memory" in result.dropped_clients[0]["reason"]
    assert result.extra["ssd"] == toy_reference({2: parts[2], 0: parts[0], 1: parts[1]}, [2])["ssd"]
    with pytest.raises(TooFewClientsError, match="out of memory"):
        run_protocol(ToyStrategy(), PartitionedClients(Crashing, parts), 3)
