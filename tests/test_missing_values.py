"""Test-wise deletion: each CI test counts only the rows complete on its variables.

The reference is independent of our counting: causal-learn's ``chisq`` / ``gsq`` on exactly the
rows a test may use (pandas-free row selection per test), and the federated sums (dense and
sparse) against the pooled oracle.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import causallearn_pvalues, random_discrete_bn, random_queries

from fedcausal_flwr.stats.contingency import (
    MISSING_CODE,
    discrete_tests,
    local_tables,
    make_layout,
    merge_sparse_tables,
    sparse_local_tables,
    sparse_tests,
    sum_tables,
)
from fedcausal_flwr.stats.oracles import DiscreteOracle


def with_missing(rng, codes: np.ndarray, share: float) -> np.ndarray:
    """``codes`` with a ``share`` of its values missing completely at random."""
    holed = codes.copy()
    holed[rng.random(codes.shape) < share] = MISSING_CODE
    return holed


def complete_case_pvalues(codes: np.ndarray, queries, method: str) -> np.ndarray:
    """causal-learn's test of each query on the rows complete on that query's variables."""
    out = []
    for x, y, s in queries:
        rows = (codes[:, [x, y, *s]] >= 0).all(axis=1)
        out.append(causallearn_pvalues(codes[rows], [(x, y, s)], method)[0])
    return np.array(out)


@pytest.mark.parametrize("share", [0.05, 0.20])
@pytest.mark.parametrize(("test", "method"), [("chi2", "chisq"), ("g2", "gsq")])
def test_testwise_pvalues_equal_causallearn_on_each_tests_complete_rows(share, test, method):
    rng = np.random.default_rng(int(share * 100))
    codes, cards = random_discrete_bn(rng, 8, 1500)
    holed = with_missing(rng, codes, share)
    queries = random_queries(rng, 8, 120, 3)
    oracle = DiscreteOracle(holed, cards, [f"V{i}" for i in range(8)], test, allow_missing=True)
    ours = oracle.test_batch(queries)
    reference = complete_case_pvalues(holed, queries, method)
    np.testing.assert_allclose(ours, reference, rtol=1e-9, atol=1e-300)
    assert (reference < 1e-6).any() and (reference > 0.05).any()
    # deletion is test-wise, not list-wise: the answers differ from complete-case-everywhere
    listwise = holed[(holed >= 0).all(axis=1)]
    assert not np.allclose(ours, causallearn_pvalues(listwise, queries, method))


@pytest.mark.parametrize("clients", [3, 10])
def test_federated_testwise_tables_sum_to_the_pooled_test(clients):
    rng = np.random.default_rng(clients)
    codes, cards = random_discrete_bn(rng, 7, 2400)
    holed = with_missing(rng, codes, 0.12)
    queries = random_queries(rng, 7, 150, 3)
    layout = make_layout(queries, cards)
    parts = np.array_split(holed, clients)
    dense = sum_tables([local_tables(p, cards, layout, allow_missing=True)[0] for p in parts])
    federated = discrete_tests(dense, layout, "chi2").pvalue
    sparse = merge_sparse_tables(
        [sparse_local_tables(p, cards, layout, allow_missing=True) for p in parts]
    )
    pooled = DiscreteOracle(holed, cards, [f"V{i}" for i in range(7)], "chi2", allow_missing=True)
    expected = pooled.test_batch(list(layout.queries))
    np.testing.assert_array_equal(federated, expected)
    # sparse sums add a table's strata in another order: equal up to rounding
    np.testing.assert_allclose(sparse_tests(*sparse, layout, "chi2").pvalue, expected, rtol=1e-10)
    # each table holds exactly the rows complete on its variables
    for i, (x, y, s) in enumerate(layout.queries):
        complete = int((holed[:, [x, y, *s]] >= 0).all(axis=1).sum())
        assert int(layout.table(dense, i).sum()) == complete


def test_sparse_oracle_tables_delete_testwise_too():
    rng = np.random.default_rng(5)
    codes, cards = random_discrete_bn(rng, 6, 900)
    holed = with_missing(rng, codes, 0.1)
    queries = random_queries(rng, 6, 60, 3)
    names = [f"V{i}" for i in range(6)]
    dense = DiscreteOracle(holed, cards, names, "g2", allow_missing=True)
    sparse = DiscreteOracle(holed, cards, names, "g2", allow_missing=True, max_cells=1)
    np.testing.assert_allclose(sparse.test_batch(queries), dense.test_batch(queries), rtol=1e-12)


def test_missing_codes_are_refused_unless_allowed():
    rng = np.random.default_rng(1)
    codes, cards = random_discrete_bn(rng, 4, 50)
    codes[3, 2] = MISSING_CODE
    with pytest.raises(ValueError, match=r"variable .V2. \(column 2\) has codes in \[-1, "):
        DiscreteOracle(codes, cards, ["V0", "V1", "V2", "V3"], "chi2")
    with pytest.raises(ValueError, match="has codes in"):
        local_tables(codes, cards, [(0, 2, ())])
