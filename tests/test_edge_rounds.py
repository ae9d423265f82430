"""``edge_tests="until-removed"``: each PC-stable depth asked edge by edge until the edge is
removed gives the full search's adjacency after every depth and its CPDAG under every collider
rule, from fewer tests; the pairs the colliders read record exactly what the full depths record;
federated equals pooled; the options that cannot combine with it say so."""

from __future__ import annotations

import warnings
from itertools import combinations

import numpy as np
import pytest
from helpers import run_cli
from test_streamed_levels import oracle_of

from fedcausal_flwr.discovery.edge_rounds import DepthPools, lex_combinations
from fedcausal_flwr.discovery.pc import pc, unshielded_pairs
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.graphs.knowledge import Knowledge
from fedcausal_flwr.options import OptionError

UNTIL = {"edge_tests": "until-removed"}


def test_lex_combinations_unrank_in_itertools_order():
    for n in range(9):
        for k in range(1, 5):
            listed = list(combinations(range(n), k))
            if listed:
                ranks = np.arange(len(listed))
                assert lex_combinations(np.full(len(listed), n), k, ranks).tolist() == [
                    list(c) for c in listed
                ]
    # pools of different sizes in one call
    got = lex_combinations(np.array([5, 3, 7]), 2, np.array([9, 0, 20]))
    assert got.tolist() == [[3, 4], [0, 1], [5, 6]]


def _full_depth_order(adjacency: np.ndarray, x: int, y: int, depth: int) -> list[tuple]:
    """The sets the full depth lists for the pair x < y: x's side, then y's new ones."""
    near_x = [v for v in np.flatnonzero(adjacency[x]).tolist() if v != y]
    near_y = [v for v in np.flatnonzero(adjacency[y]).tolist() if v != x]
    first = list(combinations(near_x, depth))
    return first + [s for s in combinations(near_y, depth) if s not in set(first)]


def _listed_sets(seed: int, trials: int, ranked: bool):
    """Random graphs' pairs x < y at depths 1-3, each with every set its pools list in position
    order (ranked by a random strength with ties, or not): ``(strength, depth, x, y, how many
    sets x's side numbers, the sets, the full depth's sets)``."""
    rng = np.random.default_rng(seed)
    for _ in range(trials):
        n = int(rng.integers(3, 12))
        adjacency = np.triu(rng.random((n, n)) < rng.uniform(0.3, 0.9), 1)
        adjacency |= adjacency.T
        strength = rng.integers(0, 4, (n, n)).astype(np.float32) if ranked else None
        if strength is not None:
            strength += strength.T
        for depth in (1, 2, 3):
            pools = DepthPools(adjacency, depth, strength)
            lo, hi = np.nonzero(np.triu(adjacency, 1))
            first, total = pools.totals(lo, hi)
            for x, y, lower, count in zip(lo.tolist(), hi.tolist(), first, total, strict=True):
                rows = pools.tests(np.full(count, x), np.full(count, y), np.arange(count))
                listed = [tuple(r[2:]) for r in rows.tolist() if r[0] >= 0]
                full = _full_depth_order(adjacency, x, y, depth)
                yield strength, depth, x, y, lower, listed, full


def test_pools_number_each_pairs_sets_in_the_full_depths_order():
    for *_, listed, full in _listed_sets(3, 30, ranked=False):
        assert listed == full


def test_ranked_pools_number_every_set_once_strongest_members_first():
    for strength, depth, x, y, lower, listed, full in _listed_sets(5, 20, ranked=True):
        assert sorted(listed) == sorted(full) and len(set(listed)) == len(listed)
        if depth == 1 and lower:  # x's side: its members strongest first, ties by index
            members = [s for (s,) in listed[:lower]]
            by_strength = sorted(sorted(members), key=lambda s: -strength[x, s] - strength[y, s])
            assert members == by_strength


