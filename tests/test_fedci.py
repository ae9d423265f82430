"""fedCI over the Flower runtime: federated p-values equal the in-process (pooled-equal) ones."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import mixed_site_frames

from fedcausal_flwr.citest import FedCIOracle, citest
from fedcausal_flwr.data.inputs import InputError
from fedcausal_flwr.data.partition import split_site_effects
from fedcausal_flwr.data.schema import Schema
from fedcausal_flwr.data.synthetic import choose_latents, random_dag
from fedcausal_flwr.discovery.driver import drive
from fedcausal_flwr.discovery.fci import fci
from fedcausal_flwr.discovery.pc import pc_steps
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, TAIL
from fedcausal_flwr.stats.glm import ClientTable, ci_test_inprocess
from fedcausal_flwr.strategies import fedci  # noqa: F401  (registers fedci-pc / fedci-fci)


@pytest.fixture(scope="module")
def mixed():
    clients = mixed_site_frames(900)
    return clients, Schema.infer(clients)


@pytest.mark.parametrize("algorithm", ["pc", "fci"])
def test_fedci_takes_background_knowledge(mixed, algorithm):
    """A pair forbidden both ways is never tested and a required edge is kept untested: the same
    graph as PC (FCI) over the in-process fedCI oracle with the same knowledge."""
    from fedcausal_flwr.discovery.fci import fci_steps
    from fedcausal_flwr.graphs.knowledge import Knowledge

    clients, schema = mixed
    a, b, c = list(schema.names)[:3]
    text = f"forbidden {a} -- {b}\nrequired {a} -> {c}\n"
    options = {"schema": schema.dumps(), "knowledge": text}
    result = run_method(f"fedci-{algorithm}", clients, options, backend="inprocess")
    oracle = FedCIOracle(clients, schema, site_effect="none")
    engine = pc_steps if algorithm == "pc" else fci_steps
    steps = engine(list(schema.names), 0.05, knowledge=Knowledge.parse(text))
    assert result.graph == drive(steps, oracle).graph
    tested = {frozenset((t["x"], t["y"])) for t in result.extra["ci_tests"]}
    assert tested and not tested & {frozenset((a, b)), frozenset((a, c))}
    assert result.extra["knowledge"]["required"] == [[a, c]]
    assert not result.graph.adjacent(result.graph.index(a), result.graph.index(b))


@pytest.mark.parametrize("site_effect", ["none", "fixed", "private"])
def test_fedci_pc_matches_inprocess_oracle(mixed, site_effect):
    clients, schema = mixed
    options = {"schema": schema.dumps(), "site_effect": site_effect, "alpha": 0.05}
    result = run_method("fedci-pc", clients, options, backend="inprocess")
    oracle = FedCIOracle(clients, schema, site_effect=site_effect)
    reference = drive(pc_steps(list(schema.names), 0.05), oracle)
    assert result.graph == reference.graph
    tests = result.extra["ci_tests"]
    assert len(tests) == oracle.n_computed
    tables = [ClientTable(df, schema) for df in clients]
    for t in tests[:: max(1, len(tests) // 6)]:
        ref = ci_test_inprocess(tables, t["x"], t["y"], t["given"], site_effect)
        assert t["p_value"] == pytest.approx(ref.p_value, rel=1e-9, abs=1e-300)
        assert t["clients"] == [0, 1, 2]
    # rounds follow IRLS iterations per batch, not tests x iterations
    batches = result.extra["batches"]
    assert result.rounds == 1 + sum(b["rounds"] for b in batches)
    assert all(b["rounds"] <= 26 for b in batches)
    assert sum(b["tests"] for b in batches) == len(tests)


def test_fedci_with_partial_variable_sets(mixed):
    """A site lacking a variable is refused (pointing to fedcdnv); the in-process test still takes
    such clients and fits a test's four models on the clients observing all its variables."""
    clients, schema = mixed
    parts = [clients[0], clients[1].drop(columns=["X5"]), clients[2]]
    options = {"schema": schema.dumps(), "site_effect": "fixed", "max_depth": 1}
    with pytest.raises(InputError, match=r"client 1 has columns .*\(lacking: \['X5'\]\).*fedcdnv"):
        run_method("fedci-pc", parts, options, backend="inprocess")
    for site_effect in ("none", "fixed"):
        ref = citest(parts, "X1", "X5", ["X2"], site_effect=site_effect, schema=schema)
        alone = citest([clients[0], clients[2]], "X1", "X5", ["X2"], site_effect=site_effect,
                       schema=schema)  # fmt: skip
        assert ref.clients == (0, 2) and ref.n == alone.n
        assert ref.p_value == pytest.approx(alone.p_value, rel=1e-9, abs=1e-300)


