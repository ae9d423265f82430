"""A level with more tests than ``depth_batch`` is asked in batches generated as they are sent:
the same skeleton, separating sets, p-values, graph and test counts as the level asked at once,
in-process and federated; its batches are fresh (a cache keeps none of their answers)."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.data import Schema, load_network
from fedcausal_flwr.discovery.driver import with_cache
from fedcausal_flwr.discovery.fci import fci
from fedcausal_flwr.discovery.pc import pc
from fedcausal_flwr.discovery.skeleton import FreshQueries, depth_queries, depth_size
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.graphs.knowledge import Knowledge
from fedcausal_flwr.stats.oracles import DiscreteOracle


def oracle_of(network: str, rows: int, seed: int = 1) -> DiscreteOracle:
    net = load_network(network)
    frame = net.sample(rows, seed=seed)
    codes = Schema.infer([frame]).encode(frame).astype(np.int64)
    return DiscreteOracle(codes, net.cards, list(frame.columns), test="chi2")


def skeleton_record(found) -> tuple:
    s = found.skeleton
    return (s.adjacency.tolist(), s.sepsets, s.max_pvalue, s.removed_at, s.depths)


@pytest.mark.parametrize("network", ["alarm", "insurance"])
# one test per batch (7-10 s a network) runs with the slow tests
@pytest.mark.parametrize("batch", [pytest.param(1, marks=pytest.mark.slow), 9, 400])
def test_a_streamed_level_equals_the_level_asked_at_once(network, batch):
    oracle = oracle_of(network, 2000)
    whole = pc(oracle, 0.05)
    streamed = pc(oracle, 0.05, depth_batch=batch)
    assert streamed.graph == whole.graph
    assert skeleton_record(streamed) == skeleton_record(whole)
    assert whole.skeleton.n_tests > 400  # the largest batch streams some levels, not all


def test_streaming_keeps_required_edges_and_fci_graphs():
    oracle = oracle_of("alarm", 2000)
    names = oracle.variables
    knowledge = Knowledge(required=[(names[0], names[5])], forbidden=[(names[1], names[2])])
    assert skeleton_record(pc(oracle, 0.05, knowledge=knowledge, depth_batch=5)) == skeleton_record(
        pc(oracle, 0.05, knowledge=knowledge)
    )
    assert fci(oracle, 0.05, depth_batch=11).graph == fci(oracle, 0.05).graph


def test_level_size_counts_what_level_queries_lists():
    rng = np.random.default_rng(0)
    adjacency = rng.random((12, 12)) < 0.5
    adjacency = np.triu(adjacency, 1)
    adjacency |= adjacency.T
    keep = np.zeros_like(adjacency)
    keep[0, 3] = keep[3, 0] = True
    for level in range(4):
        listed = depth_queries(adjacency, level)
        assert depth_size(adjacency, level) == len(listed)
        kept = [q for q in listed if not keep[q[0], q[1]]]
        assert depth_size(adjacency, level, keep) == len(kept)


def test_a_cache_passes_fresh_batches_through_and_keeps_the_others():
    def steps():
        first = yield FreshQueries([(0, 1, ())])
        second = yield [(1, 0, ()), (0, 2, ())]
        return list(first), list(second)

    cache: dict = {}
    wrapped = with_cache(steps(), cache)
    assert isinstance(next(wrapped), FreshQueries)
    assert wrapped.send([0.5]) == [(0, 1, ()), (0, 2, ())]  # not answered from the cache
    with pytest.raises(StopIteration) as stop:
        wrapped.send([0.5, 0.25])
    assert stop.value.value == ([0.5], [0.5, 0.25])
    assert cache == {(0, 1, ()): 0.5, (0, 2, ()): 0.25}


def test_fedpc_streams_a_level_over_its_server_budget_and_learns_the_pooled_graph():
    from fedcausal_flwr.data.specs import sample_partition

    partition, _ = sample_partition("asia", 3000, 3, "iid", 0)
    frames = list(partition.clients)
    whole = run_method("fedpc", frames, {"ci": "exact"})
    # 64 budget cells per test: a budget of 64 * 6 cells asks 6 tests at a time
    tight = run_method("fedpc", frames, {"ci": "exact", "max_server_cells": 64 * 6})
    assert tight.graph == whole.graph
    assert tight.extra["tests"] == whole.extra["tests"]
    assert tight.rounds > whole.rounds


def _reference_tests(adjacency, level, keep):
    """The tests of a level, each once, normalised (the definition depth_rows vectorises): every
    still-adjacent pair given every set of the level's size from either end's neighbours."""
    from itertools import combinations

    neighbours = [np.flatnonzero(row).tolist() for row in adjacency]
    out = set()
    for x, near in enumerate(neighbours):
        for i, y in enumerate(near):
            if keep is not None and keep[x, y]:
                continue
            for s in combinations(near[:i] + near[i + 1 :], level):
                out.add((min(x, y), max(x, y), tuple(sorted(s))))
    return out


@pytest.mark.parametrize("batch", [1, 3, 50, 10_000])
def test_level_rows_list_each_test_once_with_the_tests_of_a_set_together(batch):
    from fedcausal_flwr.discovery.skeleton import _exact_batches, depth_rows

    rng = np.random.default_rng(batch)
    for _ in range(20):
        n = int(rng.integers(3, 11))
        adjacency = np.triu(rng.random((n, n)) < rng.uniform(0.3, 0.9), 1)
        adjacency |= adjacency.T
        keep = np.zeros_like(adjacency)
        keep[0, n - 1] = keep[n - 1, 0] = True
        for level in range(4):
            for kept in (None, keep):
                batches = list(_exact_batches(depth_rows(adjacency, level, kept, batch), batch))
                listed = [q for rows in batches for q in FreshQueries(rows)]
                assert len(listed) == len(set(listed))
                assert set(listed) == _reference_tests(adjacency, level, kept)
                # one variable set's tests come one after another (one joint table each)
                sets = [frozenset((x, y, *s)) for x, y, s in listed]
                runs = [v for i, v in enumerate(sets) if i == 0 or sets[i - 1] != v]
                assert len(runs) == len(set(sets))
                assert all(len(rows) == batch for rows in batches[:-1])


@pytest.mark.parametrize("order", ["increasing", "sorted-with-repeats", "shuffled"])
def test_largest_per_pair_is_keep_largest_over_the_tests(order):
    """Each pair's largest p-value (NaN ignored, a pair with only NaN left out), as keep_largest
    records it one test at a time, whatever order the tests come in."""
    from fedcausal_flwr.discovery.skeleton import _largest_per_pair
    from fedcausal_flwr.discovery.skeleton_record import keep_largest

    rng = np.random.default_rng(3)
    codes = np.arange(0, 400, 2, dtype=np.int64)
    if order != "increasing":
        codes = np.sort(rng.choice(codes, 600))
    if order == "shuffled":
        codes = rng.permutation(codes)
    pvalues = rng.random(codes.size)
    pvalues[rng.random(codes.size) < 0.2] = np.nan
    expected: dict = {}
    for code, p in zip(codes.tolist(), pvalues.tolist(), strict=True):
        if not np.isnan(p):
            keep_largest(expected, (code, 0), p)
    got_codes, got = _largest_per_pair(codes, pvalues)
    assert got_codes.tolist() == sorted(k for k, _ in expected)
    assert got.tolist() == [expected[(k, 0)] for k in got_codes.tolist()]


@pytest.mark.parametrize("batches", ["in-order", "overlapping", "in-order-then-back"])
def test_largest_per_pair_over_batches_is_keep_largest(batches):
    """A depth's batches folded one at a time (kept as they are while each comes after every
    pair so far, merged otherwise) give each pair's largest p as keep_largest records it."""
    from fedcausal_flwr.discovery.skeleton import _LargestPerPair
    from fedcausal_flwr.discovery.skeleton_record import keep_largest

    rng = np.random.default_rng(5)
    if batches == "in-order":
        parts = np.array_split(np.arange(0, 900, 3, dtype=np.int64), 5)
    elif batches == "overlapping":
        parts = [np.sort(rng.choice(300, 80)) for _ in range(5)]
    else:
        parts = [*np.array_split(np.arange(100, 400, dtype=np.int64), 3), np.arange(0, 150)]
    largest, expected = _LargestPerPair(), {}
    for codes in parts:
        pvalues = rng.random(codes.size)
        pvalues[rng.random(codes.size) < 0.2] = np.nan
        largest.add(codes.astype(np.int64), pvalues)
        for code, p in zip(codes.tolist(), pvalues.tolist(), strict=True):
            if not np.isnan(p):
                keep_largest(expected, (code, 0), p)
    got_codes, got = largest.result()
    assert got_codes.tolist() == sorted(k for k, _ in expected)
    assert got.tolist() == [expected[(k, 0)] for k in got_codes.tolist()]
