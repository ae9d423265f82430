"""FedLCS through the Flower strategy: the paper's Table 2 trace, d-separation recovery, votes."""

import numpy as np
import pandas as pd
import pytest
from helpers import ONE_ACTOR

from fedcausal_flwr.clients.fedlcs import FedLCSClient
from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.discovery.lcs import local_structure
from fedcausal_flwr.discovery.lcs_payload import full_graph
from fedcausal_flwr.discovery.lcs_state import LCSOptions
from fedcausal_flwr.federation.runtime.runners import PartitionedClients, run_method, run_protocol
from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL
from fedcausal_flwr.graphs.truth import dag_to_cpdag
from fedcausal_flwr.metrics import local_metrics
from fedcausal_flwr.stats.oracles import DSeparationOracle, TableOracle
from fedcausal_flwr.strategies.fedlcs import OPTIONS, make_strategy

#: the rows-per-cell rule every FedLCS entry point applies by default (a local oracle must match it)
DEFAULT_RELIABILITY = OPTIONS["reliability"].default

NAMES = ["A", "B", "C", "E", "F", "T"]
# E _||_ T ; B _||_ T | A ; F _||_ T | A ; everything else dependent (Table 2 of the paper).
TABLE = {("E", "T", ()): 0.9, ("B", "T", ("A",)): 0.8, ("F", "T", ("A",)): 0.7}


class TableClient(FedLCSClient):
    """Test-only: every CI test answered from the fixed Table-2 independences."""

    table = TABLE

    def _oracle(self, payload):
        return TableOracle(self.table, payload.variables, default=0.0)


class DSepClient(FedLCSClient):
    """Test-only: perfect CI answers (d-separation in the true DAG)."""

    dag = None

    def _oracle(self, payload):
        assert list(self.dag.names) == payload.variables
        return DSeparationOracle(self.dag)


def binary_frames(names, k, rows=20, seed=0):
    rng = np.random.default_rng(seed)
    return [pd.DataFrame(rng.integers(0, 2, (rows, len(names))), columns=names) for _ in range(k)]


def run_with(client_cls, frames, options):
    factory = PartitionedClients(client_cls, frames)
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
            return TableOracle(table, payload.variables, default=0.0)

    frames = binary_frames(NAMES, 3)
    kept = run_with(Lonely, frames, {"target": "T"})
    assert kept.extra["skeleton_layers"]["T"][0]["removed"] == []
    strict = run_with(Lonely, frames, {"target": "T", "ratio": 0.9})
    assert strict.extra["skeleton_layers"]["T"][0]["removed"] == ["E"]
    # the vote shares: E was kept by 2 of 3 at T's layer 0, which ratio 0.9 removes; an edge
    # keeps the share of its sides' last votes, each at least the 2 of 3 that ratio 0.4 needs
    assert ["T", "E", pytest.approx(2 / 3), 0] in strict.extra["edge_votes"]["removed"]
    shares = {frozenset(v[:2]): v[2] for v in kept.extra["edge_votes"]["kept"]}
    assert frozenset(("T", "E")) in shares and min(shares.values()) >= 2 / 3


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
    # two clients with the same rows vote as one (a vote needs two); in another order, since
    # the same rows in the same order are one site given twice, which the input check refuses
    two = [frame, frame[::-1]]
    result = run_method("fedlcs", two, {"target": "either", "test": "g2"}, backend="inprocess")
    from fedcausal_flwr.clients.base import encode_columns
    from fedcausal_flwr.stats.oracles import DiscreteOracle

    levels = {v: sorted(frame[v].unique().tolist()) for v in net.variables}
    codes = encode_columns(frame, list(net.variables), levels, 0)
    oracle = DiscreteOracle(
        codes, [len(levels[v]) for v in net.variables], net.variables, "g2",
        reliability=DEFAULT_RELIABILITY,
    )  # fmt: skip
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
    from fedcausal_flwr.discovery.lcs_skeleton import answer_prune
    from fedcausal_flwr.discovery.pcsimple import apply_layer, layer_queries
    from fedcausal_flwr.stats.oracles import DiscreteOracle

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
        # speculation is bounded: few tests beyond what the one-at-a-time replay needs
        assert batched.n_computed <= 1.6 * sequential.n_computed


# ============================================================================ baselines
BASELINE_TARGETS = ["HR", "CO", "VENTLUNG"]


@pytest.fixture(scope="module")
def alarm_rows():
    net = load_network("alarm")
    return net, net.sample(3000, seed=2)


def incident(extra):
    return {t: (o["parents"], o["children"], o["undirected"]) for t, o in extra["targets"].items()}


def test_one_client_baselines_equal_fedlcs(alarm_rows):
    """With one client, per-client search, pooled search and the federation are the same run."""
    from fedcausal_flwr.strategies.fedlcs import lcs_local_summary

    net, frame = alarm_rows
    options = {"target": ",".join(BASELINE_TARGETS)}
    # a vote needs two clients; the same rows (in another order: not one site twice) vote as one
    votes = {"fedlcs": [frame, frame[::-1]]}
    methods = ("fedlcs", "fedlcs-local", "lcs-pooled")
    runs = {m: run_method(m, votes.get(m, [frame]), options) for m in methods}
    want = incident(runs["fedlcs"].extra)
    assert sorted(want) == sorted(BASELINE_TARGETS)
    assert any(p or c for p, c, _ in want.values())  # something was oriented
    assert incident(runs["fedlcs-local"].extra) == want
    assert incident(runs["lcs-pooled"].extra) == want
    assert runs["lcs-pooled"].extra["pc_sets"] == runs["fedlcs"].extra["pc_sets"]
    summary = lcs_local_summary(runs["fedlcs-local"], net.dag)
    avg, best = summary["fedlcs-local-avg"], summary["fedlcs-local-best"]
    assert best["oracle"] and best["client"] == 0
    assert {k: best[k] for k in avg} == avg


