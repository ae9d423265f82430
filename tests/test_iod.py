"""IOD with oracle CI answers (m-separation in a DAG with latents): the true PAG is always in the
output, the three procedures agree on the final list, and the candidate counts shrink
original >= orderedcolls (CWO) >= orderedtriplets (TWO)."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.discovery.iod import EMPTY_MESSAGE, feasible_tests, iod
from fedcausal_flwr.discovery.iod_candidates import PROCEDURES, IODTooLargeError
from fedcausal_flwr.graphs.graph import ARROW, TAIL, Graph
from fedcausal_flwr.graphs.pag_validity import canonical_mag, pag_problem, triples_with_order
from fedcausal_flwr.graphs.truth import dag_to_mag, dag_to_pag
from fedcausal_flwr.stats.batch_oracle import CIOracle, Query
from fedcausal_flwr.stats.oracles import DSeparationOracle

OBSERVED = ["A", "B", "C", "D", "E"]
SPLIT = [[0, 1, 2, 4], [0, 2, 3, 4]]  # {A, B, C, E} / {A, C, D, E}


def dag_of(names: list[str], edges: list[tuple[str, str]]) -> Graph:
    m = np.zeros((len(names), len(names)), dtype=np.int8)
    for a, b in edges:
        i, j = names.index(a), names.index(b)
        m[i, j], m[j, i] = ARROW, TAIL
    return Graph(names, m, "DAG")


def fig1_dag() -> Graph:
    """A DAG whose PAG is the paper's Fig. 1: A <-> C, B o-> C, A <-> D, C -> D, C -> E, D -> E."""
    names = [*OBSERVED, "U_AC", "U_AD"]
    edges = [("U_AC", "A"), ("U_AC", "C"), ("U_AD", "A"), ("U_AD", "D"), ("B", "C"),
             ("C", "D"), ("C", "E"), ("D", "E")]  # fmt: skip
    return dag_of(names, edges)


class Flipped(CIOracle):
    """Another oracle's answers with some tests forced to ``p = 1`` (independent)."""

    def __init__(self, base: CIOracle, independent: set[Query]):
        super().__init__(base.variables)
        self.base, self.independent = base, independent

    def compute_batch(self, queries: list[Query]) -> np.ndarray:
        p = self.base.test_batch(queries)
        return np.array(
            [1.0 if q in self.independent else v for q, v in zip(queries, p, strict=True)]
        )


def edge(g: Graph, a: str, b: str) -> tuple[int, int]:
    """(mark at a, mark at b) on a - b."""
    i, j = g.index(a), g.index(b)
    return int(g.marks[j, i]), int(g.marks[i, j])


def test_fig1_true_pag_in_every_procedures_list():
    dag = fig1_dag()
    truth = dag_to_pag(dag, ["U_AC", "U_AD"])
    assert edge(truth, "C", "D") == (TAIL, ARROW) and edge(truth, "A", "D") == (ARROW, ARROW)
    oracle = DSeparationOracle(dag, OBSERVED)
    results = {proc: iod(oracle, SPLIT, procedure=proc) for proc in PROCEDURES}
    lists = {proc: sorted(g.marks.tobytes() for g in r.pags) for proc, r in results.items()}
    assert lists["original"] == lists["orderedcolls"] == lists["orderedtriplets"]
    for r in results.values():
        assert truth in r.pags and r.message.startswith("IOD found")
        # the paper's point: C -> D, D -> E and A <-> D although B and D are never observed
        # together
        for g in r.pags:
            assert edge(g, "C", "D") == (TAIL, ARROW) and edge(g, "D", "E") == (TAIL, ARROW)
            assert edge(g, "A", "D") == (ARROW, ARROW)
        assert [d.pag.names for d in r.local] == [("A", "B", "C", "E"), ("A", "C", "D", "E")]
        for local, ids in zip(r.local, SPLIT, strict=True):  # each site's local PAG is its truth
            marginal = dag_to_pag(
                dag, [n for n in dag.names if n not in [OBSERVED[v] for v in ids]]
            )
            assert local.pag == marginal
    # B and D are never observed together: never tested together, never imputed, yet every PAG
    # in the list has them non-adjacent (the edge was enumerated and failed validation)
    assert not any({1, 3} <= {x, y, *cond} for x, y, cond in oracle.cache)
    assert all(not g.adjacent(1, 3) for r in results.values() for g in r.pags)
    assert any((1, 3) in r.enumeration.removable for r in results.values())
    counts = [results[p].candidates for p in PROCEDURES]
    assert counts[0] >= counts[1] >= counts[2] and counts[0] > counts[2]
    # 42 feasible tests for this split (3 shared, 2 exclusive); IOD asks only feasible ones
    assert results["original"].n_tests <= len(feasible_tests(SPLIT, 3))


