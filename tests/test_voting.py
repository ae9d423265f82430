"""Voting methods: fedpc-vote, pc/fci-vote, pc/fci-cit-vote, local, pooled.

One client equals pooled PC/FCI; every method runs on ALARM at K = 5 and 30; fedpc-vote's layer
votes are recomputed from the clients' own data; combination rules, ties and the max-p fix.
"""

import math
from itertools import combinations

import numpy as np
import pytest
from helpers import ONE_ACTOR, padded_names

from fedcausal_flwr.api import make_partition, run
from fedcausal_flwr.clients.voting import VotingClient
from fedcausal_flwr.data import load_network
from fedcausal_flwr.discovery.fci import fci
from fedcausal_flwr.discovery.layerwise import prune_depth
from fedcausal_flwr.discovery.pc import pc
from fedcausal_flwr.discovery.sepset_choice import max_pvalue_choice
from fedcausal_flwr.federation.runtime.runners import PartitionedClients, run_method, run_protocol
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL
from fedcausal_flwr.stats.oracles import DiscreteOracle
from fedcausal_flwr.strategies.fedpc_vote import (
    make_strategy as make_fedpc_vote,
)
from fedcausal_flwr.strategies.fedpc_vote import vote_threshold
from fedcausal_flwr.strategies.voting import local_summary, majority_marks, vote_pvalues

METHODS = ["pooled", "fedpc-vote", "pc-vote", "pc-cit-vote", "fci-vote", "fci-cit-vote", "local"]
SAMPLES, SEED = 10_000, 0
#: on one test worker: the module's ALARM fixtures (pooled PC, the memoised runs) are computed once
pytestmark = pytest.mark.xdist_group("voting-alarm")


def reordered(frame):
    """The same rows in reverse order: a second site with the same data, which a run does not
    refuse as the same site given twice (its fingerprint depends on the row order)."""
    return frame.iloc[::-1].reset_index(drop=True)


@pytest.fixture(scope="module")
def alarm():
    net = load_network("alarm")
    pooled = net.sample(SAMPLES, seed=SEED)
    codes = net.sample_codes(SAMPLES, seed=SEED).astype(np.int64)
    return net, pooled, codes


@pytest.fixture(scope="module")
def alarm_oracle(alarm):
    net, _, codes = alarm
    return DiscreteOracle(codes, net.cards, net.variables, test="chi2")


@pytest.fixture(scope="module")
def alarm_pc(alarm_oracle):
    return pc(alarm_oracle, alpha=0.05)


@pytest.fixture(scope="module")
def alarm_runs():
    """``get(method, k, **options)``: api.run on ALARM x 10k, memoised across tests."""
    cache = {}

    def get(method, k, **options):
        key = (method, k, tuple(sorted(options.items())))
        if key not in cache:
            cache[key] = run(
                method,
                network="alarm",
                samples=SAMPLES,
                clients=k,
                backend="inprocess",
                seed=SEED,
                **options,
            )
        return cache[key]

    return get


def client_codes(frame, net):
    """A client frame's category codes (the network's state order, i.e. net.cards)."""
    return np.column_stack([frame[v].cat.codes.to_numpy() for v in net.variables]).astype(np.int64)


def pc_stable_level(oracle, adjacency, level, alpha=0.05):
    """One PC-stable level written out (an implementation independent of the skeleton engine):
    edge x - y goes if some S of ``level`` nodes of adj(x) - {y} or adj(y) - {x}, adjacency
    frozen at the level's start, gives p > alpha. All tests go to the oracle in one batch."""
    queries = []
    for x, y in zip(*np.nonzero(np.triu(adjacency, k=1)), strict=True):
        sets = set()
        for near, far in ((x, y), (y, x)):
            pool = [int(v) for v in np.flatnonzero(adjacency[near]) if v != far]
            sets.update(combinations(pool, level))
        queries.extend((int(x), int(y), s) for s in sorted(sets))
    kept = adjacency.copy()
    pvalues = oracle.test_batch(queries) if queries else []
    for (x, y, _), p in zip(queries, pvalues, strict=True):
        if p > alpha:
            kept[x, y] = kept[y, x] = False
    return kept


