"""FedLCS's vectorised layer scan equals the per-subset replay it replaced.

``_reference_apply_layer`` and ``_reference_answer_prune`` are frozen copies of the sequential
implementation (``apply_layer`` walking ``itertools.combinations`` one subset at a time, and the
batched ``answer_prune`` that replays it after every fetch). The current :func:`answer_prune` must
keep the same candidates AND send the oracle the same batches of tests, so federated test counts
and results do not move.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import combinations, islice

import numpy as np
import pytest

from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.discovery.lcs_skeleton import answer_prune
from fedcausal_flwr.stats.batch_oracle import CIOracle, Query, normalise_query
from fedcausal_flwr.stats.oracles import DiscreteOracle


# ============================================================================ frozen reference
def _reference_apply_layer(
    target: int,
    candidates: Sequence[int],
    level: int,
    pvalue: Callable[[Query], float | None],
    alpha: float,
    stable: bool = False,
    resume: dict | None = None,
) -> tuple[list[int], dict[int, tuple[int, ...]]]:
    """Frozen copy of the per-subset ``pcsimple.apply_layer``."""
    current = list(candidates)
    found: dict[int, tuple[int, ...]] = {}
    for x in candidates:
        pool = [v for v in (candidates if stable else current) if v != x]
        key = (x, tuple(pool))
        start = 0 if resume is None else resume.get(key, 0)
        for index, z in enumerate(islice(combinations(pool, level), start, None), start):
            p = pvalue(normalise_query(x, target, z))
            if p is None:
                if resume is not None:
                    resume[key] = index
                break
            if p > alpha:
                found[x] = tuple(z)
                current.remove(x)
                break
    return current, found


def _reference_answer_prune(
    oracle,
    jobs: Sequence[tuple[int, tuple[int, ...], int]],
    alpha: float,
    stable: bool,
    first: int = 4,
    growth: float = 2.0,
    passes: list | None = None,
) -> list[tuple[int, ...]]:
    """Frozen copy of the replaying ``lcs_skeleton.answer_prune`` (``passes``, test-only:
    collects each pass's kept lists)."""
    scans: dict[tuple[int, int], list] = {}
    for j, (v, cpc, lv) in enumerate(jobs):
        for x in cpc:
            others = [u for u in cpc if u != x]
            scans[(j, x)] = [normalise_query(x, v, z) for z in combinations(others, lv)]
    position = {key: {q: i for i, q in enumerate(qs)} for key, qs in scans.items()}
    fetched = dict.fromkeys(scans, 0)
    known: dict = {}
    resumes: list[dict] = [{} for _ in jobs]
    while True:
        short: dict[tuple[int, int], int] = {}
        kept_lists = []
        for j, (v, cpc, lv) in enumerate(jobs):

            def pvalue(q, j=j, v=v, short=short):
                if q in known:
                    return known[q]
                key = (j, q[1] if q[0] == v else q[0])
                short.setdefault(key, position[key][q])
                return None

            kept = _reference_apply_layer(v, cpc, lv, pvalue, alpha, stable, resume=resumes[j])[0]
            kept_lists.append(tuple(kept))
        if passes is not None:
            passes.append(kept_lists)
        if not short:
            return kept_lists
        removed = [set(cpc) - set(kept) for (_, cpc, _), kept in zip(jobs, kept_lists, strict=True)]
        pending: dict[int, list[int]] = {}
        for j, x in short:
            pending.setdefault(j, []).append(x)
        batch = []
        for key, at in short.items():
            j, x = key
            rank = {u: i for i, u in enumerate(jobs[j][1])}
            unsure = set() if stable else {u for u in pending[j] if rank[u] < rank[x]}
            if unsure and not unsure.isdisjoint(scans[key][at][2]):
                continue
            stop = min(len(scans[key]), max(math.ceil(growth * fetched[key]), at + first))
            skip = removed[j] | unsure
            batch.append(scans[key][at])
            batch.extend(
                q for q in scans[key][at + 1 : stop] if q not in known and skip.isdisjoint(q[2])
            )
            fetched[key] = stop
        batch = list(dict.fromkeys(batch))
        known.update(zip(batch, oracle.test_batch(batch).tolist(), strict=True))


# ============================================================================ helpers
class RecordingOracle:
    """Passes batches to an oracle and records them, in order."""

    def __init__(self, oracle: CIOracle):
        self.oracle = oracle
        self.batches: list[list] = []

    def test_batch(self, queries):
        self.batches.append(list(queries))
        return self.oracle.test_batch(queries)


class HashedOracle(CIOracle):
    """Synthetic p-values fixed per query: NaN (3 %), exactly ``tie`` (7 %; the alpha of the test,
    so dependent), independent (a share ``independent``), otherwise dependent."""

    def __init__(self, n_vars: int, seed: int, tie: float, independent: float = 0.1):
        super().__init__([f"V{i}" for i in range(n_vars)])
        self.seed, self.tie, self.independent = seed, tie, independent

    def compute_batch(self, queries):
        out = []
        for a, b, z in queries:
            u = np.random.default_rng([self.seed, a, b, len(z), *z]).random()
            if u < 0.03:
                out.append(np.nan)
            elif u < 0.1:
                out.append(self.tie)
            elif u < 0.1 + self.independent:
                out.append(0.5 + u / 2)
            else:
                out.append(u / 40)
        return np.array(out)


def compare(oracle: CIOracle, jobs, stable: bool, alpha: float = 0.05) -> tuple[int, int]:
    """Assert equal kept candidates and equal oracle batches; return (batches, tests)."""
    old, new = RecordingOracle(oracle), RecordingOracle(oracle)
    want = _reference_answer_prune(old, jobs, alpha, stable)
    got = answer_prune(new, jobs, alpha, stable)
    assert got == want
    assert new.batches == old.batches  # same tests, same batches, same order
    return len(old.batches), sum(map(len, old.batches))


def layered_jobs(oracle: CIOracle, targets, stable: bool, max_level: int = 3):
    """FLSke's requests for these targets: one list of jobs per layer (all targets together),
    each layer's candidates being what the reference kept at the layer before."""
    n = oracle.n_vars
    cpc = {t: tuple(u for u in range(n) if u != t) for t in targets}
    for level in range(max_level + 1):
        jobs = [(t, cpc[t], level) for t in targets if len(cpc[t]) > level]
        if not jobs:
            return
        yield jobs
        kept = _reference_answer_prune(oracle, jobs, 0.05, stable)
        cpc.update((t, k) for (t, _, _), k in zip(jobs, kept, strict=True))


def discrete_oracle(name: str, rows: int, seed: int, **options) -> DiscreteOracle:
    """A client's chi2 oracle (as in ``VotingClient._oracle``) on sampled rows."""
    net = load_network(name)
    frame = net.sample(rows, seed=seed)
    names = list(net.variables)
    codes = np.column_stack([frame[v].cat.codes.to_numpy() for v in names]).astype(np.int64)
    return DiscreteOracle(codes, net.cards, names, test="chi2", **options)


# ============================================================================ combinations
@pytest.mark.parametrize("cached", [True, False])
def test_combination_rows_and_ranks_follow_itertools(monkeypatch, cached):
    from fedcausal_flwr.discovery import pcsimple

    monkeypatch.setattr(pcsimple, "_TABLES", {})
    if not cached:
        monkeypatch.setattr(pcsimple, "COMBINATION_CACHE_ENTRIES", 0)
    sizes = [(0, 0), (5, 0), (1, 0), (3, 5), (6, 1), (2, 1), (9, 4), (7, 3), (12, 3), (5, 3)]
    for n, k in sizes + [(20, 2), (6, 2), (25, 2), (12, 6), (8, 6)]:
        subsets = list(combinations(range(n), k))
        want = np.array(subsets, dtype=np.int64).reshape(len(subsets), k)
        assert np.array_equal(pcsimple.combination_rows(n, k, 0, math.comb(n, k)), want)
        assert np.array_equal(pcsimple.combination_rows(n, k, 2, 5), want[2:5])
        assert np.array_equal(pcsimple.combination_ranks(want, n), np.arange(len(want)))


def test_first_stop_is_the_sequential_scan():
    from fedcausal_flwr.discovery.pcsimple import first_stop

    rng = np.random.default_rng(0)
    for _ in range(300):
        size, level = int(rng.integers(1, 9)), int(rng.integers(0, 4))
        x = int(rng.integers(size))
        others = [u for u in range(size) if u != x]
        subsets = list(combinations(others, level))
        dependent = rng.random(int(rng.integers(0, len(subsets) + 2))) < 0.8
        gone = rng.random(size) < 0.3
        gone[x] = False
        want = next(
            (
                i
                for i, z in enumerate(subsets)
                if not gone[list(z)].any() and not (i < len(dependent) and dependent[i])
            ),
            len(subsets),
        )
        assert first_stop(dependent, size, level, x, 0, gone) == want
        if not gone.any():
            assert first_stop(dependent, size, level, x, 0, None) == want


# ============================================================================ new == reference
NETWORK_TARGETS = {
    "child": list(range(20)),  # every variable: many jobs share their pairs
    "insurance": [0, 3, 8, 12, 17, 21, 25],
    "alarm": [0, 5, 12, 13, 20, 23, 24, 30, 34],
}


@pytest.mark.parametrize("stable", [False, True])
@pytest.mark.parametrize("name", sorted(NETWORK_TARGETS))
def test_prune_equals_reference_on_networks(name, stable):
    oracle = discrete_oracle(name, 3000, seed=11)
    levels = set()
    batches = 0
    for jobs in layered_jobs(oracle, NETWORK_TARGETS[name], stable):
        batches += compare(oracle, jobs, stable)[0]
        # each target alone as well (no other job shares its tests)
        for job in jobs[:3]:
            compare(oracle, [job], stable)
        levels.add(jobs[0][2])
    assert levels == {0, 1, 2, 3} and batches > 20


def test_prune_equals_reference_with_unreliable_tests():
    """NaN p-values (too few rows per cell) read as dependent in both."""
    oracle = discrete_oracle("alarm", 800, seed=4, reliability=5.0)
    for stable in (False, True):
        for jobs in layered_jobs(oracle, [0, 5, 13, 23, 24], stable):
            compare(oracle, jobs, stable)
    assert np.isnan(list(oracle.cache.values())).any()


@pytest.mark.parametrize("seed", range(6))
def test_prune_equals_reference_on_random_jobs(seed):
    """Unsorted candidates, mirrored pairs, a job asked twice, levels 0..4, other prefix sizes."""
    rng = np.random.default_rng(seed)
    n = 16
    oracle = HashedOracle(n, seed, tie=0.15)
    jobs = []
    for _ in range(8):
        target = int(rng.integers(n))
        others = [u for u in range(n) if u != target]
        candidates = tuple(int(u) for u in rng.permutation(others)[: int(rng.integers(1, 12))])
        if rng.random() < 0.5:
            candidates = tuple(sorted(candidates))
        jobs.append((target, candidates, int(rng.integers(0, 5))))
    jobs.append(jobs[0])  # the same job twice
    level = jobs[1][2]
    jobs.append((jobs[1][1][0], (jobs[1][0], *jobs[1][1][1:]), level))  # its mirror image
    for stable in (False, True):
        compare(oracle, jobs, stable, alpha=0.15)
        old, new = RecordingOracle(oracle), RecordingOracle(oracle)
        want = _reference_answer_prune(old, jobs, 0.15, stable, first=1, growth=1.5)
        assert answer_prune(new, jobs, 0.15, stable, first=1, growth=1.5) == want
        assert new.batches == old.batches


#: (seed, share independent, level): the few random layers, of about 1,400 where a candidate
#: removed in one pass is back in the next, whose later candidates decide differently unless
#: they rescan from the start (found by planting that bug).
RETURNING = [(262, 0.3, 2), (1464, 0.2, 1), (2571, 0.3, 1)]


@pytest.mark.parametrize(("seed", "independent", "level"), RETURNING)
def test_prune_equals_reference_when_a_removed_candidate_returns(seed, independent, level):
    """On the fly, a candidate removed given a set with a still-open candidate comes back when
    that one leaves; later candidates' pools grow again."""
    rng = np.random.default_rng(seed)
    oracle = HashedOracle(20, seed, tie=0.15, independent=independent)
    jobs = []
    for target in rng.permutation(20)[:3]:
        others = [u for u in range(20) if u != target]
        jobs.append((int(target), tuple(sorted(rng.permutation(others)[:14].tolist())), level))
    passes: list = []
    _reference_answer_prune(oracle, jobs, 0.15, False, passes=passes)
    pairs = zip(passes, passes[1:], strict=False)  # consecutive passes
    assert any(set(b) - set(a) for one, two in pairs for a, b in zip(one, two, strict=True))
    compare(oracle, jobs, False, alpha=0.15)


def test_whole_search_equals_reference(monkeypatch):
    """local_structure with the reference prune: same structures and the same test counts."""
    from fedcausal_flwr.discovery import lcs
    from fedcausal_flwr.discovery.lcs_state import LCSOptions

    targets = [12, 23, 24, 30]
    runs = []
    for prune in (answer_prune, _reference_answer_prune):
        monkeypatch.setattr(lcs, "answer_prune", prune)  # the name local_structure calls
        oracle = discrete_oracle("alarm", 2000, seed=3)
        structures, knowledge = lcs.local_structure(oracle, targets, LCSOptions())
        runs.append((oracle.n_asked, oracle.n_computed, oracle.n_batches, knowledge.pc))
        runs[-1] += tuple((s.parents, s.children, s.undirected) for s in structures.values())
    assert runs[0] == runs[1]


def test_prune_rejects_malformed_jobs():
    oracle = HashedOracle(5, 0, tie=0.05)
    with pytest.raises(ValueError, match="variable 1 lists it among its candidates"):
        answer_prune(oracle, [(1, (0, 1, 2), 1)], 0.05, False)
    with pytest.raises(ValueError, match="repeats a candidate"):
        answer_prune(oracle, [(1, (0, 2, 2), 1)], 0.05, False)
    with pytest.raises(ValueError, match="level -1 is negative"):
        answer_prune(oracle, [(1, (0, 2), -1)], 0.05, False)