@pytest.fixture(scope="module")
def latent_mixed():
    """Mixed data from a 6-node DAG with X1 hidden and no site shifts (``affected=[]``), so the
    federated test is exactly the pooled GLM test; 600 rows over 3 sites."""
    dag = random_dag(6, 2.5, seed=1)
    latent = choose_latents(dag, 0.2, seed=1)
    assert latent == ["X1"]
    types = dict(zip(dag.names, ["continuous", "binary", "ordinal", "categorical", "continuous",
                                 "binary"], strict=True))  # fmt: skip
    part = split_site_effects(dag, 600, 3, seed=1, types=types, affected=[], n_levels=3)
    clients = [df.drop(columns=latent) for df in part.clients]
    return clients, Schema.infer(clients)


def test_fedci_fci_equals_fci_on_the_pooled_rows(latent_mixed):
    """fedCI-FCI against FCI on one pooled table through the same GLM likelihood-ratio test (one
    site: no federation), graph and every p-value."""
    clients, schema = latent_mixed
    result = run_method("fedci-fci", clients, {"schema": schema.dumps()}, backend="inprocess")
    pooled = pd.concat(clients, ignore_index=True)
    oracle = FedCIOracle([pooled], schema)
    reference = fci(oracle, alpha=0.05)
    assert result.graph.kind == "PAG"
    assert result.graph == reference.graph
    marks = reference.graph.marks  # a PAG with every kind of mark, so the marks are compared
    assert (marks == ARROW).any() and (marks == CIRCLE).any() and (marks == TAIL).any()
    names = list(schema.names)
    expected = {
        (names[x], names[y], tuple(names[v] for v in s)): res
        for (x, y, s), res in oracle.results.items()
    }
    tests = {(t["x"], t["y"], tuple(t["given"])): t for t in result.extra["ci_tests"]}
    assert tests.keys() == expected.keys() and len(tests) > 30
    for key, t in tests.items():
        assert t["p_value"] == pytest.approx(expected[key].p_value, rel=1e-9, abs=1e-300), key
        assert t["clients"] == [0, 1, 2] and t["n"] == len(pooled) == 600


def test_citest_fisher_baseline(mixed):
    clients, schema = mixed
    fisher = citest(clients, "X1", "X4", ["X2"], ci="fisher", schema=schema)
    local = [citest([df], "X1", "X4", ["X2"], schema=schema).p_value for df in clients]
    expected = -2 * np.sum(np.log(local))
    assert fisher.statistic[0] == pytest.approx(expected)
    assert fisher.df == (6, 6) and fisher.clients == (0, 1, 2)
    with pytest.raises(ValueError, match="unknown ci 'pooled'"):
        citest(clients, "X1", "X4", ci="pooled")


def test_fixed_point_digits_sum_exactly_within_the_secure_bound():
    from fedcausal_flwr.federation.core.messages import secure_bound_for
    from fedcausal_flwr.protocols.fedci import decode_fixed, digit_bits, encode_fixed

    rng = np.random.default_rng(0)
    for n_clients in (3, 64):
        clip = secure_bound_for(n_clients)
        bits = digit_bits(clip)
        assert 2 ** (bits - 1) <= clip < 2**bits
        parts = [rng.normal(scale=10.0 ** rng.integers(-3, 9, 50)) for _ in range(n_clients)]
        digits = [encode_fixed(v, 30, bits, 3) for v in parts]
        assert all(np.max(np.abs(d)) <= clip for d in digits)
        total = decode_fixed(np.sum(digits, axis=0), 30, bits, 3)
        exact = np.sum(parts, axis=0)
        assert np.max(np.abs(total - exact) - 1e-12 * np.abs(exact)) <= n_clients * 2.0**-31
    with pytest.raises(OverflowError, match="fixed_limbs"):
        encode_fixed(np.array([2.0**40]), 30, 25, 2)


