"""RFCD: the GES engine against causal-learn 0.1.4.8's ``ges`` with BDeu, its operators on small
CPDAGs, the worst-client family score, and the federated runs (in-process, Ray, dropouts).

causal-learn runs on the same integer codes here, at test time; its CPDAG is compared with ours.
"""

import warnings
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from causallearn.score.LocalScoreFunction import local_score_BDeu
from causallearn.search.ScoreBased.GES import ges as causallearn_ges

from fedcausal_flwr.clients.rfcd import RFCDClient
from fedcausal_flwr.data import load_network
from fedcausal_flwr.data.inputs import InputError
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.data.synthetic import random_dag, random_discrete_network
from fedcausal_flwr.discovery.ges import (
    CausalLearnBDeu,
    apply_operator,
    delete_operators,
    edge_prior_terms,
    ges,
    ges_steps,
    insert_operators,
    observed_levels,
)
from fedcausal_flwr.discovery.score import BDeuScorer
from fedcausal_flwr.federation.core.messages import ClientInfo, ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.runtime.runners import PartitionedClients, run_method, run_protocol
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.options import OptionError
from fedcausal_flwr.protocols.rfcd import FAMILY_SCORES, decode_families, encode_families
from fedcausal_flwr.strategies.rfcd import RFCDStrategy, make_strategy


def codes_of(frame: pd.DataFrame) -> np.ndarray:
    return np.column_stack([frame[c].cat.codes.to_numpy() for c in frame.columns]).astype(np.int64)


def causallearn_cpdag(codes: np.ndarray, names: list[str], max_parents=None) -> Graph:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        record = causallearn_ges(codes, score_func="local_score_BDeu", maxP=max_parents)
    return Graph.from_causallearn(record["G"].graph, names, "CPDAG")


def deletion_case() -> np.ndarray:
    """A dense random network on which GES inserts with non-empty T and deletes with non-empty H
    (found by search; the test checks that it still does)."""
    dag = random_dag(8, 4, seed=90)
    return random_discrete_network(dag, cards=2, seed=90).sample_codes(300, seed=90).astype(int)


def matrices(p: int, directed=(), undirected=()) -> tuple[np.ndarray, np.ndarray]:
    d = np.zeros((p, p), dtype=bool)
    u = np.zeros((p, p), dtype=bool)
    for a, b in directed:
        d[a, b] = True
    for a, b in undirected:
        u[a, b] = u[b, a] = True
    return d, u


# ============================================================================ causal-learn parity
# child (causal-learn's GES takes 10 s there) runs with the slow tests
@pytest.mark.parametrize("network", ["asia", pytest.param("child", marks=pytest.mark.slow)])
def test_one_client_equals_causallearn_ges_bdeu(network):
    """The acceptance test: a one-client run is causal-learn's ``ges(X, "local_score_BDeu")``."""
    frame = load_network(network).sample(1000, seed=1)
    names = list(frame.columns)
    theirs = causallearn_cpdag(codes_of(frame), names)
    result = run_method("rfcd", [frame], {"max_parents_fraction": None})
    assert result.graph.kind == "CPDAG"
    assert result.graph == theirs
    assert theirs.n_edges() >= (7 if network == "asia" else 18)  # a real search, not an empty graph
    if network == "asia":  # the paper's cap maxP = p / 2 against causal-learn given the same cap
        capped = run_method("rfcd", [frame], {})
        assert capped.graph == causallearn_cpdag(codes_of(frame), names, len(names) / 2)


def test_deletions_and_parent_caps_equal_causallearn():
    codes = deletion_case()
    names = [f"X{k}" for k in range(codes.shape[1])]
    found = ges(codes.shape[1], CausalLearnBDeu(codes))
    assert any(subset for *_, subset in found.inserts)  # some Insert(x, y, T) with T non-empty
    assert any(subset for *_, subset in found.deletes)  # some Delete(x, y, H) with H non-empty
    assert found.graph(names) == causallearn_cpdag(codes, names)
    capped = {cap: ges(codes.shape[1], CausalLearnBDeu(codes), max_parents=cap) for cap in (0, 1)}
    for cap, result in capped.items():
        assert result.graph(names) == causallearn_cpdag(codes, names, cap)
    assert capped[0].graph(names) != found.graph(names)


