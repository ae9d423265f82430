"""Tests that share a variable set read one joint table (a private batch asks each set once)."""

import numpy as np
import pytest

import fedcausal_flwr
from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.stats.contingency import discrete_pvalues
from fedcausal_flwr.stats.set_tables import SetTables
from fedcausal_flwr.stats.tables import local_tables, make_layout


@pytest.mark.parametrize("threads", [False, True])
@pytest.mark.parametrize("test", ["chi2", "g2"])
def test_each_test_on_its_sets_table_gives_its_own_tables_pvalue_to_the_bit(
    test, threads, monkeypatch
):
    if threads:  # every part's tests in threads
        from fedcausal_flwr.stats import set_tables

        monkeypatch.setattr(set_tables, "THREADED_TEST_CELLS", 1)
        monkeypatch.setattr(set_tables, "counting_threads", lambda: 2)
    rng = np.random.default_rng(0)
    cards = [2, 3, 4, 2, 3]
    codes = np.column_stack([rng.integers(0, c, 500) for c in cards])
    queries = [(0, 1, (2,)), (2, 0, (1,)), (1, 2, (0,)), (3, 4, ()), (0, 1, (2, 3)),
               (1, 3, (0, 2)), (4, 2, ()), (2, 3, (1, 0)), (0, 3, (1, 2))]  # fmt: skip
    sets = SetTables.of(queries)
    assert len(sets.sets) == 4  # {0,1,2}, {3,4}, {0,1,2,3}, {2,4}
    direct, layout = local_tables(codes, cards, make_layout(queries, cards))
    for noise in (0.0, 2.5) if test == "chi2" else (0.0,):
        expected = discrete_pvalues(direct, layout, test, noise_variance=noise)
        # the sets asked in two parts, as two rounds would
        for first, end in ((0, 2), (2, 4)):
            part = make_layout(sets.sets[first:end], cards)
            asked, _ = local_tables(codes, cards, part)
            positions, pvalues = sets.pvalues(asked, first, end, cards, test, noise_variance=noise)
            assert sorted(sets.index[positions].tolist()) == sorted(
                i for i in sets.index.tolist() if first <= i < end
            )
            assert np.array_equal(pvalues, expected[positions])


def test_a_batch_of_sets_lists_them_in_the_order_its_tests_first_name_them():
    sets = SetTables.of([(3, 4, (5,)), (0, 1, (2,)), (3, 5, (4,)), (1, 2, (0,))])
    assert sets.sets.tolist() == [[3, 4, 5], [0, 1, 2]]
    assert sets.index.tolist() == [0, 1, 0, 1]


def test_an_exact_batch_asks_each_variable_set_once_with_the_pooled_graph():
    from fedcausal_flwr.discovery.pc import pc
    from fedcausal_flwr.stats.oracles import DiscreteOracle

    net = load_network("alarm")
    sites = split_iid(net.sample(3000, seed=2), 3, seed=1).clients
    result = fedcausal_flwr.run("fedpc", data=sites, test="chi2")
    codes = net.sample_codes(3000, seed=2)
    pooled = pc(DiscreteOracle(codes, net.cards, net.variables, test="chi2"), alpha=0.05)
    assert result.graph == pooled.graph
    depth1 = result.extra["batches"][1]
    # the tables asked at depth 1 are fewer than its tests (a triangle's three share one)
    assert depth1["tables"] < depth1["tests"]


def test_a_private_batch_charges_one_table_per_variable_set():
    sites = split_iid(load_network("asia").sample(3000, seed=4), 3, seed=1).clients
    seen = {}

    from fedcausal_flwr.strategies.search import SearchStrategy

    next_request = SearchStrategy.next_request

    def spy(self):  # the tests pending and the tables each private request is charged for
        request = next_request(self)
        charge = None if request is None else request.payload.get("privacy")
        if charge is not None:
            seen.setdefault("depths", []).append((len(self.runner.pending), charge["tables"]))
        return request

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SearchStrategy, "next_request", spy)
        result = fedcausal_flwr.run(
            "fedpc", data=sites, dp="central", dp_epsilon=8, dp_noise_seed=2, dp_batches=2
        )
    (depth0_tests, depth0_tables), (depth1_tests, depth1_tables) = seen["depths"]
    assert depth0_tables == depth0_tests  # pairs are distinct sets
    assert depth1_tables < depth1_tests  # x _||_ y | z and x _||_ z | y share their triple
    pending = [r["tables"] for r in result.extra["privacy"]["releases"]]
    assert pending == [depth0_tables, depth1_tables]


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int64, np.uint8, np.float64])
def test_row_products_are_numpys_products_along_rows(dtype):
    """Column by column, with integers multiplied in int64 as ``prod`` does (three 120s
    overflow an int16), none (the product of no columns) 1."""
    from fedcausal_flwr.stats.tables import row_products

    rng = np.random.default_rng(0)
    for columns in (0, 1, 3):
        matrix = rng.integers(1, 121, (50, columns)).astype(dtype)
        got, expected = row_products(matrix), matrix.prod(axis=1)
        assert got.dtype == expected.dtype or dtype == np.uint8  # prod keeps unsigned
        assert got.tolist() == expected.tolist()
