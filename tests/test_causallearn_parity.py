"""FedPC equals causal-learn 0.1.4.8's ``pc`` for every ``uc_rule`` / ``uc_priority`` pair it
accepts, PC-stable or not, with the rows split over 1, 3 and 10 unequal clients (exact mode).

Data: random DAGs generated here, linear-Gaussian (Fisher-z) and discrete (chi2). causal-learn
runs on the pooled rows; the project runs federated, so every CI test is a sum over the clients.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from causallearn.search.ConstraintBased.PC import pc as cl_pc
from helpers import padded_names, uneven_clients

from fedcausal_flwr.data import load_network
from fedcausal_flwr.data.inputs import InputError
from fedcausal_flwr.data.synthetic import (
    random_dag,
    random_discrete_network,
    random_gaussian_network,
)
from fedcausal_flwr.discovery.pc import pc
from fedcausal_flwr.federation.core.input_notes import ConstantColumnNote
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.options import OptionError
from fedcausal_flwr.stats.oracles import DiscreteOracle

#: Every (uc_rule, uc_priority) pair causal-learn's ``pc`` accepts (definiteMaxP asserts 2-4).
ACCEPTED = [(rule, prio) for rule in (0, 1) for prio in (-1, 0, 1, 2, 3, 4)] + [
    (2, prio) for prio in (-1, 2, 3, 4)
]
CL_TEST = {"gaussian": "fisherz", "discrete": "chisq"}
OUR_TEST = {"gaussian": "fisherz", "discrete": "chi2"}


def _data(kind: str, seed: int) -> np.ndarray:
    dag = random_dag(10, 3, seed=seed)
    if kind == "gaussian":
        return random_gaussian_network(dag, seed=seed).sample_codes(600, seed=seed)
    return random_discrete_network(dag, seed=seed).sample_codes(1500, seed=seed).astype(np.int64)


def _clients(data: np.ndarray, k: int, seed: int) -> list[pd.DataFrame]:
    return uneven_clients(pd.DataFrame(data, columns=padded_names(data.shape[1])), k, seed)


def _causallearn(data: np.ndarray, kind: str, rule: int, prio: int, stable: bool) -> Graph:
    names = padded_names(data.shape[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cg = cl_pc(
            data,
            0.05,
            CL_TEST[kind],
            stable=stable,
            uc_rule=rule,
            uc_priority=prio,
            show_progress=False,
            node_names=names,
        )
    return Graph.from_causallearn(cg.G.graph, names, "CPDAG")


def _check_grid(kind: str, seed: int, k: int, stables=(True, False)) -> set[bytes]:
    data = _data(kind, seed)
    clients = _clients(data, k, seed)
    seen: set[bytes] = set()
    for stable in stables:
        for rule, prio in ACCEPTED:
            options = {"test": OUR_TEST[kind], "uc_rule": rule, "uc_priority": prio}
            result = run_method("fedpc", clients, {**options, "stable": stable})
            theirs = _causallearn(data, kind, rule, prio, stable)
            assert result.graph == theirs, (kind, seed, k, stable, rule, prio)
            assert result.config["options"]["stable"] is stable
            seen.add(theirs.marks.tobytes())
    return seen


@pytest.mark.parametrize("kind", ["gaussian", "discrete"])
def test_every_accepted_pair_equals_causallearn_over_three_clients(kind):
    seen = _check_grid(kind, seed=1, k=3)
    # the pairs really orient differently here, so equality is not a coincidence of one graph
    assert len(seen) >= 3


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 3, 10])
@pytest.mark.parametrize("kind", ["gaussian", "discrete"])
def test_every_accepted_pair_equals_causallearn_at_every_k(kind, k):
    _check_grid(kind, seed=2, k=k)


def test_pvalue_rules_ask_one_more_round():
    data = _data("discrete", 1)
    clients = _clients(data, 3, 1)
    base = run_method("fedpc", clients, {"uc_priority": 2})
    for rule, prio in ((0, 3), (1, 2), (2, -1)):
        result = run_method("fedpc", clients, {"uc_rule": rule, "uc_priority": prio})
        assert result.rounds == base.rounds + 1, (rule, prio)
        assert result.extra["tests"] > base.extra["tests"]


def test_stable_false_is_order_dependent_as_causallearn():
    """On these samples causal-learn's stable=False skeleton changes when the columns are
    reversed; ours changes the same way, while PC-stable does not change at all."""
    differs = 0
    for seed in (0, 8, 9):
        dag = random_dag(10, 3, seed=seed)
        data = random_discrete_network(dag, seed=seed).sample_codes(300, seed=seed)
        data = data.astype(np.int64)
        names = padded_names(data.shape[1])
        skeletons: dict[bool, list[np.ndarray]] = {True: [], False: []}
        for arr in (data, np.ascontiguousarray(data[:, ::-1])):
            frame = pd.DataFrame(arr, columns=names)
            for stable in (True, False):
                result = run_method("fedpc", [frame], {"stable": stable})
                assert result.graph == _causallearn(arr, "discrete", 0, 2, stable)
                skeletons[stable].append(result.graph.adjacency())
        forward, backward = skeletons[True]
        assert np.array_equal(forward, backward[::-1, ::-1])
        forward, backward = skeletons[False]
        differs += not np.array_equal(forward, backward[::-1, ::-1])
    assert differs == 3


@pytest.mark.parametrize(
    "options,words",
    [
        ({"uc_rule": 2, "uc_priority": 0}, "definiteMaxP"),
        ({"uc_rule": 2, "uc_priority": 1}, "definiteMaxP"),
        ({"uc_rule": 1, "collider_rule": "standard"}, "collider_rule='causallearn'"),
        ({"uc_rule": 3}, "uc_rule"),
        ({"uc_priority": 5}, "uc_priority"),
        ({"uc_priority": -2}, "uc_priority"),
    ],
)
def test_pairs_causallearn_refuses_are_refused_before_the_first_round(options, words):
    clients = _clients(_data("discrete", 1), 3, 1)
    with pytest.raises(OptionError, match=words):
        run_method("fedpc", clients, options)


# ------------------------------------------------------------------ single-level columns
@pytest.fixture(scope="module")
def water():
    """causal-learn's water benchmark network: a sample with six single-level columns."""
    net = load_network("water")
    frame = net.sample(2_000, seed=0).astype(str)  # as read from CSV: the observed levels only
    constant = [c for c in frame.columns if frame[c].nunique() == 1]
    codes = np.column_stack(
        [pd.Categorical(frame[c], categories=sorted(frame[c].unique())).codes for c in frame]
    ).astype(np.int64)
    return frame, codes, constant