def test_bdeu_family_scores_equal_causallearn_local_score():
    codes = deletion_case()[:, :5]
    codes[:40, 4] = 2  # a third level, unevenly observed
    score = CausalLearnBDeu(codes)
    plain = CausalLearnBDeu(codes, structure_prior=None)
    scorer = BDeuScorer(codes, [2, 2, 2, 2, 3], ess=1.0, structure_prior=False)
    for child, parents in [(0, ()), (4, (0,)), (1, (0, 2, 4)), (4, (1, 2, 3))]:
        assert score(child, parents) == pytest.approx(
            local_score_BDeu(codes, child, list(parents)), rel=1e-12
        )
        assert plain(child, parents) == pytest.approx(scorer.local(child, parents), rel=1e-12)
    # causal-learn's cardinalities are the observed ones: re-indexed codes, same scores
    recoded, cards = observed_levels(codes * 3 + 1)
    assert cards == [2, 2, 2, 2, 3] and np.array_equal(recoded, codes)
    terms = edge_prior_terms(5, 1.0)
    assert terms[2] == pytest.approx(2 * np.log(1 / 4) + 2 * np.log(3 / 4))
    with pytest.raises(ValueError, match="structure_prior"):
        edge_prior_terms(2, 1.0)


# ============================================================================ the engine
def test_insert_operators_check_cliques_and_semi_directed_paths():
    # 0 -> 1 -> 2: inserting 2 -> 0 would close a directed cycle; 0 -> 2 is fine
    d, u = matrices(3, directed=[(0, 1), (1, 2)])
    ops = {(op.tail, op.head): op for op in insert_operators(d, u)}
    assert (2, 0) not in ops and (0, 2) in ops
    assert (ops[0, 2].with_tail, ops[0, 2].without_tail) == ((2, (0, 1)), (2, (1,)))
    # 1 - 0 - 2 (1, 2 not adjacent), 3 isolated: Insert(3, 0, T) for T = {}, {1}, {2}, not {1, 2}
    d, u = matrices(4, undirected=[(0, 1), (0, 2)])
    subsets = [op.subset for op in insert_operators(d, u) if (op.tail, op.head) == (3, 0)]
    assert subsets == [(), (1,), (2,)]
    # the path 1 - 0 - 2 from 2 to 1 must meet NA u T: Insert(1, 2) is valid (NA = {0})
    ops = {(op.tail, op.head, op.subset): op for op in insert_operators(d, u)}
    assert ops[1, 2, ()].with_tail == (2, (0, 1))
    # the cap counts directed parents of the head only
    d, u = matrices(3, directed=[(0, 1)])
    assert all(op.head != 1 for op in insert_operators(d, u, max_parents=0))


def test_delete_operators_and_application():
    # triangle 0 - 1 - 2 - 0: Delete(0, 1, H) for H = {} and {2}
    d, u = matrices(3, undirected=[(0, 1), (1, 2), (0, 2)])
    ops = [op for op in delete_operators(d, u) if (op.tail, op.head) == (0, 1)]
    assert [(op.subset, op.with_tail, op.without_tail) for op in ops] == [
        ((), (1, (0, 2)), (1, (2,))),
        ((2,), (1, (0,)), (1, ())),
    ]
    # deleting 0 - 1 with H = {2} leaves the v-structure 0 -> 2 <- 1
    d2, u2 = apply_operator(ops[1], d, u)
    assert np.array_equal(d2, matrices(3, directed=[(0, 2), (1, 2)])[0]) and not u2.any()
    # next to 0 - 1 (0, 2 not adjacent): Insert(2, 1, {0}) makes the collider 0 -> 1 <- 2, while
    # Insert(2, 1, {}) leaves a chain without v-structure, completed to 0 - 1 - 2
    d, u = matrices(3, undirected=[(0, 1)])
    ops = {(o.tail, o.head, o.subset): o for o in insert_operators(d, u)}
    d3, u3 = apply_operator(ops[2, 1, (0,)], d, u)
    assert np.array_equal(d3, matrices(3, directed=[(0, 1), (2, 1)])[0]) and not u3.any()
    d4, u4 = apply_operator(ops[2, 1, ()], d, u)
    assert not d4.any() and np.array_equal(u4, matrices(3, undirected=[(0, 1), (1, 2)])[1])


