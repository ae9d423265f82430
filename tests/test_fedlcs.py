"""FedLCS through the Flower strategy: the paper's Table 2 trace, d-separation recovery, votes."""

import numpy as np
import pandas as pd
import pytest

from fedcausal_flwr.clients.fedlcs import FedLCSClient
from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.federation.runners import PartitionedClients, run_method, run_protocol
from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL
from fedcausal_flwr.graphs.truth import dag_to_cpdag
from fedcausal_flwr.metrics import local_metrics
from fedcausal_flwr.stats.oracles import DSeparationOracle, TableOracle
from fedcausal_flwr.strategies.fedlcs import (
    LCSOptions,
    full_graph,
    local_structure,
    make_strategy,
)

NAMES = ["A", "B", "C", "E", "F", "T"]
# E _||_ T ; B _||_ T | A ; F _||_ T | A ; everything else dependent (Table 2 of the paper).
TABLE = {("E", "T", ()): 0.9, ("B", "T", ("A",)): 0.8, ("F", "T", ("A",)): 0.7}


class TableClient(FedLCSClient):
    """Test-only: every CI test answered from the fixed Table-2 independences."""

    table = TABLE

    def _oracle(self, payload):
        return TableOracle(self.table, payload["variables"], default=0.0)


class DSepClient(FedLCSClient):
    """Test-only: perfect CI answers (d-separation in the true DAG)."""

    dag = None

    def _oracle(self, payload):
        assert list(self.dag.names) == payload["variables"]
        return DSeparationOracle(self.dag)


def binary_frames(names, k, rows=20, seed=0):
    rng = np.random.default_rng(seed)
    return [pd.DataFrame(rng.integers(0, 2, (rows, len(names))), columns=names) for _ in range(k)]


def run_with(client_cls, frames, options):
    factory = PartitionedClients(lambda pid, data: client_cls(pid, data), frames)
    return run_protocol(make_strategy(options), factory, len(frames))


def test_table2_trace_through_the_federation():
    result = run_with(TableClient, binary_frames(NAMES, 3), {"target": "T"})
    layers = result.extra["skeleton_layers"]["T"]
    assert [lv["level"] for lv in layers] == [0, 1]  # at l = 2, |CPC| = 2 = l ends the search
    assert [lv["removed"] for lv in layers] == [["E"], ["B", "F"]]
    assert result.extra["pc_sets"]["T"] == ["A", "C"]
    assert set(result.extra["parents"] + result.extra["children"]) <= {"A", "C"}
    # B and F went given {A}: the consistent-sepset search (FLEori around A) finds exactly that
    assert result.extra["consistent_sepsets"]["B|T"]["set"] == ["A"]
    # A's first layer-1 tests saw no removal, so the unchanged-skeleton stop (l >= 1) fired for A
    assert [lv["level"] for lv in result.extra["skeleton_layers"]["A"]] == [0, 1]
    assert result.rounds == 1 + sum(result.extra["stage_rounds"].values())


def test_votes_follow_the_ratio_threshold():
    """Only one of three clients sees E _||_ T: ratio 0.4 needs 2 keep votes of 3, so E stays
    iff at least two clients keep it; with ratio 0.9 (3 of 3) one remover is enough."""

    class Lonely(TableClient):
        def _oracle(self, payload):
            table = TABLE if self.partition_id == 0 else {}
            return TableOracle(table, payload["variables"], default=0.0)

    frames = binary_frames(NAMES, 3)
    kept = run_with(Lonely, frames, {"target": "T"})
    assert kept.extra["skeleton_layers"]["T"][0]["removed"] == []
    strict = run_with(Lonely, frames, {"target": "T", "ratio": 0.9})
    assert strict.extra["skeleton_layers"]["T"][0]["removed"] == ["E"]


def identifiable_errors(name, result_targets):
    """Per target: PC set must be the truth's; CPDAG-directed edges must be oriented the same
    way; CPDAG-undirected edges must stay undirected (nothing is guessed)."""
    net = load_network(name)
    cpdag = dag_to_cpdag(net.dag)
    m, names = cpdag.marks, list(net.variables)
    errors, identifiable = [], 0
    for t_name, out in result_targets.items():
        t = names.index(t_name)
        truth = {names[x] for x in np.flatnonzero(m[t] != NONE)}
        learned = set(out["parents"]) | set(out["children"]) | set(out["undirected"])
        if truth != learned:
            errors.append((t_name, "pc", sorted(truth ^ learned)))
            continue
        for x_name in truth:
            x = names.index(x_name)
            parent = m[x, t] == ARROW and m[t, x] == TAIL
            child = m[t, x] == ARROW and m[x, t] == TAIL
            identifiable += parent or child
            got = "p" if x_name in out["parents"] else "c" if x_name in out["children"] else "u"
            want = "p" if parent else "c" if child else "u"
            if got != want:
                errors.append((t_name, x_name, want, got))
    return errors, identifiable