def causallearn_graph(graph):
    """``graph`` as a causal-learn GeneralGraph (padded node names: their order is index order)."""
    from causallearn.graph.Edge import Edge
    from causallearn.graph.Endpoint import Endpoint
    from causallearn.graph.GeneralGraph import GeneralGraph
    from causallearn.graph.GraphNode import GraphNode

    endpoint = {TAIL: Endpoint.TAIL, ARROW: Endpoint.ARROW, CIRCLE: Endpoint.CIRCLE}
    nodes = [GraphNode(n) for n in padded_names(graph.n_nodes)]
    out = GeneralGraph(nodes)
    for i, j in zip(*np.nonzero(np.triu(graph.marks != NONE, k=1)), strict=True):
        out.add_edge(Edge(nodes[i], nodes[j], endpoint[graph.marks[j, i]],
                          endpoint[graph.marks[i, j]]))  # fmt: skip
    return out


def causallearn_cpdag(dag):
    """The CPDAG of ``dag`` by causal-learn's dag2cpdag."""
    from causallearn.graph.Dag import Dag
    from causallearn.utils.DAG2CPDAG import dag2cpdag

    general = causallearn_graph(dag)
    cl_dag = Dag(general.get_nodes())
    for i, j in zip(*np.nonzero(dag.marks == ARROW), strict=True):  # arrowhead at j: i --> j
        cl_dag.add_directed_edge(general.get_nodes()[i], general.get_nodes()[j])
    return Graph.from_causallearn(dag2cpdag(cl_dag).graph, dag.names, "CPDAG")


def arrowhead_f1(learned, truth):
    """Arrowhead F1 from the two edge lists (ordered pairs (u, v) with an arrow at v)."""

    def heads(graph):
        out = set()
        for u, v, at_u, at_v in graph.edges():
            out |= {(u, v)} if at_v == "arrow" else set()
            out |= {(v, u)} if at_u == "arrow" else set()
        return out

    got, true = heads(learned), heads(truth)
    tp, fp, fn = len(got & true), len(got - true), len(true - got)
    precision = tp / (tp + fp) if tp + fp else float(fn == 0)
    recall = tp / (tp + fn) if tp + fn else float(fp == 0)
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


# ============================================================================ one client = pooled
@pytest.mark.parametrize("method", ["pc-vote", "pc-cit-vote", "local", "pooled"])
def test_one_client_equals_pooled_pc(alarm, alarm_pc, method):
    _, pooled, _ = alarm
    # a vote needs two
    clients = [pooled, reordered(pooled)] if method.endswith("vote") else [pooled]
    result = run_method(method, clients, {"alpha": 0.05}, backend="inprocess")
    assert result.graph.kind == "CPDAG"
    assert result.graph == alarm_pc.graph


def test_one_client_fedpc_vote_equals_pooled_pc(alarm, alarm_pc):
    _, pooled, _ = alarm
    result = run_method(
        "fedpc-vote", [pooled, reordered(pooled)], {"orientation": "sepsets"}, backend="inprocess"
    )  # two identical clients vote as one
    assert result.graph == alarm_pc.graph
    names = alarm_pc.graph.names
    expected = {
        f"{names[a]}|{names[b]}": [[names[v] for v in s] for s in sets]
        for (a, b), sets in alarm_pc.skeleton.sepsets.items()
    }
    assert result.evidence.sepsets() == expected
    assert [lv["depth"] for lv in result.extra["layers"]] == [
        lv["depth"] for lv in alarm_pc.skeleton.depths
    ]
    assert result.rounds == 1 + len(alarm_pc.skeleton.depths)  # hello + one round per layer