def test_fig1_with_fishers_wrong_decision_gives_an_empty_list():
    """The paper's Fig. 1: Fisher's method fails to reject C _||_ E | A (p = 0.1347); with that
    one wrong answer no PAG is consistent with both sites, and the empty list is reported."""
    oracle = Flipped(DSeparationOracle(fig1_dag(), OBSERVED), {(2, 4, (0,))})
    for proc in PROCEDURES:
        r = iod(oracle, SPLIT, procedure=proc)
        assert r.pags == [] and r.message == EMPTY_MESSAGE and r.candidates > 0


def test_42_feasible_tests_for_five_variables_3_shared_2_exclusive():
    tests = feasible_tests([[0, 1, 2, 3], [1, 2, 3, 4]], max_conditioning=3)
    assert len(tests) == 42 and len(set(tests)) == 42
    all_tests = feasible_tests([[0, 1, 2, 3, 4]], max_conditioning=3)
    assert len(all_tests) == 80  # 80 - 38 needing both exclusive variables = 42
    assert not any({0, 4} <= {x, y, *s} for x, y, s in tests)


def random_case(rng: np.random.Generator) -> tuple[Graph, list[str], list[str], list[list[int]]]:
    """A random DAG over 5 observed variables and 1-2 latent confounders, with two sites (3
    shared, 1 exclusive each: the paper's App. D split) or three (each misses one variable)."""
    p, n_latent = 5, int(rng.integers(1, 3))
    names = [f"X{i}" for i in range(p)] + [f"L{j}" for j in range(n_latent)]
    order = rng.permutation(p)
    edges = [(names[order[a]], names[order[b]]) for a in range(p) for b in range(a + 1, p)
             if rng.random() < 0.3]  # fmt: skip
    for j in range(n_latent):
        edges += [(f"L{j}", names[c]) for c in rng.choice(p, 2, replace=False)]
    perm = rng.permutation(p).tolist()
    if rng.random() < 0.5:
        sets = [sorted([*perm[:3], perm[3]]), sorted([*perm[:3], perm[4]])]
    else:
        sets = [sorted(v for v in perm if v != perm[k]) for k in range(3)]
    return dag_of(names, edges), names[:p], names[p:], sets


def test_random_pags_true_pag_always_in_the_list():
    rng = np.random.default_rng(20260)
    reduced = 0
    for case in range(50):
        dag, observed, latent, sets = random_case(rng)
        truth = dag_to_pag(dag, latent)
        oracle = DSeparationOracle(dag, observed)
        results = [iod(oracle, sets, procedure=proc) for proc in PROCEDURES]
        lists = [sorted(g.marks.tobytes() for g in r.pags) for r in results]
        assert lists[0] == lists[1] == lists[2], (case, sets)
        assert all(truth in r.pags for r in results), (case, sets)
        counts = [r.candidates for r in results]
        assert counts[0] >= counts[1] >= counts[2], (case, counts)
        reduced += counts[2] < counts[0]
        for g in results[0].pags:  # every member is a PAG
            assert pag_problem(g) is None
    assert reduced > 0  # TWO saved candidates somewhere


