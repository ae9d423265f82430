"""FedC2SL (FedPC, FedFCI): federated answers equal pooled ones; rounds, modes, dropouts, errors."""

import json

import numpy as np
import pandas as pd
import pytest
from causallearn.search.ConstraintBased.PC import pc as cl_pc
from helpers import ONE_ACTOR

from fedcausal_flwr.cli import main as cli_main
from fedcausal_flwr.clients.fedpc import FedPCClient
from fedcausal_flwr.data import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.data.synthetic import random_dag, random_gaussian_network
from fedcausal_flwr.discovery.fci import fci
from fedcausal_flwr.discovery.pc import pc
from fedcausal_flwr.federation.core.messages import TooFewClientsError
from fedcausal_flwr.federation.core.registry import UnknownMethodError
from fedcausal_flwr.federation.runtime.runners import PartitionedClients, run_method, run_protocol
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.result import Result
from fedcausal_flwr.stats.oracles import DiscreteOracle, GaussianOracle
from fedcausal_flwr.strategies.fedpc import METHODS


@pytest.fixture(scope="module")
def alarm():
    net = load_network("alarm")
    pooled = net.sample(10_000, seed=0)
    codes = net.sample_codes(10_000, seed=0).astype(np.int64)
    return net, pooled, codes


@pytest.fixture(scope="module")
def alarm_pooled_pc(alarm):
    net, _, codes = alarm
    return pc(DiscreteOracle(codes, net.cards, net.variables, test="chi2"), alpha=0.05)


def test_pooled_reference_equals_causallearn(alarm, alarm_pooled_pc):
    net, _, codes = alarm
    theirs = cl_pc(
        codes, 0.05, "chisq", stable=True, show_progress=False, node_names=list(net.variables)
    )
    # name order differs from index order, but PC's skeleton and orientation only use indices
    assert alarm_pooled_pc.graph == Graph.from_causallearn(theirs.G.graph, net.variables, "CPDAG")


@pytest.mark.parametrize("k", [2, 10, 64])
def test_exact_fedpc_equals_pooled_pc(alarm, alarm_pooled_pc, k):
    _, pooled, _ = alarm
    part = split_iid(pooled, k, seed=k)
    result = run_method("fedpc", part.clients, {"alpha": 0.05, "test": "chi2"}, backend="inprocess")
    assert result.graph == alarm_pooled_pc.graph
    levels = result.extra["depths_searched"]
    assert levels == len(alarm_pooled_pc.skeleton.depths)
    assert result.rounds <= levels + 2  # hello + one round per PC level
    assert 0 < result.extra["tests"] <= alarm_pooled_pc.n_tests
    # only tables leave a client: summed dense vectors, or the nonzero cells of a batch whose
    # dense tables are more than twice a client's data (small clients: K = 10, 64)
    kinds = {entry["kind"] for entry in result.ledger}
    assert kinds == ({"hello", "tables"} if k == 2 else {"hello", "tables", "sparse_tables"})


def test_fedfci_equals_pooled_fci():
    net = load_network("child")
    pooled = net.sample(5_000, seed=1)
    codes = net.sample_codes(5_000, seed=1).astype(np.int64)
    reference = fci(DiscreteOracle(codes, net.cards, net.variables, test="chi2"), alpha=0.05)
    result = run_method(
        "fedfci", split_iid(pooled, 5, seed=0).clients, {"alpha": 0.05}, backend="inprocess"
    )
    assert result.graph.kind == "PAG"
    assert result.graph == reference.graph


def test_secure_mode_gives_the_plain_graph():
    net = load_network("asia")
    part = split_iid(net.sample(3_000, seed=2), 3, seed=0).clients
    plain = run_method("fedpc", part, {"alpha": 0.05}, backend="inprocess")
    secure = run_method("fedpc", part, {"alpha": 0.05}, backend="inprocess", secure=True)
    assert secure.graph == plain.graph
    assert all(e["secure"] for e in secure.ledger if e["kind"] == "tables")
    assert not any(e["secure"] for e in plain.ledger)