def test_one_client_fedpc_vote_maxp_orientation(alarm, alarm_oracle, alarm_pc):
    """Default orientation: pooled skeleton, and max-p sets equal a brute-force search."""
    _, pooled, _ = alarm
    result = run_method("fedpc-vote", [pooled, reordered(pooled)], {}, backend="inprocess")
    adjacency = alarm_pc.skeleton.adjacency
    assert np.array_equal(result.graph.adjacency(), adjacency)
    names = list(alarm_pc.graph.names)
    chosen = {}
    for x in range(len(names)):
        for z in range(x + 1, len(names)):
            if adjacency[x, z] or not (adjacency[x] & adjacency[z]).any():
                continue
            pool = sorted(set(np.flatnonzero(adjacency[x] | adjacency[z]).tolist()) - {x, z})
            best, best_p = None, -1.0
            for size in range(min(3, len(pool)) + 1):
                for s in combinations(pool, size):
                    p = float(alarm_oracle.test_batch([(x, z, s)])[0])
                    if p > 0.05 and p > best_p:
                        best, best_p = s, p
            chosen[(x, z)] = best
    reported = result.extra["consistent_sepsets"]
    assert len(reported) == len(chosen) > 0
    for (x, z), s in chosen.items():
        entry = reported[f"{names[x]}|{names[z]}"]
        assert (entry is None) == (s is None)
        if s is not None:
            assert entry["set"] == [names[v] for v in s] and entry["client"] == 0
    # independent path: causal-learn orients the pooled skeleton with those sets (its UC_sepset
    # rule with priority 2, "existing colliders first", then its Meek rules)
    assert all(s is not None for s in chosen.values())
    from causallearn.graph.GraphClass import CausalGraph
    from causallearn.utils.PCUtils import Meek, UCSepset

    cg = CausalGraph(len(names), padded_names(len(names)))
    for i, j in zip(*np.nonzero(np.triu(~adjacency, k=1)), strict=True):
        cg.G.remove_edge(cg.G.get_edge(cg.G.nodes[i], cg.G.nodes[j]))
    cg.sepset = np.empty((len(names), len(names)), object)
    for (x, z), s in chosen.items():
        cg.sepset[x, z] = cg.sepset[z, x] = [tuple(s)]
    oriented = Meek.meek(UCSepset.uc_sepset(cg, priority=2))
    expected = Graph.from_causallearn(oriented.G.graph, names, "CPDAG")
    assert np.any(expected.marks == ARROW)
    assert result.graph == expected
    assert result.rounds == 1 + len(alarm_pc.skeleton.depths) + 1
    assert [e["kind"] for e in result.ledger][-1] == "pvalues"


@pytest.mark.parametrize("method", ["fci-vote", "fci-cit-vote"])
def test_one_client_equals_pooled_fci(alarm, alarm_oracle, method):
    _, pooled, _ = alarm
    reference = fci(alarm_oracle, alpha=0.05)
    result = run_method(method, [pooled, reordered(pooled)], {"alpha": 0.05}, backend="inprocess")
    assert result.graph.kind == "PAG"
    assert result.graph == reference.graph


# ============================================================================ ALARM, K = 5 and 30
@pytest.mark.parametrize("k", [5, 30])
@pytest.mark.parametrize("method", METHODS)
def test_every_method_runs_on_alarm(alarm_runs, alarm_pc, method, k):
    result = alarm_runs(method, k)
    assert {"arrow_f1", "shd"} <= set(result.metrics)
    assert 0.3 < result.metrics["arrow_f1"] <= 1.0
    assert 0 <= result.metrics["shd"] < 46  # ALARM has 46 edges
    assert result.graph.kind == ("PAG" if method.startswith("fci") else "CPDAG")
    assert result.config["data"]["clients"] == k and not result.dropped_clients
    kinds = [e["kind"] for e in result.ledger]
    assert kinds[0] == "hello" and not any(e["summed"] for e in result.ledger)
    assert ("raw_rows" in kinds) == (method == "pooled")  # only the reference moves data
    if method == "pooled":
        assert result.graph == alarm_pc.graph  # whatever the split
    if method in ("pc-vote", "fci-vote", "local", "pooled"):
        assert result.rounds == 2
    if method == "fedpc-vote":
        assert result.rounds == 1 + len(result.extra["layers"]) + 1
        assert set(kinds[1:-1]) == {"prune"} and kinds[-1] == "pvalues"


@pytest.mark.parametrize("k", [5, 30])
def test_fedpc_vote_keeps_only_edges_with_enough_votes(alarm_runs, k):
    result = alarm_runs("fedpc-vote", k)
    layers = result.extra["layers"]
    threshold = math.ceil(0.5 * k)
    surviving = None
    for layer in layers:
        assert layer["threshold"] == threshold and len(layer["clients"]) == k
        kept = {pair for pair, votes in layer["votes"].items() if votes >= threshold}
        if surviving is not None:
            assert set(layer["votes"]) == surviving  # the next layer starts from the kept edges
        assert layer["removed"] == len(layer["votes"]) - len(kept)
        surviving = kept
    final = {f"{u}|{v}" for u, v, _, _ in result.graph.edges()}
    assert final == surviving
    for layer in layers:  # no final edge ever had fewer than ceil(ratio*K) votes
        assert all(layer["votes"][pair] >= threshold for pair in final)


