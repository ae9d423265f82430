"""FedECD: bootstrap pieces (resamples, evidence, votes, cycle repair) and the federated protocol.

With one bootstrap, no resampling and tau = 0 phase 1 equals the plain voting skeleton; restoring
and the stopping rules change it the documented way; the result is reproducible, acyclic and inside
the skeleton.
"""

import networkx as nx
import numpy as np
import pytest

from fedcausal_flwr.api import make_partition
from fedcausal_flwr.data import load_network
from fedcausal_flwr.discovery.bootstrap import (
    bootstrap_rows,
    break_cycles,
    directed_part,
    evidence_queries,
    independence_evidence,
    vote_directions,
)
from fedcausal_flwr.federation.core.messages import ClientInfo, ClientProtocolError, Reply
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.graphs.graph import ARROW
from fedcausal_flwr.metrics import graph_metrics
from fedcausal_flwr.stats.batch_oracle import normalise_query
from fedcausal_flwr.strategies.fedecd import FedECDStrategy, make_strategy

FAST = {"bootstraps": 2, "tabu_length": 10, "max_barren": 3}


# ============================================================================ resamples
def test_bootstrap_rows_depend_only_on_seed_client_replicate():
    a = bootstrap_rows(500, seed=3, client=2, replicate=1)
    assert a.shape == (500,) and a.min() >= 0 and a.max() < 500
    assert np.array_equal(a, bootstrap_rows(500, 3, 2, 1))
    others = [
        bootstrap_rows(500, 4, 2, 1),
        bootstrap_rows(500, 3, 1, 1),
        bootstrap_rows(500, 3, 2, 0),
    ]
    assert all(not np.array_equal(a, b) for b in others)
    # with replacement: about 1 - 1/e of the rows appear
    assert 0.55 < len(np.unique(a)) / 500 < 0.72
    with pytest.raises(ValueError, match="client 7"):
        bootstrap_rows(0, 1, 7, 0)


# ============================================================================ evidence
def path_skeleton():
    """0 - 1 - 2 - 3 plus 0 - 2 and 1 - 3 (a 4-node graph missing only 0 - 3)."""
    s = np.zeros((4, 4), dtype=bool)
    for a, b in [(0, 1), (1, 2), (2, 3), (0, 2), (1, 3)]:
        s[a, b] = s[b, a] = True
    return s


def test_evidence_queries_take_both_neighbourhoods():
    s = path_skeleton()
    queries, owner, side = evidence_queries(s, np.array([[0, 2]]), level=1, rule="larger_index")
    # adj(2) \ {0} = {1, 3} (side 1), adj(0) \ {2} = {1} (side 0)
    assert queries == [(0, 2, (1,)), (0, 2, (3,)), (0, 2, (1,))]
    assert owner.tolist() == [0, 0, 0] and side.tolist() == [1, 1, 0]
    union, _, union_side = evidence_queries(s, np.array([[2, 0]]), level=1, rule="union")
    assert union == [(0, 2, (1,)), (0, 2, (3,))] and union_side.tolist() == [1, 1]
    level0, _, _ = evidence_queries(s, np.array([[1, 3], [0, 1]]), level=0)
    assert level0 == [normalise_query(1, 3, ()), normalise_query(0, 1, ())]
    with pytest.raises(ValueError, match=r"pair \(0, 3\)"):
        evidence_queries(s, np.array([[0, 3]]), level=0)


