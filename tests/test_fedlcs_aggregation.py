"""FedLCS's separating-set rules across clients (``sep_rule``): votes, max-p, Fisher."""

import math

import numpy as np
import pandas as pd
import pytest

from fedcausal_flwr.clients.fedlcs import FedLCSClient
from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.discovery.lcs import local_structure
from fedcausal_flwr.discovery.lcs_orient import orient_local
from fedcausal_flwr.discovery.lcs_sepsets import sepset_search
from fedcausal_flwr.discovery.lcs_state import Knowledge, LCSOptions, SepsetRequest
from fedcausal_flwr.discovery.sepset_choice import (
    choose_sepsets,
    fisher_choice,
    independent_sets,
    max_pvalue_choice,
    vote_choice,
)
from fedcausal_flwr.federation.runtime.runners import PartitionedClients, run_protocol
from fedcausal_flwr.graphs.graph import ARROW, TAIL
from fedcausal_flwr.stats.oracles import DiscreteOracle, TableOracle
from fedcausal_flwr.strategies.fedlcs import make_strategy

NAN = np.nan
# 5 clients x 4 candidate sets. Votes (p > 0.05): 1, 4, 0, 2. The single largest p (0.9) is one
# client's on candidate 0; four clients agree on candidate 1 (mean p 0.35, largest 0.5 at client 4).
BLOCK = np.array(
    [
        [0.90, 0.20, 0.01, NAN],
        [0.01, 0.30, 0.02, 0.60],
        [0.01, 0.40, 0.03, 0.70],
        [0.02, 0.01, 0.04, NAN],
        [0.01, 0.50, 0.01, NAN],
    ]
)


def test_vote_choice_prefers_agreement_over_one_large_p():
    assert max_pvalue_choice(BLOCK, 0.05) == (0, 0, 0.9)
    candidate, client, p, votes = vote_choice(BLOCK, 0.05, need=2)
    assert (candidate, client, votes) == (1, 4, 4)
    assert p == pytest.approx(0.2)  # the smallest p of the four voters
    assert vote_choice(BLOCK, 0.05, need=5) is None  # no set has five votes
    with pytest.raises(ValueError, match="at least one client"):
        vote_choice(BLOCK, 0.05, need=0)


def test_vote_choice_ties():
    """Equal votes: the larger smallest p of the voters (not the mean); equal votes and smallest
    p: the first candidate."""
    by_min = np.array([[0.3, 0.6], [0.3, 0.2], [0.01, 0.01]])  # 2 votes each; mean .3 / .4
    assert vote_choice(by_min, 0.05, need=1)[:3] == (0, 0, 0.3)  # smallest .3 beats .2
    first = np.array([[0.3, 0.5], [0.5, 0.3]])  # 2 votes each, both smallest .3
    assert vote_choice(first, 0.05, need=2)[:2] == (0, 1)


def test_fisher_choice_combines_the_clients():
    """Candidate 0: p = (0.5, 0.5), -2 sum log p = 4 ln 2 on chi2(4): exp(-2 ln 2)(1 + 2 ln 2);
    candidate 1: p = (0.9, 0.04), y = -ln(0.036): 0.036 (1 + y), below candidate 0 although it
    holds the single largest p."""
    block = np.array([[0.5, 0.9], [0.5, 0.04]])
    candidate, client, p = fisher_choice(block, 0.05)
    assert (candidate, client) == (0, 0)
    assert p == pytest.approx(0.25 * (1 + 2 * math.log(2)))
    assert max_pvalue_choice(block, 0.05)[0] == 1
    low = np.array([[0.9], [0.04]])
    assert fisher_choice(low, 0.2) is None  # 0.036 * (1 - ln 0.036) = 0.156 <= 0.2
    assert fisher_choice(low, 0.15)[2] == pytest.approx(0.036 * (1 - math.log(0.036)))
    assert fisher_choice(np.array([[0.9], [NAN]]), 0.05) is None  # NaN reads as dependent
    assert fisher_choice(np.array([[0.3, 0.7]]), 0.05)[:2] == (1, 0)  # one client: its p
    assert fisher_choice(np.array([[0.3, 0.7]]), 0.05)[2] == pytest.approx(0.7)


def test_choose_sepsets_by_rule():
    """One job, pool (2, 3, 4) at level 1: three clients x subsets (2,), (3,), (4,)."""
    job = (0, 1, (2, 3, 4), 1)
    values = np.array([[0.95, 0.30, 0.01], [0.01, 0.20, 0.01], [0.01, 0.25, 0.01]])
    assert choose_sepsets([job], values, 0.05, "max_p") == [((2,), 0.95, 0)]
    [(subset, p, client, votes)] = choose_sepsets([job], values, 0.05, "votes", need=2)
    assert (subset, client, votes) == ((3,), 0, 3) and p == pytest.approx(0.20)  # smallest p
    [(subset, p, client)] = choose_sepsets([job], values, 0.05, "fisher")
    assert subset == (3,) and client == 0
    assert choose_sepsets([job], values[:, [0, 2, 2]], 0.05, "votes", need=2) == [None]
    with pytest.raises(ValueError, match="sep_rule"):
        choose_sepsets([job], values, 0.05, "median")
    with pytest.raises(ValueError, match="sep_rule"):
        LCSOptions(sep_rule="median")