def test_ges_recovers_a_collider_and_asks_each_family_once():
    dag = Graph.from_edges(["a", "b", "c", "d"], [("a", "c"), ("b", "c"), ("c", "d")], "DAG")
    codes = random_discrete_network(dag, cards=3, seed=4).sample_codes(4000, seed=4).astype(int)
    steps = ges_steps(4)
    asked: list = []
    score = CausalLearnBDeu(codes)
    try:
        batch = next(steps)
        while True:
            asked += batch
            batch = steps.send(score.batch(batch))
    except StopIteration as stop:
        result = stop.value
    assert len(asked) == len(set(asked)) == result.families_scored
    expected = Graph.from_edges(["a", "b", "c", "d"], [("a", "c"), ("b", "c"), ("c", "d")], "CPDAG")
    assert result.graph(["a", "b", "c", "d"]) == expected
    assert result.graph(list("abcd")) == ges(4, score).graph(list("abcd"))


def test_ges_steps_refuse_bad_answers():
    steps = ges_steps(3)
    batch = next(steps)
    with pytest.raises(ValueError, match=f"expected {len(batch)} family scores"):
        steps.send(np.zeros(len(batch) - 1))
    steps = ges_steps(3)
    batch = next(steps)
    with pytest.raises(ValueError, match="not finite"):
        steps.send(np.full(len(batch), np.nan))
    with pytest.raises(ValueError, match="n_vars"):
        next(ges_steps(0))


def test_family_codec_round_trip_and_errors():
    families = [(2, ()), (0, (1, 3)), (3, (0,))]
    assert decode_families(encode_families(families), 4) == families
    for bad, what in [
        ([[0, 0, -1]], "exclude the child"),
        ([[1, 2, 0]], "ascending"),
        ([[1, -1, 2]], "padding"),
        ([[4, -1, -1]], "not in 0..3"),
    ]:
        with pytest.raises(ValueError, match=what):
            decode_families(np.array(bad), 4)


# ============================================================================ the federation
@pytest.fixture(scope="module")
def asia_parts():
    """Three IID clients; client 0 never saw ``tub = yes`` (its observed cards differ)."""
    frame = load_network("asia").sample(1200, seed=2)
    parts = split_iid(frame, 3, seed=2).clients
    parts[0] = parts[0][parts[0]["tub"] != "yes"].reset_index(drop=True)
    return pd.concat(parts, ignore_index=True), parts


def worst_case_ges(parts, names, cards=None, max_parents=None):
    """RFCD's search computed here without a federation: each family's smallest client score."""
    levels = {c: sorted(set().union(*(set(p[c].astype(str)) for p in parts))) for c in names}
    scorers = []
    for part in parts:
        codes = np.column_stack(
            [pd.Index(levels[c]).get_indexer(part[c].astype(str)) for c in names]
        )
        scorers.append(CausalLearnBDeu(codes, cards))
    return ges(len(names), lambda c, ps: min(s(c, ps) for s in scorers), max_parents)


def test_k_clients_take_the_worst_client_score(asia_parts):
    frame, parts = asia_parts
    names = list(frame.columns)
    result = run_method("rfcd", parts, {"max_parents_fraction": None})
    expected = worst_case_ges(parts, names)
    assert result.graph == expected.graph(names)
    assert result.extra["score"] == pytest.approx(expected.score, rel=1e-12)
    assert result.extra["families_scored"] == expected.families_scored
    assert result.rounds == 1 + expected.batches  # hello, then one round per step with new families
    # the global level sets give other scores: client 0 lacks a level, so its cards differ
    assert parts[0]["tub"].nunique() < frame["tub"].nunique()
    cards = [frame[c].nunique() for c in names]
    global_cards = run_method("rfcd", parts, {"cardinalities": "global"})
    expected_global = worst_case_ges(parts, names, cards, max_parents=len(names) / 2)
    assert global_cards.graph == expected_global.graph(names)
    assert global_cards.extra["score"] == pytest.approx(expected_global.score, rel=1e-12)
    assert global_cards.extra["score"] != pytest.approx(result.extra["score"], rel=1e-9)


