"""FedCDnv's mathematics without Flower: Eq. (2), Level 2 (hand-worked examples of Eqs. (1)-(3)),
the status matrix (Theorem 3.1, Lemmas 3.2 / 3.3), Level 1 (Conditions 3.6 / 3.7), C-Update, G0,
FeddG and the recorded local FCI, with perfect d-separation oracles where the theory applies."""

from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

from fedcausal_flwr.data.synthetic import choose_latents, random_dag
from fedcausal_flwr.discovery.driver import drive
from fedcausal_flwr.discovery.tpss import TPSSOptions, transform_pvalues
from fedcausal_flwr.discovery.tpss_local import local_fci
from fedcausal_flwr.discovery.tpss_select import (
    level1_explains,
    level2_values,
    majority_adjacency,
    restrict_to_definite,
    tpss_adjacency,
    transfer_arrowheads,
    weighted_adjacency,
)
from fedcausal_flwr.discovery.tpss_union import (
    embed,
    observed_mask,
    overlap_matrix,
    status_matrix,
    stitch_order,
    union_graph,
)
from fedcausal_flwr.discovery.tpss_update import c_update_steps
from fedcausal_flwr.graphs.fci_rules import apply_fci_rules
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.graphs.truth import dag_to_mag, dag_to_pag
from fedcausal_flwr.stats.oracles import DiscreteOracle, DSeparationOracle, TableOracle

SIZES = [1000, 500, 500]
P_A = np.array([0.0002, 0.2, 0.7])  # hand-worked example of Eqs. (1)-(3): c1 adjacent, c2, c3 not
ADJ_A = np.array([True, False, False])


def marks_of(d, edges):
    """``d x d`` marks from ``(i, j, mark_at_i, mark_at_j)`` rows."""
    g = Graph.empty([f"V{k}" for k in range(d)], "PAG")
    for i, j, mi, mj in edges:
        g.set_edge(i, j, mi, mj)
    return g.marks


def value(adjacent, p, status, options=None, sizes=SIZES):
    options = options or TPSSOptions()
    ptil = transform_pvalues(p, options.alpha, options.theta1, options.theta2)
    observed = np.ones(len(p), dtype=bool)
    return float(level2_values(adjacent, ptil, observed, sizes, np.array(status), options))


# ============================================================================ Eq. (2)
def test_pvalue_transform_scales_the_band_and_sends_the_rest_raw():
    p = np.array([0.0009, 0.001, 0.0255, 0.05, 0.275, 0.5, 0.5001, np.nan])
    ptil = transform_pvalues(p)
    assert ptil[0] == 0.0009 and ptil[6] == 0.5001  # outside [0.001, 0.5]: raw
    assert ptil[1] == pytest.approx(-1.0) and ptil[5] == pytest.approx(-1.0)  # band edges
    assert ptil[2] == pytest.approx(-0.5) and ptil[4] == pytest.approx(-0.5)
    assert ptil[3] == 0.0 and np.signbit(ptil[3])  # p = alpha: in the band, phat = 0
    assert np.isnan(ptil[7])


# ============================================================================ Level 2
def test_level2_reproduces_the_hand_worked_examples():
    # Case A, stat = +2: c1 stable (+1), c2 in band (phat 1/3), c3 stable non-causal (-1)
    assert value(ADJ_A, P_A, 2) == pytest.approx(float(Fraction(1, 7)), abs=1e-12)  # 0.1429
    # Case B, stat = +1: nobody stable; phat = raw 0.0002, 1/3, raw 0.7
    phat = np.array([0.0002, 1 / 3, 0.7])
    w = phat * 3 / phat.sum()
    expected = 0.5 * w[0] - 0.25 * w[1] - 0.25 * w[2]
    assert value(ADJ_A, P_A, 1) == pytest.approx(expected, abs=1e-12)
    assert value(ADJ_A, P_A, 1) == pytest.approx(-0.7496, abs=1e-4)
    assert w[2] > 1  # Eq. (3) can exceed the paper's claimed bound 1