def test_sketch_mode_two_rounds_per_batch_and_close_to_exact():
    net = load_network("asia")
    part = split_iid(net.sample(5_000, seed=3), 4, seed=0).clients
    exact = run_method("fedpc", part, {"alpha": 0.05}, backend="inprocess")
    sketch = run_method(
        "fedpc", part, {"alpha": 0.05, "ci": "sketch", "sketch_length": 200}, backend="inprocess"
    )
    batches = len(sketch.extra["batches"])
    assert sketch.rounds == 1 + 2 * batches
    assert [e["kind"] for e in sketch.ledger][1:3] == ["margins", "sketch"]
    # l = 200 gives ~10% relative noise on each statistic: the skeleton stays close to exact
    diff = np.logical_xor(sketch.graph.adjacency(), exact.graph.adjacency()).sum() // 2
    assert diff <= 2


def test_fisherz_needs_one_statistics_round():
    dag = random_dag(15, 2, seed=0)
    data = random_gaussian_network(dag, seed=0).sample(4_000, seed=0)
    result = run_method(
        "fedpc",
        split_iid(data, 3, seed=0).clients,
        {"test": "fisherz", "alpha": 0.05},
        backend="inprocess",
    )
    reference = pc(GaussianOracle(data.to_numpy(), list(data.columns)), alpha=0.05)
    assert result.graph == reference.graph
    assert result.rounds == 2
    assert [e["kind"] for e in result.ledger] == ["hello", "moments"]


class FlakyClient(FedPCClient):
    """Raises at its second table request, like a site that loses its connection."""

    calls: dict = {}

    def tables(self, payload, arrays):
        n = FlakyClient.calls.get(self.partition_id, 0) + 1
        FlakyClient.calls[self.partition_id] = n
        if n == 2:
            raise ConnectionError(f"site {self.partition_id} went away")
        return super().tables(payload, arrays)


def test_dropout_is_recorded_and_the_run_finishes_on_the_rest():
    net = load_network("asia")
    parts = split_iid(net.sample(4_000, seed=4), 4, seed=0).clients
    FlakyClient.calls = {}

    def make_client(pid, data, context=None):
        return FlakyClient(pid, data, context) if pid == 2 else FedPCClient(pid, data, context)

    strategy = METHODS["pc"].strategy({"alpha": 0.05})
    result = run_protocol(
        strategy, PartitionedClients(make_client, parts), 4, backend="inprocess", min_clients=3
    )
    assert [d["client"] for d in result.dropped_clients] == [2]
    assert result.dropped_clients[0]["round"] == 3  # hello, level 0, then level 1 failed
    assert "went away" in result.dropped_clients[0]["reason"]
    assert result.graph is not None and result.graph.n_edges() > 0
    with pytest.raises(TooFewClientsError, match="went away"):
        FlakyClient.calls = {}
        run_protocol(
            METHODS["pc"].strategy({}),
            PartitionedClients(make_client, parts),
            4,
            backend="inprocess",
            min_clients=4,
        )


def test_bad_input_names_client_and_column():
    net = load_network("asia")
    parts = split_iid(net.sample(1_000, seed=5), 3, seed=0).clients
    renamed = [parts[0], parts[1].rename(columns={"tub": "tuberculosis"}), parts[2]]
    with pytest.raises(ValueError, match="client 1 has columns"):
        run_method("fedpc", renamed, {}, backend="inprocess")
    floats = [p.copy() for p in parts]
    floats[2]["xray"] = np.linspace(0, 1, len(floats[2]))
    with pytest.raises(ValueError, match="client 2 column 'xray'"):
        run_method("fedpc", floats, {}, backend="inprocess")
    with pytest.raises(UnknownMethodError, match="fedpc"):
        run_method("fedpcx", parts, {}, backend="inprocess")
    with pytest.raises(ValueError, match="min_clients"):
        run_method("fedpc", parts, {}, backend="inprocess", min_clients=4)
    with pytest.raises(ValueError, match="ci='exact'"):
        METHODS["pc"].strategy({"test": "fisherz", "ci": "sketch"})


def test_result_json_has_the_shared_fields(tmp_path):
    net = load_network("asia")
    parts = split_iid(net.sample(2_000, seed=6), 2, seed=0).clients
    result = run_method("fedpc", parts, {"alpha": 0.05}, backend="inprocess")
    path = result.save(tmp_path / "r.json")
    obj = json.loads(path.read_text())
    for key in (
        "method",
        "config",
        "variables",
        "graph",
        "metrics",
        "rounds",
        "bytes_up",
        "bytes_down",
        "wall_s",
        "dropped_clients",
        "ledger",
    ):
        assert key in obj
    assert obj["graph"]["kind"] == "CPDAG"
    assert all(
        len(e) == 4 and {e[2], e[3]} <= {"tail", "arrow", "circle"} for e in obj["graph"]["edges"]
    )
    assert Result.load(path).graph == result.graph


