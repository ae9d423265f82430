"""The vectorised sampler against exact marginals and against pgmpy's own sampler."""

import gzip
from importlib import resources

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from fedcausal_flwr.data import Network, Schema, load_network, sample_codes

EXAMPLES = resources.files("pgmpy") / "utils" / "example_models"


def _pgmpy_model(name):
    from pgmpy.readwrite import BIFReader

    with gzip.open(EXAMPLES / f"{name}.bif.gz") as fh:
        return BIFReader(string=fh.read().decode()).get_model()


def _within(p_hat, p, n, z=4.5):
    """|p_hat - p| within z binomial standard errors (plus float slack)."""
    return np.abs(p_hat - p) <= z * np.sqrt(p * (1 - p) / n) + 1e-9


@pytest.fixture(scope="module")
def alarm():
    return load_network("alarm"), _pgmpy_model("alarm")


def test_codes_shape_dtype_and_determinism():
    net = load_network("asia")
    a = sample_codes(net, 1000, seed=3)
    b = net.sample_codes(1000, seed=3)
    c = sample_codes(net, 1000, seed=4)
    assert a.shape == (1000, 8) and a.dtype == np.int8
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.all(a >= 0) and np.all(a < net.cards)
    assert sample_codes(net, 0, seed=0).shape == (0, 8)
    with pytest.raises(ValueError, match="non-negative integer"):
        sample_codes(net, -1)


def test_frame_is_categorical_with_global_levels():
    net = load_network("asia")
    df = net.sample(500, seed=1)
    assert list(df.columns) == net.variables
    for v in net.variables:
        assert isinstance(df[v].dtype, pd.CategoricalDtype)
        assert list(df[v].cat.categories) == net.states[v]
    np.testing.assert_array_equal(Schema.for_network(net).encode(df), net.sample_codes(500, seed=1))


def test_asia_marginals_vs_exact_and_pgmpy():
    from pgmpy.inference import VariableElimination
    from pgmpy.sampling import BayesianModelSampling

    net = load_network("asia")
    model = _pgmpy_model("asia")
    n = 100_000
    ours = net.sample(n, seed=11)
    theirs = BayesianModelSampling(model).forward_sample(size=20_000, seed=5, show_progress=False)
    ve = VariableElimination(model)
    for v in net.variables:
        exact = ve.query([v], show_progress=False)
        p = pd.Series(exact.values, index=exact.state_names[v])
        ours_p = ours[v].value_counts(normalize=True).reindex(p.index, fill_value=0.0)
        theirs_p = theirs[v].astype(str).value_counts(normalize=True).reindex(p.index, fill_value=0)
        assert _within(ours_p.to_numpy(), p.to_numpy(), n).all(), v
        assert _within(theirs_p.to_numpy(), p.to_numpy(), 20_000).all(), v


def test_alarm_marginals_and_joints_vs_exact(alarm):
    from pgmpy.inference import VariableElimination

    net, model = alarm
    n = 60_000
    df = net.sample(n, seed=2)
    ve = VariableElimination(model)
    for v in net.variables:
        exact = ve.query([v], show_progress=False)
        p = pd.Series(exact.values, index=exact.state_names[v])
        p_hat = df[v].value_counts(normalize=True).reindex(p.index, fill_value=0.0)
        assert _within(p_hat.to_numpy(), p.to_numpy(), n).all(), v
    # joints of a child with its parents (parent-order mistakes would show up here)
    for child in ("HR", "CO", "BP", "VENTLUNG", "SAO2"):
        pair = (net.parents[child][-1], child)
        exact = ve.query(list(pair), joint=True, show_progress=False)
        table = exact.values
        names = exact.variables
        counts = pd.crosstab(df[names[0]], df[names[1]], dropna=False)
        counts = counts.reindex(
            index=exact.state_names[names[0]], columns=exact.state_names[names[1]], fill_value=0
        )
        assert _within(counts.to_numpy() / n, table, n).all(), pair


def test_alarm_marginals_vs_pgmpy_sampler(alarm):
    net, model = alarm
    n_ours, n_theirs = 60_000, 20_000
    ours = net.sample(n_ours, seed=9)
    theirs = model.simulate(n_theirs, seed=9, show_progress=False)
    worst = 0.0
    for v in net.variables:
        a = ours[v].value_counts(normalize=True).reindex(net.states[v], fill_value=0).to_numpy()
        b = (
            theirs[v].astype(str).value_counts(normalize=True).reindex(net.states[v], fill_value=0)
        ).to_numpy()
        pooled = (a * n_ours + b * n_theirs) / (n_ours + n_theirs)
        se = np.sqrt(pooled * (1 - pooled) * (1 / n_ours + 1 / n_theirs))
        assert np.all(np.abs(a - b) <= 4.5 * se + 1e-9), v
        worst = max(worst, float(np.max(np.abs(a - b))))
    assert worst < 0.02


def _tiny_network():
    """A (3 states, first impossible), B | A (20 states, some impossible), C | A, B."""
    rng = np.random.default_rng(0)
    b_cpt = rng.dirichlet(np.ones(20), size=3).T
    b_cpt[[0, 19], :] = 0.0
    b_cpt /= b_cpt.sum(axis=0)
    c_cpt = rng.dirichlet(np.ones(2), size=60).T
    c_cpt[1, :] = 0.0
    c_cpt[0, :] = 1.0
    c_cpt[:, 5] = [0.3, 0.7]
    return Network(
        "tiny",
        ["A", "B", "C"],
        {"A": [], "B": ["A"], "C": ["A", "B"]},
        states={"A": ["a0", "a1", "a2"], "B": [f"b{i}" for i in range(20)], "C": ["c0", "c1"]},
        cpts={"A": np.array([[0.0], [0.25], [0.75]]), "B": b_cpt, "C": c_cpt},
    )


def test_zero_probability_states_never_drawn_and_large_cards():
    net = _tiny_network()
    n = 200_000
    codes = sample_codes(net, n, seed=1)
    a, b, c = codes[:, 0], codes[:, 1], codes[:, 2]
    assert not np.any(a == 0)
    assert not np.any((b == 0) | (b == 19))
    # C is deterministic except in parent configuration 5 = (A=0, B=5), which cannot occur
    assert not np.any(c == 1)
    # the 20-state node (searchsorted path) follows its CPT given A
    for state_a in (1, 2):
        rows = b[a == state_a]
        p_hat = np.bincount(rows, minlength=20) / rows.size
        assert _within(p_hat, net.cpts["B"][:, state_a], rows.size).all()


def test_gaussian_sampling_matches_pgmpy_joint():
    from pgmpy.models import LinearGaussianBayesianNetwork

    net = load_network("ecoli70")
    model = LinearGaussianBayesianNetwork.load(str(EXAMPLES / "ecoli70.json"))
    mean, cov = model.to_joint_gaussian()
    order = list(nx.topological_sort(model))
    n = 100_000
    df = net.sample(n, seed=4)
    assert (df.dtypes == np.float64).all()
    x = df[order].to_numpy()
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(x.mean(axis=0) - mean) <= 5 * sd / np.sqrt(n))
    corr_hat = np.corrcoef(x, rowvar=False)
    corr = cov / np.outer(sd, sd)
    assert np.max(np.abs(corr_hat - corr)) < 0.025
    np.testing.assert_allclose(x.std(axis=0), sd, rtol=0.02)
