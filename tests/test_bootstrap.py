"""The federated bootstrap: B resamples of each client's rows in the same rounds as the run itself.

Each replicate must be exactly what the method learns from its resampled rows alone (checked by
running the method on those rows, resampled here from ``bootstrap_rows``), so FedPC's bootstrap
equals the pooled PC's on the same resamples; frequencies are counted here by plain loops.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from helpers import ONE_ACTOR

from fedcausal_flwr.cli import main
from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.discovery.bootstrap import resample_rows
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.graphs.frequency import edge_frequencies
from fedcausal_flwr.graphs.graph import ARROW, TAIL, Graph
from fedcausal_flwr.metrics import auc
from fedcausal_flwr.options import OptionError
from fedcausal_flwr.result import confidence_labels

REPO_ROOT = Path(__file__).resolve().parents[1]
B = 4


@pytest.fixture(scope="module")
def parts():
    frame = load_network("asia").sample(3000, seed=2)
    return split_iid(frame, 3, seed=0).clients


def resampled(parts, seed: int, replicate: int, how: str = "subsample"):
    return [
        p.iloc[resample_rows(len(p), seed, pid, replicate, how)].reset_index(drop=True)
        for pid, p in enumerate(parts)
    ]


def counted(graphs: list[Graph]) -> dict[tuple[str, str], list[float]]:
    """Edge and direction shares by loops over node pairs (independent of edge_frequencies)."""
    names = graphs[0].names
    out = {}
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            edge = sum(g.adjacent(a, b) for g in graphs)
            ab = sum(g.marks[a, b] == ARROW and g.marks[b, a] == TAIL for g in graphs)
            ba = sum(g.marks[b, a] == ARROW and g.marks[a, b] == TAIL for g in graphs)
            if edge:
                out[(names[a], names[b])] = [edge / len(graphs), ab / len(graphs), ba / len(graphs)]
    return out


def as_dict(edges: list[list]) -> dict[tuple[str, str], list[float]]:
    return {(x, y): [e, ab, ba] for x, y, e, ab, ba in edges}


@pytest.mark.parametrize(
    ("method", "options"),
    [("fedpc", {}), ("fedpc", {"test": "g2", "max_cells": 40}), ("fedpc-vote", {}),
     ("fedfci", {}), ("pc-vote", {}), ("fedpc", {"bootstrap_sample": "replace"})],
)  # fmt: skip
def test_each_replicate_is_the_method_on_its_resampled_rows(parts, method, options):
    """Replicate 0 is the run without the bootstrap; replicate k is the method run on each
    client's resample k (max_cells=40 splits each level over several rounds)."""
    seed = 7
    boot = run_method(method, parts, {**options, "bootstrap": B, "seed": seed})
    own = {k: v for k, v in options.items() if k != "bootstrap_sample"}
    how = options.get("bootstrap_sample", "subsample")
    plain = run_method(method, parts, {**own, "seed": seed})
    assert boot.graph == plain.graph
    runs = [
        run_method(method, resampled(parts, seed, k, how), {**own, "seed": seed})
        for k in range(1, B + 1)
    ]
    graphs = [run.graph for run in runs]
    assert boot.rounds == max(run.rounds for run in [plain, *runs])  # they share the rounds
    report = boot.extra["bootstrap"]
    assert report["replicates"] == B and report["seed"] == seed and report["sample"] == how
    expected = counted(graphs)
    for x, y in counted([boot.graph]):  # the run's own edges are listed, at 0 too
        expected.setdefault((x, y), [0.0, 0.0, 0.0])
    assert as_dict(report["edges"]) == expected
    assert boot.config["options"]["bootstrap"] == B


def test_fedpc_bootstrap_equals_the_pooled_bootstrap(parts):
    """FedPC's replicates equal pooled PC's on the same resamples (the server pools each
    client's resample), so the frequencies agree exactly."""
    federated = run_method("fedpc", parts, {"bootstrap": 3, "seed": 1})
    pooled = run_method("pooled", parts, {"bootstrap": 3, "seed": 1})
    assert federated.graph == pooled.graph
    assert federated.extra["bootstrap"]["edges"] == pooled.extra["bootstrap"]["edges"]


