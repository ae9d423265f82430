"""The federation runtime in-process: protocol loop, hello, exact sums (plain and SecAgg+),
dropouts, errors, determinism and bookkeeping. Every run here uses the real ServerApp/ClientApp
objects on the synchronous LocalGrid (no Ray)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from flwr.common import ndarrays_to_parameters

from fedcausal_flwr.clients.base import ProtocolClient, action
from fedcausal_flwr.federation.core.messages import (
    REFUSAL_CODE,
    UNKNOWN_CLIENT,
    ClientProtocolError,
    Failure,
    FederationError,
    ProtocolError,
    Request,
    TooFewClientsError,
    check_secure_vector,
    decode_client_error,
    encode_refusal,
    secure_bound_for,
)
from fedcausal_flwr.federation.core.registry import UnknownMethodError, get_method
from fedcausal_flwr.federation.runtime.localgrid import LocalGrid, run_local
from fedcausal_flwr.federation.runtime.runners import PartitionedClients, run_method, run_protocol
from fedcausal_flwr.federation.runtime.workflow import make_client_app, make_server_app
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.result import Result
from fedcausal_flwr.strategies.base import ProtocolStrategy
from tests.test_federation_toy import (
    COLUMNS,
    ToyStrategy,
    make_toy_client,
    toy_partitions,
    toy_reference,
)

TIMING_KEYS = {"seconds"}


def comparable(result: Result) -> dict:
    """Result JSON without wall-clock fields (everything else must match exactly)."""
    out = result.to_json()
    out.pop("wall_s")
    out["log"] = [{k: v for k, v in e.items() if k not in TIMING_KEYS} for e in out["log"]]
    return out


def toy_factory(parts, **options):
    def make(pid, data, context):
        return make_toy_client(pid, data, options, context=context)

    return PartitionedClients(make, parts)


@pytest.fixture(scope="module")
def parts3():
    return toy_partitions(3)


@pytest.fixture(scope="module")
def plain3(parts3):
    return run_method("toy", parts3)


# ----------------------------------------------------------------------------- protocol loop
def test_toy_run_matches_pooled_reference(parts3, plain3):
    ref = toy_reference(dict(enumerate(parts3)), [0, 2])
    assert plain3.extra["colsums"] == ref["colsums"]
    assert plain3.extra["counts"] == ref["counts"]
    assert plain3.extra["contributors"] == [0, 1, 2]
    assert plain3.extra["ssd"] == pytest.approx(ref["ssd"])
    assert plain3.metrics["n_total"] == ref["n_total"]
    assert plain3.variables == COLUMNS
    # the run ends when next_request() returns None: hello + 3 steps, no padding rounds
    assert plain3.rounds == 4
    assert [e["action"] for e in plain3.log] == ["hello", "colsum", "counts", "ssd"]
    assert [e["n_clients"] for e in plain3.log] == [3, 3, 3, 2]
    assert plain3.log[1]["total_rows"] == ref["n_total"]  # subclass annotation
    assert plain3.method == "toy" and plain3.config["method"] == "toy"


def test_hello_reports_levels_and_client_info(parts3):
    strategy = ToyStrategy()
    run_protocol(strategy, toy_factory(parts3), 3)
    info = strategy.client_info
    assert sorted(info) == [0, 1, 2]
    assert [info[k].n_rows for k in range(3)] == [len(p) for p in parts3]
    assert info[0].columns == COLUMNS
    assert info[1].levels["c"] == sorted(parts3[1]["c"].unique().tolist())
    assert info[2].levels["x"] is None and info[2].dtypes["x"] == "float64"
    pooled = pd.concat(parts3)
    assert strategy.global_levels()["b"] == sorted(pooled["b"].unique().tolist())


def test_mismatched_columns_are_rejected_naming_the_clients(parts3):
    parts = [parts3[0], parts3[1].rename(columns={"c": "cc"}), parts3[2]]
    with pytest.raises(
        ValueError, match=r"client 1 has columns \['a', 'b', 'cc', 'x'\] but client 0"
    ):
        run_method("toy", parts)


def test_duplicate_partition_ids_are_rejected(parts3):
    app = make_server_app(ToyStrategy(), num_clients=2)
    capp = make_client_app(toy_factory(parts3))
    same = [{"partition-id": 1}, {"partition-id": 1}]
    with pytest.raises(ValueError, match="two clients report partition id 1"):
        run_local(app, capp, 2, node_configs=same)


# ----------------------------------------------------------------------------- exact sums
def test_secure_sum_equals_plain_sum_exactly(parts3, plain3):
    secure = run_method("toy", parts3, secure=True)
    assert secure.extra["counts"] == plain3.extra["counts"]
    assert secure.extra == plain3.extra
    counts_entry = next(e for e in secure.ledger if e["kind"] == "counts")
    assert counts_entry["secure"] and counts_entry["summed"]
    plain_entry = next(e for e in plain3.ledger if e["kind"] == "counts")
    assert not plain_entry["secure"] and plain_entry["summed"]
    assert counts_entry["arrays"] == plain_entry["arrays"] == [{"dtype": "int64", "shapes": [[10]]}]


def test_secure_sum_is_exact_for_values_near_the_bound():
    # 4 clients, values up to C (and -C): the SecAgg+ recipe must reproduce the int64 sum exactly
    bound = secure_bound_for(4)

    class BigClient(ProtocolClient):
        @action("big")
        def big(self, payload, arrays):
            rng = np.random.default_rng(self.partition_id)
            vec = rng.integers(-bound, bound + 1, 50)
            vec[:2] = [bound, -bound]
            return [vec], {}

    class BigStrategy(ProtocolStrategy):
        def __init__(self):
            super().__init__()
            self.total = None

        def next_request(self):
            return None if self.total is not None else Request("big", secure=True)

        def handle_replies(self, request, replies):
            self.total = replies[0].arrays[0]

    expected = sum(
        np.random.default_rng(k).integers(-bound, bound + 1, 50) for k in range(4)
    ).astype(np.int64)
    expected[:2] = [4 * bound, -4 * bound]
    parts = [pd.DataFrame({"v": [k]}) for k in range(4)]  # (one site twice is refused)
    for secure in (False, True):
        strategy = BigStrategy()
        run_protocol(strategy, PartitionedClients(BigClient, parts), 4, secure=secure)
        np.testing.assert_array_equal(strategy.total, expected)


@pytest.mark.parametrize("secure", [False, True])
def test_secure_overflow_is_a_clear_error(parts3, secure):
    # scaled counts exceed C = (2**32 - 1) // 6 for three clients
    with pytest.raises(
        ClientProtocolError, match=r"client \d: secure action 'counts': max \|value\|"
    ):
        run_method("toy", parts3, {"scale": 2**25}, secure=secure)


def test_secure_request_needs_two_clients_under_secagg(parts3):
    with pytest.raises(FederationError, match="needs at least 2 clients for SecAgg"):
        run_method("toy", parts3[:1], secure=True)


# ----------------------------------------------------------------------------- dropouts
@pytest.mark.parametrize("secure", [False, True])
def test_dropout_reissues_the_same_request_to_survivors(secure):
    parts = toy_partitions(4)
    options = {"fail_client": 1, "fail_action": "counts"}
    strategy = ToyStrategy()
    result = run_protocol(strategy, toy_factory(parts, **options), 4, min_clients=2, secure=secure)
    assert [(d["client"], d["round"], d["action"]) for d in result.dropped_clients] == [
        (1, 3, "counts")
    ]
    assert "site 1 lost its connection during counts" in result.dropped_clients[0]["reason"]
    assert [(e["action"], e["status"]) for e in result.log] == [
        ("hello", "ok"),
        ("colsum", "ok"),
        ("counts", "dropout"),
        ("counts", "ok"),
        ("ssd", "ok"),
    ]
    survivors = {k: parts[k] for k in (0, 2, 3)}
    ref = toy_reference(survivors, [0, 2])
    assert result.extra["counts"] == ref["counts"]
    assert result.extra["contributors"] == [0, 2, 3]
    assert result.extra["ssd"] == pytest.approx(ref["ssd"])
    assert strategy.dropped_seen == [1]
    assert result.rounds == 5


def test_too_many_dropouts_stop_the_run_with_the_reason():
    parts = toy_partitions(3)
    with pytest.raises(TooFewClientsError, match=r"client 2 dropped in round 2 \('colsum'\)"):
        run_protocol(ToyStrategy(), toy_factory(parts, fail_client=2, fail_action="colsum"), 3)


def test_too_few_clients_connected_times_out():
    app = make_server_app(ToyStrategy(), num_clients=3, connect_timeout=0.3)
    capp = make_client_app(toy_factory(toy_partitions(3)))
    with pytest.raises(TooFewClientsError, match=r"2 of 3 required clients connected after 0.3 s"):
        run_local(app, capp, 2)


# ----------------------------------------------------------------------------- errors
class AskOnce(ProtocolStrategy):
    def __init__(self, request):
        super().__init__()
        self.request = request
        self.replies = None

    def next_request(self):
        return self.request if self.replies is None else None

    def handle_replies(self, request, replies):
        self.replies = replies


def test_unknown_action_is_a_clear_error(parts3):
    with pytest.raises(ClientProtocolError, match=r"client 0: unknown action 'nope'.*'colsum'"):
        run_protocol(AskOnce(Request("nope")), toy_factory(parts3), 3)


def test_request_for_unknown_client_is_rejected(parts3):
    with pytest.raises(ValueError, match=r"asks unknown clients \[7\]"):
        run_protocol(AskOnce(Request("colsum", clients=[0, 7])), toy_factory(parts3), 3)


def test_max_rounds_caps_a_protocol_that_never_ends(parts3):
    class Forever(AskOnce):
        def next_request(self):
            return self.request

    with pytest.raises(FederationError, match="max_rounds=4"):
        run_protocol(Forever(Request("colsum")), toy_factory(parts3), 3, max_rounds=4)


def test_strategy_object_runs_once(parts3):
    strategy = ToyStrategy()
    run_protocol(strategy, toy_factory(parts3), 3)
    with pytest.raises(ValueError, match="already run"):
        run_protocol(strategy, toy_factory(parts3), 3)


def test_unknown_method_lists_known_methods():
    with pytest.raises(UnknownMethodError, match=r"unknown method 'nope'; known methods: .*, toy"):
        get_method("nope")
    with pytest.raises(UnknownMethodError, match=r"unknown method 'tyo' \(did you mean 'toy'\?\)"):
        get_method("tyo")


def test_secure_vector_checks_and_error_parsing():
    assert secure_bound_for(1) == 2**30 - 1
    assert secure_bound_for(100) == (2**32 - 1) // 200
    assert 100 * 2 * secure_bound_for(100) < 2**32
    check_secure_vector([np.array([-5, 5])], 5, 0, "a")
    with pytest.raises(ProtocolError, match=r"client=3\]: secure action 'a': max \|value\| 6"):
        check_secure_vector([np.array([1, -6])], 5, 3, "a")
    with pytest.raises(ProtocolError, match="flat integer vector"):
        check_secure_vector([np.array([0.5])], 5, 3, "a")
    with pytest.raises(ProtocolError, match="exactly one array"):
        check_secure_vector([np.array([1]), np.array([2])], 5, 3, "a")
    # a refusal is a typed error reply: our code and a JSON reason, never parsed from Flower's text
    refusal = Failure(REFUSAL_CODE, encode_refusal(ProtocolError(4, "bad thing")))
    assert refusal.refusal == (4, "bad thing")
    assert Failure(2, "<class 'x.ProtocolError'>:<'ProtocolError[client=4]: bad'>").refusal is None
    assert decode_client_error(REFUSAL_CODE, "not json") == (UNKNOWN_CLIENT, "not json")


# ----------------------------------------------------------------------------- determinism
class ReversingGrid(LocalGrid):
    """Delivers replies in reverse order (and the clients in reverse order too)."""

    def pull_messages(self, message_ids):
        return list(reversed(super().pull_messages(list(reversed(list(message_ids))))))


def test_results_do_not_depend_on_reply_order(parts3, plain3):
    strategy = ToyStrategy()
    app = make_server_app(strategy, num_clients=3)
    grid = ReversingGrid(make_client_app(toy_factory(parts3)), 3)
    from flwr.app import Context, RecordDict

    app(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={}))
    reversed_result = strategy.build_result(plain3.config)
    assert strategy.reply_order == [[0, 1, 2], [-1], [0, 2]]
    assert comparable(reversed_result) == comparable(plain3)


# ----------------------------------------------------------------------------- bookkeeping
def test_bytes_and_ledger_are_counted_as_sent(parts3, plain3):
    ssd = next(e for e in plain3.log if e["action"] == "ssd")
    # down: the broadcast mean (npy bytes) + JSON payload "{}" + action name, to 2 clients
    params = ndarrays_to_parameters([np.array([0.5])])
    per_client = sum(len(t) for t in params.tensors) + len("{}") + len("ssd")
    assert ssd["bytes_down"] == 2 * per_client
    # up: one float64 npy + meta JSON per client
    up = [len(t) for t in ndarrays_to_parameters([np.array([1.0])]).tensors][0]
    meta_lengths = [len(f'{{"rows":{len(parts3[k])}}}') for k in (0, 2)]
    assert ssd["bytes_up"] == 2 * up + sum(meta_lengths)
    assert plain3.bytes_up == sum(e["bytes_up"] for e in plain3.log)
    assert plain3.bytes_down == sum(e["bytes_down"] for e in plain3.log)
    assert sum(v["up"] for v in plain3.bytes_per_client.values()) == plain3.bytes_up
    assert sum(v["down"] for v in plain3.bytes_per_client.values()) == plain3.bytes_down
    assert plain3.bytes_per_client[1]["down"] < plain3.bytes_per_client[0]["down"]  # 1 skips ssd
    kinds = [(e["round"], e["kind"], e["n_clients"], e["summed"]) for e in plain3.ledger]
    assert kinds == [
        (1, "hello", 3, False),
        (2, "colsum", 3, False),
        (3, "counts", 3, True),
        (4, "ssd", 2, False),
    ]
    colsum = plain3.ledger[1]
    assert colsum["arrays"] == [
        {"dtype": "int64", "shapes": [[3]]},
        {"dtype": "float64", "shapes": [[1]]},
    ]
    assert colsum["meta_keys"] == ["n"]
    assert plain3.wall_s > 0 and all(e["seconds"] >= 0 for e in plain3.log)


def test_result_json_roundtrip_and_summary(tmp_path, plain3):
    result = Result.from_json(plain3.to_json())
    edges = [("a", "b", "tail", "arrow"), ("c", "b", "circle", "arrow")]
    result.graph = Graph.from_edges(["a", "b", "c"], edges, kind="PAG")
    path = result.save(tmp_path / "out" / "result.json")
    loaded = Result.load(path)
    assert loaded.to_json() == result.to_json()
    assert loaded.graph == result.graph and loaded.graph.kind == "PAG"
    assert "toy: PAG with 2 edges over 3 nodes; 4 rounds" in loaded.summary()
    assert loaded.bytes_per_client == plain3.bytes_per_client
