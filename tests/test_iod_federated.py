"""fedci-iod / iod-fisher over the Flower runtime: sites with different columns (the paper's Fig. 1
split), p-values equal to the pooled test with the site as a covariate, the same PAG list as IOD
on pooled evidence, list metrics in the result."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import ONE_ACTOR

from fedcausal_flwr.data.inputs import InputError
from fedcausal_flwr.data.partition import split_site_effects
from fedcausal_flwr.data.schema import Schema
from fedcausal_flwr.discovery.iod import iod
from fedcausal_flwr.discovery.iod_evidence import SiteEvidence, datasets_of
from fedcausal_flwr.discovery.iod_metrics import pag_list_metrics
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.graphs.truth import dag_to_pag
from fedcausal_flwr.scoring import score_graph
from fedcausal_flwr.stats.batch_oracle import normalise_query
from fedcausal_flwr.strategies.fedci_iod import result_pags
from tests.test_iod import fig1_dag

REPO_ROOT = Path(__file__).resolve().parents[1]
LATENT = ["U_AC", "U_AD"]
TYPES = {"A": "continuous", "B": "binary", "C": "categorical", "D": "continuous",
         "E": "continuous", "U_AC": "continuous", "U_AD": "continuous"}  # fmt: skip


def fig1_sites(n: int, k: int, seed: int) -> list[pd.DataFrame]:
    """Fig. 1's DAG with site effects on every variable, k sites alternating between the
    columns {A, B, C, E} and {A, C, D, E} (B and D never observed together)."""
    part = split_site_effects(fig1_dag(), n, k, seed=seed, types=TYPES, n_levels=3)
    frames = [df.drop(columns=LATENT) for df in part.clients]
    return [f[["A", "B", "C", "E"] if i % 2 == 0 else ["A", "C", "D", "E"]]
            for i, f in enumerate(frames)]  # fmt: skip


@pytest.fixture(scope="module")
def sites():
    frames = fig1_sites(1200, 4, seed=3)
    return frames, Schema.infer(frames)


def marks(pags) -> list[bytes]:
    return sorted(g.marks.tobytes() for g in pags)


def against_pooled_iod(method: str, frames, schema):
    """``method``'s in-process result on the sites, the pooled evidence of the same sites, and
    IOD's outcome on that evidence."""
    result = run_method(method, frames, {"schema": schema.dumps()}, backend="inprocess")
    pooled = SiteEvidence(frames, schema, "pooled")
    return result, pooled, iod(pooled, datasets_of(frames, schema.names))


def with_queries(tests: list[dict], names: list[str]):
    """Each test the result lists, with its query as variable indices (normalised)."""
    for t in tests:
        given = [names.index(v) for v in t["given"]]
        yield t, normalise_query(names.index(t["x"]), names.index(t["y"]), given)


def test_fedci_iod_equals_iod_on_pooled_evidence(sites):
    frames, schema = sites
    result, pooled, reference = against_pooled_iod("fedci-iod", frames, schema)
    tests = result.extra["ci_tests"]
    assert len(tests) == len(pooled.cache) > 10
    for t, q in with_queries(tests, list(schema.names)):
        assert t["p_value"] == pytest.approx(pooled.cache[q], abs=1e-6), q
    # every decision agrees (no p-value within 1e-6 of alpha), so the lists must be equal
    assert all(abs(p - 0.05) > 1e-6 for p in pooled.cache.values())
    assert marks(result_pags(result)) == marks(reference.pags) and reference.pags
    assert result.extra["candidates"] == reference.candidates
    assert result.extra["message"] == reference.message
    local = result.extra["local_pags"]
    assert [sorted(d["variables"]) for d in local] == [["A", "B", "C", "E"], ["A", "C", "D", "E"]]
    assert [d["sites"] for d in local] == [[0, 2], [1, 3]]
    # tests over {A, C, E} pool all four sites; B's and D's only their own two
    clients = {(t["x"], t["y"], tuple(t["given"])): t["clients"] for t in tests}
    assert all(len(c) == 4 for key, c in clients.items() if not {"B", "D"} & {*key[:2], *key[2]})
    assert all(len(c) == 2 for key, c in clients.items() if {"B", "D"} & {*key[:2], *key[2]})
    # the list is scored by the registry hook, in the result's metrics as in compare
    metrics = score_graph(result, fig1_dag())
    truth = dag_to_pag(fig1_dag(), LATENT)
    assert metrics == pag_list_metrics(reference.pags, truth)
    assert metrics["n_pags"] == len(reference.pags)


def test_fedci_iod_secure_aggregation_gives_the_same_list(sites):
    """SecAgg+ carries fedCI's fixed-point blocks: same list, p-values within the encoding's
    precision."""
    frames, schema = sites
    opts = {"schema": schema.dumps()}
    plain = run_method("fedci-iod", frames, opts, backend="inprocess")
    secure = run_method("fedci-iod", frames, opts, backend="inprocess", secure=True)
    assert marks(result_pags(secure)) == marks(result_pags(plain))
    a = np.array([t["p_value"] for t in plain.extra["ci_tests"]])
    b = np.array([t["p_value"] for t in secure.extra["ci_tests"]])
    assert np.allclose(a, b, rtol=0, atol=1e-6)
    assert any(e["secure"] for e in secure.ledger)