def test_independence_evidence_weights_and_rules():
    alpha = 0.01
    owner = np.array([0, 0, 0, 1, 1, 2])
    side = np.array([1, 1, 0, 1, 0, 0])
    p = np.array([0.505, np.nan, 1.0, 0.001, 0.208, 0.005])
    w = lambda q: (q - alpha) / (1 - alpha)  # noqa: E731
    union = independence_evidence(p, owner, side, 3, alpha, "union")
    assert union == pytest.approx([(w(0.505) + w(1.0)) / 2, w(0.208), 0.0])
    larger = independence_evidence(p, owner, side, 3, alpha, "larger_index")
    # pair 0: side 1 qualified (0.505) -> only side 1; pair 1: side 1 did not -> side 0
    assert larger == pytest.approx([w(0.505), w(0.208), 0.0])
    assert independence_evidence(np.array([1.0]), np.array([0]), np.array([0]), 1, alpha)[0] == 1
    assert independence_evidence(np.array([alpha]), np.array([0]), np.array([0]), 1, alpha)[0] == 0


# ============================================================================ votes and cycles
def test_vote_directions_union_presence_majority_and_ties():
    votes = np.zeros((4, 4), dtype=int)
    votes[0, 1], votes[1, 0] = 3, 1  # 0 -> 1
    votes[2, 1] = 1  # one vote is enough for presence: 2 -> 1
    votes[0, 3], votes[3, 0] = 2, 2  # tie
    und = vote_directions(votes, "undirected")
    assert und[0, 1] and not und[1, 0] and und[2, 1] and not und[1, 2]
    assert und[0, 3] and und[3, 0] and und.sum() == 4
    low = vote_directions(votes, "lower_parent")
    high = vote_directions(votes, "higher_parent")
    assert low[0, 3] and not low[3, 0] and high[3, 0] and not high[0, 3]
    assert not vote_directions(np.zeros((3, 3), dtype=int)).any()
    with pytest.raises(ValueError, match="tie rule"):
        vote_directions(votes, "random")


def test_break_cycles_drops_weakest_and_ignores_variable_order():
    # 0 -> 1 -> 2 -> 0 with margins 4, 2, 1 and an undirected 2 - 3 that must stay
    votes = np.zeros((4, 4), dtype=int)
    votes[0, 1], votes[1, 2], votes[2, 0] = 4, 3, 2
    votes[2, 1], votes[0, 2] = 1, 1
    votes[2, 3] = votes[3, 2] = 2
    graph = vote_directions(votes)
    repaired, dropped = break_cycles(graph, votes)
    assert dropped == [(2, 0)]
    assert repaired[0, 1] and repaired[1, 2] and not repaired[2, 0]
    assert repaired[2, 3] and repaired[3, 2]
    perm = np.array([3, 1, 0, 2])  # node k of the permuted graph is node perm[k]
    pv = votes[np.ix_(perm, perm)]
    rp, _ = break_cycles(vote_directions(pv), pv)
    assert np.array_equal(rp, repaired[np.ix_(perm, perm)])
    # two tied weakest edges on one cycle go together
    tied = np.zeros((3, 3), dtype=int)
    tied[0, 1] = tied[1, 2] = tied[2, 0] = 1
    out, gone = break_cycles(vote_directions(tied), tied)
    assert sorted(gone) == [(0, 1), (1, 2), (2, 0)] and not directed_part(out).any()


# ============================================================================ server rules
def test_restore_rule_uses_the_client_mean():
    strategy = FedECDStrategy(tau=0.1)
    strategy.client_info = {0: ClientInfo(0, 10, ["a", "b", "c", "d"], {}, {}, {})}
    strategy.loop.adjacency = np.zeros((4, 4), dtype=bool)
    strategy.removed = np.array([[0, 1], [0, 2], [2, 3]])
    strategy.loop.layers = [{"client_tests": {}}]
    replies = [
        Reply(0, [np.array([0.0, 0.3, 0.1])], {}),
        Reply(1, [np.array([0.2, 0.0, 0.1])], {}),
    ]
    strategy._restore(replies)  # means 0.1 (<= tau: restored), 0.15, 0.1 (restored)
    skeleton, layer = strategy.loop.adjacency, strategy.loop.layers[-1]
    assert skeleton[0, 1] and skeleton[3, 2] and not skeleton[0, 2]
    assert layer["restored"] == 2 and layer["removed"] == 1
    strategy.removed = np.array([[0, 1]])
    with pytest.raises(ClientProtocolError, match="client 4"):
        strategy._restore([Reply(4, [np.array([1.5])], {})])


