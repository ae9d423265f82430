"""Tests that share a variable set read one joint table (a private batch asks each set once)."""

import numpy as np
import pytest

import fedcausal_flwr
from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.stats.set_tables import SetTables
from fedcausal_flwr.stats.tables import local_tables, make_layout


def test_each_tests_table_is_its_sets_table_transposed():
    rng = np.random.default_rng(0)
    cards = [2, 3, 4, 2, 3]
    codes = np.column_stack([rng.integers(0, c, 500) for c in cards])
    queries = [(0, 1, (2,)), (2, 0, (1,)), (1, 2, (0,)), (3, 4, ()), (0, 1, (2, 3)),
               (1, 3, (0, 2)), (4, 2, ()), (2, 3, (1, 0))]  # fmt: skip
    sets = SetTables.of(queries)
    assert len(sets.sets) == 4  # {0,1,2}, {3,4}, {0,1,2,3}, {2,4}
    asked, _ = local_tables(codes, cards, make_layout(sets.queries, cards))
    direct, _ = local_tables(codes, cards, make_layout(queries, cards))
    assert np.array_equal(sets.test_tables(asked, cards), direct)


def test_a_private_batch_charges_one_table_per_variable_set():
    sites = split_iid(load_network("asia").sample(3000, seed=4), 3, seed=1).clients
    seen = {}

    from fedcausal_flwr.strategies.fedpc import FedPCStrategy

    charge = FedPCStrategy.charge

    def spy(self, tables, cells, variance, shares):
        seen.setdefault("depths", []).append((len(self.runner.pending), tables))
        return charge(self, tables, cells, variance, shares)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FedPCStrategy, "charge", spy)
        result = fedcausal_flwr.run(
            "fedpc", data=sites, dp="central", dp_epsilon=8, dp_noise_seed=2
        )
    (depth0_tests, depth0_tables), (depth1_tests, depth1_tables) = seen["depths"]
    assert depth0_tables == depth0_tests  # pairs are distinct sets
    assert depth1_tables < depth1_tests  # x _||_ y | z and x _||_ z | y share their triple
    pending = [r["tables"] for r in result.extra["privacy"]["releases"]]
    assert pending == [depth0_tables, depth1_tables]