def test_fedpc_vote_layer_votes_recomputed_from_client_data(alarm, alarm_runs):
    net, pooled, _ = alarm
    k, ratio = 5, 0.4
    result = alarm_runs("fedpc-vote", k, ratio=ratio)
    oracles = [
        DiscreteOracle(client_codes(f, net), net.cards, net.variables, test="chi2")
        for f in make_partition(pooled, k, "iid", SEED).clients
    ]
    names = net.variables
    adjacency = ~np.eye(len(names), dtype=bool)
    threshold = 2  # ceil(0.4 * 5)
    assert [layer["depth"] for layer in result.extra["layers"]][:3] == [0, 1, 2]
    for layer in result.extra["layers"]:
        assert layer["threshold"] == threshold
        kept = [pc_stable_level(o, adjacency, layer["depth"]) for o in oracles]
        votes = np.sum(kept, axis=0)
        rows, cols = np.nonzero(np.triu(adjacency, k=1))
        assert layer["votes"] == {
            f"{names[a]}|{names[b]}": int(votes[a, b]) for a, b in zip(rows, cols, strict=True)
        }
        adjacency = adjacency & (votes >= threshold)
    assert np.array_equal(result.graph.adjacency(), adjacency)


def test_local_summary_scores_every_client(alarm, alarm_runs):
    net, pooled, _ = alarm
    result = alarm_runs("local", 5)
    summary = local_summary(result, net.dag)
    graphs = {e["client"]: Graph.from_json(e["graph"]) for e in result.extra["client_graphs"]}
    assert sorted(graphs) == [0, 1, 2, 3, 4]
    assert result.graph == graphs[0]
    # a client graph is that client's own PC: causal-learn's PC-stable on its rows (client 3
    # observes every level, so causal-learn's inferred level sets are the network's)
    from causallearn.graph.SHD import SHD
    from causallearn.search.ConstraintBased.PC import pc as cl_pc

    codes = client_codes(make_partition(pooled, 5, "iid", SEED).clients[3], net)
    assert [len(np.unique(codes[:, j])) for j in range(codes.shape[1])] == list(net.cards)
    names = padded_names(codes.shape[1])
    own = cl_pc(codes, 0.05, "chisq", stable=True, show_progress=False, node_names=names)
    assert graphs[3] == Graph.from_causallearn(own.G.graph, net.variables, "CPDAG")
    # scores by causal-learn's SHD and an edge-list arrowhead F1 against causal-learn's CPDAG
    truth = causallearn_cpdag(net.dag)
    shds = [SHD(causallearn_graph(truth), causallearn_graph(graphs[c])).get_shd() for c in range(5)]
    f1s = [arrowhead_f1(graphs[c], truth) for c in range(5)]
    assert len(set(shds)) > 1 and len(set(f1s)) > 1  # the clients differ, so the mean matters
    assert summary["local-avg"]["shd"] == pytest.approx(np.mean(shds))
    assert summary["local-avg"]["arrow_f1"] == pytest.approx(np.mean(f1s))
    best = max(range(5), key=lambda c: (f1s[c], -c))
    assert summary["local-best"]["client"] == best and summary["local-best"]["oracle"]
    assert summary["local-best"]["arrow_f1"] == pytest.approx(f1s[best])
    assert summary["local-best"]["shd"] == shds[best]
    with pytest.raises(KeyError, match="client_graphs"):
        local_summary(alarm_runs("pc-vote", 5), net.dag)


# ============================================================================ rules and ties
def test_vote_threshold_is_exact_decimal_ceiling():
    assert vote_threshold(0.4, 3) == 2  # FedPC's round(1.2) would give 1
    assert vote_threshold(0.3, 10) == 3  # 0.3 * 10 is 3.0000000000000004 in floats
    assert vote_threshold(0.1, 10) == 1
    assert vote_threshold(0.5, 5) == 3 and vote_threshold(0.5, 4) == 2
    assert vote_threshold("0.4", 30) == 12 and vote_threshold(1, 7) == 7
    for bad in (0, 1.5, -0.2):
        with pytest.raises(ValueError, match="ratio"):
            vote_threshold(bad, 5)


