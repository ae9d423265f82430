"""Schemas, client partitions, CSV input and data checks."""

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from fedcausal_flwr.data import (
    DataError,
    Partition,
    Schema,
    VariableSpec,
    check_client_data,
    drop_latents,
    from_csv_files,
    from_pooled_csv,
    load_network,
    random_dag,
    random_discrete_network,
    split_heterogeneous,
    split_iid,
    split_site_effects,
    split_sizes,
    split_variable_subsets,
)
from fedcausal_flwr.graphs import Graph


@pytest.fixture(scope="module")
def pooled():
    dag = random_dag(8, 2.0, seed=0)
    net = random_discrete_network(dag, cards=3, seed=1)
    return net.sample(6000, seed=2)


def _union_equals(part, df):
    union = pd.concat(part.clients).sort_index()
    return union.index.equals(df.index) and union.equals(df)


# --------------------------------------------------------------------------- schema
def test_schema_infer_kinds_and_union_levels():
    a = pd.DataFrame(
        {
            "f": [0.5, 1.5],
            "b": [True, False],
            "o": pd.Categorical(["lo", "hi"], categories=["lo", "hi"], ordered=True),
            "c": pd.Categorical(["x", "y"]),
            "s": pd.Series(["u", "w"], dtype="str"),
            "i": [3, 1],
        }
    )
    b = pd.DataFrame(
        {
            "i": [2, 7],
            "s": pd.Series(["v", "u"], dtype=object),
            "c": pd.Categorical(["z", "x"]),
            "extra": [1.0, 2.0],
        }
    )
    schema = Schema.infer([a, b], client_names=["A", "B"])
    assert schema.names == ("f", "b", "o", "c", "s", "i", "extra")
    assert schema.kinds == (
        "continuous",
        "binary",
        "ordinal",
        "categorical",
        "categorical",
        "categorical",
        "continuous",
    )
    assert schema["o"].levels == ("lo", "hi")  # declared order kept
    assert schema["c"].levels == ("x", "y", "z")  # union, sorted
    assert schema["s"].levels == ("u", "v", "w")
    assert schema["i"].levels == (1, 2, 3, 7)
    assert schema.cards.tolist() == [0, 2, 2, 3, 3, 4, 0]
    assert schema.is_discrete.tolist() == [False, True, True, True, True, True, False]
    codes = schema.encode(b, client="B", columns=["i", "s", "c"])
    assert codes.tolist() == [[1, 1, 2], [3, 0, 0]]
    mixed = schema.encode(a, client="A", columns=["f", "i"])
    assert mixed.dtype == np.float64 and mixed.tolist() == [[0.5, 2.0], [1.5, 0.0]]
    back = Schema.from_json(json.loads(json.dumps(schema.to_json())))
    assert back == schema
    assert Schema.from_json(schema.dumps()) == schema


def test_schema_errors_name_client_and_column():
    schema = Schema((VariableSpec("x", "categorical", ("a", "b")), VariableSpec("y", "continuous")))
    ok = pd.DataFrame({"x": ["a", "b"], "y": [1.0, 2.0]})
    assert schema.encode(ok, client="site1").tolist() == [[0, 1], [1, 2]]
    with pytest.raises(DataError, match=r"client 'site1', column 'x': value 'c' at row 1"):
        schema.encode(pd.DataFrame({"x": ["a", "c"], "y": [1.0, 2.0]}), client="site1")
    with pytest.raises(DataError, match=r"client 'site2', column 'x': missing value at row 0"):
        schema.encode(pd.DataFrame({"x": [None, "a"], "y": [1.0, 2.0]}), client="site2")
    with pytest.raises(DataError, match=r"client 'site3', column 'y': non-finite"):
        schema.encode(pd.DataFrame({"x": ["a", "a"], "y": [1.0, np.nan]}), client="site3")
    with pytest.raises(DataError, match=r"client 'site4': missing column\(s\) \['y'\]"):
        schema.encode(pd.DataFrame({"x": ["a"]}), client="site4")
    with pytest.raises(DataError, match=r"client 'site5': columns \['z'\] are not in the schema"):
        schema.encode(ok.assign(z=1), client="site5")
    with pytest.raises(DataError, match="different kinds"):
        Schema.infer([pd.DataFrame({"x": [1.0]}), pd.DataFrame({"x": ["a"]})])
    with pytest.raises(DataError, match="ordinal levels of client 'client_1'"):
        Schema.infer(
            [
                pd.DataFrame({"o": pd.Categorical(["a"], categories=["a", "b"], ordered=True)}),
                pd.DataFrame({"o": pd.Categorical(["a"], categories=["b", "a"], ordered=True)}),
            ]
        )
    with pytest.raises(ValueError, match="binary variable"):
        VariableSpec("b", "binary", (0, 1, 2))


