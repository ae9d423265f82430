"""fedCI's federated GLM LRT against pooled statsmodels fits (independent implementation)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats

from fedcausal_flwr.data.partition import split_site_effects
from fedcausal_flwr.data.schema import DataError, Schema
from fedcausal_flwr.data.synthetic import random_dag
from fedcausal_flwr.stats.glm import (
    ClientTable,
    GLMModel,
    ci_test_inprocess,
    fisher_combine,
    fit_models,
    model_dof,
    symmetric_pvalue,
)

KIND_OF = {"c": "continuous", "b": "binary", "o": "ordinal", "k": "categorical"}
NAMES = ["c1", "b1", "o1", "k1", "c2", "b2", "o2", "k2"]


def make_partition(k: int, seed: int = 3):
    dag = random_dag(len(NAMES), expected_degree=3.0, seed=seed)
    types = {f"X{i + 1}": KIND_OF[name[0]] for i, name in enumerate(NAMES)}
    part = split_site_effects(dag, 1500, k, seed=seed, types=types, n_levels=3)
    rename = {f"X{i + 1}": name for i, name in enumerate(NAMES)}
    clients = [df.rename(columns=rename) for df in part.clients]
    return clients, Schema.infer(clients)


# ----------------------------------------------------------------------- pooled reference
def pooled_design(df: pd.DataFrame, schema: Schema, predictors, site: np.ndarray | None):
    cols = [pd.Series(1.0, index=df.index, name="const")]
    for v in predictors:
        spec = schema[v]
        if spec.kind in ("continuous", "binary"):
            cols.append(df[v].astype(float))
        else:
            cat = pd.Categorical(df[v].astype(object), categories=list(spec.levels))
            dummies = pd.get_dummies(cat, prefix=v, drop_first=True, dtype=float)
            dummies.index = df.index
            cols.append(dummies)
    if site is not None:
        levels = sorted(set(site.tolist()))
        site_cat = pd.Categorical(site, categories=levels)
        dummies = pd.get_dummies(site_cat, prefix="site", drop_first=True, dtype=float)
        dummies.index = df.index
        cols.append(dummies)
    return pd.concat(cols, axis=1).to_numpy()


def pooled_loglik(df, schema, response, predictors, site):
    X = pooled_design(df, schema, predictors, site)
    spec = schema[response]
    if spec.kind == "continuous":
        return sm.OLS(df[response].to_numpy(float), X).fit().llf
    if spec.kind == "binary":
        return sm.GLM(df[response].to_numpy(float), X, family=sm.families.Binomial()).fit().llf
    codes = pd.Categorical(df[response].astype(object), categories=list(spec.levels)).codes
    if spec.kind == "categorical":
        fit = sm.MNLogit(codes, X).fit(method="newton", disp=0, maxiter=60)
        return fit.llf
    # ordinal: independent cumulative logits, then differenced cell probabilities (as python-fedci)
    cums = []
    for j in range(spec.card - 1):
        target = (codes <= j).astype(float)
        fit = sm.GLM(target, X, family=sm.families.Binomial()).fit(tol=1e-12)
        cums.append(fit.predict(X))
    cum = np.column_stack([np.zeros(len(codes)), *cums, np.ones(len(codes))])
    cells = cum[:, 1:] - cum[:, :-1]
    for i in np.flatnonzero((cells < 0).any(axis=1)):
        cells[i] = np.abs(cells[i]) / np.abs(cells[i]).sum()
    cells = np.maximum(cells, 1e-8)
    return float(np.log(cells[np.arange(len(codes)), codes]).sum())


def pooled_pvalue(clients, schema, x, y, given, site_effect):
    used = [k for k, df in enumerate(clients) if set([x, y, *given]) <= set(df.columns)]
    df = pd.concat([clients[k][[x, y, *given]] for k in used], ignore_index=True)
    site = None
    if site_effect != "none":
        site = np.concatenate([np.full(len(clients[k]), k) for k in used])
    pvals = []
    for resp, other in ((x, y), (y, x)):
        l0 = pooled_loglik(df, schema, resp, given, site)
        l1 = pooled_loglik(df, schema, resp, [other, *given], site)
        dof = model_dof(GLMModel(resp, (other, *given)), schema) - model_dof(
            GLMModel(resp, tuple(given)), schema
        )
        pvals.append(stats.chi2.sf(2 * (l1 - l0), dof))
    return symmetric_pvalue(*pvals)


# ----------------------------------------------------------------------- tests
pytestmark = pytest.mark.filterwarnings("ignore::Warning")

TYPE_PAIRS = list(itertools.combinations_with_replacement("cbok", 2))


@pytest.fixture(scope="module", params=[3, 12])
def federation(request):
    clients, schema = make_partition(request.param)
    tables = [ClientTable(df, schema, f"site{k}") for k, df in enumerate(clients)]
    return clients, schema, tables


@pytest.mark.parametrize("pair", TYPE_PAIRS, ids=["".join(p) for p in TYPE_PAIRS])
def test_federated_lrt_equals_pooled(federation, pair):
    clients, schema, tables = federation
    x = pair[0] + "1"
    y = pair[1] + ("2" if pair[0] == pair[1] else "1")
    rng = np.random.default_rng(TYPE_PAIRS.index(pair))
    others = [v for v in NAMES if v not in (x, y)]
    site_effects = ["none", "fixed", "private"] if len(tables) == 3 else ["fixed", "private"]
    for size, site_effect in zip(range(4), itertools.cycle(site_effects), strict=False):
        given = list(rng.choice(others, size=size, replace=False))
        fed = ci_test_inprocess(tables, x, y, given, site_effect=site_effect, tol=1e-8)
        ref = pooled_pvalue(clients, schema, x, y, given, site_effect)
        assert fed.clients == tuple(range(len(tables)))
        assert abs(np.log10(fed.p_value) - np.log10(ref)) < 1e-6, (x, y, given, site_effect)


def test_default_tolerance_close_to_pooled():
    clients, schema = make_partition(3)
    tables = [ClientTable(df, schema) for df in clients]
    for x, y, given in (("k1", "o1", ["c2"]), ("b1", "c2", ["k2", "o2"])):
        fed = ci_test_inprocess(tables, x, y, given, site_effect="fixed")
        ref = pooled_pvalue(clients, schema, x, y, given, "fixed")
        assert abs(np.log10(fed.p_value) - np.log10(ref)) < 1e-4


def test_private_equals_fixed_and_differs_from_none():
    clients, schema = make_partition(3)
    tables = [ClientTable(df, schema) for df in clients]
    fixed = ci_test_inprocess(tables, "c1", "b1", ["k1"], site_effect="fixed", tol=1e-9)
    private = ci_test_inprocess(tables, "c1", "b1", ["k1"], site_effect="private", tol=1e-9)
    none = ci_test_inprocess(tables, "c1", "b1", ["k1"], site_effect="none", tol=1e-9)
    assert abs(np.log10(private.p_value) - np.log10(fixed.p_value)) < 1e-7
    assert private.df == fixed.df == none.df
    assert abs(np.log10(none.p_value) - np.log10(fixed.p_value)) > 1.0  # site confounding


def test_degrees_of_freedom_table():
    schema = Schema.infer(
        [
            pd.DataFrame(
                {
                    "m4": pd.Categorical(list("abcd") * 3),
                    "n4": pd.Categorical(list("wxyz") * 3),
                    "o4": pd.Categorical([1, 2, 3, 4] * 3, ordered=True),
                    "c": np.arange(12.0),
                    "b": [True, False] * 6,
                }
            )
        ]
    )

    def df_of(resp, added):
        return model_dof(GLMModel(resp, (added,)), schema) - model_dof(GLMModel(resp, ()), schema)

    assert df_of("m4", "n4") == df_of("n4", "m4") == 9
    assert df_of("o4", "c") == 3 and df_of("c", "o4") == 3
    assert df_of("c", "b") == 1 and df_of("b", "c") == 1


def test_clients_missing_a_variable_contribute_nothing():
    clients, schema = make_partition(3)
    reduced = [clients[0], clients[1].drop(columns=["c2"]), clients[2]]
    tables = [ClientTable(df, schema) for df in reduced]
    fed = ci_test_inprocess(tables, "c1", "k1", ["c2"], site_effect="fixed", tol=1e-8)
    assert fed.clients == (0, 2)
    assert fed.n == len(clients[0]) + len(clients[2])
    ref = pooled_pvalue(reduced, schema, "c1", "k1", ["c2"], "fixed")
    assert abs(np.log10(fed.p_value) - np.log10(ref)) < 1e-6
    none = ci_test_inprocess(tables[1:2], "c1", "k1", ["c2"])
    assert np.isnan(none.p_value) and none.clients == ()


def test_gaussian_fit_matches_ols_coefficients_and_takes_two_rounds():
    clients, schema = make_partition(3)
    tables = [ClientTable(df, schema) for df in clients]
    (state,), rounds = fit_models(tables, [GLMModel("c1", ("b1", "k1"))])
    df = pd.concat(clients, ignore_index=True)
    ols = sm.OLS(df["c1"].to_numpy(float), pooled_design(df, schema, ["b1", "k1"], None)).fit()
    np.testing.assert_allclose(state.beta, ols.params, rtol=1e-9, atol=1e-10)
    assert state.loglik == pytest.approx(ols.llf, rel=1e-12)
    assert rounds == 2


def test_fisher_worked_example_and_tsagris():
    statistic, df, p = fisher_combine([0.0918, 0.3253])
    assert round(statistic, 3) == 7.022 and df == 4 and round(p, 4) == 0.1347
    assert symmetric_pvalue(0.0327, 0.0338) == pytest.approx(0.0338)
    with pytest.raises(ValueError):
        fisher_combine([1.2])


def test_bad_input_is_named():
    clients, schema = make_partition(3)
    tables = [ClientTable(df, schema, f"site{k}") for k, df in enumerate(clients)]
    with pytest.raises(KeyError, match="nope"):
        ci_test_inprocess(tables, "c1", "nope")
    with pytest.raises(ValueError, match="repeats"):
        ci_test_inprocess(tables, "c1", "b1", ["c1"])
    with pytest.raises(ValueError, match="site_effect"):
        ci_test_inprocess(tables, "c1", "b1", site_effect="random")
    bad = clients[0].copy()
    bad.loc[bad.index[0], "c1"] = np.nan
    with pytest.raises(DataError, match="site0"):
        ci_test_inprocess([ClientTable(bad, schema, "site0")], "c1", "b1")