def test_worst_scores_is_the_smallest_client_score_and_replies_are_checked():
    strategy = RFCDStrategy()
    strategy.client_scores = {(0, ()): {0: -5.0, 1: -7.5, 2: -6.0}, (1, (0,)): {0: -1.0, 2: -2.0}}
    assert strategy.worst_scores([(0, ()), (1, (0,))], [0, 2]).tolist() == [-6.0, -2.0]
    assert strategy.worst_scores([(0, ())], [0, 1, 2]).tolist() == [-7.5]
    strategy.client_info = {0: ClientInfo(0, 10, ["a", "b"], {}, {}, {})}
    request = Request(FAMILY_SCORES, {}, arrays=[encode_families([(0, ()), (1, (0,))])])
    strategy.handle_replies(request, [Reply(4, [np.array([-3.0, -4.0])], {})])
    assert strategy.client_scores[1, (0,)] == {0: -1.0, 2: -2.0, 4: -4.0}
    for bad in (np.array([1.0]), np.array([1.0, np.inf]), np.array([1, 2])):
        with pytest.raises(ClientProtocolError, match="client 4"):
            strategy.handle_replies(request, [Reply(4, [bad], {})])


def test_options_are_declared_and_checked():
    defaults = make_strategy({})
    assert (defaults.ess, defaults.structure_prior) == (1.0, 1.0)
    assert (defaults.max_parents_fraction, defaults.cardinalities) == (0.5, "observed")
    assert make_strategy({"structure_prior": "none"}).structure_prior is None
    with pytest.raises(OptionError, match="cardinalities"):
        make_strategy({"cardinalities": "local"})
    with pytest.raises(OptionError, match="ess"):
        make_strategy({"ess": 0})
    two = pd.DataFrame({"a": [0, 1, 0, 1], "b": [1, 1, 0, 0]})
    with pytest.raises(InputError, match="structure_prior must be below 1") as err:
        run_method("rfcd", [two], {})
    assert "structure_prior=None" in str(err.value)
    assert run_method("rfcd", [two], {"structure_prior": None}).graph.kind == "CPDAG"


class DropsAtScores:
    """RFCD clients; client 1 goes away (an ordinary exception: a dropout) the ``occurrence``-th
    time it is asked ``family_scores``. ``asked`` lists the families each client was sent,
    ``failed`` the batch client 1 did not answer."""

    def __init__(self, occurrence: int):
        self.occurrence = occurrence
        self.calls = 0
        self.asked: dict[int, list] = {}
        self.failed: list = []

    def __call__(self, partition_id: int, data: pd.DataFrame, context=None) -> RFCDClient:
        client = RFCDClient(partition_id, data, context)
        answer = client.answer

        def counted(name, payload, arrays):
            if name == FAMILY_SCORES:
                batch = decode_families(arrays[0], len(payload["variables"]))
                if partition_id == 1:
                    self.calls += 1
                    if self.calls == self.occurrence:
                        self.failed = batch
                        raise ConnectionError("site 1 went away")
                self.asked.setdefault(partition_id, []).extend(batch)
            return answer(name, payload, arrays)

        client.answer = counted  # type: ignore[method-assign]
        return client


def test_a_later_dropout_restarts_ges_over_the_survivors_stored_scores(asia_parts):
    """Client 1 (its columns shuffled: it would change the answer) drops out at its 4th batch:
    the result is RFCD over clients 0 and 2 alone, and the survivors are asked again only the
    batch of the failed round."""
    _, parts = asia_parts
    rng = np.random.default_rng(0)
    shuffled = parts[1].apply(lambda col: col.iloc[rng.permutation(len(col))].to_numpy())
    parts = [parts[0], shuffled, parts[2]]
    maker = DropsAtScores(occurrence=4)
    result = run_protocol(make_strategy({}), PartitionedClients(maker, parts), 3, min_clients=2)
    assert [d["client"] for d in result.dropped_clients] == [1]
    alone = run_method("rfcd", [parts[0], parts[2]], {})
    assert result.graph == alone.graph
    assert result.extra["score"] == alone.extra["score"]
    assert run_method("rfcd", parts, {}).graph != alone.graph  # client 1 mattered
    for survivor in (0, 2):
        asked = Counter(maker.asked[survivor])
        assert {f for f, times in asked.items() if times > 1} <= set(maker.failed)
        assert max(asked.values()) <= 2