def test_schema_for_network_round_trip():
    net = load_network("asia")
    schema = Schema.for_network(net)
    codes = net.sample_codes(300, seed=0)
    frame = schema.decode(codes)
    np.testing.assert_array_equal(schema.encode(frame), codes)
    assert Schema.infer([net.sample(50, seed=1)]) == schema


# --------------------------------------------------------------------------- row splits
def test_split_iid(pooled):
    part = split_iid(pooled, 7, seed=3)
    assert isinstance(part, Partition) and part.rule == "iid"
    assert max(part.sizes) - min(part.sizes) <= 1 and sum(part.sizes) == len(pooled)
    assert _union_equals(part, pooled)
    assert part.client_names == [f"client_{i}" for i in range(7)]
    again = split_iid(pooled, 7, seed=3)
    assert all(a.index.equals(b.index) for a, b in zip(part.clients, again.clients, strict=True))
    other = split_iid(pooled, 7, seed=4)
    assert not part.clients[0].index.equals(other.clients[0].index)
    assert part.info["seed"] == 3 and part.info["never_together"] == []
    assert part.pooled().sort_index().equals(pooled)
    with pytest.raises(ValueError, match="cannot split 5 rows into 10 clients"):
        split_iid(pooled.iloc[:5], 10)


def test_split_sizes(pooled):
    part = split_sizes(pooled, sizes=[100, 2000, 900], seed=1)
    assert part.sizes == [100, 2000, 900] and part.info["unused_rows"] == 3000
    rows = np.concatenate([df.index.to_numpy() for df in part.clients])
    assert len(np.unique(rows)) == 3000
    dir_part = split_sizes(pooled, alpha=0.3, k=6, seed=2, min_rows=50)
    assert sum(dir_part.sizes) == len(pooled) and min(dir_part.sizes) >= 50
    assert len(set(dir_part.sizes)) > 1
    assert _union_equals(dir_part, pooled)
    assert dir_part.sizes == split_sizes(pooled, alpha=0.3, k=6, seed=2, min_rows=50).sizes
    with pytest.raises(ValueError, match="exactly one of"):
        split_sizes(pooled, sizes=[1], alpha=1.0)
    with pytest.raises(ValueError, match="sum to 7000"):
        split_sizes(pooled, sizes=[5000, 2000])


def _tv(p, q):
    return 0.5 * np.abs(p - q).sum()


def test_split_heterogeneous_biases_clients_not_union():
    net = load_network("asia")
    df = net.sample(20_000, seed=5)
    causes = ["smoke", "asia", "xray"]
    part = split_heterogeneous(df, 4, cause_vars=causes, seed=1, strength=1.0)
    assert part.rule == "heterogeneous" and part.info["cause_vars"] == causes
    assert _union_equals(part, df)
    assert part.sizes == split_heterogeneous(df, 4, cause_vars=causes, seed=1).sizes
    pooled_p = df["smoke"].value_counts(normalize=True).sort_index().to_numpy()
    local = [c["smoke"].value_counts(normalize=True).sort_index().to_numpy() for c in part.clients]
    assert max(_tv(p, pooled_p) for p in local) > 0.15
    # the assignment follows P(C | causes): check one client against the recorded table
    table = part.info["client_given_causes"]
    assert table.shape == (8, 4)
    np.testing.assert_allclose(table.sum(axis=1), 1.0)
    # strength 0 is an i.i.d. split: local marginals agree with the pooled one
    flat = split_heterogeneous(df, 4, cause_vars=causes, seed=1, strength=0.0)
    for c in flat.clients:
        p = c["smoke"].value_counts(normalize=True).sort_index().to_numpy()
        assert _tv(p, pooled_p) < 0.03
    random_causes = split_heterogeneous(df, 3, cause_vars=2, seed=0)
    assert len(random_causes.info["cause_vars"]) == 2


def test_split_heterogeneous_collider_bias():
    """Two independent causes become dependent inside clients (selection on a collider)."""
    from scipy.stats import chi2_contingency

    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "a": pd.Categorical.from_codes(rng.integers(0, 2, 20_000), categories=["0", "1"]),
            "b": pd.Categorical.from_codes(rng.integers(0, 2, 20_000), categories=["0", "1"]),
            "x": rng.normal(size=20_000),
        }
    )
    assert chi2_contingency(pd.crosstab(df["a"], df["b"])).pvalue > 0.01
    part = split_heterogeneous(df, 3, cause_vars=["a", "b"], seed=2)
    local_p = [chi2_contingency(pd.crosstab(c["a"], c["b"])).pvalue for c in part.clients]
    assert min(local_p) < 1e-6


