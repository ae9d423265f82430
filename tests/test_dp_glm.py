"""Differentially private fedCI: each row's GLM contribution is clipped at its site (the bound the
noise is calibrated to), and the LR test reads noisy log-likelihoods knowing their noise."""

import numpy as np
import pandas as pd
import pytest

from fedcausal_flwr.data.schema import Schema, VariableSpec
from fedcausal_flwr.stats.glm import ClientTable, GLMModel, local_contribution, n_global_params


@pytest.fixture(scope="module")
def mixed():
    rng = np.random.default_rng(3)
    n = 60
    frame = pd.DataFrame({
        "c": rng.normal(0, 2, n),
        "b": rng.integers(0, 2, n).astype(bool),
        "k": rng.choice(["u", "v", "w"], n),
        "o": rng.choice(["lo", "mid", "hi", "top"], n),
    })  # fmt: skip
    schema = Schema((
        VariableSpec("c", "continuous"), VariableSpec("b", "binary", (False, True)),
        VariableSpec("k", "categorical", ("u", "v", "w")),
        VariableSpec("o", "ordinal", ("lo", "mid", "hi", "top")),
    ))  # fmt: skip
    return frame, schema


@pytest.mark.parametrize("response", ["c", "b", "k", "o"])
def test_a_clipped_contribution_is_the_sum_of_each_rows_contribution_clipped(mixed, response):
    """Against the contributions of one-row tables, clipped one by one (an independent route:
    no closed form, no weights)."""
    frame, schema = mixed
    predictors = tuple(v for v in ("c", "b", "k", "o") if v != response)
    model = GLMModel(response, predictors, "none", (), ())
    rng = np.random.default_rng(7)
    beta = rng.normal(0, 0.3, n_global_params(model, schema))
    rows = [local_contribution(ClientTable(frame.iloc[[i]], schema), 0, model, beta)
            for i in range(len(frame))]  # fmt: skip
    norms = np.array([np.linalg.norm(r) for r in rows])
    clip = float(np.median(norms))
    assert (norms > clip).any() and (norms < clip).any()  # the test clips some rows, not all
    expected = sum(r * min(1.0, clip / nrm) for r, nrm in zip(rows, norms, strict=True))
    got = local_contribution(ClientTable(frame, schema), 0, model, beta, clip=clip)
    assert np.allclose(got, expected, rtol=1e-10, atol=1e-10)
    unclipped = local_contribution(ClientTable(frame, schema), 0, model, beta)
    assert np.allclose(unclipped, sum(rows), rtol=1e-10, atol=1e-10)


def test_a_noisy_statistics_p_value_is_the_tail_of_chi2_plus_its_noise():
    from scipy import stats

    from fedcausal_flwr.stats.privacy import noisy_chi2_sf

    rng = np.random.default_rng(0)
    for df, variance, t in ((1, 25.0, 4.0), (3, 400.0, 30.0), (2, 1.0, 6.0), (4, 100.0, -5.0)):
        draws = rng.chisquare(df, 400_000) + rng.normal(0, np.sqrt(variance), 400_000)
        assert noisy_chi2_sf(t, df, variance) == pytest.approx(np.mean(draws >= t), abs=4e-3)
    assert noisy_chi2_sf(3.84, 1, 0.0) == pytest.approx(stats.chi2.sf(3.84, 1))