def _level1(oracle, ranked: bool) -> tuple[np.ndarray, int]:
    """Depth 1 of an until-removed search after depth 0, ranked by depth 0's statistics or in
    neighbour order: the pairs it removes and the tests it asks."""
    from fedcausal_flwr.discovery.driver import drive
    from fedcausal_flwr.discovery.edge_rounds import until_removed_depth
    from fedcausal_flwr.discovery.skeleton import skeleton_steps
    from fedcausal_flwr.discovery.skeleton_record import Skeleton

    n = len(oracle.variables)
    adjacency = drive(skeleton_steps(n, 0.05, max_depth=0), oracle).adjacency
    lo, hi = np.nonzero(np.triu(adjacency, 1))
    pairs = [(x, y, ()) for x, y in zip(lo.tolist(), hi.tolist(), strict=True)]
    pvalues, statistics = oracle.compute_statistics(pairs)
    assert (pvalues <= 0.05).all()
    strength = np.zeros((n, n), dtype=np.float32)
    strength[lo, hi] = strength[hi, lo] = statistics
    steps = until_removed_depth(
        Skeleton(adjacency.copy()), adjacency, 1, 0.05, None, 10**6, strength if ranked else None
    )
    removed, asked = drive(steps, oracle)
    return removed, asked["tests"]


def test_ranking_by_depth_zeros_statistics_removes_the_same_pairs_from_fewer_tests():
    oracle = oracle_of("alarm", 3000)
    ranked, ranked_tests = _level1(oracle, ranked=True)
    plain, plain_tests = _level1(oracle, ranked=False)
    assert sorted(map(tuple, ranked.tolist())) == sorted(map(tuple, plain.tolist()))
    assert ranked_tests < 0.8 * plain_tests, (ranked_tests, plain_tests)


def test_an_oracle_without_statistics_ranks_by_p_values_to_the_same_cpdag():
    """Fisher-z's moments and fedCI's fits give p-values only: depth 0 ranks by ``1 - p``."""
    oracle = oracle_of("alarm", 2000)

    class PValuesOnly(type(oracle)):
        def compute_statistics(self, queries):
            return super().compute_statistics(queries)[0], None

    plain = PValuesOnly(oracle.codes, oracle.cards, oracle.variables, test="chi2")
    by_p = pc(plain, 0.05, **UNTIL)
    by_statistic = pc(oracle, 0.05, **UNTIL)
    assert by_p.graph == by_statistic.graph == pc(oracle, 0.05).graph
    assert by_p.skeleton.n_tests != by_statistic.skeleton.n_tests  # another order was taken


def _records_agree(full, until) -> None:
    """The same adjacency and removal depths; each removed pair's sets some of the full
    record's, in its order; the unshielded triples' pairs recorded exactly alike."""
    a, b = full.skeleton, until.skeleton
    assert (a.adjacency == b.adjacency).all()
    assert dict(a.removed_at) == dict(b.removed_at)
    for pair, sets in b.sepsets.items():
        assert sets and sets == [s for s in a.sepsets[pair] if s in set(sets)]
    for pair in unshielded_pairs(a.adjacency):
        assert b.sepsets[pair] == a.sepsets[pair]
        assert b.max_pvalue[pair] == a.max_pvalue[pair]


RULES = [
    {},
    {"collider_rule": "standard"},
    {"collider_rule": "majority"},
    {"collider_rule": "conservative"},
    {"uc_priority": 3},
    {"uc_rule": 1},
    {"uc_rule": 2},
    {"max_depth": 1},
]


@pytest.mark.parametrize("network, rows", [("alarm", 2000), ("insurance", 3000), ("child", 2000)])
def test_until_removed_gives_the_full_searchs_cpdag_under_every_rule(network, rows):
    oracle = oracle_of(network, rows)
    for options in RULES:
        full = pc(oracle, 0.05, **options)
        until = pc(oracle, 0.05, **options, **UNTIL)
        assert until.graph == full.graph, options
        _records_agree(full, until)
        assert until.n_tests < full.n_tests
        assert until.skeleton.n_tests < 0.7 * full.skeleton.n_tests
        assert until.skeleton.depths[1]["rounds"] > 1