def test_cli_run_writes_json_and_reports_metrics(tmp_path, capsys):
    out = tmp_path / "res.json"
    code = cli_main(
        [
            "run",
            "--method",
            "fedpc",
            "--network",
            "asia",
            "--samples",
            "2000",
            "--clients",
            "3",
            "--backend",
            "inprocess",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "shd=" in printed and "rounds" in printed
    obj = json.loads(out.read_text())
    assert {"shd", "adj_f1", "arrow_f1"} <= set(obj["metrics"])
    assert cli_main(["run", "--method", "nosuch", "--backend", "inprocess"]) == 2
    assert "unknown method" in capsys.readouterr().err


def test_cli_user_csvs_with_truth(tmp_path, capsys):
    net = load_network("asia")
    parts = split_iid(net.sample(3_000, seed=7), 2, seed=0).clients
    paths = []
    for k, part in enumerate(parts):
        paths.append(tmp_path / f"site{k}.csv")
        part.to_csv(paths[-1], index=False)
    truth = tmp_path / "truth.csv"
    pd.DataFrame(net.edges, columns=["cause", "effect"]).to_csv(truth, index=False)
    code = cli_main(
        [
            "run",
            "--method",
            "fedpc",
            "--data",
            *map(str, paths),
            "--truth",
            str(truth),
            "--backend",
            "inprocess",
        ]
    )
    assert code == 0
    assert "shd=" in capsys.readouterr().out


@pytest.mark.slow
def test_ray_engine_gives_the_inprocess_result():
    net = load_network("asia")
    parts = split_iid(net.sample(3_000, seed=8), 3, seed=0).clients
    options = {"alpha": 0.05}
    inprocess = run_method("fedpc", parts, options, backend="inprocess", secure=True)
    on_ray = run_method("fedpc", parts, options, backend="ray", secure=True, **ONE_ACTOR)
    assert on_ray.graph == inprocess.graph
    assert on_ray.rounds == inprocess.rounds
    assert on_ray.ledger == inprocess.ledger
    assert on_ray.bytes_up == inprocess.bytes_up


def test_flwr_run_config_can_score_against_the_network():
    from fedcausal_flwr.flwr_app import score

    net = load_network("asia")
    parts = split_iid(net.sample(2_000, seed=9), 2, seed=0).clients
    result = run_method("fedpc", parts, {"alpha": 0.05}, backend="inprocess")
    assert result.metrics == {}
    score(result, "network", "asia")
    assert {"shd", "adj_f1", "arrow_f1"} <= set(result.metrics)


def test_plain_table_replies_travel_compact_and_sum_exactly(monkeypatch):
    """Outside SecAgg+ a client's counts travel in the smallest integer type that holds them
    (lossless); the server sums them in int64, so the graph is still pooled PC's."""
    import numpy as np

    import fedcausal_flwr.clients.base as client_base
    from fedcausal_flwr.api import run
    from fedcausal_flwr.clients.base import compact_integers

    assert compact_integers(np.array([0, 255])).dtype == np.uint8
    assert compact_integers(np.array([0, 300])).dtype == np.uint16
    assert compact_integers(np.array([-1, 5])).dtype == np.int16
    assert compact_integers(np.array([0.5])).dtype == np.float64
    setting = dict(network="alarm", samples=4000, clients=4, test="chi2")
    compact = run("fedpc", **setting)
    pooled = run("pooled", **setting)
    assert np.array_equal(compact.graph.marks, pooled.graph.marks)
    sparse = {a["dtype"] for e in compact.ledger if e["kind"] == "sparse_tables"
              for a in e["arrays"]}  # fmt: skip
    assert sparse and sparse <= {"uint8", "uint16", "uint32"}
    import fedcausal_flwr.clients.fedpc as client_fedpc

    monkeypatch.setattr(client_base, "compact_integers", lambda array: array)
    monkeypatch.setattr(client_fedpc, "count_type", lambda rows: np.dtype(np.int64))
    wide = run("fedpc", **setting)
    assert np.array_equal(wide.graph.marks, compact.graph.marks)
    assert compact.bytes_up < wide.bytes_up / 3  # 1,000-row clients: 2-byte counts, not 8
    secure = run("fedpc", secure=True, **{**setting, "samples": 1000})
    assert np.array_equal(
        secure.graph.marks, run("pooled", **{**setting, "samples": 1000}).graph.marks
    )