def test_baselines_on_alarm_with_three_clients(alarm_rows):
    """fedlcs-local: each client's graphs are its own local search; lcs-pooled: the search on the
    union of the rows, after a raw_rows round (labelled not private)."""
    from fedcausal_flwr.clients.base import encode_columns
    from fedcausal_flwr.data.partition import split_iid
    from fedcausal_flwr.graphs.graph import Graph
    from fedcausal_flwr.stats.oracles import DiscreteOracle
    from fedcausal_flwr.strategies.fedlcs import lcs_local_summary

    net, frame = alarm_rows
    names = list(net.variables)
    parts = split_iid(frame, 3, seed=0).clients
    levels = {v: sorted(frame[v].cat.categories.tolist()) for v in names}
    targets = [names.index(t) for t in BASELINE_TARGETS]

    def search(rows):
        codes = encode_columns(rows, names, levels, 0)
        cards = [len(levels[v]) for v in names]
        oracle = DiscreteOracle(codes, cards, names, "chi2", reliability=DEFAULT_RELIABILITY)
        return local_structure(oracle, targets, LCSOptions())[0]

    options = {"target": ",".join(BASELINE_TARGETS)}
    local = run_method("fedlcs-local", parts, options)
    assert local.rounds == 2 and [e["kind"] for e in local.ledger] == ["hello", "lcs_local"]
    per_client = {}
    for entry, part in zip(local.extra["client_graphs"], parts, strict=True):
        found = search(part)
        for t in targets:
            got = Graph.from_json(entry["targets"][names[t]])
            assert got == full_graph(found[t].graph(names), names)
        per_client[entry["client"]] = [
            local_metrics(full_graph(found[t].graph(names), names), net.dag, names[t])["f1"]
            for t in targets
        ]
    summary = lcs_local_summary(local, net.dag)
    means = {c: float(np.mean(v)) for c, v in per_client.items()}
    assert summary["fedlcs-local-avg"]["f1"] == pytest.approx(np.mean(list(means.values())))
    assert summary["fedlcs-local-best"]["f1"] == pytest.approx(max(means.values()))
    assert len(set(means.values())) > 1  # the clients differ: avg and best are not the same

    pooled = run_method("lcs-pooled", parts, options)
    assert [e["kind"] for e in pooled.ledger] == ["hello", "raw_rows"]
    assert "not private" in pooled.extra["reference"]
    found = search(frame.iloc[np.concatenate([p.index.to_numpy() for p in parts])])
    for t in targets:
        out = pooled.extra["targets"][names[t]]
        assert out["parents"] == [names[v] for v in found[t].parents]
        assert out["children"] == [names[v] for v in found[t].children]
        assert out["undirected"] == [names[v] for v in found[t].undirected]
    with pytest.raises(KeyError, match="fedlcs-local"):
        lcs_local_summary(pooled, net.dag)


@pytest.mark.slow
def test_ray_engine_gives_the_inprocess_result():
    """Same structure, knowledge, rounds and ledger on Flower's Ray engine (3 clients)."""
    from fedcausal_flwr.data.partition import split_iid

    net = load_network("asia")
    parts = split_iid(net.sample(3_000, seed=8), 3, seed=0).clients
    options = {"target": "either,lung", "test": "g2"}
    inprocess = run_method("fedlcs", parts, options, backend="inprocess")
    on_ray = run_method("fedlcs", parts, options, backend="ray", **ONE_ACTOR)
    assert on_ray.graph == inprocess.graph
    counts = ("client_tests", "tests")
    assert {k: v for k, v in on_ray.extra.items() if k not in counts} == {
        k: v for k, v in inprocess.extra.items() if k not in counts
    }
    # the client's cross-round test cache lives per data frame, which Ray may rebuild
    assert on_ray.extra["tests"] >= inprocess.extra["tests"] > 0
    assert on_ray.rounds == inprocess.rounds
    assert on_ray.ledger == inprocess.ledger
    assert on_ray.bytes_down == inprocess.bytes_down  # (bytes_up carry the test counts)


def test_separating_set_stop_rules():
    """Pair (0, 1), pool (2, 3): level 0 finds a set with p = 0.5, level 1 one with p = 0.9, level 2
    none. after_found and first_empty keep the level-1 set (max over levels); first_found stops
    at level 0 with the level-0 set."""
    from fedcausal_flwr.discovery.lcs_sepsets import sepset_search
    from fedcausal_flwr.discovery.lcs_state import Knowledge, SepsetRequest

    answers = {0: ((), 0.5, 0), 1: ((2,), 0.9, 1), 2: None}

    def drive(stop):
        kb = Knowledge()
        steps = sepset_search([((0, 1), (2, 3))], kb, LCSOptions(sep_stop=stop))
        levels = []
        try:
            request = next(steps)
            while True:
                assert isinstance(request, SepsetRequest)
                levels.append(request.jobs[0][3])
                choice = answers[levels[-1]]
                request = steps.send([(choice, () if choice is None else (choice[0],))])
        except StopIteration:
            return levels, kb.sepsets[(0, 1)]

    levels, chosen = drive("after_found")
    assert levels == [0, 1, 2] and chosen["set"] == (2,) and chosen["level"] == 1
    assert chosen["independent"] == [(), (2,)]  # every level's sets, for the collider rules
    levels, chosen = drive("first_found")
    assert levels == [0] and chosen["set"] == () and chosen["p"] == 0.5
    levels, chosen = drive("first_empty")
    assert levels == [0, 1, 2] and chosen["set"] == (2,)