def test_frequencies_of_hand_made_graphs():
    names = ["a", "b", "c"]
    directed = Graph(names, kind="CPDAG")
    directed.marks[0, 1], directed.marks[1, 0] = ARROW, TAIL  # a -> b
    undirected = Graph(names, kind="CPDAG")
    undirected.marks[0, 1] = undirected.marks[1, 0] = TAIL  # a - b
    undirected.marks[1, 2], undirected.marks[2, 1] = TAIL, ARROW  # c -> b
    assert edge_frequencies([directed, undirected]) == [
        ["a", "b", 1.0, 0.5, 0.0],
        ["b", "c", 0.5, 0.0, 0.5],
    ]
    lone = Graph(names, kind="CPDAG")
    lone.marks[0, 2] = lone.marks[2, 0] = TAIL
    assert edge_frequencies([directed], also=lone) == [
        ["a", "b", 1.0, 1.0, 0.0],
        ["a", "c", 0.0, 0.0, 0.0],
    ]
    with pytest.raises(ValueError, match="different nodes"):
        edge_frequencies([directed, Graph(["a", "b", "d"])])


def test_bootstrap_is_refused_where_it_cannot_run(parts):
    with pytest.raises(OptionError, match="bootstrap run sends every replicate's statistics"):
        run_method("fedpc", parts, {"bootstrap": 2}, secure=True)
    with pytest.raises(OptionError, match="option bootstrap: expected an integer >= 0, got -1"):
        run_method("fedpc", parts, {"bootstrap": -1})
    with pytest.raises(
        OptionError, match="bootstrap_sample='replace' needs resamples: set bootstrap"
    ):
        run_method("fedpc", parts, {"bootstrap_sample": "replace"})
    with pytest.raises(OptionError, match="has no option 'bootstrap'"):  # its clients keep state
        run_method("notears-admm", parts, {"bootstrap": 2})


@pytest.mark.slow
def test_bootstrap_on_ray_gives_the_inprocess_frequencies(parts, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    inprocess = run_method("fedpc", parts, {"bootstrap": 3, "seed": 5})
    on_ray = run_method("fedpc", parts, {"bootstrap": 3, "seed": 5}, backend="ray", **ONE_ACTOR)
    assert on_ray.graph == inprocess.graph
    assert on_ray.extra["bootstrap"] == inprocess.extra["bootstrap"]
    assert np.isclose(on_ray.bytes_up, inprocess.bytes_up, rtol=0.05)


def test_auc_counts_pairs_of_a_positive_and_a_negative():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, 60).astype(float)  # many ties
    labels = rng.random(60) < 0.3
    pos, neg = scores[labels], scores[~labels]
    pairs = [(a > b) + 0.5 * (a == b) for a in pos for b in neg]
    assert auc(scores, labels) == pytest.approx(np.mean(pairs), abs=1e-12)
    with pytest.raises(ValueError, match="needs positives and negatives"):
        auc([0.1, 0.2], [True, True])


def test_the_command_line_prints_each_edge_with_its_bootstrap_share(capsys):
    code = main(
        ["run", "--method", "fedpc", "--network", "asia", "--samples", "2000", "--clients", "2",
         "--bootstrap", "3", "--bootstrap-sample", "replace", "--quiet"]
    )  # fmt: skip
    assert code == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "-->" in line]
    assert lines and all(re.search(r"p \S+, boot \d+% \(\w+->\w+ \d+%, \w+->\w+ \d+%\)", line)
                         for line in lines)  # fmt: skip
    labels = confidence_labels(
        {"bootstrap": {"edges": [["a", "b", 0.5, 0.25, 0.0]]}, "edge_pvalues": {"kept": []}},
        short=True,
    )
    assert labels == {frozenset(("a", "b")): "boot 50%"}
