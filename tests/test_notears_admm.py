"""NOTEARS-ADMM, linear: the score pieces, centralised NOTEARS, the ADMM pieces, the discrete map,
and the federated protocol (equal to the same ADMM in memory, step for step; one client equal to
centralised NOTEARS; the client's state across rounds; in-process equal to Ray)."""

import numpy as np
import pandas as pd
import pytest
from flwr.app import Context, RecordDict
from scipy.linalg import expm

from fedcausal_flwr.clients.notears_admm import (
    AdmmStateLost,
    NotearsAdmmClient,
    numeric_columns,
)
from fedcausal_flwr.data.inputs import InputError
from fedcausal_flwr.discovery.notears import (
    AdmmSettings,
    acyclicity,
    centred_gram,
    exp_nonnegative,
    frequency_midpoints,
    least_squares,
    local_step,
    notears_admm,
    notears_linear,
    threshold_dag,
)
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.protocols.notears_admm import ADMM_STEP

#: a short schedule for tests: the penalties grow faster, so the run ends in a few dozen rounds
FAST = {"rho1_growth": 4.0, "rho2_growth": 2.0, "rho_max": 1e12}


def chain_data(n: int = 600, seed: int = 0) -> tuple[pd.DataFrame, Graph]:
    """X1 -> X2 -> X3 <- X4, X3 -> X5 with weights of magnitude >= 0.8."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5))
    x[:, 1] += 1.5 * x[:, 0]
    x[:, 2] += -1.0 * x[:, 1] + 0.8 * x[:, 3]
    x[:, 4] += 1.2 * x[:, 2]
    names = [f"X{i + 1}" for i in range(5)]
    truth = Graph.from_edges(names, [("X1", "X2"), ("X2", "X3"), ("X4", "X3"), ("X3", "X5")])
    return pd.DataFrame(x, columns=names), truth


def covariances(parts: list[pd.DataFrame]) -> list[np.ndarray]:
    """The clients' ``C_k = X_k'X_k / N``, computed as the clients compute them."""
    total = sum(len(p) for p in parts)
    names = list(parts[0].columns)
    return [centred_gram(numeric_columns(p, names, {}, k)) / total for k, p in enumerate(parts)]


# ============================================================================ score pieces
def test_exp_nonnegative_equals_scipy_expm():
    rng = np.random.default_rng(1)
    for scale in (1e-3, 0.2, 1.0, 5.0, 40.0):
        a = rng.random((7, 7)) * scale
        reference = expm(a)
        assert np.allclose(exp_nonnegative(a), reference, rtol=1e-11, atol=0)


def test_acyclicity_is_zero_exactly_on_dags_and_its_gradient_is_right():
    dag = np.array([[0, 1.2, 0], [0, 0, -0.7], [0, 0, 0]])
    assert acyclicity(dag)[0] == pytest.approx(0.0, abs=1e-12)
    cyclic = dag.copy()
    cyclic[2, 0] = 0.5
    h, grad = acyclicity(cyclic)
    assert h > 1e-3
    step = 1e-6
    for i, j in [(0, 1), (2, 0), (1, 0), (1, 1)]:
        up, down = cyclic.copy(), cyclic.copy()
        up[i, j] += step
        down[i, j] -= step
        numeric = (acyclicity(up)[0] - acyclicity(down)[0]) / (2 * step)
        assert grad[i, j] == pytest.approx(numeric, rel=1e-4, abs=1e-8)


def test_least_squares_is_half_the_mean_squared_residual():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(50, 4))
    x -= x.mean(axis=0)
    w = rng.normal(size=(4, 4))
    loss, grad = least_squares(w, x.T @ x / 50)
    assert loss == pytest.approx(0.5 / 50 * np.sum((x - x @ w) ** 2))
    assert np.allclose(grad, -x.T @ (x - x @ w) / 50)


def test_local_step_zeroes_the_gradient_of_its_subproblem():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 4))
    c = centred_gram(x) / 120
    z, dual, rho = rng.normal(size=(4, 4)), rng.normal(size=(4, 4)), 0.37
    w = local_step(c, z, dual, rho)
    gradient = least_squares(w, c)[1] + dual + rho * (w - z)
    assert np.abs(gradient).max() < 1e-12


def test_threshold_dag_thresholds_then_cuts_the_weakest_edge_of_a_cycle():
    w = np.array([[0.9, 1.0, 0.2], [0.0, 0.0, -0.8], [0.5, 0.0, 0.0]])
    dag, cut = threshold_dag(w, 0.3)
    # diagonal and 0.2 go; 0 -> 1 -> 2 -> 0 is a cycle: its weakest edge (0.5) goes
    expected = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, -0.8], [0.0, 0.0, 0.0]])
    assert np.array_equal(dag, expected) and cut == 0.5
    assert threshold_dag(expected, 0.3) == (pytest.approx(expected), 0.0)


def test_frequency_midpoints_follow_fedc2sl():
    # levels 0, 1, 2 with counts 1, 5, 2: order 1 (5/8), 2 (2/8), 0 (1/8)
    values = frequency_midpoints(np.array([1, 5, 2]))
    assert values == pytest.approx([20 * (7 / 8 + 1 / 16), 20 * 5 / 16, 20 * (5 / 8 + 1 / 8)])
    # ties keep the level order
    assert frequency_midpoints(np.array([2, 2]), scale=1.0) == pytest.approx([0.25, 0.75])
    with pytest.raises(ValueError):
        frequency_midpoints(np.array([0, 0]))


# ============================================================================ centralised NOTEARS
def test_notears_linear_recovers_a_chain():
    data, truth = chain_data()
    x = data.to_numpy()
    fit = notears_linear(centred_gram(x) / len(x), lambda1=0.01)
    assert fit.h < 1e-8
    dag, _ = threshold_dag(fit.weights, 0.3)
    names = list(data.columns)
    learned = Graph.from_edges(
        names, [(names[i], names[j]) for i, j in zip(*np.nonzero(dag), strict=True)]
    )
    assert learned == truth


# ============================================================================ federated protocol
def test_federated_run_equals_the_admm_in_memory_step_for_step():
    data, truth = chain_data(seed=4)
    parts = [data.iloc[:150], data.iloc[150:350], data.iloc[350:]]  # unequal sizes
    parts = [p.reset_index(drop=True) for p in parts]
    result = run_method("notears-admm", parts, {**FAST, "max_iter": 25})
    reference = notears_admm(covariances(parts), AdmmSettings(**{**FAST, "max_iter": 25}))
    assert np.array_equal(np.array(result.extra["weights"]), reference.consensus)
    assert result.extra["trace"] == reference.trace
    assert result.extra["iterations"] == reference.iteration == len(reference.trace)
    # one round per iteration after hello; every round moves d x d floats each way per client
    assert result.rounds == reference.iteration + 1
    assert [e["action"] for e in result.log[1:]] == [ADMM_STEP] * reference.iteration
    d2 = 5 * 5 * 8
    assert result.bytes_up >= 3 * reference.iteration * d2
    assert result.bytes_down >= 3 * reference.iteration * d2
    dag, _ = threshold_dag(reference.consensus, 0.3)
    assert result.graph.kind == "DAG"
    assert np.array_equal(result.graph.adjacency(), (dag != 0) | (dag != 0).T)
    assert result.extra["primal_residual"] == reference.trace[-1]["primal_residual"]


def test_one_client_equals_centralised_notears():
    """One client: the federated run is the ADMM in memory bit for bit, and (with the diagonal
    fixed to 0, as centralised NOTEARS fixes it) the same DAG as centralised NOTEARS with the
    same lambda1 and threshold, its weights within 0.1 (two optimisers, one local optimum)."""
    data, truth = chain_data(seed=5)
    result = run_method("notears-admm", [data], {"zero_diagonal": True})
    reference = notears_admm(covariances([data]), AdmmSettings(zero_diagonal=True))
    assert np.array_equal(np.array(result.extra["weights"]), reference.consensus)
    assert result.extra["converged"] and result.extra["iterations"] == 197
    x = data.to_numpy()
    central = notears_linear(centred_gram(x) / len(x), lambda1=0.01)
    assert np.abs(np.array(result.extra["weights"]) - central.weights).max() < 0.1
    dag, _ = threshold_dag(central.weights, 0.3)
    assert np.array_equal(result.graph.adjacency(), (dag != 0) | (dag != 0).T)
    assert result.graph == truth


def test_discrete_columns_are_mapped_by_pooled_frequencies():
    rng = np.random.default_rng(6)
    n = 400
    a = rng.choice(["lo", "mid", "hi"], size=n, p=[0.2, 0.5, 0.3])
    b = np.where(rng.random(n) < 0.8, (a == "hi").astype(int), rng.integers(0, 2, n))
    c = 2.0 * b + rng.normal(size=n)
    frame = pd.DataFrame({"a": a, "b": b, "c": c})
    parts = [frame.iloc[:100].reset_index(drop=True), frame.iloc[100:].reset_index(drop=True)]
    options = {**FAST, "max_iter": 12}
    result = run_method("notears-admm", parts, options)
    assert [e["action"] for e in result.log[:2]] == ["hello", "level_counts"]
    assert result.rounds == 2 + 12
    encoding = result.extra["encoding"]
    assert encoding["levels"] == {"a": ["hi", "lo", "mid"], "b": [0, 1]}
    pooled_a = [int((a == level).sum()) for level in ("hi", "lo", "mid")]
    assert encoding["values"]["a"] == pytest.approx(frequency_midpoints(np.array(pooled_a)))
    assert encoding["values"]["b"] == pytest.approx(
        frequency_midpoints(np.bincount(b, minlength=2))
    )
    # the same ADMM in memory on the mapped numbers
    total = len(frame)
    grams = [
        centred_gram(numeric_columns(p, ["a", "b", "c"], encoding, k)) / total
        for k, p in enumerate(parts)
    ]
    reference = notears_admm(grams, AdmmSettings(**{**FAST, "max_iter": 12}))
    assert np.array_equal(np.array(result.extra["weights"]), reference.consensus)
    # the counts were summed: the server saw one vector, not one per client
    counts_entry = [e for e in result.ledger if e["kind"] == "level_counts"]
    assert counts_entry and counts_entry[0]["summed"]


def test_discrete_options_refuse_what_they_cannot_use():
    data, _ = chain_data(n=60)
    coded = data.assign(X2=(data["X2"] > 0).astype(int))
    with pytest.raises(InputError, match=r"client 1 column 'X2'.*discrete=refuse"):
        run_method("notears-admm", [data, coded], {"discrete": "refuse"})
    texted = data.assign(X2=np.where(data["X2"] > 0, "up", "down"))
    with pytest.raises(InputError, match=r"column 'X2'.*text"):
        run_method("notears-admm", [texted, texted[::-1]], {"discrete": "as_numbers"})
    # as_numbers takes the integer column as its values: no counting round
    options = {**FAST, "max_iter": 3, "discrete": "as_numbers"}
    result = run_method("notears-admm", [coded, coded[::-1].reset_index(drop=True)], options)
    assert "level_counts" not in [e["action"] for e in result.log]


def test_client_keeps_its_dual_repeats_an_iteration_and_fails_without_state():
    data, _ = chain_data(n=90)
    names = list(data.columns)
    context = Context(
        run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={}
    )  # fmt: skip
    client = NotearsAdmmClient(0, data, context)
    c = centred_gram(numeric_columns(data, names, {}, 0)) / 180
    z0 = np.zeros((5, 5))
    payload = {"variables": names, "iteration": 1, "rho": 0.5, "dual_rho": None, "rows": 180}
    (w1,), _ = client.answer(ADMM_STEP, payload, [z0])
    assert np.array_equal(w1, local_step(c, z0, np.zeros((5, 5)), 0.5))
    z1 = np.full((5, 5), 0.1)
    second = {**payload, "iteration": 2, "rho": 0.8, "dual_rho": 0.5}
    (w2,), _ = client.answer(ADMM_STEP, second, [z1])
    dual = 0.5 * (w1 - z1)
    assert np.array_equal(w2, local_step(c, z1, dual, 0.8))
    # asked iteration 2 again (another client dropped): the same dual, the same answer
    (again,), _ = client.answer(ADMM_STEP, second, [z1])
    assert np.array_equal(again, w2)
    # a site that lost its state (or skipped an iteration) cannot continue: a dropout
    fresh = NotearsAdmmClient(0, data, Context(1, 1, {}, RecordDict(), {}))
    with pytest.raises(AdmmStateLost, match="client 0 holds no ADMM state for iteration 1"):
        fresh.answer(ADMM_STEP, second, [z1])
    with pytest.raises(AdmmStateLost, match="it has iteration 2"):
        client.answer(ADMM_STEP, {**second, "iteration": 4}, [z1])