def test_independent_sets_follow_each_rules_criterion():
    job = (0, 1, (2, 3, 4, 5), 1)  # four subsets of size 1: BLOCK's columns
    assert independent_sets([job], BLOCK, 0.05, "votes", need=2) == [((3,), (5,))]
    assert independent_sets([job], BLOCK, 0.05, "max_p") == [((2,), (3,), (5,))]
    # combined p 1e-4, 0.054, 2e-5 and (NaN reads as dependent) 0: only candidate 1 at 0.05
    assert independent_sets([job], BLOCK, 0.05, "fisher") == [((3,),)]
    assert independent_sets([job], BLOCK, 0.06, "fisher") == [()]
    with pytest.raises(ValueError, match="unknown sep_rule"):
        independent_sets([job], BLOCK, 0.05, "median")


@pytest.mark.parametrize(
    ("rule", "collider"),
    [("standard", True), ("majority", False), ("conservative", False), ("causallearn", False)],
)
def test_collider_rule_reads_the_chosen_or_every_independent_set(rule, collider):
    """0 - 2 - 1 and 0 - 3 - 1, 0 and 1 non-adjacent. Chosen set (3,) (2 not in it: a collider at 2
    by the standard rule); the sets found independent are (3,), (2,), (2, 3): 2 is in two of three,
    so the majority rule calls it a non-collider, conservative and causallearn do not orient."""
    kb = Knowledge(pc={0: (2, 3), 1: (2, 3), 2: (0, 1), 3: (0, 1)}, collider_rule=rule)
    kb.sepsets[(0, 1)] = {
        "set": (3,), "p": 0.9, "client": 0, "level": 1, "independent": [(3,), (2,), (2, 3)],
    }  # fmt: skip
    nodes, marks = orient_local(kb, {0, 1, 2, 3}, {(0, 1)})
    into_2 = marks[0, 2] == ARROW and marks[1, 2] == ARROW and marks[2, 0] == TAIL
    assert into_2 == collider
    assert marks[0, 3] == marks[3, 0] == TAIL  # 3 is in the chosen set: never a collider


def test_votes_rank_before_p_across_levels():
    """Level 0 has one client's p = 0.9, level 1 three clients' mean p 0.3: votes keep level 1;
    answers without votes (max_p, fisher) count as one vote, so p decides (level 0)."""

    def drive(answers):
        kb = Knowledge()
        steps = sepset_search([((0, 1), (2, 3))], kb, LCSOptions())
        try:
            request = next(steps)
            while True:
                assert isinstance(request, SepsetRequest)
                choice = answers[request.jobs[0][3]]
                request = steps.send([(choice, () if choice is None else (choice[0],))])
        except StopIteration:
            return kb.sepsets[(0, 1)]

    chosen = drive({0: ((), 0.9, 0, 1), 1: ((2,), 0.3, 1, 3), 2: None})
    assert chosen["set"] == (2,) and chosen["votes"] == 3 and chosen["level"] == 1
    chosen = drive({0: ((), 0.9, 0, 3), 1: ((2,), 0.95, 1, 3), 2: None})
    assert chosen["set"] == (2,)  # equal votes: the larger mean p
    chosen = drive({0: ((), 0.9, 0), 1: ((2,), 0.3, 1), 2: None})
    assert chosen["set"] == () and "votes" not in chosen


@pytest.mark.parametrize("rule", ["votes", "fisher"])
def test_one_client_every_rule_is_the_single_site_search(rule):
    """One oracle: the vote and Fisher rules choose exactly max-p's sets (ALARM, 1500 rows)."""
    net = load_network("alarm")
    data = net.sample(1500, seed=3)
    names = list(net.variables)
    cards = [len(data[c].cat.categories) for c in names]
    codes = np.stack([data[c].cat.codes.to_numpy() for c in names], axis=1)
    targets = [names.index(t) for t in ("HR", "VENTLUNG", "CATECHOL", "LVFAILURE", "PCWP")]
    found = {}
    for r in ("max_p", rule):
        oracle = DiscreteOracle(codes, cards, names, test="chi2")
        found[r] = local_structure(oracle, targets, LCSOptions(sep_rule=r))
    (base, kb_base), (other, kb_other) = found["max_p"], found[rule]
    assert kb_base.sepsets  # the search examined triples
    assert {k: None if v is None else v["set"] for k, v in kb_base.sepsets.items()} == {
        k: None if v is None else v["set"] for k, v in kb_other.sepsets.items()
    }
    for t in targets:
        assert np.array_equal(base[t].marks, other[t].marks)