def test_level2_options_change_the_arithmetic_as_documented():
    # numerator #non-stable: w(c2) = (1/3) * 1 / (1/3 + 2) = 1/7; val = 1/2 - 1/28 - 1/4 = 3/14
    nonstable = TPSSOptions(w_numerator="nonstable")
    assert value(ADJ_A, P_A, 2, nonstable) == pytest.approx(3 / 14, abs=1e-12)
    # clip: c3's 2.03 becomes 1
    phat = np.array([0.0002, 1 / 3, 0.7])
    w = np.minimum(phat * 3 / phat.sum(), 1.0)
    clipped = 0.5 * w[0] - 0.25 * w[1] - 0.25 * w[2]
    assert value(ADJ_A, P_A, 1, TPSSOptions(clip_w=True)) == pytest.approx(clipped, abs=1e-12)
    # out-of-band phat = 1: phat = 1, 1/3, 1 -> w = 9/7, 3/7, 9/7 -> val = 9/14 - 3/28 - 9/28
    ones = TPSSOptions(out_of_band="one")
    assert value(ADJ_A, P_A, 1, ones) == pytest.approx(9 / 14 - 3 / 28 - 9 / 28, abs=1e-12)
    # signed reading: with stat = +2 a non-adjacent client is never stable (c3 phat = 0.7 raw)
    signed = TPSSOptions(stable_reading="signed")
    ns = np.array([1 / 3, 0.7])
    w2, w3 = ns * 3 / (ns.sum() + 1)
    assert value(ADJ_A, P_A, 2, signed) == pytest.approx(0.5 - 0.25 * w2 - 0.25 * w3, abs=1e-12)


def test_level2_edge_cases():
    # every client non-stable with phat = 0 (p = alpha): zero denominator, w = 0, val = 0
    p = np.array([0.05, 0.05])
    assert value(np.array([True, False]), p, 1, sizes=[10, 10]) == 0.0
    # a client that does not observe the pair neither votes nor counts in n'
    ptil = transform_pvalues(np.array([0.0001, 0.9, 0.9]))
    observed = np.array([True, True, False])
    val = level2_values(ADJ_A, ptil, observed, [100, 300, 10_000], np.array(2), TPSSOptions())
    assert float(val) == pytest.approx(0.25 * 1 - 0.75 * 1)
    # shapes are checked
    with pytest.raises(ValueError, match="shapes differ"):
        level2_values(ADJ_A, ptil[:2], observed, SIZES, np.array(2))


def test_options_validate():
    with pytest.raises(ValueError, match="theta1"):
        TPSSOptions(theta1=0.06)
    with pytest.raises(ValueError, match="level1"):
        TPSSOptions(level1="both")
    assert TPSSOptions(theta2=0.3).band == (0.001, 0.35)


# ============================================================================ G0 and stat
def test_union_graph_keeps_arrowheads_and_drops_tails():
    # paper: Xi o-o Xj, Xi o-> Xj, Xi --> Xj combine to Xi o-> Xj; opposite arrowheads give <->
    stack = np.stack(
        [
            marks_of(3, [(0, 1, CIRCLE, CIRCLE), (1, 2, ARROW, TAIL)]),
            marks_of(3, [(0, 1, CIRCLE, ARROW), (1, 2, TAIL, ARROW)]),
            marks_of(3, [(0, 1, TAIL, ARROW)]),
        ]
    )
    g0 = union_graph(stack)
    assert (g0[1, 0], g0[0, 1]) == (CIRCLE, ARROW)
    assert (g0[2, 1], g0[1, 2]) == (ARROW, ARROW)
    assert g0[0, 2] == g0[2, 0] == NONE


def test_identical_variable_sets_make_every_pair_definite():
    overlap = overlap_matrix(np.ones((3, 5), dtype=bool))
    adjacency = np.zeros((5, 5), dtype=bool)
    adjacency[0, 1] = adjacency[1, 0] = adjacency[1, 2] = adjacency[2, 1] = True
    stat = status_matrix(adjacency, overlap)
    upper = stat[np.triu_indices(5, 1)]
    assert set(upper.tolist()) == {-2, 2}
    assert stat[0, 1] == stat[1, 2] == 2 and stat[0, 2] == -2


def pattern(d, clients, edges):
    """(adjacency, overlap) of a hand-built overlap pattern."""
    adjacency = np.zeros((d, d), dtype=bool)
    for i, j in edges:
        adjacency[i, j] = adjacency[j, i] = True
    return adjacency, overlap_matrix(observed_mask(clients, d))


