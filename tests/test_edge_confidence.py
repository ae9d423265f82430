"""Edge confidence of the PC methods: every tested pair's deciding p-value in the result."""

import numpy as np
import pytest

from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.discovery.fci import fci
from fedcausal_flwr.discovery.pc import pc
from fedcausal_flwr.discovery.search_report import edge_pvalues
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.stats.oracles import DiscreteOracle


@pytest.fixture(scope="module")
def alarm():
    net = load_network("alarm")
    frame = net.sample(2000, seed=4)
    names = list(net.variables)
    codes = np.stack([frame[v].cat.codes.to_numpy() for v in names], axis=1).astype(np.int64)
    cards = [len(frame[v].cat.categories) for v in names]
    return net, frame, DiscreteOracle(codes, cards, names, "chi2")


def test_each_pair_carries_the_largest_p_of_its_tests(alarm):
    """Removed pairs: the p that removed them (> alpha) at their level; kept edges: their weakest
    dependence (<= alpha); both the maximum over every test the oracle answered for the pair."""
    net, _, oracle = alarm
    result = pc(oracle, 0.05)
    found = edge_pvalues(result)
    names = list(net.variables)
    largest: dict[frozenset, float] = {}
    for (x, y, _), p in oracle.cache.items():
        key = frozenset((names[x], names[y]))
        largest[key] = max(largest.get(key, -1.0), p)
    assert len(found["kept"]) == result.graph.n_edges()
    assert len(found["kept"]) + len(found["removed"]) == len(names) * (len(names) - 1) // 2
    for x, y, p in found["kept"]:
        assert p <= 0.05 and p == largest[frozenset((x, y))]
        assert result.graph.adjacent(names.index(x), names.index(y))
    levels = set()
    for x, y, p, level in found["removed"]:
        assert p > 0.05 and p == largest[frozenset((x, y))]
        levels.add(level)
    assert levels >= {0, 1, 2}


def test_federated_edge_pvalues_equal_the_pooled_ones(alarm):
    net, frame, oracle = alarm
    parts = split_iid(frame, 4, seed=0).clients
    federated = run_method("fedpc", parts, {})
    expected = edge_pvalues(pc(oracle, 0.05))
    got = {**federated.extra["edge_pvalues"], "removed": federated.evidence.removed()}
    assert [row[:2] for row in got["kept"]] == [row[:2] for row in expected["kept"]]
    assert [row[:2] + row[3:] for row in got["removed"]] == [
        row[:2] + row[3:] for row in expected["removed"]
    ]
    np.testing.assert_allclose(
        [row[2] for row in got["kept"] + got["removed"]],
        [row[2] for row in expected["kept"] + expected["removed"]],
        rtol=1e-12,
    )
    pooled = run_method("pooled", parts, {})
    assert pooled.extra["edge_pvalues"] == federated.extra["edge_pvalues"]
    assert pooled.evidence == federated.evidence


def test_voting_fedpc_reports_each_pairs_vote_share(alarm):
    """fedpc-vote: a kept edge's share of clients at its last layer is at least the ratio, a
    removed pair's share at its removing layer is below it, and the shares are the layers' own
    vote counts."""
    net, frame, _ = alarm
    parts = split_iid(frame, 5, seed=0).clients
    result = run_method("fedpc-vote", parts, {"ratio": 0.5})
    votes = result.extra["edge_votes"]
    names = list(net.variables)
    assert len(votes["kept"]) == result.graph.n_edges()
    assert len(votes["kept"]) + len(votes["removed"]) == len(names) * (len(names) - 1) // 2
    assert all(share >= 0.5 for *_, share in votes["kept"])
    assert all(share < 0.5 for _, _, share, _ in votes["removed"])
    layers = result.extra["layers"]
    for x, y, share, depth in votes["removed"][::25]:
        layer = next(lay for lay in layers if lay["depth"] == depth)
        assert share == layer["votes"][f"{x}|{y}"] / len(layer["clients"])
    last = layers[-1]
    for x, y, share in votes["kept"]:
        if f"{x}|{y}" in last["votes"]:
            assert share == last["votes"][f"{x}|{y}"] / len(last["clients"])


@pytest.mark.parametrize("possible_dsep", ["sequential", "stable"])
def test_fci_pairs_carry_the_largest_p_of_their_tests_possible_dsep_included(possible_dsep):
    """FCI's evidence: the skeleton's and the Possible-D-Sep phase's tests (Zhang's rules ask
    none); a pair Possible-D-Sep removed is labelled so (insurance x 1,000 has such pairs);
    FedFCI's equals the pooled one."""
    net = load_network("insurance")
    frame = net.sample(1000, seed=4)
    names = list(net.variables)
    codes = np.stack([frame[v].cat.codes.to_numpy() for v in names], axis=1).astype(np.int64)
    cards = [len(frame[v].cat.categories) for v in names]
    oracle = DiscreteOracle(codes, cards, names, "chi2")
    result = fci(oracle, 0.05, possible_dsep=possible_dsep)
    assert result.pds_removed
    largest: dict[frozenset, float] = {}
    for (x, y, _), p in oracle.cache.items():
        key = frozenset((names[x], names[y]))
        largest[key] = max(largest.get(key, -1.0), p)
    found = edge_pvalues(result)
    assert len(found["kept"]) == result.graph.n_edges()
    assert len(found["kept"]) + len(found["removed"]) == len(largest)
    for x, y, p in found["kept"]:
        assert p <= 0.05 and p == largest[frozenset((x, y))]
    for x, y, p, level in found["removed"]:
        assert p > 0.05 and p == largest[frozenset((x, y))]
        pair = tuple(sorted((names.index(x), names.index(y))))
        assert (level == "possible-dsep") == (pair in result.pds_removed)
    assert sum(r[3] == "possible-dsep" for r in found["removed"]) == len(result.pds_removed)
    parts = split_iid(frame, 4, seed=0).clients
    federated = run_method("fedfci", parts, {"possible_dsep": possible_dsep})
    got = {**federated.extra["edge_pvalues"], "removed": federated.evidence.removed()}
    assert [r[:2] for r in got["kept"]] == [r[:2] for r in found["kept"]]
    assert [r[:2] + r[3:] for r in got["removed"]] == [r[:2] + r[3:] for r in found["removed"]]
    np.testing.assert_allclose(
        [r[2] for r in got["kept"] + got["removed"]],
        [r[2] for r in found["kept"] + found["removed"]],
        rtol=1e-12,
    )