@pytest.mark.parametrize("name", ["child", "alarm"])
def test_dseparation_oracle_recovers_identifiable_structure(name):
    net = load_network(name)
    client = type("Oracle", (DSepClient,), {"dag": net.dag})
    frame = net.sample(300, seed=1)
    result = run_with(client, [frame], {"target": "all"})
    errors, identifiable = identifiable_errors(name, result.extra["targets"])
    assert errors == []
    assert identifiable > 20  # the check is not vacuous
    # batching: rounds grow with stages x layers, not with the number of targets
    assert result.rounds < net.n_nodes


def test_one_target_equals_its_share_of_an_all_targets_run():
    net = load_network("child")
    client = type("Oracle", (DSepClient,), {"dag": net.dag})
    frame = net.sample(300, seed=1)
    every = run_with(client, [frame], {"target": "all"}).extra["targets"]
    for target in ["Disease", "LungParench", "Age"]:
        alone = run_with(client, [frame], {"target": target})
        for key in ("parents", "children", "undirected"):
            assert alone.extra[key] == every[target][key]


def test_local_search_matches_federation_with_one_client():
    """One client with real G2 tests: the server-driven search equals the local driver."""
    net = load_network("asia")
    frame = net.sample(3000, seed=3)
    result = run_method("fedlcs", [frame], {"target": "either", "test": "g2"}, backend="inprocess")
    from fedcausal_flwr.clients.fedc2sl import encode_columns
    from fedcausal_flwr.stats.oracles import DiscreteOracle

    levels = {v: sorted(frame[v].unique().tolist()) for v in net.variables}
    codes = encode_columns(frame, list(net.variables), levels, 0)
    oracle = DiscreteOracle(codes, [len(levels[v]) for v in net.variables], net.variables, "g2")
    t = list(net.variables).index("either")
    local, _ = local_structure(oracle, [t], LCSOptions())
    names = list(net.variables)
    assert result.extra["parents"] == [names[v] for v in local[t].parents]
    assert result.extra["children"] == [names[v] for v in local[t].children]
    scores = local_metrics(full_graph(result.graph, names), net.dag, "either")
    assert 0 <= scores["f1"] <= 1


def test_random_orientation_is_an_option_and_off_by_default():
    net = load_network("child")
    client = type("Oracle", (DSepClient,), {"dag": net.dag})
    frame = net.sample(300, seed=1)
    plain = run_with(client, [frame], {"target": "all"}).extra["targets"]
    undirected = [t for t, out in plain.items() if out["undirected"]]
    assert undirected  # child has undirected CPDAG edges
    forced = run_with(client, [frame], {"target": "all", "random_orient": "true"})
    for t in undirected:
        out = forced.extra["targets"][t]
        assert out["undirected"] == [] and out["randomly_oriented"]
        assert set(out["parents"] + out["children"]) == set(
            plain[t]["parents"] + plain[t]["children"] + plain[t]["undirected"]
        )


def test_bad_options_are_clear_errors():
    frames = binary_frames(NAMES, 2)
    with pytest.raises(ValueError, match="target"):
        run_with(TableClient, frames, {})
    with pytest.raises(KeyError, match="'Z' is not a variable"):
        run_with(TableClient, frames, {"target": "Z"})
    with pytest.raises(ValueError, match="sep_stop"):
        make_strategy({"target": "T", "sep_stop": "never"})
    with pytest.raises(ValueError, match="ratio"):
        make_strategy({"target": "T", "ratio": 0})


def test_batched_prune_equals_sequential_pcsimple_layer():
    """answer_prune fetches tests in growing chunks; its decisions equal a one-test-at-a-time
    replay, and it computes fewer tests than the whole layer superset."""
    from fedcausal_flwr.discovery.pcsimple import apply_layer, layer_queries
    from fedcausal_flwr.stats.oracles import DiscreteOracle
    from fedcausal_flwr.strategies.fedlcs import answer_prune

    net = load_network("alarm")
    frame = net.sample(1500, seed=5)
    names = list(net.variables)
    codes = np.column_stack([frame[v].cat.codes.to_numpy() for v in names]).astype(np.int64)
    jobs = [(t, tuple(v for v in range(12) if v != t), lv) for t in (0, 3, 7) for lv in (0, 1, 2)]
    for stable in (False, True):
        batched = DiscreteOracle(codes, net.cards, names, test="chi2")
        sequential = DiscreteOracle(codes, net.cards, names, test="chi2")
        got = answer_prune(batched, jobs, 0.05, stable)
        want = [
            tuple(apply_layer(v, c, lv, lambda q, o=sequential: o.test(*q), 0.05, stable)[0])
            for v, c, lv in jobs
        ]
        assert got == want
        superset = {q for v, c, lv in jobs for q in layer_queries(v, c, lv)}
        assert sequential.n_computed <= batched.n_computed < len(superset)