def test_majority_marks_rules_and_ties():
    def stack(*entries):
        out = np.zeros((len(entries), 2, 2), dtype=np.int8)
        for k, (at1, at0) in enumerate(entries):  # marks at node 1 and at node 0
            out[k, 0, 1], out[k, 1, 0] = at1, at0
        return out

    arrow = (ARROW, TAIL)  # 0 --> 1
    back = (TAIL, ARROW)  # 0 <-- 1
    none = (NONE, NONE)
    und = (TAIL, TAIL)
    # presence needs a strict majority: 1 of 2 is a tie, so no edge
    assert not majority_marks(stack(arrow, none)).any()
    assert np.array_equal(majority_marks(stack(arrow, arrow, none))[0], [NONE, ARROW])
    # one arrow, one reversed: each end ties tail vs arrow -> tail (smallest code)
    assert np.array_equal(majority_marks(stack(arrow, back)), [[NONE, TAIL], [TAIL, NONE]])
    # plurality among the clients that have the edge, not among all clients
    # (voting "no edge" as one more code would tie none vs arrow at node 1)
    voted = majority_marks(stack(arrow, arrow, back, none, none))
    assert voted[0, 1] == ARROW and voted[1, 0] == TAIL
    voted = majority_marks(stack(und, back, back))
    assert voted[0, 1] == TAIL and voted[1, 0] == ARROW
    # circles lose ties to arrows and tails
    pag = majority_marks(stack((CIRCLE, CIRCLE), (ARROW, CIRCLE)))
    assert pag[0, 1] == ARROW and pag[1, 0] == CIRCLE
    # order-independent
    s = stack(arrow, back, und, none, arrow, (CIRCLE, ARROW))
    rng = np.random.default_rng(0)
    for _ in range(5):
        assert np.array_equal(majority_marks(s[rng.permutation(len(s))]), majority_marks(s))
    with pytest.raises(ValueError, match="K x p x p"):
        majority_marks(np.zeros((2, 3)))


def test_vote_pvalues_strict_majority():
    p = np.array(
        [
            [0.5, 0.5, 0.01, np.nan],
            [0.2, 0.01, 0.02, 0.9],
            [0.01, 0.3, 0.6, 0.8],
            [0.3, 0.02, 0.001, 0.7],
        ]
    )
    combined = vote_pvalues(p, 0.05)
    assert combined[0] == 0.5  # 3 of 4 independent: max
    assert combined[1] == 0.01  # 2 of 4 is a tie: dependent, min
    assert combined[2] == 0.001  # 1 of 4: min
    assert combined[3] == 0.9  # NaN counts as dependent; 3 of 4 independent: max
    assert vote_pvalues(np.array([[np.nan], [np.nan]]), 0.05)[0] != 0.05  # NaN, not a decision
    assert np.isnan(vote_pvalues(np.array([[np.nan], [np.nan]]), 0.05)[0])


def test_max_pvalue_choice_ties_and_empty():
    block = np.array([[0.01, 0.7, 0.7], [0.7, 0.2, 0.9]])  # clients x candidates
    assert max_pvalue_choice(block, 0.05) == (2, 1, 0.9)
    tie = np.array([[0.01, 0.7], [0.7, 0.7]])
    assert max_pvalue_choice(tie, 0.05) == (0, 1, 0.7)  # first candidate, then lowest client
    assert max_pvalue_choice(np.array([[0.01, 0.05], [np.nan, 0.0]]), 0.05) is None


class NeverIndependentClient(VotingClient):
    """Answers every orientation test with p = 0: no separating set is ever found."""

    def pvalues(self, payload, arrays):
        out, meta = super().pvalues(payload, arrays)
        return [np.zeros_like(out[0])], meta


def test_no_separating_set_leaves_the_triple_undecided():
    """FedPC's MATLAB orients a collider when max_p finds nothing; we must not."""
    net = load_network("asia")
    parts = make_partition(net.sample(4_000, seed=1), 2, "iid", 0).clients
    plain = run_method("fedpc-vote", parts, {}, backend="inprocess")
    assert plain.extra["colliders"]  # asia has colliders to find
    factory = PartitionedClients(NeverIndependentClient, parts)
    result = run_protocol(make_fedpc_vote({}), factory, 2, backend="inprocess")
    assert np.array_equal(result.graph.adjacency(), plain.graph.adjacency())
    assert all(v is None for v in result.extra["consistent_sepsets"].values())
    assert result.extra["undecided_triples"] and not result.extra["colliders"]
    assert not np.any(result.graph.marks == ARROW)  # no collider, so nothing to propagate