@pytest.mark.parametrize("method", ["fedpc", "pooled"])
@pytest.mark.parametrize("k", [1, 3, 10])
def test_single_level_columns_become_isolated_nodes_as_in_causallearn(water, method, k):
    frame, codes, constant = water
    assert len(constant) == 6
    names = list(frame.columns)
    clients = uneven_clients(frame, k)
    with pytest.warns(ConstantColumnNote, match=f"column {constant[0]!r} has a single level"):
        result = run_method(method, clients, {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cg = cl_pc(codes, 0.05, "chisq", show_progress=False, node_names=names)
    assert result.graph == Graph.from_causallearn(cg.G.graph, names, "CPDAG")
    adjacency = result.graph.adjacency()
    for col in constant:
        assert not adjacency[names.index(col)].any()
    assert result.extra["constant_columns"] == constant
    assert adjacency.sum() > 0


@pytest.mark.parametrize(
    "method,options,words",
    [
        ("fedpc", {"ci": "sketch"}, "fedpc with the chi2 test cannot use"),
        ("fedci-pc", {}, "fedci-pc"),
    ],
)
def test_a_method_that_cannot_use_a_single_level_column_says_so_by_name(
    water, method, options, words
):
    frame, _, constant = water
    with pytest.raises(InputError, match=words) as err:
        run_method(method, uneven_clients(frame[frame.columns[:8]], 3), options)
    assert repr(constant[0]) in str(err.value) or constant[0] in str(err.value)


def test_fisherz_cannot_use_a_constant_column_and_says_so():
    data = _data("gaussian", 1)
    frame = pd.DataFrame(data, columns=padded_names(data.shape[1])).assign(X01=1.5)
    with pytest.raises(InputError, match="fedpc with the Fisher-z test cannot use"):
        run_method("fedpc", uneven_clients(frame, 3), {"test": "fisherz"})


# ------------------------------------------------------------------ pooled honours the options
@pytest.fixture(scope="module")
def child_clients():
    frame = load_network("child").sample(5_000, seed=1).astype(str)
    return uneven_clients(frame, 3)


@pytest.mark.parametrize(
    "algorithm,options",
    [
        ("pc", {"uc_rule": 2, "uc_priority": -1}),
        ("pc", {"uc_rule": 1, "uc_priority": 4, "stable": False}),
        ("pc", {"collider_rule": "conservative"}),
        ("fci", {"fci_rules": "causallearn"}),
        ("fci", {"fci_rules": "zhang", "possible_dsep": "stable"}),
    ],
)
def test_pooled_honours_the_engine_options_of_the_method_it_stands_in_for(
    child_clients, algorithm, options
):
    method = "fedpc" if algorithm == "pc" else "fedfci"
    fed = run_method(method, child_clients, options)
    pooled = run_method("pooled", child_clients, {"algorithm": algorithm, **options})
    assert pooled.graph == fed.graph
    assert pooled.config["options"] | options == pooled.config["options"]


def test_pooled_results_change_with_the_rule_set(child_clients):
    zhang = run_method("pooled", child_clients, {"algorithm": "fci"})
    causallearn = run_method(
        "pooled", child_clients, {"algorithm": "fci", "fci_rules": "causallearn"}
    )
    assert zhang.graph != causallearn.graph


@pytest.mark.parametrize(
    "options,words",
    [
        ({"algorithm": "fci", "rules": "bogus"}, "has no option 'rules'"),
        ({"algorithm": "fci", "fci_rules": "bogus"}, "fci_rules"),
        ({"algorithm": "fci", "uc_rule": 1}, "applies only with algorithm='pc'"),
        ({"algorithm": "pc", "fci_rules": "causallearn"}, "applies only with algorithm='fci'"),
        ({"algorithm": "pc", "uc_rule": 2, "uc_priority": 1}, "definiteMaxP"),
        ({"algorithm": "pc", "collider_rule": "bogus"}, "collider_rule"),
    ],
)
def test_pooled_refuses_unknown_options_and_values(options, words):
    clients = _clients(_data("discrete", 1), 3, 1)
    with pytest.raises(OptionError, match=words):
        run_method("pooled", clients, options)


def test_candidate_sets_follow_max_depth():
    """A deliberate difference: with max_depth, the p-value rules read candidate sets of at most
    max_depth variables (causal-learn's max_k caps only the skeleton)."""
    data = _data("discrete", 1)
    names = padded_names(data.shape[1])

    class Recording(DiscreteOracle):
        batches: list = []

        def test_batch(self, queries):
            self.batches.append(list(queries))
            return super().test_batch(queries)

    for depth, rule in ((1, 1), (2, 2), (None, 1)):
        oracle = Recording(data, data.max(axis=0) + 1, names, test="chi2")
        oracle.batches = []
        result = pc(oracle, 0.05, max_depth=depth, uc_rule=rule)
        extra = oracle.batches[-1]  # the candidate-set batch, after the skeleton's levels
        assert len(oracle.batches) == len(result.skeleton.depths) + 1
        largest = max(len(s) for _, _, s in extra)
        if depth is None:
            assert largest > 2
        else:
            assert largest == depth


@pytest.mark.slow
def test_every_accepted_pair_equals_causallearn_on_water(water):
    """causal-learn's water benchmark (six single-level columns), three unequal clients."""
    frame, codes, _ = water
    names = list(frame.columns)
    clients = uneven_clients(frame, 3)
    for rule, prio in ACCEPTED:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the single-level columns' notes
            result = run_method("fedpc", clients, {"uc_rule": rule, "uc_priority": prio})
            cg = cl_pc(
                codes, 0.05, "chisq", uc_rule=rule, uc_priority=prio, show_progress=False,
                node_names=names,
            )  # fmt: skip
        assert result.graph == Graph.from_causallearn(cg.G.graph, names, "CPDAG"), (rule, prio)