def test_split_site_effects():
    dag = random_dag(5, 2.0, seed=3)
    types = {
        "X1": "continuous",
        "X2": "continuous",
        "X3": "binary",
        "X4": "ordinal",
        "X5": "categorical",
    }
    part = split_site_effects(dag, 4000, 4, seed=1, types=types)
    assert part.rule == "site_effects" and sum(part.sizes) == 4000
    assert min(part.sizes) > 800 and len(set(part.sizes)) > 1  # random, about n / k
    assert part.schema.kinds == ("continuous", "continuous", "binary", "ordinal", "categorical")
    site = part.info["site_of_row"]
    assert all((site[c.index] == i).all() for i, c in enumerate(part.clients))
    # the site shifts X1 (a root): per-site means differ (one-way ANOVA)
    from scipy.stats import f_oneway

    assert f_oneway(*[c["X1"] for c in part.clients]).pvalue < 1e-6
    equal = split_site_effects(dag, 4001, 4, seed=1, types=types, site_sizes="equal")
    assert max(equal.sizes) - min(equal.sizes) <= 1
    # only X2 affected: a root that is not affected has the same mean everywhere
    only = split_site_effects(dag, 8000, 4, seed=2, types=types, affected=["X2"])
    assert f_oneway(*[c["X1"] for c in only.clients]).pvalue > 1e-3
    first = split_site_effects(dag, 500, 3, seed=9, types=types)
    second = split_site_effects(dag, 500, 3, seed=9, types=types)
    assert all(a.equals(b) for a, b in zip(first.clients, second.clients, strict=True))


def _never_together_brute(observed, names):
    pairs = []
    for a, b in itertools.combinations(names, 2):
        if not any(a in cols and b in cols for cols in observed.values()):
            pairs.append((a, b))
    return pairs


def test_split_variable_subsets_explicit(pooled):
    names = list(pooled.columns)
    subsets = [names[:5], names[3:]]
    part = split_variable_subsets(pooled, k=4, subsets=subsets, seed=0)
    assert part.observed["client_0"] == names[:5] and part.observed["client_1"] == names[3:]
    assert part.observed["client_2"] == names[:5] and part.observed["client_3"] == names[3:]
    expected = _never_together_brute(part.observed, names)
    assert part.info["never_together"] == expected
    assert len(expected) == 3 * 3  # X1..X3 never meet X6..X8
    assert sum(part.sizes) == len(pooled)
    pooled_back = part.pooled()
    assert pooled_back.shape == pooled.shape
    assert pooled_back["X1"].isna().sum() == part.sizes[1] + part.sizes[3]
    with pytest.raises(ValueError, match="observed by no client"):
        split_variable_subsets(pooled, k=2, subsets=[names[:3], names[3:6]])


def test_split_variable_subsets_random_and_structured(pooled):
    names = list(pooled.columns)
    part = split_variable_subsets(pooled, k=5, fraction=0.5, seed=3)
    assert all(len(cols) == 4 for cols in part.observed.values())
    assert set().union(*map(set, part.observed.values())) == set(names)
    assert part.info["never_together"] == _never_together_brute(part.observed, names)
    structured = split_variable_subsets(pooled, k=4, fraction=0.5, structured=True)
    assert structured.info["never_together"] == _never_together_brute(structured.observed, names)
    assert len(structured.info["never_together"]) > 0
    # restrict an existing partition, keeping its rows
    base = split_sizes(pooled, alpha=1.0, k=3, seed=0)
    sub = split_variable_subsets(base, subsets=[names[:6], names[2:]], seed=0)
    assert sub.sizes == base.sizes and sub.n_clients == 3
    with pytest.raises(ValueError, match="cannot cover"):
        split_variable_subsets(pooled, k=2, fraction=0.25)


def test_drop_latents_from_partition(pooled):
    part = split_iid(pooled, 3, seed=0)
    hidden = drop_latents(part, ["X2", "X5"])
    assert "X2" not in hidden.schema.names and hidden.info["latents"] == ["X2", "X5"]
    assert all(
        list(c.columns) == [v for v in pooled.columns if v not in ("X2", "X5")]
        for c in hidden.clients
    )
    assert "X2" in part.schema.names  # original untouched
    with pytest.raises(ValueError, match="not in the partition"):
        drop_latents(part, ["nope"])


def test_constant_columns_reported_and_checked():
    df = pd.DataFrame({"a": ["x"] * 5 + ["y"] * 5, "b": [1.0, 2.0] * 5})
    part = Partition([df.iloc[:5], df.iloc[5:]], Schema.infer([df]), ["s1", "s2"], "manual")
    assert part.info["constant_columns"] == {"s1": ["a"], "s2": ["a"]}
    check_client_data(part, require_variation=False)
    with pytest.raises(DataError, match=r"client 's1', column 'a' is constant \('x'\)"):
        check_client_data(part)