class SplitClient(FedLCSClient):
    """A - T - B with A _||_ B on every client (p = 0.5) but A _||_ B | T on client 0 only."""

    def _oracle(self, payload):
        table = {("A", "B", ()): 0.5}
        if self.partition_id == 0:
            table[("A", "B", ("T",))] = 0.9
        return TableOracle(table, payload.variables, default=0.0)


@pytest.mark.parametrize(
    "rule, collider",
    [("max_p", False), ("votes", True), ("fisher", True)],
)
def test_one_client_does_not_outvote_the_others(rule, collider):
    """max_p takes client 0's {T} (p 0.9 > 0.5): no collider. votes: {T} has 1 of the 2 votes
    ratio 0.4 needs of 3, the empty set 3 votes: A -> T <- B. fisher: {T} combines to 0."""
    rng = np.random.default_rng(0)
    frames = [pd.DataFrame(rng.integers(0, 2, (20, 3)), columns=["A", "B", "T"]) for _ in range(3)]
    factory = PartitionedClients(SplitClient, frames)
    result = run_protocol(make_strategy({"target": "T", "sep_rule": rule}), factory, 3)
    chosen = result.extra["consistent_sepsets"]["A|B"]
    assert chosen["set"] == ([] if collider else ["T"])
    assert sorted(result.extra["parents"]) == (["A", "B"] if collider else [])
    assert ("votes" in chosen) == (rule == "votes")
    if rule == "votes":
        assert chosen["votes"] == 3


class TwoOfThreeClient(FedLCSClient):
    """A - T - B with A _||_ B (p = 0.5) on clients 0 and 1 only; client 2 finds no separator."""

    def _oracle(self, payload):
        table = {("A", "B", ()): 0.5} if self.partition_id < 2 else {}
        return TableOracle(table, payload.variables, default=0.0)


@pytest.mark.parametrize("ratio, collider", [(0.4, True), (0.9, False)])
def test_votes_need_ratio_times_clients(ratio, collider):
    """The empty set has 2 votes of 3: enough for ratio 0.4 (2 needed), not for 0.9 (3): then no
    set is found and the triple stays undecided (FLSke removed A - B in both: 1 keep vote)."""
    rng = np.random.default_rng(1)
    frames = [pd.DataFrame(rng.integers(0, 2, (20, 3)), columns=["A", "B", "T"]) for _ in range(3)]
    factory = PartitionedClients(TwoOfThreeClient, frames)
    options = {"target": "T", "sep_rule": "votes", "ratio": ratio}
    result = run_protocol(make_strategy(options), factory, 3)
    assert result.extra["pc_sets"]["A"] == ["T"]
    chosen = result.extra["consistent_sepsets"]["A|B"]
    if collider:
        assert chosen["set"] == [] and chosen["votes"] == 2
        assert sorted(result.extra["parents"]) == ["A", "B"]
    else:
        assert chosen is None
        assert sorted(result.extra["undirected"]) == ["A", "B"]


class LowFirstClient(FedLCSClient):
    """A _||_ B with p = 0.04 on client 0 (dependent at alpha 0.05) and 0.9 on clients 1 and 2."""

    def _oracle(self, payload):
        table = {("A", "B", ()): 0.04 if self.partition_id == 0 else 0.9}
        return TableOracle(table, payload.variables, default=0.0)


def test_fisher_clients_reveal_every_pvalue():
    """Fisher over (0.04, 0.9, 0.9) is e^-y (1 + y + y^2 / 2) = 0.33 with y = -sum ln p: the empty
    set separates. Client 0's 0.04 must be sent (``reveal_all``): masked to NaN it would read as
    dependent and leave the triple undecided."""
    rng = np.random.default_rng(2)
    frames = [pd.DataFrame(rng.integers(0, 2, (20, 3)), columns=["A", "B", "T"]) for _ in range(3)]
    factory = PartitionedClients(LowFirstClient, frames)
    result = run_protocol(make_strategy({"target": "T", "sep_rule": "fisher"}), factory, 3)
    chosen = result.extra["consistent_sepsets"]["A|B"]
    y = -(math.log(0.04) + 2 * math.log(0.9))
    assert chosen["set"] == [] and chosen["p"] == pytest.approx(math.exp(-y) * (1 + y + y * y / 2))
    assert sorted(result.extra["parents"]) == ["A", "B"]


def test_edge_rule_and_or():
    """PC_0 = {1} but PC_1 = {}: the AND rule drops 0 - 1, OR keeps it; with PC_1 not learned
    (1 not known) both keep it provisionally."""
    from fedcausal_flwr.discovery.lcs_state import adjacent

    for rule, expected in (("and", False), ("or", True)):
        kb = Knowledge(pc={0: (1,), 1: ()}, edge_rule=rule)
        assert adjacent(kb, {0, 1}, 0, 1) is expected
        assert adjacent(kb, {0}, 0, 1) is True
    assert make_strategy({"target": "T", "edge_rule": "or"}).options.edge_rule == "or"
    with pytest.raises(ValueError, match="edge_rule"):
        make_strategy({"target": "T", "edge_rule": "xor"})