# ============================================================================ errors
def test_bad_options_and_data_are_clear_errors():
    net = load_network("asia")
    parts = make_partition(net.sample(1_000, seed=2), 2, "iid", 0).clients
    with pytest.raises(ValueError, match="option test: 'fisherz' is not one of chi2, g2"):
        run_method("pc-vote", parts, {"test": "fisherz"}, backend="inprocess")
    with pytest.raises(ValueError, match="ratio"):
        run_method("fedpc-vote", parts, {"ratio": 0}, backend="inprocess")
    with pytest.raises(ValueError, match="orientation"):
        run_method("fedpc-vote", parts, {"orientation": "random"}, backend="inprocess")
    with pytest.raises(ValueError, match="algorithm"):
        run_method("local", parts, {"algorithm": "ges"}, backend="inprocess")
    floats = [p.copy() for p in parts]
    floats[1]["xray"] = np.linspace(0, 1, len(floats[1]))
    with pytest.raises(ValueError, match="client 1 column 'xray'"):
        run_method("pc-cit-vote", floats, {}, backend="inprocess")
    missing = [p.copy() for p in parts]
    missing[0].loc[missing[0].index[0], "smoke"] = None
    with pytest.raises(ValueError, match="client 0 column 'smoke' has 1 missing"):
        run_method("fedpc-vote", missing, {}, backend="inprocess")


def test_prune_level_is_one_level_of_the_pc_skeleton(alarm_oracle, alarm_pc):
    """The client step, level by level, equals PC-stable written out independently."""
    adjacency = ~np.eye(alarm_oracle.n_vars, dtype=bool)
    for level in range(len(alarm_pc.skeleton.depths)):
        pruned = prune_depth(alarm_oracle, adjacency, level, 0.05).adjacency
        expected = pc_stable_level(alarm_oracle, adjacency, level)
        assert np.array_equal(pruned, expected), level
        assert level > 2 or np.any(adjacency & ~pruned)  # levels 0-2 remove edges
        adjacency = pruned
    with pytest.raises(ValueError, match="symmetric"):
        prune_depth(alarm_oracle, np.ones((3, 3), dtype=bool), 0, 0.05)


# ============================================================================ Ray engine
@pytest.mark.slow
@pytest.mark.parametrize("method", ["pc-cit-vote"])
def test_ray_engine_gives_the_inprocess_result(method):
    """On Ray, the voting family member no deployment test runs (the others: fedpc-vote and
    pc-vote in tests/test_deploy_secure.py's BREADTH, pooled in its RAW_METHODS, each through a
    SuperLink with a process per message; the Ray engine itself: tests/test_federation_ray.py)."""
    net = load_network("asia")
    parts = make_partition(net.sample(3_000, seed=8), 3, "iid", 0).clients
    inprocess = run_method(method, parts, {}, backend="inprocess")
    on_ray = run_method(method, parts, {}, backend="ray", **ONE_ACTOR)
    assert on_ray.graph == inprocess.graph
    assert on_ray.rounds == inprocess.rounds
    assert on_ray.ledger == inprocess.ledger
    assert on_ray.extra == inprocess.extra


def test_reliability_option_reaches_the_clients_tests():
    """``reliability`` (FedECD's Causal Learner rule) reaches every client's and the pooled
    reference's tests: with one client each method equals PC on an oracle with the same rule."""
    net = load_network("child")
    pooled = net.sample(500, seed=1)
    codes = net.sample_codes(500, seed=1).astype(np.int64)
    assert [len(np.unique(codes[:, j])) for j in range(len(net.cards))] == list(net.cards)
    ruled = DiscreteOracle(codes, net.cards, net.variables, test="g2", reliability=5.0)
    expected = pc(ruled, alpha=0.05).graph
    assert expected != pc(DiscreteOracle(codes, net.cards, net.variables, test="g2"), 0.05).graph
    for method in ("local", "pc-vote", "pooled"):
        # a vote needs two
        clients = [pooled, reordered(pooled)] if method == "pc-vote" else [pooled]
        result = run_method(method, clients, {"test": "g2", "reliability": 5})
        assert result.graph == expected, method
    with pytest.raises(ValueError, match="reliability"):
        run_method("pc-vote", [pooled], {"reliability": "lots"})


