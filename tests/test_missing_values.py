"""Test-wise deletion: each CI test counts only the rows complete on its variables.

The reference is independent of our counting: causal-learn's ``chisq`` / ``gsq`` on exactly the
rows a test may use (pandas-free row selection per test), and the federated sums (dense and
sparse) against the pooled oracle.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import causallearn_pvalues, mixed_site_frames, random_discrete_bn, random_queries

from fedcausal_flwr.cli import main
from fedcausal_flwr.data.inputs import InputError
from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.discovery.pc import pc
from fedcausal_flwr.federation.core.messages import ClientProtocolError
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.options import OptionError
from fedcausal_flwr.result import Result
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
from fedcausal_flwr.stats.oracles import DiscreteOracle, GaussianTestwiseOracle


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


# ------------------------------------------------------------- FedPC and pooled, every entry point
def holed_sample(rows: int, share: float, seed: int = 0) -> pd.DataFrame:
    """An ALARM sample (level labels) with a ``share`` of its values missing at random."""
    sample = load_network("alarm").sample(rows, seed=seed)
    rng = np.random.default_rng(seed)
    return sample.mask(rng.random(sample.shape) < share)


def reference_codes(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The frame's codes over each column's sorted level set, MISSING_CODE where missing."""
    codes, cards = [], []
    for name in frame.columns:
        levels = pd.Index(sorted(frame[name].cat.categories))
        codes.append(levels.get_indexer(frame[name]))
        cards.append(len(levels))
    return np.column_stack(codes), np.array(cards)


@pytest.mark.parametrize("clients", [3, 10])
def test_fedpc_testwise_equals_pooled_pc_with_testwise_deletion(clients):
    pooled = holed_sample(3000, 0.1)
    parts = split_iid(pooled, clients, seed=0).clients
    federated = run_method("fedpc", parts, {"missing": "testwise"})
    codes, cards = reference_codes(pooled[list(federated.graph.names)])
    oracle = DiscreteOracle(codes, cards, list(federated.graph.names), "chi2", allow_missing=True)
    reference = pc(oracle, 0.05)
    assert federated.graph == reference.graph
    assert federated.extra["tests"] == oracle.n_computed
    central = run_method("pooled", parts, {"missing": "testwise"})
    assert central.graph == federated.graph
    # the missingness report: per client and column, as counted in the client's rows
    report = federated.extra["missing_values"]
    assert federated.extra["missing"] == "testwise" and len(report) == clients
    for k, part in enumerate(parts):
        assert report[str(k)] == {c: int(n) for c, n in part.isna().sum().items() if n}


def test_fedpc_listwise_equals_pc_on_each_clients_complete_rows():
    pooled = holed_sample(4000, 0.01)
    parts = split_iid(pooled, 3, seed=1).clients
    federated = run_method("fedpc", parts, {"missing": "listwise"})
    names = list(federated.graph.names)
    complete = pd.concat([p.dropna() for p in parts])[names]
    assert 0 < len(complete) < len(pooled)
    codes, cards = reference_codes(complete)
    reference = pc(DiscreteOracle(codes, cards, names, "chi2"), 0.05)
    assert federated.graph == reference.graph
    assert run_method("pooled", parts, {"missing": "listwise"}).graph == federated.graph


def test_missing_values_are_refused_by_default_with_the_options_that_help():
    parts = split_iid(holed_sample(300, 0.05), 2, seed=0).clients
    with pytest.raises(InputError) as caught:
        run_method("fedpc", parts, entry_point="cli")
    message = str(caught.value)
    assert message.startswith("client 0 column ") and "missing value" in message
    assert "--missing testwise" in message and "--missing listwise" in message
    with pytest.raises(InputError, match="missing value"):
        run_method("fedpc-vote", parts)  # a method without the option says only what to do
    with pytest.raises(OptionError, match="missing"):
        run_method("fedpc", parts, {"missing": "pairwise"})


