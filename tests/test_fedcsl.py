"""FedCSL: HITON-PC, client weights, the weighted skeleton and merge, and the federated protocol.

With a d-separation oracle HITON-PC finds every variable's true neighbours and identical clients
give the true skeleton; HITON-PC follows the reference procedure on arbitrary p-value tables; the
weighted votes follow the code's rules on hand-made cases; the run's wire reproduces the core.
"""

from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2_contingency

from fedcausal_flwr.data import load_network, split_iid
from fedcausal_flwr.discovery.fedcsl import (
    VOTE_SCALE,
    client_weight,
    federated_skeleton,
    hiton_pc,
    hiton_pc_all,
    marginal_strength,
    weighted_direction_votes,
)
from fedcausal_flwr.federation.core.messages import ClientInfo, ClientProtocolError, Reply
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.metrics import graph_metrics
from fedcausal_flwr.stats.batch_oracle import CIOracle
from fedcausal_flwr.stats.oracles import DiscreteOracle, DSeparationOracle, TableOracle
from fedcausal_flwr.strategies.fedcsl import FedCSLStrategy, make_strategy

FAST = {"tabu_length": 10, "max_barren": 3}


def true_skeleton(dag) -> np.ndarray:
    arrows = dag.marks != 0
    return arrows | arrows.T