def test_until_removed_keeps_knowledge_and_small_batches():
    oracle = oracle_of("alarm", 2000)
    names = oracle.variables
    knowledge = Knowledge(required=[(names[0], names[5])], forbidden=[(names[1], names[2])])
    full = pc(oracle, 0.05, knowledge=knowledge)
    for batch in (None, 7):
        until = pc(oracle, 0.05, knowledge=knowledge, depth_batch=batch, **UNTIL)
        assert until.graph == full.graph
        _records_agree(full, until)
        assert until.knowledge == full.knowledge


def test_until_removed_equals_causallearn_on_alarm():
    from causallearn.search.ConstraintBased.PC import pc as cl_pc

    oracle = oracle_of("alarm", 3000)
    ours = pc(oracle, 0.05, **UNTIL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = cl_pc(oracle.codes, 0.05, "chisq", stable=True, show_progress=False)
    names = [f"X{i + 1}" for i in range(len(oracle.variables))]
    theirs = Graph.from_causallearn(found.G.graph, names, "CPDAG")
    assert (ours.graph.marks == theirs.marks).all()


def test_federated_until_removed_equals_pooled_and_asks_fewer_tests(monkeypatch):
    """Also: the sums are exact, so the federated search ranks its pools by the statistics the
    pooled one ranks by."""
    from fedcausal_flwr.data.specs import sample_partition
    from fedcausal_flwr.discovery import skeleton

    asked = []

    class Recorded(skeleton.FreshQueries):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if self.statistics_wanted:
                asked.append(self)

    monkeypatch.setattr(skeleton, "FreshQueries", Recorded)
    partition, _ = sample_partition("alarm", 4000, 3, "iid", 0)
    frames = list(partition.clients)
    full = run_method("fedpc", frames, {"test": "chi2"})
    assert not asked
    until = run_method("fedpc", frames, {"test": "chi2", **UNTIL})
    assert until.graph == full.graph
    assert until.extra["tests"] < 0.8 * full.extra["tests"]
    assert until.rounds > full.rounds
    pooled = run_method("pooled", frames, {"algorithm": "pc", "test": "chi2", **UNTIL})
    assert pooled.graph == until.graph
    assert pooled.config["options"]["edge_tests"] == "until-removed"
    federated, centred = asked  # depth 0 of each
    assert federated.statistics is not None and centred.statistics is not None
    assert (federated.rows == centred.rows).all()
    np.testing.assert_allclose(federated.statistics, centred.statistics, rtol=1e-12)
    assert federated.statistics.max() > 100  # alarm's strong dependences, not a placeholder


@pytest.mark.parametrize(
    "options, words",
    [
        ({"stable": False, **UNTIL}, ["edge_tests='until-removed'", "stable=True"]),
        ({"dp": "central", "dp_epsilon": 8.0, **UNTIL}, ["edge_tests='until-removed'"]),
        ({"edge_tests": "some"}, ["edge_tests", "until-removed"]),
    ],
)
def test_options_that_cannot_combine_with_until_removed_are_refused(options, words):
    frames = _two_sites()
    with pytest.raises(OptionError) as caught:
        run_method("fedpc", frames, options)
    for word in words:
        assert word in str(caught.value)


def _two_sites():
    from fedcausal_flwr.data.specs import sample_partition

    partition, _ = sample_partition("asia", 500, 2, "iid", 0)
    return list(partition.clients)


def test_the_cli_refusal_names_the_options_as_typed(tmp_path, capsys):
    paths = []
    for i, frame in enumerate(_two_sites()):
        paths.append(str(tmp_path / f"s{i}.csv"))
        frame.to_csv(paths[-1], index=False)
    code, _, err = run_cli(
        capsys, "fedpc", paths, "--edge-tests", "until-removed", "--stable", "false"
    )
    assert code != 0
    assert "--edge-tests until-removed" in err
    assert "--stable true" in err
    assert "Traceback" not in err