# ============================================================================ confidence, knowledge
def test_graph_vote_edge_votes_are_the_share_of_client_graphs(alarm_runs):
    """pc-vote's ``edge_votes``: per pair some client has, the share of clients whose own PC
    graph has it (recounted from ``local``'s client graphs of the same split); kept = majority."""
    vote, local = alarm_runs("pc-vote", 5), alarm_runs("local", 5)
    graphs = [Graph.from_json(e["graph"]) for e in local.extra["client_graphs"]]
    names = list(vote.graph.names)
    expected = {}
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            share = sum(g.adjacent(a, b) for g in graphs) / len(graphs)
            if share:
                expected[(names[a], names[b])] = share
    votes = vote.extra["edge_votes"]
    got = {(x, y): s for x, y, s in votes["kept"] + votes["removed"]}
    assert got == pytest.approx(expected)
    assert {(x, y) for x, y, _ in votes["kept"]} == {
        (names[a], names[b])
        for a, b in zip(*np.nonzero(np.triu(vote.graph.adjacency())), strict=True)
    }
    assert all(s > 0.5 for _, _, s in votes["kept"]) and all(s <= 0.5 for *_, s in votes["removed"])


@pytest.mark.parametrize("algorithm", ["pc", "fci"])
def test_cit_vote_takes_background_knowledge(alarm, alarm_oracle, algorithm):
    """Two identical clients vote every test as one, so CIT-voting with knowledge is the pooled
    search with it; its result carries the voted p-values' evidence."""
    from fedcausal_flwr.discovery.fci import fci
    from fedcausal_flwr.graphs.knowledge import Knowledge

    _, pooled, _ = alarm
    text = "forbidden HR -> CO; forbidden HISTORY -- CO; required INTUBATION -> SHUNT"
    result = run_method(f"{algorithm}-cit-vote", [pooled, reordered(pooled)], {"knowledge": text})
    knowledge = Knowledge.parse(text.replace(";", "\n")).matrix(list(alarm_oracle.variables))
    search = pc if algorithm == "pc" else fci
    expected = search(alarm_oracle, 0.05, knowledge=knowledge)
    assert result.graph == expected.graph
    assert result.extra["knowledge"]["required"] == [["INTUBATION", "SHUNT"]]
    kept = result.extra["edge_pvalues"]["kept"]  # the required edge was never tested
    assert len(kept) == result.graph.n_edges() - 1 and all(p <= 0.05 for *_, p in kept)


@pytest.mark.parametrize("method", ["pc-vote", "fci-vote", "local"])
def test_each_clients_own_search_takes_background_knowledge(alarm, alarm_oracle, method):
    """Every client's local PC/FCI gets the knowledge: two identical clients vote as one, so the
    graph is the pooled search with it."""
    from fedcausal_flwr.graphs.knowledge import Knowledge

    _, pooled, _ = alarm
    text = "forbidden HR -> CO; forbidden HISTORY -- CO; required INTUBATION -> SHUNT"
    options = {"knowledge": text, **({"algorithm": "fci"} if method == "local" else {})}
    clients = [pooled, reordered(pooled)] if method != "local" else [pooled]
    result = run_method(method, clients, options)
    knowledge = Knowledge.parse(text.replace(";", "\n")).matrix(list(alarm_oracle.variables))
    search = pc if method == "pc-vote" else fci
    assert result.graph == search(alarm_oracle, 0.05, knowledge=knowledge).graph
    assert result.graph != search(alarm_oracle, 0.05).graph


@pytest.mark.parametrize("method", ["pc-vote", "pc-cit-vote"])
def test_a_column_constant_at_every_site_is_an_isolated_node_as_in_pooled(method):
    """A column with one value over every site's rows: each site's tests with it are
    independent (no degree of freedom), so the vote keeps it isolated, as pooled PC does."""
    frame = load_network("asia").sample(1200, seed=3).assign(unit="mg")
    sites = [frame.iloc[:600].reset_index(drop=True), frame.iloc[600:].reset_index(drop=True)]
    result = run_method(method, sites, {}, backend="inprocess")
    pooled = run_method("pooled", sites, {}, backend="inprocess")
    unit = result.graph.names.index("unit")
    assert not result.graph.marks[unit].any() and result.graph == pooled.graph