def test_iod_fisher_equals_fisher_evidence_in_process(sites):
    frames, schema = sites
    result = run_method("iod-fisher", frames, {"schema": schema.dumps()}, backend="inprocess")
    fisher = SiteEvidence(frames, schema, "fisher")
    reference = iod(fisher, datasets_of(frames, schema.names))
    assert marks(result_pags(result)) == marks(reference.pags)
    p = {(t["x"], t["y"], tuple(t["given"])): t["p_value"] for t in result.extra["ci_tests"]}
    names = list(schema.names)
    for (x, y, s), ref in fisher.cache.items():
        key = (names[x], names[y], tuple(names[v] for v in s))
        assert p[key] == pytest.approx(ref, rel=1e-9)


def test_procedure_and_cap_options_reach_iod(sites):
    frames, schema = sites
    opts = {"schema": schema.dumps(), "procedure": "orderedtriplets"}
    result = run_method("fedci-iod", frames, opts, backend="inprocess")
    assert result.extra["procedure"] == "orderedtriplets"
    with pytest.raises(Exception, match="max_candidates"):
        run_method("fedci-iod", frames, {**opts, "max_candidates": 1}, backend="inprocess")
    part = run_method("fedci-iod", frames, {**opts, "max_candidates": 1, "partial": True},
                      backend="inprocess")  # fmt: skip
    assert part.extra["partial"] and part.extra["enumeration"]["enumerated"] == 1


def test_a_site_with_one_column_is_refused(sites):
    frames, schema = sites
    parts = [*frames[:3], frames[3][["A"]]]
    with pytest.raises((InputError, ValueError), match=r"client 3.*\['A'\]"):
        run_method("fedci-iod", parts, {"schema": schema.dumps()}, backend="inprocess")


def test_iod_pooled_method_equals_iod_on_pooled_evidence(sites):
    """``iod-pooled`` (every site sends its rows once, the server tests the pooled table with the
    site as a covariate) gives the list and p-values of IOD on in-process pooled evidence."""
    frames, schema = sites
    result, pooled, reference = against_pooled_iod("iod-pooled", frames, schema)
    assert [e["action"] for e in result.log] == ["hello", "raw_rows"]
    tests = result.extra["ci_tests"]
    assert len(tests) == len(pooled.cache) > 10
    for t, q in with_queries(tests, list(schema.names)):
        assert t["p_value"] == pytest.approx(pooled.cache[q], rel=1e-12, abs=1e-300), q
        assert t["n"] == sum(len(frames[k]) for k in t["clients"])
    assert marks(result_pags(result)) == marks(reference.pags)
    assert result.extra["candidates"] == reference.candidates
    with pytest.raises(ValueError, match="cannot be summed"):
        run_method("iod-pooled", frames, {"schema": schema.dumps()}, secure=True)


@pytest.mark.slow
def test_fedci_iod_on_ray_equals_inprocess(sites, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    frames, schema = sites
    opts = {"schema": schema.dumps()}
    inprocess = run_method("fedci-iod", frames, opts, backend="inprocess")
    ray = run_method("fedci-iod", frames, opts, backend="ray", **ONE_ACTOR)  # RAY_TMPDIR: conftest
    assert marks(result_pags(ray)) == marks(result_pags(inprocess))
    a = np.array([t["p_value"] for t in inprocess.extra["ci_tests"]])
    b = np.array([t["p_value"] for t in ray.extra["ci_tests"]])
    assert np.allclose(a, b, rtol=1e-9, atol=0)


@pytest.mark.slow
def test_experiment_fedci_iod_quick(tmp_path, capfd):
    """The named experiment's quick run prints ours beside the paper's for every method."""
    from helpers import assert_experiment_folder

    from fedcausal_flwr.experiments_registry import run_experiment

    assert run_experiment("fedci-iod", quick=True, out=tmp_path) == 0
    text = capfd.readouterr().out
    assert_experiment_folder(tmp_path, "fedci-iod", "Pooled", "Fisher", "fedCI")
    assert "2 run(s) per (method, K, N) cell" in text
    for method, paper in (("Pooled", "0.337"), ("Fisher", "0.353"), ("fedCI", "0.335")):
        row = re.search(rf"^{method}\s+4\s+500\s+([\d.]+|nan)\s+{paper}\s+2\s+(\d)", text, re.M)
        assert row is not None, method
    assert re.search(r"^Fisher\s+4\s+1000\s+\S+\s+0\.162$", text, re.M)


def test_list_metrics_reach_the_result_json(sites):
    """``run(..., truth=dag)`` scores the list through the registry hook (compare runs the same
    path), also when the list has several PAGs and so no single ``graph``."""
    import fedcausal_flwr

    frames, schema = sites
    result = fedcausal_flwr.run("fedci-iod", data=frames, truth=fig1_dag(), schema=schema.dumps())
    doc = result.to_json()
    pags = [Graph.from_json(g) for g in doc["extra"]["pags"]]
    truth = dag_to_pag(fig1_dag(), LATENT)
    assert doc["metrics"] == pag_list_metrics(pags, truth)
    assert doc["metrics"]["n_pags"] == len(pags) == doc["extra"]["n_pags"]
    assert (doc["graph"] is None) == (len(pags) != 1)


@pytest.mark.parametrize("method", ["fedci-iod", "iod-fisher", "iod-pooled"])
def test_the_iod_methods_refuse_differential_privacy(method):
    """IOD's searches (a local one per dataset, then the merge) have no split of a privacy
    budget: a dp option is an unknown option, never a run that adds no noise and says nothing."""
    from fedcausal_flwr.options import OptionError

    for option in ({"dp": "central"}, {"dp_epsilon": 1}, {"dp_clip": 5}):
        with pytest.raises(OptionError, match=f"{next(iter(option))}"):
            run_method(method, [pd.DataFrame({"A": [0, 1]})] * 2, option)
