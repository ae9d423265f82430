"""fedCI over the Flower runtime: federated p-values equal the in-process (pooled-equal) ones."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.citest import FedCIOracle, citest
from fedcausal_flwr.data.partition import split_site_effects
from fedcausal_flwr.data.schema import Schema
from fedcausal_flwr.data.synthetic import random_dag
from fedcausal_flwr.discovery.driver import drive
from fedcausal_flwr.discovery.pc import pc_steps
from fedcausal_flwr.federation.runners import run_method
from fedcausal_flwr.stats.glm import ClientTable, ci_test_inprocess
from fedcausal_flwr.strategies import fedci  # noqa: F401  (registers fedci-pc / fedci-fci)

TYPES = {"X1": "continuous", "X2": "binary", "X3": "ordinal", "X4": "categorical",
         "X5": "continuous"}  # fmt: skip


@pytest.fixture(scope="module")
def mixed():
    dag = random_dag(5, expected_degree=2.5, seed=1)
    part = split_site_effects(dag, 900, 3, seed=1, types=TYPES, n_levels=3)
    return part.clients, Schema.infer(part.clients)


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
    clients, schema = mixed
    parts = [clients[0], clients[1].drop(columns=["X5"]), clients[2]]
    options = {"schema": schema.dumps(), "site_effect": "fixed", "max_depth": 1}
    result = run_method("fedci-pc", parts, options, backend="inprocess")
    by_key = {(t["x"], t["y"], tuple(t["given"])): t for t in result.extra["ci_tests"]}
    with_x5 = [t for k, t in by_key.items() if "X5" in (k[0], k[1], *k[2])]
    without = [t for k, t in by_key.items() if "X5" not in (k[0], k[1], *k[2])]
    assert with_x5 and all(t["clients"] == [0, 2] for t in with_x5)
    assert without and all(t["clients"] == [0, 1, 2] for t in without)
    t = with_x5[0]
    ref = citest(parts, t["x"], t["y"], t["given"], site_effect="fixed", schema=schema)
    assert ref.clients == (0, 2)
    assert t["p_value"] == pytest.approx(ref.p_value, rel=1e-9, abs=1e-300)


def test_fedci_fci_runs_end_to_end(mixed):
    clients, schema = mixed
    result = run_method("fedci-fci", clients, {"schema": schema.dumps()}, backend="inprocess")
    assert result.graph.kind == "PAG"
    assert set(result.graph.names) == set(schema.names)


def test_citest_fisher_baseline(mixed):
    clients, schema = mixed
    fisher = citest(clients, "X1", "X4", ["X2"], method="fisher", schema=schema)
    local = [citest([df], "X1", "X4", ["X2"], schema=schema).p_value for df in clients]
    expected = -2 * np.sum(np.log(local))
    assert fisher.statistic[0] == pytest.approx(expected)
    assert fisher.df == (6, 6) and fisher.clients == (0, 1, 2)
    with pytest.raises(ValueError, match="method"):
        citest(clients, "X1", "X4", method="pooled")