def test_the_command_line_reads_missing_values_when_the_method_deletes_them(tmp_path, capsys):
    parts = split_iid(holed_sample(1200, 0.08), 2, seed=0).clients
    files = []
    for k, part in enumerate(parts):
        files.append(str(tmp_path / f"site{k}.csv"))
        part.to_csv(files[-1], index=False)
    assert main(["run", "--method", "fedpc", "--data", *files, "--quiet"]) != 0
    assert "has a missing value in data row" in capsys.readouterr().err
    out = tmp_path / "result.json"
    code = main(
        ["run", "--method", "fedpc", "--data", *files, "--missing", "testwise", "--quiet",
         "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    result = Result.load(out)
    assert result.extra["missing"] == "testwise"
    assert sum(sum(c.values()) for c in result.extra["missing_values"].values()) == int(
        sum(p.isna().sum().sum() for p in parts)
    )
    expected = run_method("fedpc", parts, {"missing": "testwise"})
    assert result.graph == expected.graph


# ----------------------------------------------------------- Fisher-z with test-wise deletion
def gaussian_chain(rows: int, share: float, seed: int) -> np.ndarray:
    """A linear Gaussian SEM on 7 variables with a ``share`` of its values missing (NaN)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 7))
    x[:, 1] += 0.8 * x[:, 0]
    x[:, 2] += 0.7 * x[:, 1] - 0.5 * x[:, 3]
    x[:, 4] += 0.6 * x[:, 2]
    x[:, 5] += 0.5 * x[:, 4] + 0.4 * x[:, 6]
    x[rng.random(x.shape) < share] = np.nan
    return x


@pytest.mark.parametrize("share", [0.05, 0.20])
def test_testwise_fisher_z_equals_causallearn_mv_fisherz(share):
    from causallearn.utils.cit import CIT

    data = gaussian_chain(1500, share, seed=int(share * 100))
    queries = random_queries(np.random.default_rng(3), 7, 80, 3)
    ours = GaussianTestwiseOracle(data, [f"V{i}" for i in range(7)]).test_batch(queries)
    cit = CIT(data, "mv_fisherz")
    reference = np.array([cit(x, y, list(s)) for x, y, s in queries])
    np.testing.assert_allclose(ours, reference, rtol=1e-9, atol=1e-12)
    assert (reference < 1e-6).any() and (reference > 0.05).any()


@pytest.mark.parametrize("clients", [3, 10])
def test_fedpc_fisher_z_testwise_equals_pooled_testwise_pc(clients):
    data = gaussian_chain(3000, 0.1, seed=clients)
    names = [f"V{i}" for i in range(7)]
    frame = pd.DataFrame(data, columns=names)
    parts = split_iid(frame, clients, seed=0).clients
    federated = run_method("fedpc", parts, {"test": "fisherz", "missing": "testwise"})
    reference = pc(GaussianTestwiseOracle(data, names), 0.05)
    assert federated.graph == reference.graph
    assert federated.extra["tests"] == reference.n_tests
    listwise = run_method("fedpc", parts, {"test": "fisherz", "missing": "listwise"})
    complete = pd.concat([p.dropna() for p in parts])
    expected = pc(GaussianTestwiseOracle(complete.to_numpy(), names), 0.05)
    assert listwise.graph == expected.graph


def test_listwise_deletion_that_empties_a_client_is_refused_before_the_run():
    parts = split_iid(holed_sample(400, 0.3), 2, seed=0).clients  # 0.7^37: no complete row
    with pytest.raises(InputError) as caught:
        run_method("fedpc", parts, {"missing": "listwise"}, entry_point="cli")
    message = str(caught.value)
    assert message.startswith("client 0 has no row without a missing value (200 rows)")
    assert message.endswith("(--missing testwise)")


def test_an_infinite_value_is_an_error_not_a_missing_one():
    data = gaussian_chain(200, 0.1, seed=1)
    data[5, 3] = np.inf
    names = [f"V{i}" for i in range(7)]
    with pytest.raises(ValueError, match="variable 'V3' has inf values"):
        GaussianTestwiseOracle(data, names)
    parts = split_iid(pd.DataFrame(data, columns=names), 2, seed=0).clients
    # the site refuses in hello, before any moment leaves it: the run stops (not a dropout)
    with pytest.raises(ClientProtocolError, match=r"client 0: column 'V3' has 1 infinite value"):
        run_method("fedpc", parts, {"test": "fisherz", "missing": "testwise"})


# ============================================================================ fedCI (mixed data)
@pytest.fixture(scope="module")
def mixed_holed():
    from fedcausal_flwr.data.schema import Schema

    clients = mixed_site_frames(900)
    schema = Schema.infer(clients)
    rng = np.random.default_rng(0)
    holed = [c.mask(rng.random(c.shape) < 0.1) for c in clients]
    return holed, schema


@pytest.mark.parametrize("algorithm", ["pc", "fci"])
def test_fedci_testwise_equals_the_pooled_test_on_each_tests_complete_rows(mixed_holed, algorithm):
    """Each federated GLM likelihood-ratio test (4 IRLS fits over the 3 clients' rows complete
    on x, y and S) equals the same test on the pooled complete rows, and the graph equals the
    search over the in-process fedCI oracle with test-wise deletion."""
    from fedcausal_flwr.citest import FedCIOracle
    from fedcausal_flwr.discovery.driver import drive
    from fedcausal_flwr.discovery.fci import fci_steps
    from fedcausal_flwr.discovery.pc import pc_steps
    from fedcausal_flwr.stats.glm import ClientTable, ci_test_inprocess

    holed, schema = mixed_holed
    options = {"schema": schema.dumps(), "missing": "testwise"}
    result = run_method(f"fedci-{algorithm}", holed, options)
    pooled = pd.concat(holed, ignore_index=True)
    tests = result.extra["ci_tests"]
    assert len(tests) > 20
    for t in tests:
        names = [t["x"], t["y"], *t["given"]]
        rows = pooled.dropna(subset=names).infer_objects()
        ref = ci_test_inprocess([ClientTable(rows, schema)], t["x"], t["y"], t["given"])
        assert t["n"] == ref.n < len(pooled)
        assert t["p_value"] == pytest.approx(ref.p_value, rel=1e-9, abs=1e-300)
    engine = pc_steps if algorithm == "pc" else fci_steps
    oracle = FedCIOracle(holed, schema, testwise=True)
    assert result.graph == drive(engine(list(schema.names), 0.05), oracle).graph
    assert result.extra["missing"] == "testwise"
    assert set(result.extra["missing_values"]) == {"0", "1", "2"}


def test_fedci_listwise_equals_fedci_on_each_clients_complete_rows(mixed_holed):
    holed, schema = mixed_holed
    listwise = run_method("fedci-pc", holed, {"schema": schema.dumps(), "missing": "listwise"})
    complete = [c.dropna().infer_objects() for c in holed]
    expected = run_method("fedci-pc", complete, {"schema": schema.dumps()})
    assert listwise.graph == expected.graph
    assert [t["p_value"] for t in listwise.extra["ci_tests"]] == pytest.approx(
        [t["p_value"] for t in expected.extra["ci_tests"]], rel=1e-12
    )


def test_fedci_refuses_missing_values_by_default(mixed_holed):
    holed, schema = mixed_holed
    with pytest.raises(InputError, match="missing"):
        run_method("fedci-pc", holed, {"schema": schema.dumps()})
    fisher = run_method(
        "fedci-pc", holed, {"schema": schema.dumps(), "missing": "testwise", "ci": "fisher"}
    )
    assert fisher.graph is not None
