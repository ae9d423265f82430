"""Random DAGs, random networks, fedCI mixed data and latent selection."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fedcausal_flwr.data import (
    Schema,
    choose_latents,
    drop_latents,
    random_dag,
    random_discrete_network,
    random_gaussian_network,
    random_variable_types,
    simulate_mixed,
)
from fedcausal_flwr.graphs import Graph


def _edge_index_pairs(dag):
    return [
        (int(u[1:]), int(v[1:])) for u, v, mu, mv in dag.edges() if (mu, mv) == ("tail", "arrow")
    ]


@pytest.mark.parametrize("method", ["er", "sf"])
def test_random_dag_is_topological_and_seeded(method):
    dag = random_dag(40, expected_degree=3.0, seed=5, method=method)
    assert dag.kind == "DAG"
    assert list(dag.names) == [f"X{i}" for i in range(1, 41)]
    pairs = _edge_index_pairs(dag)
    assert len(pairs) == dag.n_edges()  # every edge directed
    assert all(i < j for i, j in pairs)
    assert dag == random_dag(40, expected_degree=3.0, seed=5, method=method)
    assert dag != random_dag(40, expected_degree=3.0, seed=6, method=method)


def test_random_dag_density():
    er = [random_dag(50, 2.0, seed=s).n_edges() for s in range(20)]
    assert abs(np.mean(er) - 50.0) < 4.0  # expected |E| = degree * p / 2
    sf = [random_dag(50, 2.0, seed=s, method="sf") for s in range(5)]
    for dag in sf:
        assert dag.n_edges() == 49  # one parent for every node after the first
        assert max(len(dag.parents(j)) for j in range(50)) == 1
    hub = max(max(len(d.children(i)) for i in range(50)) for d in sf)
    assert hub >= 6  # preferential attachment makes hubs
    with pytest.raises(ValueError, match="unknown DAG method"):
        random_dag(5, method="xx")


def test_random_discrete_network():
    dag = random_dag(12, 2.5, seed=1)
    net = random_discrete_network(dag, card_range=(2, 4), concentration=(0.1, 1.0), seed=3)
    assert net.n_nodes == 12 and net.n_edges == dag.n_edges()
    assert set(net.cards.tolist()) <= {2, 3, 4}
    for v in net.variables:
        np.testing.assert_allclose(net.cpts[v].sum(axis=0), 1.0)
        assert net.states[v] == [f"s{i}" for i in range(len(net.states[v]))]
    assert net.dag == dag
    fixed = random_discrete_network(dag, cards=[3] * 12, seed=3)
    assert np.all(fixed.cards == 3)
    # the sampler draws roots from their CPT
    root = next(v for v in fixed.variables if not fixed.parents[v])
    codes = fixed.sample_codes(50_000, seed=0)[:, fixed.index(root)]
    p_hat = np.bincount(codes, minlength=3) / codes.size
    np.testing.assert_allclose(p_hat, fixed.cpts[root][:, 0], atol=0.015)
    with pytest.raises(ValueError, match="arities"):
        random_discrete_network(dag, cards=[2, 3])


def test_random_gaussian_network():
    dag = random_dag(15, 3.0, seed=2)
    net = random_gaussian_network(dag, seed=0, weight_range=(0.5, 2.0), noise_sd=(0.5, 1.0))
    assert net.kind == "gaussian" and net.n_edges == dag.n_edges()
    weights = np.concatenate([net.coefficients[v] for v in net.variables])
    assert np.all((np.abs(weights) >= 0.5) & (np.abs(weights) <= 2.0))
    assert np.any(weights < 0) and np.any(weights > 0)
    assert all(0.5 <= net.noise_sd[v] <= 1.0 for v in net.variables)
    df = net.sample(20_000, seed=1)
    assert (df.dtypes == np.float64).all()
    # a child regressed on its parents recovers the weights
    child = max(net.variables, key=lambda v: len(net.parents[v]))
    x = df[net.parents[child]].to_numpy()
    beta, *_ = np.linalg.lstsq(np.column_stack([x, np.ones(len(x))]), df[child].to_numpy())
    np.testing.assert_allclose(beta[:-1], net.coefficients[child], atol=0.05)


def test_variable_types_draw():
    names = [f"X{i}" for i in range(5)]
    for seed in range(10):
        types = random_variable_types(names, seed=seed, min_continuous=2)
        assert sum(t == "continuous" for t in types.values()) >= 2
        assert set(types.values()) <= {"continuous", "binary", "ordinal", "categorical"}
    with pytest.raises(ValueError, match="cannot have 6 continuous"):
        random_variable_types(names, min_continuous=6)


def test_simulate_mixed_types_and_generator():
    dag = Graph.from_edges(["X1", "X2", "X3", "X4"], [("X1", "X3"), ("X2", "X3"), ("X3", "X4")])
    types = {"X1": "continuous", "X2": "categorical", "X3": "ordinal", "X4": "binary"}
    n = 40_000
    df = simulate_mixed(dag, n, seed=4, types=types)
    assert df["X1"].dtype == np.float64
    assert isinstance(df["X2"].dtype, pd.CategoricalDtype) and not df["X2"].cat.ordered
    assert list(df["X2"].cat.categories) == ["A", "B", "C", "D"]
    assert df["X3"].cat.ordered and list(df["X3"].cat.categories) == [1, 2, 3, 4]
    assert df["X4"].dtype == bool
    schema = Schema.infer([df])
    assert schema.kinds == ("continuous", "categorical", "ordinal", "binary")
    # roots: continuous ~ N(0, 1); discrete = N(0, 1) cut at quartiles, so about uniform
    assert abs(df["X1"].mean()) < 0.03 and abs(df["X1"].var() - 1) < 0.05
    np.testing.assert_allclose(df["X2"].value_counts(normalize=True).sort_index(), 0.25, atol=0.015)
    # X3 depends on both parents, X4 on X3
    assert stats.spearmanr(df["X1"], df["X3"].cat.codes).pvalue < 1e-10
    by_x2 = pd.crosstab(df["X2"], df["X3"])
    assert stats.chi2_contingency(by_x2).pvalue < 1e-10
    assert stats.chi2_contingency(pd.crosstab(df["X3"], df["X4"])).pvalue < 1e-10
    # X4 is independent of X1 given X3: a simple check on one stratum
    stratum = df[df["X3"] == 2]
    assert stats.pointbiserialr(stratum["X4"], stratum["X1"]).pvalue > 1e-3
    assert df.equals(simulate_mixed(dag, n, seed=4, types=types))


def test_simulate_mixed_default_types():
    dag = random_dag(5, 2.0, seed=1)
    df = simulate_mixed(dag, 500, seed=7)
    kinds = Schema.infer([df]).kinds
    assert sum(k == "continuous" for k in kinds) >= 2
    with pytest.raises(ValueError, match="no variable type"):
        simulate_mixed(dag, 10, types={"X1": "continuous"})


def test_choose_latents_prefers_confounders():
    dag = random_dag(30, 2.0, seed=3)
    n_children = {v: len(dag.children(i)) for i, v in enumerate(dag.names)}
    qualifying = [v for v, c in n_children.items() if c >= 2]
    latents = choose_latents(dag, 0.15, seed=0)
    assert len(latents) == round(0.15 * 30)
    assert len(qualifying) >= len(latents)
    assert all(n_children[v] >= 2 for v in latents)
    assert latents == choose_latents(dag, 0.15, seed=0)
    picks = {tuple(choose_latents(dag, 0.15, seed=s)) for s in range(10)}
    assert len(picks) > 1  # random among qualifying nodes
    # more latents than qualifying nodes: all qualifying, then the most-children others
    many = choose_latents(dag, 0.9, seed=1)
    assert set(qualifying) <= set(many) and len(many) == 27
    df = random_discrete_network(dag, seed=0).sample(100, seed=0)
    observed = drop_latents(df, latents)
    assert list(observed.columns) == [v for v in dag.names if v not in latents]
    with pytest.raises(ValueError, match="fraction"):
        choose_latents(dag, 1.5)