# ============================================================================ HITON-PC
@pytest.mark.parametrize("network, depth", [("asia", None), ("child", None), ("child", 3)])
def test_hiton_pc_with_an_oracle_finds_the_true_neighbours(network, depth):
    dag = load_network(network).dag
    truth = true_skeleton(dag)
    found = hiton_pc_all(DSeparationOracle(dag), alpha=0.5, max_depth=depth)
    # a superset of the true neighbours, exact once made symmetric by the AND rule: a local
    # learner keeps a descendant of a child when only non-members of PC(t) separate them
    assert np.array_equal(found.members & found.members.T, truth)
    assert np.all(found.members[truth])
    extra = [(dag.names[a], dag.names[b]) for a, b in np.argwhere(found.members & ~truth)]
    # asia: tub -> either -> dysp <- bronc; only {either, bronc} or {either, smoke / lung}
    # separates tub from dysp, and bronc, smoke, lung are not tub's neighbours
    assert extra == ([("tub", "dysp")] if network == "asia" else [])
    assert found.pair_pvalues.shape == (dag.n_nodes * (dag.n_nodes - 1) // 2,)


def reference_hiton_pc(pvalue, p, target, alpha, depth, strength=None) -> list[int]:
    """The procedure written out literally, one test at a time (the independent reference)."""
    scored = []
    for v in range(p):
        if v != target:
            q = pvalue(v, target, ())
            if not np.isnan(q) and q <= alpha:
                scored.append((q if strength is None else -strength[target, v], v))
    candidates = [v for _, v in sorted(scored)]
    pc: list[int] = []
    for y in candidates:
        pc = pc + [y]
        kept = list(pc)
        for x in reversed(list(pc)):
            if x not in kept:
                continue
            rest = [v for v in kept if v != x]
            separated = False
            size = 0
            while size <= min(depth, len(rest)) and not separated:
                for s in combinations(rest, size):
                    if x != y and y not in s:
                        continue
                    q = pvalue(x, target, s)
                    if not np.isnan(q) and q > alpha:
                        separated = True
                        break
                size += 1
            if separated:
                kept.remove(x)
                if x == y:
                    break
        pc = kept
    return pc


@pytest.mark.parametrize("seed", range(6))
def test_hiton_pc_follows_the_reference_procedure_on_random_tables(seed):
    rng = np.random.default_rng(seed)
    ranked = seed % 2 == 1  # odd seeds rank the candidates by a given strength
    p, alpha = 6, 0.05
    table: dict = {}

    def pvalue(x, y, s):
        key = (min(x, y), max(x, y), tuple(sorted(s)))
        if key not in table:
            draw = rng.random()
            # mostly dependent, some independent, a few unreliable (NaN)
            table[key] = np.nan if draw < 0.08 else (rng.random() * 0.04 if draw < 0.75 else draw)
        return table[key]

    class Drawn(CIOracle):
        """The same lazily drawn table (the batched engine asks more tests than it needs)."""

        def compute_batch(self, queries):
            return np.array([pvalue(x, y, s) for x, y, s in queries])

    strength = None
    if ranked:
        strength = rng.integers(0, 4, size=(p, p)).astype(float)  # with ties
        strength = strength + strength.T
    for target in range(p):
        expected = reference_hiton_pc(pvalue, p, target, alpha, 2, strength)
        oracle = Drawn([f"v{i}" for i in range(p)])
        assert hiton_pc(oracle, target, alpha, max_depth=2, strength=strength) == expected


def test_hiton_pc_removals_and_unreliable_tests():
    # t = 0; a = 1 enters first (smaller p), b = 2 second; unlisted tests are dependent
    names = ["t", "a", "b"]
    table = {("t", "a", ()): 0.001, ("t", "b", ()): 0.002}

    def run(extra: dict) -> list[int]:
        return hiton_pc(TableOracle({**table, **extra}, names, default=0.001), 0, 0.01)

    assert run({}) == [1, 2]
    assert run({("t", "a", ("b",)): 0.4}) == [2]  # the newcomer separates an old member
    assert run({("t", "b", ("a",)): 0.4}) == [1]  # the newcomer is separated at once
    # an unreliable conditional test is dependent, an unreliable marginal one independent
    assert run({("t", "a", ("b",)): np.nan}) == [1, 2]
    assert run({("t", "b", ()): np.nan}) == [1]
    # candidates enter by ascending p-value: b first, then a is separated given b
    assert run({("t", "b", ()): 0.0005, ("t", "a", ("b",)): 0.4}) == [2]
    with pytest.raises(ValueError, match="target 3"):
        hiton_pc(TableOracle(table, names), 3, 0.01)


def test_marginal_strength_is_the_g2_statistic_of_each_pair(asia):
    net, frame = asia
    names = list(frame.columns)
    codes = np.column_stack(
        [pd.Categorical(frame[v], categories=net.states[v]).codes for v in names]
    )
    oracle = DiscreteOracle(codes, [len(net.states[v]) for v in names], names, test="g2")
    strength = marginal_strength(oracle)
    assert np.array_equal(strength, strength.T) and np.all(np.diag(strength) == 0)
    for i, j in [(0, 1), (2, 3), (2, 5), (4, 7)]:
        table = pd.crosstab(codes[:, i], codes[:, j]).to_numpy()
        g2 = chi2_contingency(table, correction=False, lambda_="log-likelihood")[0]
        assert strength[i, j] == pytest.approx(g2, rel=1e-9)
    with pytest.raises(ValueError, match="strength must be 8x8"):
        hiton_pc(oracle, 0, 0.01, strength=np.zeros((2, 2)))


# ============================================================================ weights
def test_client_weight_maps_each_decision_to_its_confidence():
    alpha = 0.01
    p = np.array([0.0, 0.005, 0.01, 0.505, 1.0, np.nan])
    expected = np.mean([1.0, 0.5, 0.0, 0.5, 1.0])
    assert client_weight(p, alpha) == pytest.approx(expected)
    assert client_weight(np.array([np.nan]), alpha) == 0.0
    with pytest.raises(ValueError, match="alpha"):
        client_weight(p, 1.0)


def test_larger_clients_get_larger_weights():
    net = load_network("asia")
    frame = net.sample(4000, seed=3)
    cards = [len(net.states[v]) for v in frame.columns]
    codes = np.column_stack(
        [pd.Categorical(frame[v], categories=net.states[v]).codes for v in frame.columns]
    )
    weights = []
    for n in (200, 1000, 4000):
        oracle = DiscreteOracle(codes[:n], cards, list(frame.columns), test="g2")
        found = hiton_pc_all(oracle, 0.01, 3)
        weights.append(client_weight(found.pair_pvalues, 0.01))
    assert weights[0] < weights[1] < weights[2]


# ============================================================================ server rules
def sets_from(lists: list[dict[int, list[int]]], p: int) -> np.ndarray:
    out = np.zeros((len(lists), p, p), dtype=bool)
    for k, neighbours in enumerate(lists):
        for t, members in neighbours.items():
            out[k, t, members] = True
    return out


@pytest.mark.parametrize("network", ["child", "asia"])
def test_identical_clients_with_an_oracle_give_the_true_skeleton(network):
    dag = load_network(network).dag
    clients = [hiton_pc_all(DSeparationOracle(dag), 0.5, 3) for _ in range(3)]
    weights = [client_weight(c.pair_pvalues, 0.5) for c in clients]
    assert weights == [1.0, 1.0, 1.0]  # every oracle decision is certain
    result = federated_skeleton(np.stack([c.members for c in clients]), weights)
    expected = true_skeleton(dag)
    if network == "asia":
        # every client lists dysp in PC(tub) but not tub in PC(dysp): no client votes on the
        # asymmetric pair (score 0) and the code's ``score >= 0`` keeps it
        assert [dag.names[i] for i in result.asymmetric[0]] == ["tub", "dysp"]
        assert result.scores.tolist() == [0.0]
        a, b = result.asymmetric[0]
        expected[a, b] = expected[b, a] = True
    else:
        assert len(result.asymmetric) == 0
    assert np.array_equal(result.skeleton, expected)


def test_federated_skeleton_votes_counts_members_and_asymmetric_pairs():
    p = 4
    members = sets_from(
        [
            {0: [1, 2], 1: [0], 2: [0, 3], 3: [2]},  # weight 0.5
            {0: [1], 1: [0, 3], 2: [3], 3: [1, 2]},  # weight 0.3
            {0: [1, 3], 1: [0], 2: [], 3: [0]},  # weight 0.3
        ],
        p,
    )
    weights = [0.5, 0.3, 0.3]
    result = federated_skeleton(members, weights)
    # variable 0: sizes 2 (0.5 + 0.3) beat 1 (0.3); members 1 (1.1), then 2 (0.5) over 3 (0.3)
    # variable 2: sizes 2 (0.5), 1 (0.3), 0 (0.3): size 2 -> {0, 3}
    # variable 3: sizes 1 (0.5 + 0.3) vs 2 (0.3): size 1; votes 2: 0.8 -> {2}
    assert result.neighbour_counts.tolist() == [2, 1, 2, 1]
    assert result.tentative[0].tolist() == [False, True, True, False]
    assert result.tentative[2].tolist() == [True, False, False, True]
    # variable 1: size 1 (0.5 + 0.3) vs 2 (0.3); votes 0: 1.1 -> {0}
    assert result.tentative[1].tolist() == [True, False, False, False]
    assert result.tentative[3].tolist() == [False, False, True, False]
    assert len(result.asymmetric) == 0
    assert sorted(map(tuple, np.argwhere(np.triu(result.skeleton)).tolist())) == [
        (0, 1),
        (0, 2),
        (2, 3),
    ]
    # an asymmetric pair: 0 picks 3, 3 does not pick 0
    lopsided = sets_from([{0: [3]}, {0: [3], 3: [0]}, {}], p)
    for w, kept in (([0.5, 0.2, 0.3], False), ([0.4, 0.3, 0.2], True), ([0.4, 0.2, 0.2], True)):
        # scores: client 1 has both (+2 w1), client 2 has neither (-2 w2), client 0 abstains;
        # a zero score keeps the edge (the code's >= 0)
        result = federated_skeleton(lopsided, w)
        assert result.tentative[0, 3] and not result.tentative[3, 0]
        assert result.asymmetric.tolist() == [[0, 3]]
        assert result.scores[0] == pytest.approx(2 * w[1] - 2 * w[2])
        assert bool(result.skeleton[0, 3]) is kept and bool(result.skeleton[3, 0]) is kept
    with pytest.raises(ValueError, match="weights"):
        federated_skeleton(lopsided, [1.0, 1.0])
    with pytest.raises(ValueError, match=">= 0"):
        federated_skeleton(lopsided, [1.0, -1.0, 1.0])


def test_weighted_direction_votes_sum_the_dags_on_a_grid():
    a = np.zeros((3, 3), dtype=np.uint8)
    a[0, 1] = a[1, 2] = 1
    b = np.zeros((3, 3), dtype=np.uint8)
    b[1, 0] = b[1, 2] = 1
    votes = weighted_direction_votes(np.stack([a, b]), [0.25, 0.5])
    assert votes[0, 1] == 0.25 * VOTE_SCALE and votes[1, 0] == 0.5 * VOTE_SCALE
    assert votes[1, 2] == 0.75 * VOTE_SCALE and votes[2, 1] == 0
    # equal sums of equal weights compare equal whatever the order
    w = [0.1, 0.2, 0.3]
    tie = np.zeros((3, 3, 3), dtype=np.uint8)
    tie[0, 0, 1] = tie[1, 0, 1] = tie[2, 1, 0] = 1
    votes = weighted_direction_votes(tie, w)
    assert votes[0, 1] == votes[1, 0]
    with pytest.raises(ValueError, match="0/1"):
        weighted_direction_votes(np.full((1, 2, 2), 2), [1.0])


def test_merge_points_each_pair_to_the_heavier_side_and_checks_replies():
    strategy = FedCSLStrategy(tie_rule="higher_parent", allow_cycles=True)
    strategy.client_info = {0: ClientInfo(0, 10, ["a", "b", "c"], {}, {}, {})}
    full = np.ones((3, 3), dtype=bool) & ~np.eye(3, dtype=bool)
    members = np.stack([full, full, full])
    strategy.skeleton = federated_skeleton(members, [0.2, 0.3, 0.5])
    strategy.weights = {0: 0.2, 1: 0.3, 2: 0.5}
    dags = [np.zeros((3, 3), dtype=np.uint8) for _ in range(3)]
    dags[0][0, 1] = dags[1][0, 1] = 1  # a -> b: 0.5
    dags[2][1, 0] = 1  # b -> a: 0.5, a tie: the higher index (b) is the parent
    dags[2][1, 2] = 1  # b -> c only on the heaviest client
    strategy._merge([Reply(k, [d], {}) for k, d in enumerate(dags)])
    graph = strategy.graph
    assert graph is not None and sorted(graph.edges()) == [
        ("a", "b", "arrow", "tail"),
        ("b", "c", "tail", "arrow"),
    ]
    # the default rule leaves the tie undirected
    strategy.tie_rule = "undirected"
    strategy._merge([Reply(k, [d], {}) for k, d in enumerate(dags)])
    assert strategy.graph is not None
    assert sorted(strategy.graph.edges())[0] == ("a", "b", "tail", "tail")
    bad = np.zeros((3, 3), dtype=np.uint8)
    bad[0, 1] = bad[1, 0] = 1
    with pytest.raises(ClientProtocolError, match="client 1"):
        strategy._merge([Reply(0, [dags[0]], {}), Reply(1, [bad], {})])
    with pytest.raises(ClientProtocolError, match="client 7 sent a DAG but no neighbour"):
        strategy._merge([Reply(7, [dags[0]], {})])
    with pytest.raises(ClientProtocolError, match="client 2.*weight"):
        strategy._skeleton([Reply(2, [full.astype(np.uint8), np.array([1.5])], {})])
    with pytest.raises(ValueError, match="every client's weight is 0"):
        strategy._skeleton([Reply(2, [full.astype(np.uint8), np.array([0.0])], {})])


def test_options_are_checked():
    with pytest.raises(ValueError, match="tie_rule"):
        make_strategy({"tie_rule": "coin"})
    with pytest.raises(ValueError, match="alpha"):
        make_strategy({"alpha": 2})
    defaults = make_strategy({})
    assert (defaults.alpha, defaults.max_depth, defaults.reliability, defaults.test) == (
        0.01,
        3,
        5.0,
        "g2",
    )


# ============================================================================ federated runs
@pytest.fixture(scope="module")
def asia():
    net = load_network("asia")
    return net, net.sample(3000, seed=1)


def test_identical_clients_equal_one_client(asia):
    net, frame = asia
    one = run_method("fedcsl", [frame], FAST)
    # (the same rows in other orders: in the same order, one site given thrice is refused)
    three = run_method("fedcsl", [frame, frame[::-1], frame.sample(frac=1.0, random_state=0)], FAST)
    assert three.graph == one.graph
    assert three.extra["skeleton"] == one.extra["skeleton"]
    assert len(set(three.extra["weights"].values())) == 1
    assert three.rounds == one.rounds == 3  # hello + neighbours + local_dag


def test_run_reproduces_the_core_from_each_clients_data(asia):
    net, frame = asia
    parts = list(split_iid(frame, 3, seed=2).clients)
    result = run_method("fedcsl", parts, FAST)
    names = list(frame.columns)
    cards = [len(net.states[v]) for v in names]
    found, weights = [], []
    for part in parts:
        codes = np.column_stack(
            [pd.Categorical(part[v], categories=net.states[v]).codes for v in names]
        )
        oracle = DiscreteOracle(codes, cards, names, test="g2", reliability=5.0)
        sets = hiton_pc_all(oracle, 0.01, 3, marginal_strength(oracle))
        found.append(sets.members)
        weights.append(client_weight(sets.pair_pvalues, 0.01))
    assert list(result.extra["weights"].values()) == pytest.approx(weights, abs=1e-11)
    expected = federated_skeleton(np.stack(found), weights).skeleton
    assert result.extra["skeleton"] == [
        [names[a], names[b]] for a, b in np.argwhere(np.triu(expected, k=1)).tolist()
    ]
    learned = {frozenset(e[:2]) for e in result.graph.edges()}
    assert learned <= {frozenset(pair) for pair in result.extra["skeleton"]}
    assert graph_metrics(result.graph, net.dag)["adj_f1"] > 0.7
    # edge votes: per pair some client lists, the weighted share of clients listing it
    votes = result.extra["edge_votes"]
    got = {(x, y): v for x, y, v in votes["kept"] + votes["removed"]}
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            listing = [w for m, w in zip(found, weights, strict=True) if m[a, b] or m[b, a]]
            if listing:
                assert got[(names[a], names[b])] == pytest.approx(sum(listing) / sum(weights))
    assert {frozenset(v[:2]) for v in votes["kept"]} == learned
    assert result.bytes_up > 0 and result.bytes_down > 0


def test_continuous_data_is_refused():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(50, 3)), columns=["x", "y", "z"])
    with pytest.raises(Exception, match="discrete|continuous|categor"):
        run_method("fedcsl", [frame, frame[::-1]], FAST)