def test_enumeration_cap_stops_or_returns_a_partial_list():
    oracle = DSeparationOracle(fig1_dag(), OBSERVED)
    full = iod(oracle, SPLIT)
    size = full.enumeration.size
    assert full.enumeration.size_exact and size >= full.enumeration.enumerated
    with pytest.raises(IODTooLargeError, match=rf"{size:,} candidate graphs.*max_candidates=10\b"):
        iod(oracle, SPLIT, max_candidates=10)
    lines: list[str] = []
    part = iod(oracle, SPLIT, max_candidates=size // 2, partial=True, progress=lines.append)
    assert part.partial and "PARTIAL" in part.message
    assert part.enumeration.enumerated == size // 2
    whole = {g.marks.tobytes() for g in full.pags}
    assert {g.marks.tobytes() for g in part.pags} <= whole
    assert any(line.startswith("IOD local phase done") for line in lines)


def test_progress_is_reported_during_enumeration_and_validation(monkeypatch):
    import fedcausal_flwr.discovery.iod_candidates as candidates

    monkeypatch.setattr(candidates, "PROGRESS_EVERY_S", 0.0)
    lines: list[str] = []
    iod(DSeparationOracle(fig1_dag(), OBSERVED), SPLIT, progress=lines.append)
    assert any(line.startswith("IOD enumeration:") for line in lines)
    assert any(line.startswith("IOD validation:") for line in lines)


def test_triples_with_order_of_fig1():
    """A is a collider of order 1 on the discriminating path <B, C, A, D>."""
    dag = fig1_dag()
    mag = dag_to_mag(dag, ["U_AC", "U_AD"])
    found = {(t.x, t.z, t.y): t for t in triples_with_order(mag)}
    c_a_d = found[(2, 0, 3)]
    assert c_a_d.order == 1 and c_a_d.collider and c_a_d.ends == (1, 3)
    assert pag_problem(dag_to_pag(dag, ["U_AC", "U_AD"])) is None
    assert canonical_mag(dag_to_pag(dag, ["U_AC", "U_AD"])) is not None


def test_bad_datasets_are_refused():
    oracle = DSeparationOracle(fig1_dag(), OBSERVED)
    with pytest.raises(ValueError, match=r"no dataset observes the variable\(s\) \['D'\]"):
        iod(oracle, [[0, 1, 2], [0, 2, 4]])
    with pytest.raises(ValueError, match="at least two variables"):
        iod(oracle, [[0, 1, 2, 3, 4], [1]])
    with pytest.raises(ValueError, match="unknown IOD procedure"):
        iod(oracle, SPLIT, procedure="fast")


def test_pag_list_metrics():
    from fedcausal_flwr.discovery.iod_metrics import best_normalised_shd, pag_list_metrics

    dag = fig1_dag()
    truth = dag_to_pag(dag, ["U_AC", "U_AD"])
    other = truth.copy()
    other.remove_edge(truth.index("A"), truth.index("D"))  # a missing edge: 2 entries
    other.marks[truth.index("C"), truth.index("B")] = TAIL  # B o-> C becomes B -> C: 1 entry
    m = pag_list_metrics([truth, other], truth)
    assert m["truth_in_list"] == 1.0 and m["n_pags"] == 2.0
    assert (m["shd_min"], m["shd_max"], m["shd_mean"]) == (0.0, 3.0, 1.5)
    assert m["nshd_max"] == pytest.approx(3 / 20)
    assert m["fdr"] == 0.0  # no extra adjacency
    assert m["for"] == pytest.approx((0 + 1 / 5) / 2)  # other: 5 non-adjacent pairs, 1 wrong
    assert best_normalised_shd([other], [truth, other]) == 0.0
    empty = pag_list_metrics([], truth)
    assert empty["truth_in_list"] == 0.0 and empty["n_pags"] == 0.0 and np.isnan(empty["nshd_min"])


def test_cap_holds_when_the_size_is_only_a_lower_bound(monkeypatch):
    """Beyond EXACT_SIZE_LIMIT edge subsets the size is the bound 2^|RemEdges|; a run that reaches
    the cap anyway must still stop (or be marked partial), never be cut silently."""
    import fedcausal_flwr.discovery.iod_candidates as candidates

    oracle = DSeparationOracle(fig1_dag(), OBSERVED)
    full = iod(oracle, SPLIT)
    monkeypatch.setattr(candidates, "EXACT_SIZE_LIMIT", 1)
    bound = 2 ** len(full.enumeration.removable)
    cap = (bound + full.enumeration.size) // 2
    assert bound <= cap < full.enumeration.size
    with pytest.raises(IODTooLargeError, match=rf"at least {cap + 1:,} candidate graphs"):
        iod(oracle, SPLIT, max_candidates=cap)
    part = iod(oracle, SPLIT, max_candidates=cap, partial=True)
    assert part.partial and not part.enumeration.size_exact
    assert part.enumeration.enumerated == cap


# ---------------------------------------------------------------------------- speed, same results
def enumeration_facts(oracle: DSeparationOracle, sets: list) -> list:
    """Everything a procedure's run reports that the memos could change."""
    out = []
    for proc in PROCEDURES:
        r = iod(oracle, sets, procedure=proc)
        e = r.enumeration
        out.append(([g.marks.tobytes() for g in r.pags], e.candidates, e.enumerated, e.rejected))
    return out


def test_memos_change_no_result_and_hand_out_copies(monkeypatch):
    """The orientation and validation memos (keyed by marks) give the same lists, candidate
    counts and rejection reasons as computing every graph afresh; what they return is the
    caller's to change."""
    from fedcausal_flwr.discovery import iod_candidates as candidates

    memos = (candidates.ORIENTATION_MEMO, candidates.VALIDATION_MEMO)
    rng = np.random.default_rng(7)
    cases = [random_case(rng) for _ in range(12)]
    fresh = []
    for memo in memos:
        memo.clear()
        monkeypatch.setattr(memo, "limit", 0)  # nothing kept: every graph computed afresh
    for dag, observed, _, sets in cases:
        fresh.append(enumeration_facts(DSeparationOracle(dag, observed), sets))
    assert all(len(memo.table) == 0 and memo.hits == 0 for memo in memos)
    for memo in memos:
        monkeypatch.setattr(memo, "limit", 100_000)
    for rounds in range(2):  # cold, then every graph known
        for (dag, observed, _, sets), expected in zip(cases, fresh, strict=True):
            assert enumeration_facts(DSeparationOracle(dag, observed), sets) == expected
        assert all(memo.hits > 0 for memo in memos), rounds
    marks = dag_to_pag(fig1_dag(), ["U_AC", "U_AD"]).marks.copy()
    marks[marks != 0] = 3  # Fig. 1's skeleton with circles and the collider A *-> C <-* B:
    marks[[0, 1], [2, 2]] = ARROW  # the discriminating path <B, C, A, D> makes R4 branch
    first = candidates.orient_with_branching(marks, OBSERVED)
    assert len(first) == 2
    kept = [m.copy() for m in first]
    for m in first:
        m[:] = 0
    again = candidates.orient_with_branching(marks, OBSERVED)
    assert len(again) == len(kept) and all(
        np.array_equal(a, b) for a, b in zip(again, kept, strict=True)
    )
    with pytest.raises(ValueError, match="4 names for a 5x5 graph"):
        candidates.orient_with_branching(marks, OBSERVED[:4])
    for memo in memos:
        memo.clear()


def random_marks(rng: np.random.Generator, p: int) -> np.ndarray:
    """Any mark matrix (not necessarily a PAG): each pair an edge with probability 0.6, each end
    a tail, arrowhead or circle."""
    m = np.zeros((p, p), dtype=np.int8)
    for i in range(p):
        for j in range(i + 1, p):
            if rng.random() < 0.6:
                m[i, j], m[j, i] = rng.integers(1, 4, size=2)
    return m


def reference_r3(m: np.ndarray) -> int:
    """R3's sweep over every circle, without the pre-filter."""
    from fedcausal_flwr.graphs.marks import non_adjacent_mask

    na, n = non_adjacent_mask(m), 0
    for d, b in zip(*np.nonzero(m == 3), strict=True):
        s = (m[:, b] == ARROW) & (m[:, d] == 3)
        if s.sum() >= 2 and na[np.ix_(s, s)].any():
            m[d, b] = ARROW
            n += 1
    return n


def reference_r4(m: np.ndarray, ctx) -> int:
    """R4's sweep with c's parents read for every b, without the pre-filter."""
    from fedcausal_flwr.graphs import fci_rules

    n = 0
    for c in range(m.shape[0]):
        for b in np.flatnonzero(m[c] == 3).tolist():
            for a in np.flatnonzero((m[:, c] == ARROW) & (m[c, :] == TAIL)).tolist():
                if a == b or m[b, a] != ARROW:
                    continue
                if fci_rules._orient_discriminated(m, ctx, a, b, c):
                    n += 1
                    break
    return n


def test_r3_r4_prefilters_change_nothing():
    """R3 and R4 skip the sweep (or the nodes) where nothing can fire and read c's parents once
    per orientation: the same marks, counts and discriminating paths asked, in the same order,
    as the plain sweeps, on arbitrary mark matrices."""
    from fedcausal_flwr.graphs import fci_rules
    from fedcausal_flwr.graphs.fci_context import FCIContext

    rng = np.random.default_rng(11)
    fired = {"R3": 0, "R4": 0}
    for case in range(600):
        m = random_marks(rng, int(rng.integers(4, 8)))
        asked: dict[str, list] = {"ours": [], "reference": []}

        def decide(paths: list):
            def decision(dp):
                paths.append(dp.path)
                return (None, True, False)[sum(dp.path) % 3]

            return decision

        ours, ref = m.copy(), m.copy()
        n3 = fci_rules._zhang_r3(ours)
        assert n3 == reference_r3(ref) and np.array_equal(ours, ref), case
        ctx = {w: FCIContext(None, "standard", None, decide(asked[w]), True, -1) for w in asked}
        n4 = fci_rules._zhang_r4(ours, ctx["ours"])
        assert n4 == reference_r4(ref, ctx["reference"]) and np.array_equal(ours, ref), case
        assert asked["ours"] == asked["reference"], case
        fired["R3"] += n3 > 0
        fired["R4"] += n4 > 0
    assert fired["R3"] > 5 and fired["R4"] > 5, fired


@pytest.mark.slow
def test_fedci_iod_study_rows_do_not_depend_on_jobs():
    """The experiment computes oracle IOD once per graph and may run graphs in worker
    processes: the rows are those of independent one_run calls, in run order, for any --jobs."""
    import argparse

    from fedcausal_flwr.experiments import fedci_iod as experiment

    args = argparse.Namespace(graphs=2, graph_seed=2024, seeds=1, sites=[4], sizes=[500, 1000],
                              max_candidates=50_000, jobs=1)  # fmt: skip
    serial = experiment.study(args)
    args.jobs = 2
    parallel = experiment.study(args)
    pool = experiment.graph_pool(2, 2024)
    rows = []
    for n in (500, 1000):
        for graph in pool:
            rows += experiment.one_run(graph, n, 4, 10000, 50_000)
    cols = ["method", "best_nshd", "empty", "too_large", "n_pags"]
    direct = [[row[c] for c in cols] for row in rows]
    for frame in (serial, parallel):
        assert frame["run"].tolist() == [r for r in range(4) for _ in range(3)]
        assert frame[cols].astype(object).values.tolist() == direct