def test_theorem_3_1_settles_a_non_overlapping_pair():
    # X=0 and Y=1 never together; A_X = {2}, A_Y = {3}; 2 is seen with Y, 3 with X
    adjacency, overlap = pattern(4, [[0, 2, 3], [1, 2, 3]], [(0, 2), (1, 3)])
    assert not overlap[0, 1]
    stat = status_matrix(adjacency, overlap)
    assert stat[0, 1] == stat[1, 0] == -2
    # Lemma 3.3 still uses the settled pair {0, 1}: pair (2, 3) has 0 and 1 around it
    assert stat[2, 3] == -1
    assert stat[0, 2] == stat[1, 3] == 2  # no unresolved pair touches them, {0,1} not around


@pytest.mark.parametrize(
    ("clients", "edges", "why"),
    [
        ([[0, 2, 3], [1, 2, 3]], [(0, 2), (1, 2)], "common neighbour"),
        ([[0, 2, 3], [1, 2, 3]], [(1, 3)], "X has no neighbour"),
        ([[0, 2], [1, 3], [2, 3], [0, 3]], [(0, 2), (1, 3)], "2 (next to X) never seen with Y"),
    ],
)
def test_theorem_3_1_fails_for_each_missing_condition(clients, edges, why):
    adjacency, overlap = pattern(4, clients, edges)
    assert not overlap[0, 1], why
    stat = status_matrix(adjacency, overlap)
    assert stat[0, 1] == -1, why


def test_lemmas_3_2_and_3_3_and_their_scope():
    # 0 and 1 never together and unresolved (common neighbour 2): Z_n = {0, 1}
    adjacency, overlap = pattern(5, [[0, 2, 3, 4], [1, 2, 3, 4]], [(0, 2), (1, 2), (3, 4)])
    stat = status_matrix(adjacency, overlap)
    assert stat[0, 1] == -1
    assert stat[0, 2] == stat[1, 2] == 1  # Lemma 3.2 (adjacent pairs)
    assert stat[0, 3] == -1  # Lemma 3.2 on a non-adjacent overlapping pair (scope "all")
    assert stat[3, 4] == 2  # untouched
    # Lemma 3.3 alone: 2 - 3 is not in Z_n, but the settled pair {0, 1} lies around it
    adjacency, overlap = pattern(4, [[0, 2, 3], [1, 2, 3]], [(0, 2), (1, 3), (2, 3)])
    stat = status_matrix(adjacency, overlap)
    assert stat[0, 1] == -2 and stat[2, 3] == 1
    assert stat[0, 2] == stat[1, 3] == 2 and stat[0, 3] == -2
    adjacency, overlap = pattern(4, [[0, 2, 3], [1, 2, 3]], [(0, 2), (1, 3)])
    narrow = status_matrix(adjacency, overlap, lemma_scope="adjacent")
    assert narrow[2, 3] == -2  # non-adjacent pairs are not downgraded with scope "adjacent"
    with pytest.raises(ValueError, match="never observed together"):
        status_matrix(np.ones((2, 2), dtype=bool), np.eye(2, dtype=bool))


def oracle_round1(dag, latent, clients):
    """Clients' oracle FCI (global ids = order of the observed DAG nodes), G0, overlap, stat."""
    observed = [v for v in dag.names if v not in set(latent)]
    d = len(observed)
    results, marks = [], []
    for ids in clients:
        oracle = DSeparationOracle(dag, [observed[v] for v in ids])
        results.append(local_fci(oracle))
        marks.append(embed(results[-1].graph.marks, ids, d))
    mask = observed_mask(clients, d)
    g0 = union_graph(np.stack(marks))
    overlap = overlap_matrix(mask)
    return results, np.stack(marks), mask, g0, status_matrix(g0 != NONE, overlap)


def test_spurious_dependencies_around_a_pair_never_observed_together():
    """The situation of the paper's Fig. 1: E and F never together make A - E (client 1) and
    F - C (client 2) spurious; the theory flags every relation around them as non-definite."""
    names = ["A", "F", "E", "C"]
    dag = Graph.from_edges(names, [("A", "F"), ("F", "E"), ("E", "C")])
    a, f, e, c = range(4)
    _, marks, _, g0, stat = oracle_round1(dag, [], [[a, e, c], [a, f, c]])
    adjacent = g0 != NONE
    assert adjacent[a, e] and adjacent[f, c]  # spurious, from the relative latents
    assert stat[e, f] == -1  # unknown: never observed together (truly adjacent)
    assert stat[a, e] == stat[f, c] == stat[a, f] == stat[e, c] == 1  # Lemma 3.2
    assert stat[a, c] == -1  # Lemma 3.3: {E, F} around A and C


