"""Gaussian moments and Fisher-z against causal-learn's FisherZ."""

from __future__ import annotations

import numpy as np
import pytest
from causallearn.utils.cit import CIT
from helpers import random_queries

from fedcausal_flwr.stats import (
    GaussianMoments,
    fisher_z_from_correlation,
    fisher_z_pvalues,
    local_moments,
    sum_moments,
)


def linear_gaussian(rng, n_vars, n_rows, edge_prob=0.35, mean=0.0):
    weights = np.triu(
        rng.normal(0, 1, (n_vars, n_vars)) * (rng.random((n_vars, n_vars)) < edge_prob), 1
    )
    data = rng.normal(size=(n_rows, n_vars))
    for j in range(n_vars):
        data[:, j] += data @ weights[:, j]
    return data + mean


def causallearn_fisherz(data, queries):
    cit = CIT(data, "fisherz")
    return np.array([cit(x, y, list(s)) for x, y, s in queries])


@pytest.mark.parametrize(
    ("n_rows", "mean", "shift"), [(40, 0.0, None), (2000, 0.0, None), (800, 50.0, 50.0)]
)
def test_fisher_z_equals_causallearn_from_summed_client_moments(n_rows, mean, shift):
    rng = np.random.default_rng(n_rows)
    data = linear_gaussian(rng, 9, n_rows, mean=mean)
    queries = random_queries(rng, 9, 300, 4)
    shift_vec = None if shift is None else np.full(9, shift)
    parts = np.array_split(data, [3, 3, n_rows // 2])  # includes an empty client
    total = sum_moments([local_moments(part, shift=shift_vec) for part in parts])
    assert total.n == n_rows
    ours = fisher_z_pvalues(total, queries)
    ref = causallearn_fisherz(data, queries)
    # causal-learn computes p = 2 * (1 - Phi(|z|)), which carries ~1e-16 absolute rounding
    np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-14)
    assert (ref < 1e-6).any() and (ref > 0.05).any()


def test_moment_vectors_add_like_moments():
    rng = np.random.default_rng(1)
    data = linear_gaussian(rng, 5, 300)
    a, b = local_moments(data[:100]), local_moments(data[100:])
    vec = a.to_vector() + b.to_vector()
    back = GaussianMoments.from_vector(vec, 5)
    pooled = local_moments(data)
    assert back.n == 300
    np.testing.assert_allclose(back.sum_x, pooled.sum_x, rtol=1e-12)
    np.testing.assert_allclose(back.cross, pooled.cross, rtol=1e-12)
    queries = random_queries(rng, 5, 40, 3)
    np.testing.assert_allclose(
        fisher_z_pvalues(back, queries), fisher_z_pvalues(pooled, queries), rtol=1e-9, atol=1e-14
    )


def test_gaussian_errors():
    rng = np.random.default_rng(2)
    data = linear_gaussian(rng, 4, 50)
    names = ["a", "b", "c", "d"]
    bad = data.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match=r"'c' .*client 'site-1'.*NaN"):
        local_moments(bad, variables=names, client="site-1")
    const = data.copy()
    const[:, 1] = 0.1
    with pytest.raises(ValueError, match=r"'b' .*zero variance"):
        fisher_z_pvalues(local_moments(const), [(0, 1, ())], names)
    corr = np.corrcoef(data.T)
    corr[3, :] = corr[0, :]  # variable 3 duplicates variable 0 exactly
    corr[:, 3] = corr[:, 0]
    with pytest.raises(ValueError, match=r"columns '#1', '#2', '#0', '#3' are collinear"):
        fisher_z_from_correlation(corr, 50, [(0, 1, ()), (1, 2, (0, 3))])
    with pytest.raises(ValueError, match=r"columns 'b', 'c', 'a', 'd' are collinear: the "
                       r"correlation matrix of 'b' and 'c' given 'a', 'd' is singular, so "
                       r"Fisher-z cannot test them; drop one of them"):  # fmt: skip
        fisher_z_from_correlation(corr, 50, [(1, 2, (0, 3))], ["a", "b", "c", "d"])
    with pytest.raises(ValueError, match="needs n > 5"):
        fisher_z_pvalues(local_moments(data[:5]), [(0, 1, (2, 3))])
    with pytest.raises(ValueError, match="different shifts"):
        local_moments(data, shift=np.ones(4)) + local_moments(data)
    with pytest.raises(TypeError):
        local_moments(np.array([["x", "y"]]))
