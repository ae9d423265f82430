"""FedC2SL's random-projection chi2 sketch: linearity, unbiasedness, convergence."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from fedcausal_flwr.stats import (
    client_sketch,
    discrete_tests,
    expected_counts,
    geometric_mean_estimate,
    local_tables,
    make_layout,
    projection_matrix,
    sketch_chi2,
    sum_tables,
    table_marginals,
)


def stable_abs_moment(order: float) -> float:
    """E|X|^order for X ~ N(0, 2) (standard 2-stable), by the Gaussian moment formula."""
    return 2.0**order * special.gamma((order + 1) / 2) / math.sqrt(math.pi)


def relative_sd(sketch_length: int) -> float:
    lg = sketch_length
    return math.sqrt(stable_abs_moment(4 / lg) ** lg / stable_abs_moment(2 / lg) ** (2 * lg) - 1.0)


def dependent_codes(rng, n_rows):
    """x, y dependent within strata of s1, s2; y has an unobserved global level."""
    s = rng.integers(0, [3, 2], (n_rows, 2))
    x = (rng.random(n_rows) < 0.3 + 0.2 * s[:, 0]).astype(int) + rng.integers(0, 2, n_rows)
    y = np.where(rng.random(n_rows) < 0.6, x % 3, rng.integers(0, 3, n_rows))
    return np.column_stack([x, y, s]), np.array([3, 4, 3, 2])


def test_projection_matrix_is_deterministic_and_n02():
    a = projection_matrix(42, 7, 50, 12)
    np.testing.assert_array_equal(a, projection_matrix(42, 7, 50, 12))
    assert not np.array_equal(a, projection_matrix(42, 8, 50, 12))
    assert projection_matrix(1, 0, 5, 4, n_strata=3).shape == (3, 5, 4)
    big = projection_matrix(0, 0, 2000, 100)
    assert abs(big.var() - 2.0) < 0.05 and abs(big.mean()) < 0.02
    with pytest.raises(ValueError, match="sketch length"):
        projection_matrix(0, 0, 1, 4)


@pytest.mark.parametrize("per_stratum", [False, True])
def test_client_sketches_sum_to_projection_of_pooled_residual(per_stratum):
    rng = np.random.default_rng(0)
    codes, cards = dependent_codes(rng, 600)
    queries = [(0, 1, (2, 3)), (0, 1, ()), (1, 2, (3,))]
    layout = make_layout(queries, cards)
    clients = np.split(codes, [100, 101, 350])
    local = [local_tables(c, cards, layout)[0] for c in clients]
    marginals = sum_tables([table_marginals(t, layout) for t in local])
    expected = expected_counts(marginals, layout)
    seed, length = 123, 20
    summed = sum(
        client_sketch(t, expected, layout, len(clients), seed, length, per_stratum=per_stratum)
        for t in local
    )
    pooled = sum_tables(local)
    for i in range(layout.n_queries):
        table = layout.table(pooled, i).astype(float)
        n_xz, n_yz = table.sum(axis=2), table.sum(axis=1)
        e = (
            n_xz[:, :, None]
            * n_yz[:, None, :]
            / np.maximum(table.sum(axis=(1, 2)), 1)[:, None, None]
        )
        np.testing.assert_allclose(layout.table(expected, i), e, rtol=1e-12)
        u = ((table - e) / np.sqrt(np.where(e > 0, e, 1))).reshape(table.shape[0], -1)
        cs, cx, cy = layout.shapes[i]
        if per_stratum:
            proj = projection_matrix(seed, i, length, cx * cy, cs)
            want = np.stack([proj[z] @ u[z] for z in range(cs)])
        else:
            want = u @ projection_matrix(seed, i, length, cx * cy).T
        start = sum(layout.shapes[j][0] * length for j in range(i))
        got = summed[start : start + cs * length].reshape(cs, length)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_geometric_mean_estimator_is_unbiased_with_the_predicted_spread():
    rng = np.random.default_rng(1)
    u = rng.normal(size=12)
    true = float(u @ u)
    length, reps = 50, 4000
    proj = rng.normal(scale=math.sqrt(2), size=(reps, length, 12))
    est = geometric_mean_estimate(proj @ u)
    sd = relative_sd(length)
    assert abs(sd - 0.31) < 0.01  # ~0.31 relative sd at l = 50 (about pi / sqrt(2 l))
    std_err = true * sd / math.sqrt(reps)
    assert abs(est.mean() - true) < 4 * std_err
    assert abs(est.std() / true / sd - 1) < 0.1
    # N(0, 1) entries would halve the estimate: the scale matters
    half = geometric_mean_estimate(rng.normal(size=(reps, length, 12)) @ u)
    assert abs(half.mean() / true - 0.5) < 0.05


def test_estimator_converges_as_the_sketch_grows():
    rng = np.random.default_rng(2)
    u = rng.normal(size=6)
    true = float(u @ u)
    rmse = []
    for length in (5, 20, 80, 320):
        # P u ~ N(0, 2 ||u||^2) exactly, so draw the projected values directly
        proj = rng.normal(scale=math.sqrt(2 * true), size=(1000, length))
        rel = geometric_mean_estimate(proj) / true - 1
        rmse.append(float(np.sqrt(np.mean(rel**2))))
        assert abs(rmse[-1] / relative_sd(length) - 1) < 0.25
    assert rmse == sorted(rmse, reverse=True)
    assert rmse[-1] < 0.14  # ~ pi / sqrt(2 l)


def test_zero_projection_gives_zero():
    np.testing.assert_array_equal(geometric_mean_estimate(np.array([[0.0, 1.0, 2.0]])), [0.0])


def test_sketch_chi2_is_unbiased_for_the_exact_statistic():
    rng = np.random.default_rng(3)
    codes, cards = dependent_codes(rng, 400)
    queries = [(0, 1, (2, 3)), (0, 2, ()), (1, 3, (2,))]
    layout = make_layout(queries, cards)
    clients = np.array_split(codes, 3)
    local = [local_tables(c, cards, layout)[0] for c in clients]
    pooled = sum_tables(local)
    exact = discrete_tests(pooled, layout, "chi2")
    marginals = sum_tables([table_marginals(t, layout) for t in local])
    expected = expected_counts(marginals, layout)
    length, reps = 50, 300
    stats = np.array(
        [
            sketch_chi2(
                sum(client_sketch(t, expected, layout, 3, seed, length) for t in local),
                marginals,
                layout,
                length,
            ).statistic
            for seed in range(reps)
        ]
    )
    result = sketch_chi2(
        sum(client_sketch(t, expected, layout, 3, 0, length) for t in local),
        marginals,
        layout,
        length,
    )
    np.testing.assert_array_equal(result.dof, exact.dof)
    assert 0 <= result.pvalue.min() and result.pvalue.max() <= 1
    # a stratum sum of per-stratum estimates: its sd is at most 0.31 * the statistic
    std_err = 0.32 * exact.statistic / math.sqrt(reps)
    assert np.all(np.abs(stats.mean(axis=0) - exact.statistic) < 4 * std_err)
    quirk = sketch_chi2(
        sum(client_sketch(t, expected, layout, 3, 0, length) for t in local),
        marginals,
        layout,
        length,
        empty_strata_add_dof=True,
    )
    np.testing.assert_array_equal(
        quirk.dof, discrete_tests(pooled, layout, "chi2", empty_strata_add_dof=True).dof
    )


def test_sketch_input_errors():
    layout = make_layout([(0, 1, ())], [2, 2])
    with pytest.raises(ValueError, match="marginal vector"):
        expected_counts(np.zeros(3), layout)
    with pytest.raises(ValueError, match="n_clients"):
        client_sketch(np.zeros(4), np.ones(4), layout, 0, 1, 10)
    with pytest.raises(ValueError, match="sketch vector"):
        sketch_chi2(np.zeros(7), np.zeros(4), layout, 10)