def test_the_paper_fig3_situation_rules_on_g0_misorient():
    """Reconstructed from Fig. 3's caption: Zhang's rules on G0 give B --> E where the truth is
    E --> B (X and E are non-adjacent in G0 only because no client observes them together)."""
    names = ["X", "C", "B", "E"]
    dag = Graph.from_edges(names, [("X", "B"), ("C", "B"), ("E", "B")])
    x, c, b, e = range(4)
    results, marks, mask, g0, stat = oracle_round1(dag, [], [[x, c, b], [b, e]])
    rules_on_g0 = Graph(tuple(names), g0, "PAG")
    apply_fci_rules(rules_on_g0, None, mode="zhang")
    assert rules_on_g0.is_directed(b, e)  # the misorientation the paper warns about
    assert dag_to_pag(dag, []).marks[b, e] != ARROW  # truth: no arrowhead at E
    assert stat[x, e] == stat[c, e] == -1 and stat[b, e] == 1  # a common neighbour B
    # FedCDnv instead: C-Update (nothing to import for client 2) and the arrowhead union
    updated = []
    for ids, res in zip([[x, c, b], [b, e]], results, strict=True):
        oracle = DSeparationOracle(dag, [names[v] for v in ids])
        updated.append(embed(drive(c_update_steps(res.graph, ids, g0), oracle).graph.marks, ids, 4))
    fedg = transfer_arrowheads(g0 != NONE, np.stack(updated))
    assert fedg[b, e] != ARROW
    truth = dag_to_pag(dag, []).marks
    assert np.all(truth[fedg == ARROW] == ARROW)


def test_the_paper_theory_is_not_sound_for_separators_never_seen_with_both_ends():
    """X -> A -> Y with clients {X, A}, {A, Y}, {X, Y}: every pair overlaps (A2.3 holds), so
    stat has no non-overlapping pair and calls the spurious X - Y adjacency definite (+2)."""
    dag = Graph.from_edges(["X", "A", "Y"], [("X", "A"), ("A", "Y")])
    _, _, _, g0, stat = oracle_round1(dag, [], [[0, 1], [1, 2], [0, 2]])
    assert g0[0, 2] != NONE and stat[0, 2] == 2
    assert dag_to_mag(dag, []).marks[0, 2] == NONE


