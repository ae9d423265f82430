"""CI oracles and d-separation, checked against causal-learn and networkx."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from causallearn.utils.cit import CIT
from helpers import random_queries

from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.stats import (
    DiscreteOracle,
    DSeparationOracle,
    GaussianOracle,
    TableOracle,
    d_separated,
)


def random_dag(rng, n_nodes, edge_prob):
    adj = np.triu(rng.random((n_nodes, n_nodes)) < edge_prob, 1)
    order = rng.permutation(n_nodes)
    return adj[np.ix_(order, order)]


def discrete_data(rng, n_rows, n_vars=7):
    """Chain-and-fork discrete data with a sparse high-arity variable."""
    codes = np.empty((n_rows, n_vars), dtype=np.int64)
    codes[:, 0] = rng.integers(0, 3, n_rows)
    for j in range(1, n_vars):
        noise = rng.integers(0, 3, n_rows)
        codes[:, j] = np.where(rng.random(n_rows) < 0.5, codes[:, j // 2], noise)
    codes[:, -1] = (codes[:, -1] * 7 + rng.integers(0, 7, n_rows)) % 20
    cards = np.array([3] * (n_vars - 1) + [21])
    return codes, cards


@pytest.mark.parametrize(("test", "method"), [("g2", "gsq"), ("chi2", "chisq")])
@pytest.mark.parametrize("max_cells", [2**24, 40])
def test_discrete_oracle_matches_causallearn(test, method, max_cells):
    rng = np.random.default_rng(4)
    codes, cards = discrete_data(rng, 300)
    names = [f"V{i}" for i in range(7)]
    oracle = DiscreteOracle(codes, cards, names, test, max_cells=max_cells)
    queries = random_queries(rng, 7, 200, 4)
    cit = CIT(codes, method)
    ref = np.array([cit(x, y, list(s)) for x, y, s in queries])
    np.testing.assert_allclose(oracle.test_batch(queries), ref, rtol=1e-9, atol=1e-300)
    n_distinct = len({cit.get_formatted_XYZ_and_cachekey(x, y, s)[3] for x, y, s in queries})
    assert oracle.n_computed == n_distinct and oracle.n_batches == 1
    oracle.test_batch(queries[:10])
    assert oracle.n_batches == 1 and oracle.n_asked == 210


def test_discrete_oracle_sparse_path_agrees_on_options():
    rng = np.random.default_rng(6)
    codes, cards = discrete_data(rng, 120)
    names = [f"V{i}" for i in range(7)]
    queries = random_queries(rng, 7, 150, 4)
    for options in (
        dict(reliability=5.0),
        dict(reliability=5.0, reliability_arity="global"),
        dict(empty_strata_add_dof=True),
    ):
        dense = DiscreteOracle(codes, cards, names, "g2", **options).test_batch(queries)
        sparse = DiscreteOracle(codes, cards, names, "g2", max_cells=30, **options)
        np.testing.assert_allclose(sparse.test_batch(queries), dense, rtol=1e-12)
        assert np.isnan(dense).any() == ("reliability" in options)


def test_discrete_oracle_rejects_bad_data():
    with pytest.raises(ValueError, match=r"'b' .*client 'c3'.*non-integer"):
        DiscreteOracle(np.array([[0, 0.5], [1, 1.0]]), [2, 2], ["a", "b"], client="c3")
    with pytest.raises(ValueError, match=r"'a' .*0 levels"):
        DiscreteOracle(np.zeros((4, 2), dtype=int), [0, 2], ["a", "b"])
    one_level = DiscreteOracle(np.zeros((4, 2), dtype=int), [1, 2], ["a", "b"])  # constant: p = 1
    assert one_level.test(0, 1, ()) == 1.0
    with pytest.raises(ValueError, match="unknown discrete test"):
        DiscreteOracle(np.zeros((4, 2), dtype=int), [2, 2], ["a", "b"], "fisherz")


def test_gaussian_oracle_matches_causallearn():
    rng = np.random.default_rng(9)
    data = rng.normal(size=(500, 6))
    data[:, 2] += data[:, 0] - data[:, 1]
    data[:, 4] += 0.5 * data[:, 2]
    oracle = GaussianOracle(data, list("abcdef"))
    queries = random_queries(rng, 6, 150, 3)
    cit = CIT(data, "fisherz")
    ref = np.array([cit(x, y, list(s)) for x, y, s in queries])
    np.testing.assert_allclose(oracle.test_batch(queries), ref, rtol=1e-9, atol=1e-14)


def test_d_separation_matches_networkx():
    rng = np.random.default_rng(0)
    n_checked = n_separated = 0
    for _ in range(25):
        n_nodes = int(rng.integers(4, 14))
        adj = random_dag(rng, n_nodes, float(rng.uniform(0.15, 0.5)))
        dg = nx.DiGraph()
        dg.add_nodes_from(range(n_nodes))
        dg.add_edges_from(zip(*np.nonzero(adj), strict=True))
        for x, y, s in random_queries(rng, n_nodes, 40, min(5, n_nodes - 2)):
            want = nx.is_d_separator(dg, {x}, {y}, set(s))
            assert d_separated(adj, x, y, s) == want, (adj.astype(int), x, y, s)
            n_checked += 1
            n_separated += want
    assert 0.2 < n_separated / n_checked < 0.8


def test_d_separation_textbook_cases():
    # a -> c <- b, c -> d
    adj = np.zeros((4, 4), dtype=bool)
    adj[0, 2] = adj[1, 2] = adj[2, 3] = True
    assert d_separated(adj, 0, 1, ())
    assert not d_separated(adj, 0, 1, (2,))
    assert not d_separated(adj, 0, 1, (3,))  # descendant of the collider opens it
    assert d_separated(adj, 0, 3, (2,))
    with pytest.raises(ValueError):
        d_separated(adj, 0, 1, (0,))


def test_d_separation_oracle_with_latents():
    # L is latent: X <- L -> Y, and X -> Z -> Y
    dag = Graph.from_edges(["X", "L", "Y", "Z"], [("L", "X"), ("L", "Y"), ("X", "Z")], "DAG")
    oracle = DSeparationOracle(dag, observed=["X", "Y", "Z"])
    assert oracle.variables == ("X", "Y", "Z")
    assert oracle.test(0, 1, ()) == 0.0  # confounded by L
    assert oracle.test(0, 1, (2,)) == 0.0
    assert oracle.test(1, 2, (0,)) == 1.0
    assert oracle.test(1, 2, ()) == 0.0
    rng = np.random.default_rng(1)
    adj = random_dag(rng, 12, 0.3)
    names = [f"N{i}" for i in range(12)]
    big = Graph.from_edges(names, list(zip(*np.nonzero(adj), strict=True)), "DAG")
    observed = [3, 0, 7, 11, 5, 9, 1]
    oracle = DSeparationOracle(big, observed=observed)
    dg = big.to_networkx()
    queries = random_queries(rng, len(observed), 100, 3)
    got = oracle.test_batch(queries)
    for (x, y, s), p in zip(queries, got, strict=True):
        sep = nx.is_d_separator(
            dg, {names[observed[x]]}, {names[observed[y]]}, {names[observed[v]] for v in s}
        )
        assert p == float(sep)


def test_d_separation_oracle_rejects_non_dags():
    cyclic = Graph.from_edges(["a", "b", "c"], [("a", "b"), ("b", "c"), ("c", "a")], "DAG")
    with pytest.raises(ValueError, match="cycle"):
        DSeparationOracle(cyclic)
    cpdag = Graph.from_edges(["a", "b"], [("a", "b", "tail", "tail")], "CPDAG")
    with pytest.raises(ValueError, match="non-directed"):
        DSeparationOracle(cpdag)
    with pytest.raises(TypeError):
        DSeparationOracle(np.zeros((2, 2), dtype=bool))


def test_table_oracle_fedlcs_toy():
    names = ["A", "B", "C", "E", "F", "T"]
    table = {("E", "T", ()): 1.0, ("T", "B", ("A",)): 0.9, (4, 5, (0,)): 0.8}
    oracle = TableOracle(table, names, default=0.0)
    assert oracle.test(5, 3, ()) == 1.0
    assert oracle.test(1, 5, [0]) == 0.9
    assert oracle.test(5, 4, (0,)) == 0.8
    assert oracle.test(0, 5, ()) == 0.0
    strict = TableOracle(table, names)
    with pytest.raises(KeyError, match="not in the table"):
        strict.test(0, 1, ())
    with pytest.raises(KeyError, match="unknown variable"):
        TableOracle({("Q", "T", ()): 1.0}, names)
    with pytest.raises(ValueError, match="conflicting"):
        TableOracle({("E", "T", ()): 1.0, ("T", "E", ()): 0.0}, names)
    assert math.isclose(oracle.test_batch([(3, 5, ()), (5, 3, ())]).sum(), 2.0)
    assert oracle.n_computed == 4


def test_discrete_oracle_resamples_equal_fresh_oracles_per_resample():
    from fedcausal_flwr.data import load_network
    from fedcausal_flwr.discovery.bootstrap import bootstrap_rows

    net = load_network("child")
    codes = net.sample_codes(400, seed=3).astype(np.int64)
    queries = [(0, 1, ()), (3, 2, (5,)), (1, 7, (2, 4)), (6, 9, (0, 1, 2)), (8, 10, (11, 12, 13))]
    row_sets = [bootstrap_rows(len(codes), 1, 0, r) for r in range(4)] + [np.arange(len(codes))]
    for options in ({}, {"reliability": 5.0}, {"reliability": 5.0, "max_cells": 200}):
        oracle = DiscreteOracle(codes, net.cards, net.variables, test="g2", **options)
        batched = oracle.test_resamples(queries, row_sets)
        for r, rows in enumerate(row_sets):
            fresh = DiscreteOracle(codes[rows], net.cards, net.variables, test="g2", **options)
            np.testing.assert_array_equal(batched[r], fresh.test_batch(queries))
        assert np.isnan(batched).any() == ("reliability" in options)
    with pytest.raises(ValueError, match="resample rows"):
        oracle.test_resamples(queries, [np.array([len(codes)])])


def test_reliability_decided_before_counting_equals_the_table_rule():
    """The oracle skips unreliable tests before counting; the p-values must be those of the rule
    applied to the counted tables (contingency.discrete_tests)."""
    from fedcausal_flwr.data import load_network
    from fedcausal_flwr.stats.contingency import count_tables, discrete_tests, make_layout

    net = load_network("child")
    codes = net.sample_codes(300, seed=4).astype(np.int64)
    codes[:, 3] = np.minimum(codes[:, 3], 1)  # a variable whose top levels are never observed
    rng = np.random.default_rng(0)
    queries = []
    for k in range(4):
        for _ in range(40):
            x, y, *s = rng.choice(20, size=k + 2, replace=False).tolist()
            queries.append((x, y, tuple(s)))
    for arity in ("max_observed", "global"):
        options = {"reliability": 5.0, "reliability_arity": arity}
        oracle = DiscreteOracle(codes, net.cards, net.variables, test="g2", **options)
        got = oracle.test_batch(queries)
        layout = make_layout(queries, net.cards)
        tables = count_tables(np.ascontiguousarray(codes.T), layout)
        expected = discrete_tests(tables, layout, "g2", **options).pvalue
        np.testing.assert_array_equal(got, expected)
        assert 0 < np.isnan(got).sum() < len(queries)


def test_a_batch_over_the_cell_budget_is_counted_in_parts_with_the_same_pvalues(monkeypatch):
    from fedcausal_flwr.stats import oracles

    rng = np.random.default_rng(5)
    codes, cards = discrete_data(rng, 3000)
    codes, cards = codes[:, :-1], cards[:-1]  # 3 levels each: every table fits 81 cells
    queries = random_queries(rng, codes.shape[1], 60, 2)
    names = [f"v{i}" for i in range(codes.shape[1])]
    whole = DiscreteOracle(codes, cards, names, test="chi2").compute_batch(queries)
    parts: list[int] = []
    counted = oracles.count_tables

    def count(codes_t, layout):
        parts.append(len(layout.offsets) - 1)
        return counted(codes_t, layout)

    monkeypatch.setattr(oracles, "count_tables", count)
    split = DiscreteOracle(codes, cards, names, test="chi2", max_cells=81)
    assert split.compute_batch(queries).tolist() == whole.tolist()
    assert len(parts) > 1 and sum(parts) == len(queries)
