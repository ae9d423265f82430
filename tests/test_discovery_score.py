"""BDeu scorer and skeleton-restricted tabu hill climbing (FedECD Phase 2).

Local scores against pgmpy's BDeu and causal-learn's local_score_BDeu; the incremental search
against a from-scratch reference search (networkx reachability, every move re-scored every
iteration) in greedy, tabu and tril-compat modes; greedy mode against pgmpy's HillClimbSearch on
a tie-free score; recovery of the true CPDAG on Asia and Child.
"""

import math
import warnings
from collections import deque
from itertools import combinations

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from fedcausal_flwr.data import (
    codes_to_frame,
    load_network,
    random_dag,
    random_discrete_network,
    sample_codes,
)
from fedcausal_flwr.discovery.score import BDeuScorer, hill_climb
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.graphs.truth import dag_to_cpdag, directed_matrix

LN_PRIOR = math.log(1.0 / 11.0)  # per parent at ess = 10


def pgmpy_bdeu(df: pd.DataFrame, states: dict, ess: float = 10.0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        from pgmpy.structure_score import BDeu

        return BDeu(df, equivalent_sample_size=ess, state_names=states)


def random_codes(n: int, cards: list[int], seed: int, observed: list[int] | None = None):
    """Dependent codes: each column mixes a random function of the previous one with noise."""
    rng = np.random.default_rng(seed)
    observed = observed or cards
    cols = [rng.integers(0, observed[0], n)]
    for k, level in enumerate(observed[1:], start=1):
        mapped = (cols[-1] + k) % level
        cols.append(np.where(rng.random(n) < 0.6, mapped, rng.integers(0, level, n)))
    return np.column_stack(cols).astype(np.int8)


# ----------------------------------------------------------------------------- local scores
def test_local_scores_match_pgmpy_and_prior_adds_ln_one_over_eleven():
    cards = [2, 3, 4, 2, 3]
    codes = random_codes(400, cards, seed=1)
    assert all(np.unique(codes[:, j]).size == c for j, c in enumerate(cards))
    names = [f"V{j}" for j in range(len(cards))]
    df = pd.DataFrame(codes.astype(np.int64), columns=names)
    states = {v: list(range(c)) for v, c in zip(names, cards, strict=True)}
    for ess in (10.0, 2.5):
        ref = pgmpy_bdeu(df, states, ess)
        plain = BDeuScorer(codes, cards, ess, structure_prior=False)
        prior = BDeuScorer(codes, cards, ess, structure_prior=True)
        checked = 0
        for child in range(len(cards)):
            others = [v for v in range(len(cards)) if v != child]
            for size in range(4):
                for parents in combinations(others, size):
                    expected = ref.local_score(names[child], tuple(names[v] for v in parents))
                    assert plain.local(child, parents) == pytest.approx(expected, abs=1e-8)
                    gap = prior.local(child, parents) - plain.local(child, parents)
                    assert gap == pytest.approx(size * math.log(1 / (ess + 1)), abs=1e-12)
                    checked += 1
        assert checked == 5 * (1 + 4 + 6 + 4)
    # parents listed in any order hit the same cached family
    scorer = BDeuScorer(codes, cards, structure_prior=False)
    assert scorer.local(0, (3, 1)) == scorer.local(0, [1, 3])
    assert scorer.n_computed == 1 and scorer.n_requests == 2


def causallearn_bdeu(codes, child, parents, cards, ess=10.0):
    """causal-learn's local_score_BDeu without its own structure-prior term."""
    from causallearn.score.LocalScoreFunction import local_score_BDeu

    params = {"sample_prior": ess, "structure_prior": 1.0, "r_i_map": dict(enumerate(cards))}
    vm, size = len(cards) - 1, len(parents)
    prior = size * math.log(1 / vm) + (vm - size) * math.log(1 - 1 / vm)
    return local_score_BDeu(np.asarray(codes, dtype=np.int64), child, list(parents), params) - prior


def test_wide_parent_sets_use_observed_configurations():
    # 14 variables with 10 levels: 13 parents give q = 1e13 configurations (compressed twice)
    rng = np.random.default_rng(3)
    base = rng.integers(0, 10, size=(300, 1))
    codes = (base + rng.integers(0, 3, size=(300, 14))) % 10
    names = [f"W{j}" for j in range(14)]
    scorer = BDeuScorer(codes, [10] * 14, structure_prior=False)
    for parents in [(1, 2, 3), (1, 2, 3, 4, 5, 6), tuple(range(1, 14))]:
        expected = causallearn_bdeu(codes, 0, parents, [10] * 14)
        assert scorer.local(0, parents) == pytest.approx(expected, abs=1e-9)
    # pgmpy agrees while q is moderate; it sums q * lnG(ess/q) terms that cancel, so it drifts
    # (1e-8 at q = 1e6, 0.28 at q = 1e13)
    ref = pgmpy_bdeu(pd.DataFrame(codes, columns=names), {v: list(range(10)) for v in names})
    pgmpy_score = ref.local_score("W0", ("W1", "W2", "W3"))
    assert scorer.local(0, (1, 2, 3)) == pytest.approx(pgmpy_score, abs=1e-8)


def test_cards_larger_than_observed_levels():
    cards = [3, 4, 5, 2]
    codes = random_codes(250, cards, seed=4, observed=[2, 3, 5, 2])  # V0, V1 miss a level
    scorer = BDeuScorer(codes, cards, 10.0, structure_prior=False)
    smaller = BDeuScorer(codes, [2, 3, 5, 2], 10.0, structure_prior=False)
    for child in range(4):
        others = [v for v in range(4) if v != child]
        for size in range(3):
            for parents in combinations(others, size):
                expected = causallearn_bdeu(codes, child, parents, cards)
                assert scorer.local(child, parents) == pytest.approx(expected, abs=1e-8)
    # the given cards matter (they set ess/q and ess/(q r)) even where a level is never seen
    assert scorer.local(0, (2,)) != pytest.approx(smaller.local(0, (2,)), abs=1e-6)
    # by hand: one child state observed n times out of r = 4, no parents
    n, r, ess = 7, 4, 10.0
    one_level = BDeuScorer(np.zeros((n, 1), dtype=np.int64), [r], ess, structure_prior=False)
    by_hand = (
        math.lgamma(ess) - math.lgamma(ess + n) + math.lgamma(ess / r + n) - math.lgamma(ess / r)
    )
    assert one_level.local(0) == pytest.approx(by_hand, abs=1e-12)


def test_score_equivalence_of_two_and_three_node_dags():
    codes = random_codes(500, [3, 2, 4], seed=5)
    s = BDeuScorer(codes, [3, 2, 4], structure_prior=False)
    assert s.local(0) + s.local(1, (0,)) == pytest.approx(s.local(1) + s.local(0, (1,)), abs=1e-9)
    chain = s.local(0) + s.local(1, (0,)) + s.local(2, (1,))
    reverse_chain = s.local(2) + s.local(1, (2,)) + s.local(0, (1,))
    collider = s.local(0) + s.local(2) + s.local(1, (0, 2))
    assert chain == pytest.approx(reverse_chain, abs=1e-9)
    assert abs(chain - collider) > 1e-3  # a v-structure is a different class
    with_prior = BDeuScorer(codes, [3, 2, 4], structure_prior=True)
    dag = np.zeros((3, 3), dtype=bool)
    dag[0, 1] = dag[1, 2] = True
    assert with_prior.score_dag(dag) == pytest.approx(chain + 2 * LN_PRIOR, abs=1e-9)


# ----------------------------------------------------------------------------- reference search
def reference_hill_climb(scorer, allowed, tabu_length, max_barren, compat=False):
    """From-scratch tabu search: all moves re-scored every iteration, networkx path checks."""
    p = allowed.shape[0]
    permit = allowed & np.tri(p, p, -1, dtype=bool) if compat else allowed
    dag = np.zeros((p, p), dtype=bool)
    tabu = deque(maxlen=tabu_length)
    if tabu_length:
        tabu.append(dag.tobytes())

    def family(j):
        return scorer.local(j, np.flatnonzero(dag[:, j]).tolist())

    current = float(np.array([family(j) for j in range(p)]).sum())
    best, best_score, barren, iterations, trace = dag.copy(), current, 0, 0, []
    while True:
        graph = nx.DiGraph(list(zip(*np.nonzero(dag), strict=True)))
        graph.add_nodes_from(range(p))
        fam = [family(j) for j in range(p)]
        moves = []  # (delta, kind, tail, head) in (kind, head, tail) order
        for kind in range(3):
            for j in range(p):
                for i in range(p):
                    if not permit[i, j]:
                        continue
                    pa_j = set(np.flatnonzero(dag[:, j]).tolist())
                    pa_i = set(np.flatnonzero(dag[:, i]).tolist())
                    if kind == 0 and not (dag[i, j] or dag[j, i]) and not nx.has_path(graph, j, i):
                        moves.append((scorer.local(j, pa_j | {i}) - fam[j], 0, i, j))
                    elif kind == 1 and dag[i, j]:
                        moves.append((scorer.local(j, pa_j - {i}) - fam[j], 1, i, j))
                    elif kind == 2 and dag[i, j]:
                        without = graph.copy()
                        without.remove_edge(i, j)
                        if not nx.has_path(without, i, j):
                            delta = (scorer.local(j, pa_j - {i}) - fam[j]) + (
                                scorer.local(i, pa_i | {j}) - fam[i]
                            )
                            moves.append((delta, 2, i, j))
        iterations += 1
        chosen = None
        for k in sorted(range(len(moves)), key=lambda k: -moves[k][0]):  # stable: first max
            _, kind, i, j = moves[k]
            after = dag.copy()
            after[i, j] = kind == 0
            if kind == 2:
                after[j, i] = True
            if tabu_length and after.tobytes() in tabu:
                continue
            chosen = (kind, i, j, after)
            break
        if chosen is None:
            return best, best_score, iterations, trace
        dag = chosen[3]
        trace.append(chosen[:3])
        if tabu_length:
            tabu.append(dag.tobytes())
        current = float(np.array([family(j) for j in range(p)]).sum())
        if current > best_score and abs(current - best_score) > 1e-10:
            best, best_score, barren = dag.copy(), current, 0
        else:
            barren += 1
            if barren >= max_barren:
                return best, best_score, iterations, trace


def small_problem(seed: int, p: int = 7, n: int = 300):
    dag = random_dag(p, expected_degree=2.5, seed=seed)
    net = random_discrete_network(dag, card_range=(2, 3), seed=seed, concentration=0.5)
    codes = sample_codes(net, n, seed=seed)
    rng = np.random.default_rng(seed)
    extra = np.triu(rng.random((p, p)) < 0.3, 1)
    allowed = dag.adjacency() | extra | extra.T
    return codes, net.cards, allowed


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize(
    "tabu_length, max_barren, compat",
    [(0, 0, False), (4, 5, False), (100, 15, False), (3, 4, True), (100, 15, True)],
)
def test_incremental_search_equals_reference_search(seed, tabu_length, max_barren, compat):
    codes, cards, allowed = small_problem(seed)
    scorer = BDeuScorer(codes, cards, structure_prior=bool(seed % 2))
    result = hill_climb(
        scorer,
        allowed,
        tabu_length=tabu_length,
        max_barren=max_barren,
        lower_triangle_compat=compat,
    )
    best, best_score, iterations, trace = reference_hill_climb(
        scorer, allowed, tabu_length, max_barren, compat
    )
    kinds = {"add": 0, "delete": 1, "reverse": 2}
    assert [(kinds[k], i, j) for k, i, j in result.trace] == trace
    assert np.array_equal(result.dag, best)
    assert result.score == best_score
    assert result.iterations == iterations
    assert result.moves == len(trace)


# ----------------------------------------------------------------------------- search properties
def is_dag(matrix: np.ndarray) -> bool:
    graph = nx.DiGraph(list(zip(*np.nonzero(matrix), strict=True)))
    return nx.is_directed_acyclic_graph(graph)


def replay(p: int, trace) -> list[np.ndarray]:
    dag = np.zeros((p, p), dtype=bool)
    out = [dag.copy()]
    for kind, i, j in trace:
        if kind == "add":
            assert not dag[i, j] and not dag[j, i]
            dag[i, j] = True
        elif kind == "delete":
            assert dag[i, j]
            dag[i, j] = False
        else:
            assert dag[i, j]
            dag[i, j], dag[j, i] = False, True
        out.append(dag.copy())
    return out


@pytest.fixture(scope="module")
def alarm_333():
    net = load_network("alarm")
    return net, sample_codes(net, 333, seed=7)


def test_result_is_acyclic_inside_allowed_and_tabu_is_respected(alarm_333):
    net, codes = alarm_333
    p = net.n_nodes
    rng = np.random.default_rng(0)
    for trial in range(3):
        extra = np.triu(rng.random((p, p)) < 0.05, 1)
        allowed = net.dag.adjacency() | extra | extra.T
        drop = np.triu(rng.random((p, p)) < 0.2, 1)
        allowed &= ~(drop | drop.T)
        scorer = BDeuScorer(codes, net.cards)
        tabu_length = 10 if trial == 0 else 100
        result = hill_climb(scorer, allowed, tabu_length=tabu_length)
        assert result.dag.dtype == bool and result.dag.shape == (p, p)
        assert nx.is_directed_acyclic_graph(
            nx.DiGraph(list(zip(*np.nonzero(result.dag), strict=True)))
        )
        assert not np.any(result.dag & ~allowed)
        assert result.score == pytest.approx(scorer.score_dag(result.dag), abs=1e-8)
        assert result.stop_reason == "barren" and result.moves == len(result.trace)
        structures = replay(p, result.trace)
        keys = [s.tobytes() for s in structures]
        for step in range(1, len(keys)):  # never a structure among the last tabu_length ones
            assert keys[step] not in keys[max(0, step - tabu_length) : step]
        assert any(np.array_equal(result.dag, s) for s in structures)
        # the best is at least as good as every structure visited
        assert all(scorer.score_dag(s) <= result.score + 1e-9 for s in structures[::5])


def test_tabu_best_at_least_greedy_and_greedy_is_a_local_optimum(alarm_333):
    net, codes = alarm_333
    allowed = net.dag.adjacency()
    for prior in (False, True):
        scorer = BDeuScorer(codes, net.cards, structure_prior=prior)
        greedy = hill_climb(scorer, allowed, tabu_length=0, max_barren=0)
        tabu = hill_climb(scorer, allowed)
        assert tabu.score >= greedy.score
        assert greedy.stop_reason == "barren"
        # greedy applies its last (non-improving) move, then returns the structure before it
        structures = replay(net.n_nodes, greedy.trace)
        assert np.array_equal(structures[-2], greedy.dag)
        assert scorer.score_dag(structures[-1]) <= greedy.score + 1e-10
        # no single legal move improves the greedy result
        dag = greedy.dag
        reach = nx.transitive_closure_dag(nx.DiGraph(list(zip(*np.nonzero(dag), strict=True))))
        for i, j in zip(*np.nonzero(np.triu(allowed, 1)), strict=True):
            for a, b in ((i, j), (j, i)):
                trial = dag.copy()
                if dag[a, b]:
                    trial[a, b] = False
                    assert scorer.score_dag(trial) <= greedy.score + 1e-10
                    trial[b, a] = True
                    if nx.is_directed_acyclic_graph(
                        nx.DiGraph(list(zip(*np.nonzero(trial), strict=True)))
                    ):
                        assert scorer.score_dag(trial) <= greedy.score + 1e-10
                elif not dag[b, a] and not reach.has_edge(b, a):
                    trial[a, b] = True
                    assert scorer.score_dag(trial) <= greedy.score + 1e-10


def test_max_iter_stops_and_zero_iterations_return_the_empty_graph(alarm_333):
    net, codes = alarm_333
    scorer = BDeuScorer(codes, net.cards)
    result = hill_climb(scorer, net.dag.adjacency(), max_iter=3)
    assert (result.iterations, result.moves, result.stop_reason) == (3, 3, "max_iter")
    assert result.dag.sum() == 3
    empty = hill_climb(scorer, net.dag.adjacency(), max_iter=0)
    assert empty.dag.sum() == 0 and empty.iterations == 0
    assert empty.score == pytest.approx(sum(scorer.local(j) for j in range(net.n_nodes)))


def test_compat_mode_follows_the_lower_triangle_rule(alarm_333):
    net, codes = alarm_333
    allowed = net.dag.adjacency()
    scorer = BDeuScorer(codes, net.cards)
    result = hill_climb(scorer, allowed, lower_triangle_compat=True)
    assert result.trace
    frozen = set()
    for kind, i, j in result.trace:
        assert i > j, f"{kind} {i}->{j} is outside tril(S*)"  # every selected move: tail > head
        assert (min(i, j), max(i, j)) not in frozen
        if kind == "reverse":
            frozen.add((j, i))  # now j -> i with j < i: may never be touched again
    assert not np.any(result.dag & ~allowed)
    # symmetric default differs: it adds low -> high edges too
    symmetric = hill_climb(scorer, allowed)
    assert any(i < j for kind, i, j in symmetric.trace if kind == "add")
    # two variables: add 1 -> 0, reverse it to 0 -> 1 (barren), then 0 -> 1 is frozen
    codes2 = random_codes(300, [2, 3], seed=9)
    pair = np.array([[False, True], [True, False]])
    tiny = hill_climb(BDeuScorer(codes2, [2, 3]), pair, lower_triangle_compat=True)
    assert tiny.trace == [("add", 1, 0), ("reverse", 1, 0)]
    assert tiny.stop_reason == "no_move" and tiny.iterations == 3
    assert tiny.dag.tolist() == [[False, False], [True, False]]


# ----------------------------------------------------------------------------- recovery, pgmpy
def as_graph(names, dag: np.ndarray) -> Graph:
    return Graph.from_edges(names, list(zip(*np.nonzero(dag), strict=True)), kind="DAG")


@pytest.mark.parametrize("name, n", [("asia", 10_000), ("child", 5_000)])
def test_learns_the_true_cpdag_on_the_true_skeleton(name, n):
    net = load_network(name)
    codes = sample_codes(net, n, seed=3)
    scorer = BDeuScorer(codes, net.cards, 10.0, structure_prior=True, names=net.variables)
    result = hill_climb(scorer, net.dag.adjacency())
    assert dag_to_cpdag(as_graph(net.variables, result.dag)) == dag_to_cpdag(net.dag)
    assert result.score >= scorer.score_dag(directed_matrix(net.dag)) - 1e-8


class PerturbedBDeu(BDeuScorer):
    """BDeu plus a fixed random weight per (parent, child): no ties between equivalent DAGs."""

    def __init__(self, codes, cards, weights):
        super().__init__(codes, cards, 10.0, structure_prior=False)
        self.weights = weights

    def _compute(self, child, parents):
        return super()._compute(child, parents) + float(self.weights[list(parents), child].sum())


def test_greedy_mode_equals_pgmpy_hill_climb_search_on_a_tie_free_score():
    """pgmpy's HillClimbSearch (tabu_length=0) and our greedy mode make the same moves.

    With plain BDeu the two can end in different local optima of equal standing: equivalent
    moves tie up to rounding, and pgmpy breaks ties in Python set order (PYTHONHASHSEED). A
    perturbed score without ties removes that freedom, so the searches must agree exactly.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        from pgmpy.causal_discovery import ExpertKnowledge, HillClimbSearch
        from pgmpy.structure_score import BaseStructureScore

    class Bridge(BaseStructureScore):
        def __init__(self, data, ours=None):
            self.ours = ours
            super().__init__(data)

        def _local_score(self, variable, parents):
            index = list(self.variables)
            return self.ours.local(index.index(variable), [index.index(v) for v in parents])

    net = load_network("child")
    codes = sample_codes(net, 1000, seed=5)
    df = codes_to_frame(net, codes)
    p = net.n_nodes
    rng = np.random.default_rng(0)
    extra = np.triu(rng.random((p, p)) < 0.1, 1)
    allowed = net.dag.adjacency() | extra | extra.T
    ours = PerturbedBDeu(codes, net.cards, rng.uniform(-1.0, 1.0, (p, p)))
    result = hill_climb(ours, allowed, tabu_length=0, max_barren=0)
    names = net.variables
    space = [(names[i], names[j]) for i, j in zip(*np.nonzero(allowed), strict=True)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        search = HillClimbSearch(
            scoring_method=Bridge(df, ours),
            expert_knowledge=ExpertKnowledge(search_space=space),
            tabu_length=0,
            epsilon=1e-10,
            return_type="dag",
            show_progress=False,
        ).fit(df)
    theirs = np.zeros((p, p), dtype=bool)
    for u, v in search.causal_graph_.edges():
        theirs[names.index(u), names.index(v)] = True
    assert result.moves > 20
    assert np.array_equal(result.dag, theirs)
    assert result.score == pytest.approx(ours.score_dag(theirs), abs=1e-9)


# ----------------------------------------------------------------------------- bad input
def test_bad_input_errors():
    good = np.array([[0, 1], [1, 2], [0, 0]])
    with pytest.raises(ValueError, match="2-D"):
        BDeuScorer(np.array([0, 1, 2]), [3])
    with pytest.raises(TypeError, match="integer"):
        BDeuScorer(good.astype(float), [2, 3])
    with pytest.raises(ValueError, match="no rows"):
        BDeuScorer(np.zeros((0, 2), dtype=int), [2, 3])
    with pytest.raises(ValueError, match="one cardinality per variable"):
        BDeuScorer(good, [2, 3, 4])
    with pytest.raises(ValueError, match="positive integers"):
        BDeuScorer(good, [2, 0])
    with pytest.raises(ValueError, match=r"'HR' \(column 1\) has code 2, outside 0..1"):
        BDeuScorer(good, [2, 2], names=["BP", "HR"])
    with pytest.raises(ValueError, match="code -1"):
        BDeuScorer(np.array([[0, -1]]), [2, 2])
    for ess in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="ess"):
            BDeuScorer(good, [2, 3], ess=ess)
    with pytest.raises(TypeError, match="ess"):
        BDeuScorer(good, [2, 3], ess="10")
    scorer = BDeuScorer(good, [2, 3], names=["BP", "HR"])
    with pytest.raises(ValueError, match="own parent"):
        scorer.local(1, (1,))
    with pytest.raises(ValueError, match="not in 0..1"):
        scorer.local(0, (2,))
    with pytest.raises(ValueError, match="duplicate parents"):
        scorer.local(0, (1, 1))
    with pytest.raises(ValueError, match="cycle"):
        scorer.score_dag(np.array([[False, True], [True, False]]))
    pair = np.array([[False, True], [True, False]])
    with pytest.raises(TypeError, match="boolean"):
        hill_climb(scorer, pair.astype(int))
    with pytest.raises(ValueError, match="2x2"):
        hill_climb(scorer, np.zeros((3, 3), dtype=bool))
    with pytest.raises(ValueError, match="symmetric"):
        hill_climb(scorer, np.array([[False, True], [False, False]]))
    with pytest.raises(ValueError, match="diagonal"):
        hill_climb(scorer, np.array([[True, True], [True, False]]))
    for kwargs in ({"tabu_length": -1}, {"max_barren": 1.5}, {"max_iter": -2}):
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            hill_climb(scorer, pair, **kwargs)