# --------------------------------------------------------------------------- CSV input
def test_from_csv_files_infers_union(tmp_path):
    pd.DataFrame({"a": ["x", "y", "x"], "n": [1, 2, 3], "f": [0.1, 0.2, 0.5]}).to_csv(
        tmp_path / "site_a.csv", index=False
    )
    pd.DataFrame({"a": ["z", "y"], "n": [5, 2]}).to_csv(tmp_path / "site_b.csv", index=False)
    part = from_csv_files([tmp_path / "site_a.csv", tmp_path / "site_b.csv"])
    assert part.client_names == ["site_a", "site_b"] and part.rule == "csv_files"
    assert part.schema["a"].levels == ("x", "y", "z")
    assert part.schema["n"].kind == "categorical" and part.schema["n"].levels == (1, 2, 3, 5)
    assert part.observed == {"site_a": ["a", "n", "f"], "site_b": ["a", "n"]}
    assert part.info["never_together"] == []  # f is observed alone, but with a and n on site_a
    assert part.encode(1).tolist() == [[2, 3], [1, 1]]


def test_from_csv_files_errors(tmp_path):
    good = tmp_path / "good.csv"
    pd.DataFrame({"a": ["x", "y"], "f": [1.0, 2.0]}).to_csv(good, index=False)
    holes = tmp_path / "holes.csv"
    holes.write_text("a,f\nx,1.0\ny,\nx,3.0\n")
    with pytest.raises(DataError, match=r"client 1 \(holes.csv\) column 'f'.*row 1 \(line 3"):
        from_csv_files([good, holes])
    flat = tmp_path / "flat.csv"
    pd.DataFrame({"a": ["x", "x"], "f": [1.0, 2.0]}).to_csv(flat, index=False)
    with pytest.raises(DataError, match=r"client 'flat', column 'a' is constant"):
        from_csv_files([good, flat])
    assert from_csv_files([good, flat], require_variation=False).n_clients == 2
    schema = Schema((VariableSpec("a", "categorical", ("x", "y")), VariableSpec("f", "continuous")))
    odd = tmp_path / "odd.csv"
    pd.DataFrame({"a": ["x", "w"], "f": [1.0, 2.0]}).to_csv(odd, index=False)
    with pytest.raises(DataError, match=r"client 1 \(odd.csv\) column 'a': value 'w'"):
        from_csv_files([good, odd], schema=schema)
    with pytest.raises(ValueError, match="not unique"):
        from_csv_files([good, good])


def test_from_csv_with_schema_and_pooled_csv(tmp_path):
    net = load_network("asia")
    df = net.sample(3000, seed=3)
    path = tmp_path / "pooled.csv"
    df.to_csv(path, index=False)
    schema = Schema.for_network(net)
    part = from_pooled_csv(path, rule="iid", k=3, seed=0, schema=schema)
    assert part.schema == schema and sum(part.sizes) == 3000
    np.testing.assert_array_equal(
        np.concatenate([part.encode(i) for i in range(3)])[
            np.argsort(np.concatenate([c.index for c in part.clients]))
        ],
        net.sample_codes(3000, seed=3),
    )
    het = from_pooled_csv(
        path, rule="heterogeneous", k=2, seed=1, schema=schema, cause_vars=["smoke"]
    )
    assert het.rule == "heterogeneous" and het.info["path"] == str(path)
    with pytest.raises(ValueError, match="unknown split rule"):
        from_pooled_csv(path, rule="magic")
    # integer-coded CSV without a schema: codes become categorical levels
    codes = pd.DataFrame(net.sample_codes(200, seed=0), columns=net.variables)
    codes.to_csv(tmp_path / "codes.csv", index=False)
    with pytest.raises(DataError, match=r"client 'client_\d', column '\w+' is constant \(\d\)"):
        from_pooled_csv(tmp_path / "codes.csv", rule="sizes", sizes=[150, 50], seed=0)
    coded = from_pooled_csv(
        tmp_path / "codes.csv", rule="sizes", sizes=[150, 50], seed=0, require_variation=False
    )
    assert coded.schema.kinds == ("categorical",) * 8 and coded.sizes == [150, 50]
    assert coded.schema["asia"].levels == (0, 1)
    assert any(coded.info["constant_columns"].values())


def test_partition_validation():
    df = pd.DataFrame({"a": [1.0, 2.0]})
    with pytest.raises(ValueError, match="unique"):
        Partition([df, df], Schema.infer([df]), ["x", "x"], "manual")
    with pytest.raises(DataError, match=r"client 'x': columns \['b'\]"):
        Partition([df.assign(b=1.0)], Schema.infer([df]), ["x"], "manual")
    graph = Graph.from_edges(["__site"], [])
    with pytest.raises(ValueError, match="already has a node"):
        split_site_effects(graph, 10, 2)