@pytest.mark.parametrize("site_effect", ["none", "private"])
def test_fedci_secure_aggregation_matches_plain(mixed, site_effect):
    clients, schema = mixed
    options = {"schema": schema.dumps(), "site_effect": site_effect, "max_depth": 1}
    plain = run_method("fedci-pc", clients, options, backend="inprocess")
    secure = run_method("fedci-pc", clients, options, backend="inprocess", secure=True)
    key = lambda t: (t["x"], t["y"], tuple(t["given"]))  # noqa: E731
    expected = {key(t): t["p_value"] for t in plain.extra["ci_tests"]}
    got = {key(t): t["p_value"] for t in secure.extra["ci_tests"]}
    assert got.keys() == expected.keys()
    for k, p in expected.items():  # fixed point (2**-30) costs < 1e-6 relative here
        assert got[k] == pytest.approx(p, rel=1e-6, abs=1e-12)
    assert secure.graph == plain.graph
    assert secure.rounds == plain.rounds


def test_cli_citest_on_csv_files(mixed, tmp_path, capsys):
    from fedcausal_flwr.cli import main

    clients, schema = mixed
    paths = []
    for k, df in enumerate(clients):
        frame = df.drop(columns=["X5"]) if k == 1 else df
        paths.append(str(tmp_path / f"site{k}.csv"))
        frame.to_csv(paths[-1], index=False)
    base = ["citest", "--data", *paths, "--x", "X1", "--y", "X3", "--given", "X2", "X5"]
    assert main([*base, "--ordinal", "X3", "--site-effect", "fixed"]) == 0
    out = capsys.readouterr().out
    parts = [clients[0], clients[1].drop(columns=["X5"]), clients[2]]
    ref = citest(parts, "X1", "X3", ["X2", "X5"], site_effect="fixed", schema=schema)
    assert ref.clients == (0, 2)
    p_line = next(line for line in out.splitlines() if line.startswith("p-value:"))
    assert float(p_line.split()[1]) == pytest.approx(ref.p_value, rel=1e-5)
    assert "X3: ordinal" in out and f"df {ref.df_x}" in out and f"{ref.statistic_x:.6g}" in out
    assert f"2 of 3 took part, n = {ref.n}" in out and "skipped): " + paths[1] in out
    # without --ordinal the integer column is categorical: another model, another p-value
    assert main(base) == 0
    out = capsys.readouterr().out
    assert "X3: categorical" in out
    assert main([*base, "--ordinal", "X9"]) == 2
    assert "X9" in capsys.readouterr().err


def test_package_exports_citest_lazily(mixed):
    import fedcausal_flwr

    clients, schema = mixed
    res = fedcausal_flwr.citest(clients, "X1", "X2", ["X4"], schema=schema)
    assert res.p_value == citest(clients, "X1", "X2", ["X4"], schema=schema).p_value


def test_fedci_pc_fisher_baseline_matches_citest(mixed):
    clients, schema = mixed
    options = {"schema": schema.dumps(), "ci": "fisher", "max_depth": 1}
    result = run_method("fedci-pc", clients, options, backend="inprocess")
    tests = result.extra["ci_tests"]
    assert tests and result.rounds == 1 + len(result.extra["batches"])
    for t in tests:
        ref = citest(clients, t["x"], t["y"], t["given"], ci="fisher", schema=schema)
        assert t["p_value"] == pytest.approx(ref.p_value, rel=1e-9, abs=1e-300)
        assert tuple(t["clients"]) == ref.clients == (0, 1, 2) and t["n"] == ref.n
    with pytest.raises(ValueError, match="option ci: 'pooled' is not one of fedci, fisher"):
        run_method("fedci-pc", clients, {**options, "ci": "pooled"}, backend="inprocess")