def test_options_are_checked():
    with pytest.raises(ValueError, match="tie_rule"):
        make_strategy({"tie_rule": "coin"})
    with pytest.raises(ValueError, match="bootstraps"):
        make_strategy({"bootstraps": 0})
    with pytest.raises(ValueError, match="resample"):
        make_strategy({"resample": "maybe"})
    defaults = make_strategy({})
    assert (defaults.alpha, defaults.tau, defaults.bootstraps, defaults.max_depth) == (
        0.01,
        0.05,
        15,
        3,
    )
    assert make_strategy({"reliability": "none"}).reliability is None


# ============================================================================ federated runs
@pytest.fixture(scope="module")
def child_parts():
    net = load_network("child")
    pooled = net.sample(3000, seed=1)
    return net, make_partition(pooled, 6, "iid", seed=1).clients


def skeleton_of(result) -> set[frozenset]:
    return {frozenset(pair) for pair in result.extra["skeleton"]}


def test_one_plain_replicate_with_tau_zero_is_the_voting_skeleton(child_parts):
    net, parts = child_parts
    common = {"alpha": 0.01, "test": "g2", "max_depth": 3}
    voting = run_method("fedpc-vote", parts, {**common, "ratio": 0.5, "orientation": "sepsets"})
    plain = {"bootstraps": 1, "resample": False, "tau": 0.0, "reliability": "none"}
    fedecd = run_method("fedecd", parts, {**common, **FAST, **plain})
    expected = {frozenset(e[:2]) for e in voting.graph.edges()}
    assert skeleton_of(fedecd) == expected
    # the layers were really contested: some edges lost the vote at some layer
    assert sum(layer["lost_vote"] for layer in fedecd.extra["layers"]) > 0
    assert all(layer["restored"] == 0 for layer in fedecd.extra["layers"])
    # its edge votes are the voting skeleton's: kept pairs are the skeleton, with a majority
    votes = fedecd.extra["edge_votes"]
    assert {frozenset(v[:2]) for v in votes["kept"]} == expected
    assert all(v[2] >= 0.5 for v in votes["kept"]) and all(v[2] < 0.5 for v in votes["removed"])
    assert votes == voting.extra["edge_votes"]
    # tau = 1 restores every edge that lost its vote: a denser skeleton
    restored = run_method("fedecd", parts, {**common, **FAST, **plain, "tau": 1.0, "max_depth": 1})
    layers = restored.extra["layers"]
    assert all(layer["removed"] == 0 for layer in layers)
    assert len(skeleton_of(restored)) > len(expected)


def test_fedecd_run_is_reproducible_acyclic_and_inside_its_skeleton(child_parts):
    net, parts = child_parts
    options = {**FAST, "seed": 5}
    first = run_method("fedecd", parts, options)
    again = run_method("fedecd", parts, options)
    assert first.graph == again.graph
    assert first.extra["layers"] == again.extra["layers"]
    skeleton = skeleton_of(first)
    edges = {frozenset(e[:2]) for e in first.graph.edges()}
    assert edges <= skeleton
    arrows = first.graph.marks == ARROW
    assert nx.is_directed_acyclic_graph(nx.DiGraph(list(zip(*np.nonzero(arrows), strict=True))))
    metrics = graph_metrics(first.graph, net.dag)
    assert metrics["adj_f1"] > 0.7 and metrics["arrow_f1"] > 0.4
    assert set(first.extra["score_seconds"]) == {str(k) for k in range(len(parts))}
    other_seed = run_method("fedecd", parts, {**FAST, "seed": 6})
    assert other_seed.extra["layers"] != first.extra["layers"] or other_seed.graph != first.graph