@pytest.mark.parametrize("seed", range(6))
def test_definite_non_edges_are_sound_under_an_oracle(seed):
    """Theorem 3.1 / the lemmas' -2 pairs are non-adjacent in the true MAG (structured splits:
    client i drops a contiguous block, which leaves pairs never observed together)."""
    dag = random_dag(12, 2.5, seed=seed)
    latent = choose_latents(dag, 0.15, seed=seed)
    d = dag.n_nodes - len(latent)
    clients = [[v for v in range(d) if (v - (i * d) // 4) % d >= 3] for i in range(4)]
    _, _, _, g0, stat = oracle_round1(dag, latent, clients)
    truth = dag_to_mag(dag, latent).marks != NONE
    assert np.any(stat == -2) and np.any(stat == -1)
    assert not np.any(truth & (stat == -2))


# ============================================================================ Level 1
def level1_setup():
    """Xi=0, Xj=1 separated only by {A=2, B=3}: client 0 sees {0,1,2,3} (non-adjacent, sepset
    {2,3}), client 1 sees {0,1,2} and reports 0 o-o 1."""
    marks = np.stack(
        [
            marks_of(4, [(0, 2, CIRCLE, CIRCLE), (1, 3, CIRCLE, CIRCLE)]),
            marks_of(4, [(0, 1, CIRCLE, CIRCLE), (0, 2, CIRCLE, CIRCLE)]),
        ]
    )
    observed = observed_mask([[0, 1, 2, 3], [0, 1, 2]], 4)
    sepsets = [{(0, 1): (2, 3), (0, 3): (), (1, 2): (), (2, 3): ()}, {(1, 2): ()}]
    return marks, observed, sepsets


def test_condition_3_7_removes_an_edge_whose_separator_the_reporter_cannot_observe():
    marks, observed, sepsets = level1_setup()
    explained, reasons = level1_explains(0, 1, [1], [0], marks, observed, sepsets)
    assert explained and "3.7" in reasons[1]
    # the separator inside the reporter's variables, or empty: a CI error, left to Level 2
    for sep in [(2,), ()]:
        changed = [{**sepsets[0], (0, 1): sep}, sepsets[1]]
        assert not level1_explains(0, 1, [1], [0], marks, observed, changed)[0]
    # a tailed edge is not covered by either condition
    tailed = marks.copy()
    tailed[1][1, 0], tailed[1][0, 1] = TAIL, ARROW
    assert not level1_explains(0, 1, [1], [0], tailed, observed, sepsets)[0]
    assert not level1_explains(0, 1, [1], [0], marks, observed, sepsets, rule="off")[0]


def test_condition_3_6_removes_a_bidirected_edge_explained_by_a_hidden_confounder():
    # Xi=0 <- Y=2 -> Xj=1; client 0 sees Y: 0 <-o 2 o-> 1; client 1 lacks Y: 0 <-> 1
    marks = np.stack(
        [
            marks_of(3, [(2, 0, CIRCLE, ARROW), (2, 1, CIRCLE, ARROW)]),
            marks_of(3, [(0, 1, ARROW, ARROW)]),
        ]
    )
    observed = observed_mask([[0, 1, 2], [0, 1]], 3)
    sepsets = [{(0, 1): (2,)}, {}]
    assert level1_explains(0, 1, [1], [0], marks, observed, sepsets)[0]
    tails = marks.copy()
    tails[0][0, 2] = tails[0][1, 2] = TAIL  # 0 <-- 2 --> 1
    assert level1_explains(0, 1, [1], [0], tails, observed, sepsets)[0]
    assert not level1_explains(0, 1, [1], [0], tails, observed, sepsets, tail_at_confounder=False)[
        0
    ]
    both = observed_mask([[0, 1, 2], [0, 1, 2]], 3)  # the reporter sees Y too: no explanation
    assert not level1_explains(0, 1, [1], [0], marks, both, sepsets)[0]


def test_level1_rules_every_reporter_or_any_reporter():
    marks, observed, sepsets = level1_setup()
    # a third client sees everything and reports 0 o-o 1: its edge is not explained
    extra = marks_of(4, [(0, 1, CIRCLE, CIRCLE)])
    marks3 = np.concatenate([marks, extra[None]])
    observed3 = np.vstack([observed, np.ones((1, 4), dtype=bool)])
    sepsets3 = [*sepsets, {}]
    assert not level1_explains(0, 1, [1, 2], [0], marks3, observed3, sepsets3)[0]
    assert level1_explains(0, 1, [1, 2], [0], marks3, observed3, sepsets3, rule="any")[0]


def test_tpss_adjacency_runs_level1_then_level2_on_disagreements_only():
    marks, observed, sepsets = level1_setup()
    ptil = np.full((2, 4, 4), np.nan)
    ptil[0][np.ix_([0, 1, 2, 3], [0, 1, 2, 3])] = 0.9
    ptil[1][np.ix_([0, 1, 2], [0, 1, 2])] = 0.9
    for k, m in enumerate(marks):
        ptil[k][m != NONE] = 0.0
    status = np.full((4, 4), 2)
    adjacency, decisions = tpss_adjacency(marks, observed, ptil, [10, 1000], status, sepsets)
    assert not adjacency[0, 1]  # Level 1, although the larger client reports the edge
    assert [(d.pair, d.level) for d in decisions] == [((0, 1), 1)]
    assert adjacency[0, 2] and adjacency[1, 3]  # consensus
    off = TPSSOptions(level1="off")
    adjacency, decisions = tpss_adjacency(marks, observed, ptil, [10, 1000], status, sepsets, off)
    assert adjacency[0, 1] and decisions[0].level == 2
    assert decisions[0].value == pytest.approx(1000 / 1010 - 10 / 1010)


# ============================================================================ votes, FedG, FeddG
def test_majority_and_weighted_votes_break_ties_towards_no_edge():
    marks = np.stack([marks_of(2, [(0, 1, CIRCLE, CIRCLE)]), np.zeros((2, 2), dtype=np.int8)])
    observed = np.ones((2, 2), dtype=bool)
    assert not majority_adjacency(marks, observed)[0, 1]
    assert not weighted_adjacency(marks, observed, [5, 5])[0, 1]
    assert weighted_adjacency(marks, observed, [6, 5])[0, 1]
    assert not weighted_adjacency(marks, observed, [5, 6])[0, 1]
    # a client not observing the pair does not vote
    observed[1] = [True, False]
    assert majority_adjacency(marks, observed)[0, 1]


def test_arrowhead_transfer_and_consensus_tails():
    marks = np.stack(
        [
            marks_of(3, [(0, 1, TAIL, ARROW), (1, 2, TAIL, CIRCLE)]),
            marks_of(3, [(0, 1, TAIL, CIRCLE), (1, 2, TAIL, TAIL)]),
        ]
    )
    adjacency = (marks != NONE).any(axis=0)
    fedg = transfer_arrowheads(adjacency, marks)
    assert (fedg[1, 0], fedg[0, 1]) == (CIRCLE, ARROW) and (fedg[2, 1], fedg[1, 2]) == (
        CIRCLE,
        CIRCLE,
    )
    tails = transfer_arrowheads(adjacency, marks, tails="consensus")
    assert (tails[1, 0], tails[0, 1]) == (TAIL, ARROW)
    assert (tails[2, 1], tails[1, 2]) == (TAIL, CIRCLE)  # one client has a circle at 2


def test_feddg_keeps_definite_edges_and_definite_non_edges():
    fedg = marks_of(3, [(0, 1, CIRCLE, ARROW), (1, 2, CIRCLE, CIRCLE)])
    status = np.array([[0, 2, -2], [2, 0, 1], [-2, 1, 0]])
    feddg, edges, non_edges = restrict_to_definite(fedg, status)
    assert feddg[0, 1] == ARROW and feddg[1, 2] == NONE
    assert edges[0, 1] and not edges[1, 2] and non_edges[0, 2]
    # a definite pair TPSS removed is neither a definite edge nor a definite non-edge
    status[1, 2] = status[2, 1] = 2
    fedg[1, 2] = fedg[2, 1] = NONE
    _, edges, non_edges = restrict_to_definite(fedg, status)
    assert not edges[1, 2] and not non_edges[1, 2]


def test_stitch_order_respects_every_client_order():
    assert stitch_order([["X1", "X3", "X4"], ["X2", "X3"], ["X1", "X2"]]) == [
        "X1",
        "X2",
        "X3",
        "X4",
    ]
    assert stitch_order([["a", "b"], ["b", "a"]]) == ["a", "b"]  # conflicting: first appearance


# ============================================================================ C-Update
def test_c_update_imports_only_the_arrowheads_at_the_collider():
    # G0: 0 *-> 1 <-* 2 (0, 2 non-adjacent); the client sees all three as 0 o-o 1 o-o 2
    g0 = marks_of(3, [(0, 1, CIRCLE, ARROW), (2, 1, TAIL, ARROW)])
    pag0 = Graph(("a", "b", "c"), marks_of(3, [(0, 1, CIRCLE, CIRCLE), (1, 2, CIRCLE, CIRCLE)]))
    oracle = TableOracle({}, ["a", "b", "c"], default=0.0)
    result = drive(c_update_steps(pag0, [0, 1, 2], g0), oracle)
    m = result.graph.marks
    assert m[0, 1] == ARROW and m[2, 1] == ARROW
    assert m[1, 0] == CIRCLE and m[1, 2] == CIRCLE  # the other ends are left alone
    assert result.imported == [(0, 1, 2)] and oracle.n_asked == 0


def test_c_update_orients_away_from_the_collider_after_a_local_test():
    # G0: 0 *-> 1 <-* 2; the client sees 0, 1, 3 (not 2): 0 o-o 1 o-o 3, 0 and 3 non-adjacent
    g0 = marks_of(4, [(0, 1, CIRCLE, ARROW), (2, 1, CIRCLE, ARROW), (1, 3, CIRCLE, CIRCLE)])
    names = ["a", "b", "d"]
    pag0 = Graph(tuple(names), marks_of(3, [(0, 1, CIRCLE, CIRCLE), (1, 2, CIRCLE, CIRCLE)]))
    independent = TableOracle({("a", "d", ("b",)): 0.8}, names, default=0.0)
    result = drive(c_update_steps(pag0, [0, 1, 3], g0), independent)
    assert result.propagated == [(1, 2)] and result.graph.is_directed(1, 2)
    assert independent.n_asked == 1  # Z = {} plus Y; no other neighbour of Y to add
    dependent = TableOracle({}, names, default=0.01)
    assert drive(c_update_steps(pag0, [0, 1, 3], g0), dependent).graph == pag0
    # an arrowhead already at Y on Y - B: no test, no change
    arrow_at_y = pag0.copy()
    arrow_at_y.marks[2, 1] = ARROW
    blocked = TableOracle({}, names, default=0.9)
    assert drive(c_update_steps(arrow_at_y, [0, 1, 3], g0), blocked).graph == arrow_at_y
    assert blocked.n_asked == 0


def test_c_update_caps_the_extra_conditioning_sets():
    # Y = 1 with neighbours 0 (X), 2 (B), 3, 4, 5: Z ranges over subsets of {3, 4, 5}
    g0 = marks_of(7, [(0, 1, CIRCLE, ARROW), (6, 1, CIRCLE, ARROW)])
    names = [f"v{k}" for k in range(6)]
    edges = [(0, 1, CIRCLE, CIRCLE)] + [(1, k, CIRCLE, CIRCLE) for k in range(2, 6)]
    pag0 = Graph(tuple(names), marks_of(6, edges))
    for depth, expected in [(0, 1), (1, 4), (None, 8)]:
        oracle = TableOracle({}, names, default=0.0)
        result = drive(c_update_steps(pag0, list(range(6)), g0, max_depth=depth), oracle)
        assert result.n_queries == 4 * expected  # four choices of B, each with its Z sets


# ============================================================================ local FCI records
def test_local_fci_records_the_max_pvalue_of_every_test_and_a_separating_set():
    rng = np.random.default_rng(4)
    z = rng.integers(0, 2, 600)
    x = (z ^ (rng.random(600) < 0.15)).astype(int)
    y = (z ^ (rng.random(600) < 0.15)).astype(int)
    w = rng.integers(0, 3, 600)
    codes = np.column_stack([x, y, z, w])
    names = ["x", "y", "z", "w"]
    oracle = DiscreteOracle(codes, [2, 2, 2, 3], names, test="g2")
    record = local_fci(oracle, 0.05)
    # by hand: x - z - y with z separating x and y (a non-collider), w independent of all; no
    # orientation rule applies, so the PAG is x o-o z o-o y
    expected_pag = Graph.from_edges(
        names, [("x", "z", "circle", "circle"), ("z", "y", "circle", "circle")], kind="PAG"
    )
    assert record.graph == expected_pag
    # FCI's tests, by hand: level 0 all six pairs (w drops out); level 1 each remaining pair
    # given the third of x, y, z (x - y drops out); no pair has a Possible-D-Sep subset of size
    # >= 2 and no R4 path, so nothing else is asked. Max p-value per pair, from a fresh oracle.
    asked = [(0, 1, ()), (0, 2, ()), (0, 3, ()), (1, 2, ()), (1, 3, ()), (2, 3, ()),
             (0, 1, (2,)), (0, 2, (1,)), (1, 2, (0,))]  # fmt: skip
    fresh = DiscreteOracle(codes, [2, 2, 2, 3], names, test="g2")
    expected = np.full((4, 4), np.nan)
    for a, b, s in asked:
        expected[a, b] = expected[b, a] = np.fmax(expected[a, b], fresh.test(a, b, s))
    np.testing.assert_array_equal(record.max_pvalues, expected)
    assert record.n_tests == len(asked)
    adjacent = record.graph.adjacency()
    for a, b in combinations(range(4), 2):
        if adjacent[a, b]:
            assert record.max_pvalues[a, b] <= 0.05
        else:
            sepset = record.sepsets[(a, b)]
            assert record.max_pvalues[a, b] > 0.05
            assert oracle.test(a, b, sepset) > 0.05
    assert record.sepsets[(0, 1)] == (2,)
