"""Linear NOTEARS (Zheng et al. 2018) and its federated ADMM form, NOTEARS-ADMM (Ng & Zhang,
AISTATS 2022). Flower-free; the protocol is in ``strategies/notears_admm.py``.

Both minimise the least-squares score of a linear SEM ``X = X W + E`` with an L1 penalty under the
acyclicity constraint ``h(W) = tr(exp(W o W)) - d = 0``. They take the data only through its
covariance ``C = X'X / n`` (columns centred): the loss is ``0.5 tr((I - W)' C (I - W))``, which is
``0.5 / n ||X - X W||^2``.

* :func:`notears_linear`: the centralised method, augmented Lagrangian over ``h`` with the usual
  schedule (``rho`` x10 until ``h`` shrinks to a quarter, then ``alpha += rho h``), every inner
  problem solved by L-BFGS-B on ``W = W+ - W-`` with ``W+, W- >= 0`` (so the L1 term is smooth)
  and a zero diagonal.
* The ADMM pieces (the authors' linear algorithm): each client ``k`` holds a local matrix
  ``W_k`` and a dual ``B_k``; the server holds the consensus ``Z``, the acyclicity multiplier
  ``alpha`` and both penalties. One iteration is

  1. :func:`local_step` at every client: ``min f_k(W) + <B_k, W - Z> + rho2/2 ||W - Z||^2``, in
     closed form ``(C_k + rho2 I) W = C_k + rho2 Z - B_k``, where ``f_k`` is the client's share
     ``0.5 / N ||X_k - X_k W||^2`` of the pooled loss (``C_k = X_k'X_k / N``, ``N`` the rows of all
     clients; with equal client sizes this is the authors' ``X_k'X_k / n / K``);
  2. :func:`consensus_step` at the server: ``min lambda1 |Z|_1 + alpha h(Z) + rho1/2 h(Z)^2 +
     sum_k <B_k, W_k - Z> + rho2/2 ||W_k - Z||^2`` by L-BFGS-B, warm-started at the last ``Z``
     (the acyclicity constraint and the L1 penalty live here, as in the paper);
  3. ``alpha += rho1 h(Z)``, ``B_k += rho2 (W_k - Z)`` (:func:`dual_step`), then ``rho1 *= 1.75``
     and ``rho2 *= 1.25`` while below ``rho_max``; stop when both reached ``rho_max`` or after
     ``max_iter`` iterations. :class:`AdmmState` is the server's part; :func:`notears_admm`
     runs the whole loop in memory (the reference the federated run must equal).

As in the authors' code the ADMM matrices keep their diagonal free by default (``h`` penalises a
self-loop); ``zero_diagonal`` fixes it to 0 in both subproblems instead (as centralised NOTEARS
does), which keeps the early local solutions away from ``W_k ~ I``. Every client centres its own
columns. The estimate is :func:`threshold_dag` of ``Z``:
``|w| <= threshold`` set to 0, then the smallest remaining weights removed until no directed
cycle is left (the authors' post-processing, taken from GOLEM).

:func:`frequency_midpoints` is the map of discrete columns to numbers that FedC2SL's experiments
used before running NOTEARS-ADMM: levels sorted by falling frequency, each mapped to the midpoint
of its interval of cumulative frequency, times a scale (20 there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
from scipy.optimize import minimize


# --------------------------------------------------------------------------- the score pieces
def exp_nonnegative(matrix: np.ndarray, degree: int = 18) -> np.ndarray:
    """``exp(A)`` of an elementwise non-negative ``A`` by scaling and squaring a Taylor
    polynomial: every term is non-negative, so there is no cancellation, and after scaling to
    ``|A|_1 <= 1`` the remainder of degree 18 is below ``1 / 19! ~ 8e-18`` relative.

    Pure numpy: scipy's ``expm`` calls threaded LAPACK for every tiny matrix, which costs up to
    100x more on a busy machine, and the consensus step evaluates ``h`` thousands of times."""
    norm = float(np.abs(matrix).sum(axis=0).max()) if matrix.size else 0.0
    if not np.isfinite(norm):
        return np.full(matrix.shape, np.inf)
    squarings = max(0, int(np.ceil(np.log2(norm)))) if norm > 1.0 else 0
    scaled = matrix / 2.0**squarings
    eye = np.eye(len(matrix))
    result = eye + scaled / degree
    for k in range(degree - 1, 0, -1):
        result = eye + (scaled @ result) / k
    for _ in range(squarings):
        result = result @ result
    return result


def acyclicity(weights: np.ndarray) -> tuple[float, np.ndarray]:
    """``h(W) = tr(exp(W o W)) - d`` (zero iff ``W`` is the weight matrix of a DAG) and its
    gradient ``exp(W o W)' o 2W``."""
    exp = exp_nonnegative(weights * weights)
    return float(np.trace(exp) - len(weights)), exp.T * 2.0 * weights


def least_squares(weights: np.ndarray, covariance: np.ndarray) -> tuple[float, np.ndarray]:
    """``0.5 tr((I - W)' C (I - W))`` and its gradient ``-C (I - W)``."""
    residual = np.eye(len(weights)) - weights
    c_residual = covariance @ residual
    return 0.5 * float(np.sum(residual * c_residual)), -c_residual


def centred_gram(values: np.ndarray) -> np.ndarray:
    """``X'X`` of the columns centred on their own means (a client centres its own data)."""
    centred = values - values.mean(axis=0, keepdims=True)
    return centred.T @ centred


def _split(z: np.ndarray) -> np.ndarray:
    """``W = W+ - W-`` as the optimiser's vector ``[W+, W-]``."""
    return np.concatenate([np.maximum(z, 0.0).ravel(), np.maximum(-z, 0.0).ravel()])


def _join(x: np.ndarray, d: int) -> np.ndarray:
    return (x[: d * d] - x[d * d :]).reshape(d, d)


def _quiet_trial_steps(
    objective: Callable[[np.ndarray], tuple[float, np.ndarray]],
) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """Evaluate without floating-point warnings: L-BFGS-B's line search tries long steps where
    ``exp(W o W)`` overflows; it gets an infinite value there and steps back, so the overflow
    changes nothing but would print a warning per trial."""

    def quiet(x: np.ndarray) -> tuple[float, np.ndarray]:
        with np.errstate(over="ignore", invalid="ignore"):
            return objective(x)

    return quiet


def _bounds(d: int, zero_diagonal: bool) -> list[tuple[float, float | None]]:
    """``W+, W- >= 0``, and 0 on the diagonal when self-loops are excluded."""
    free: tuple[float, float | None] = (0.0, None)
    fixed: tuple[float, float | None] = (0.0, 0.0)
    half = [fixed if zero_diagonal and i == j else free for i in range(d) for j in range(d)]
    return half + half


# --------------------------------------------------------------------------- centralised NOTEARS
@dataclass
class NotearsFit:
    """A fitted weight matrix (before thresholding) and where the Lagrangian stopped."""

    weights: np.ndarray
    h: float
    rho: float
    alpha: float
    iterations: int


def notears_linear(
    covariance: np.ndarray,
    lambda1: float = 0.01,
    *,
    max_iter: int = 100,
    h_tol: float = 1e-8,
    rho_max: float = 1e16,
) -> NotearsFit:
    """Centralised linear NOTEARS on the covariance ``C = X'X / n`` of centred data."""
    d = len(covariance)
    bounds = _bounds(d, zero_diagonal=True)
    rho, alpha, h = 1.0, 0.0, np.inf

    @_quiet_trial_steps
    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        w = _join(x, d)
        loss, g_loss = least_squares(w, covariance)
        h_val, g_h = acyclicity(w)
        value = loss + 0.5 * rho * h_val * h_val + alpha * h_val + lambda1 * x.sum()
        g = g_loss + (rho * h_val + alpha) * g_h
        return value, np.concatenate([g.ravel() + lambda1, -g.ravel() + lambda1])

    x = np.zeros(2 * d * d)
    iterations = 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 (reported)
        while rho < rho_max:
            x_new = minimize(objective, x, method="L-BFGS-B", jac=True, bounds=bounds).x
            h_new = acyclicity(_join(x_new, d))[0]
            if h_new > 0.25 * h:
                rho *= 10.0
            else:
                break
        x, h = x_new, h_new
        alpha += rho * h
        if h <= h_tol or rho >= rho_max:
            break
    return NotearsFit(_join(x, d), float(h), rho, alpha, iterations)


# --------------------------------------------------------------------------- ADMM pieces
def local_step(
    covariance: np.ndarray,
    consensus: np.ndarray,
    dual: np.ndarray,
    rho: float,
    zero_diagonal: bool = False,
) -> np.ndarray:
    """A client's subproblem ``min 0.5 tr((I-W)'C(I-W)) + <B, W - Z> + rho/2 ||W - Z||^2``:
    the solution of ``(C + rho I) W = C + rho Z - B``; with ``zero_diagonal`` the same per
    column over the other variables (no self-loop), one batched solve."""
    d = len(covariance)
    rhs = covariance + rho * consensus - dual
    if not zero_diagonal:
        return np.linalg.solve(covariance + rho * np.eye(d), rhs)
    others = np.array([np.delete(np.arange(d), j) for j in range(d)]).reshape(d, d - 1)
    blocks = covariance[others[:, :, None], others[:, None, :]] + rho * np.eye(d - 1)
    columns = np.linalg.solve(blocks, rhs[others, np.arange(d)[:, None]][..., None])[..., 0]
    out = np.zeros((d, d))
    out[others, np.arange(d)[:, None]] = columns
    return out


def dual_step(dual: np.ndarray, rho: float, local: np.ndarray, consensus: np.ndarray) -> np.ndarray:
    """``B + rho (W - Z)``: the same expression on the server and at the client, so both hold
    the same bits."""
    return dual + rho * (local - consensus)


def consensus_step(
    locals_: np.ndarray,
    duals: np.ndarray,
    start: np.ndarray,
    *,
    lambda1: float,
    alpha: float,
    rho1: float,
    rho2: float,
    zero_diagonal: bool = False,
) -> np.ndarray:
    """The server's subproblem over ``Z`` (see the module docstring), by L-BFGS-B from ``start``
    on ``Z = Z+ - Z-``; ``locals_`` and ``duals`` are ``K x d x d`` stacks."""
    d = start.shape[0]
    n_clients = len(locals_)
    local_sum, dual_sum = locals_.sum(axis=0), duals.sum(axis=0)

    @_quiet_trial_steps
    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        z = _join(x, d)
        h_val, g_h = acyclicity(z)
        gap = locals_ - z
        value = (
            lambda1 * x.sum()
            + alpha * h_val
            + 0.5 * rho1 * h_val * h_val
            + float(np.sum(duals * gap))
            + 0.5 * rho2 * float(np.sum(gap * gap))
        )
        g = (alpha + rho1 * h_val) * g_h - dual_sum - rho2 * (local_sum - n_clients * z)
        return value, np.concatenate([g.ravel() + lambda1, -g.ravel() + lambda1])

    bounds = _bounds(d, zero_diagonal)
    solution = minimize(objective, _split(start), method="L-BFGS-B", jac=True, bounds=bounds)
    return _join(solution.x, d)


@dataclass(frozen=True)
class AdmmSettings:
    """The schedule (defaults: the authors' linear code and example notebook)."""

    lambda1: float = 0.01
    rho1: float = 0.001  # initial penalty of h(Z)^2
    rho2: float = 0.001  # initial penalty of the consensus ||W_k - Z||^2
    rho1_growth: float = 1.75
    rho2_growth: float = 1.25
    rho_max: float = 1e16
    max_iter: int = 200
    zero_diagonal: bool = False  # the code leaves the diagonal to h


@dataclass
class AdmmState:
    """The server's part of the ADMM: consensus, multiplier, penalties, every client's dual (the
    clients keep their own copy), and the per-iteration trace."""

    d: int
    settings: AdmmSettings
    consensus: np.ndarray = field(init=False)
    alpha: float = 0.0
    rho1: float = field(init=False)
    rho2: float = field(init=False)
    dual_rho: float | None = None  # the rho2 of the last dual update (the clients repeat it)
    iteration: int = 0  # ADMM iterations completed
    duals: dict[int, np.ndarray] = field(default_factory=dict)
    trace: list[dict[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.consensus = np.zeros((self.d, self.d))
        self.rho1, self.rho2 = self.settings.rho1, self.settings.rho2

    @property
    def finished(self) -> bool:
        s = self.settings
        return self.iteration >= s.max_iter or (self.rho1 >= s.rho_max and self.rho2 >= s.rho_max)

    def dual_of(self, client: int) -> np.ndarray:
        return self.duals.get(client, np.zeros((self.d, self.d)))

    def drop(self, clients: list[int]) -> None:
        """Forget clients that left (their data leaves the objective)."""
        for client in clients:
            self.duals.pop(client, None)

    def advance(self, locals_: Mapping[int, np.ndarray]) -> dict[str, float]:
        """One iteration's server half, given every client's ``W_k``: consensus step, then the
        multiplier, dual and penalty updates. Returns the iteration's trace entry."""
        clients = sorted(locals_)
        stack = np.stack([locals_[k] for k in clients])
        duals = np.stack([self.dual_of(k) for k in clients])
        s = self.settings
        previous = self.consensus
        self.consensus = consensus_step(
            stack, duals, previous, lambda1=s.lambda1, alpha=self.alpha, rho1=self.rho1,
            rho2=self.rho2, zero_diagonal=s.zero_diagonal,
        )  # fmt: skip
        h = acyclicity(self.consensus)[0]
        entry = {
            "iteration": self.iteration + 1,
            "h": h,
            "primal_residual": float(np.sqrt(np.sum((stack - self.consensus) ** 2))),
            "dual_residual": float(
                self.rho2 * np.sqrt(len(clients)) * np.linalg.norm(self.consensus - previous)
            ),
            "rho1": self.rho1,
            "rho2": self.rho2,
        }
        self.alpha += self.rho1 * h
        for k in clients:
            self.duals[k] = dual_step(self.dual_of(k), self.rho2, locals_[k], self.consensus)
        self.dual_rho = self.rho2
        if self.rho1 < s.rho_max:
            self.rho1 *= s.rho1_growth
        if self.rho2 < s.rho_max:
            self.rho2 *= s.rho2_growth
        self.iteration += 1
        self.trace.append(entry)
        return entry


def notears_admm(covariances: list[np.ndarray], settings: AdmmSettings | None = None) -> AdmmState:
    """The whole ADMM in memory on the clients' ``C_k = X_k'X_k / N`` (what the federated run
    computes, step for step)."""
    state = AdmmState(len(covariances[0]), settings or AdmmSettings())
    while not state.finished:
        locals_ = {
            k: local_step(
                c, state.consensus, state.dual_of(k), state.rho2, state.settings.zero_diagonal
            )
            for k, c in enumerate(covariances)
        }
        state.advance(locals_)
    return state


# --------------------------------------------------------------------------- post-processing
def threshold_dag(weights: np.ndarray, threshold: float) -> tuple[np.ndarray, float]:
    """Zero the diagonal and every ``|w| <= threshold``, then remove the smallest remaining
    weights until the graph is acyclic. Returns the DAG's weights and the largest ``|w|`` removed
    for a cycle (0 if none was)."""
    out = np.array(weights, dtype=np.float64)
    np.fill_diagonal(out, 0.0)
    out[np.abs(out) <= threshold] = 0.0
    cut = 0.0
    rows, cols = np.nonzero(out)
    graph = nx.DiGraph(zip(rows.tolist(), cols.tolist(), strict=True))
    order = np.argsort(np.abs(out[rows, cols]), kind="stable")
    for i, j in zip(rows[order].tolist(), cols[order].tolist(), strict=True):
        if nx.is_directed_acyclic_graph(graph):
            break
        cut = abs(float(out[i, j]))
        out[i, j] = 0.0
        graph.remove_edge(i, j)
    return out, cut


# --------------------------------------------------------------------------- discrete columns
def frequency_midpoints(counts: np.ndarray, scale: float = 20.0) -> np.ndarray:
    """FedC2SL's numbers for the levels of a discrete column, from the pooled ``counts`` (in level
    order): levels sorted by falling frequency (ties: level order), each mapped to ``scale`` times
    the midpoint of its interval of cumulative frequency."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if total <= 0:
        raise ValueError("a column needs at least one counted value")
    order = np.lexsort((np.arange(len(counts)), -counts))
    share = counts[order] / total
    left = np.concatenate([[0.0], np.cumsum(share)[:-1]])
    values = np.empty(len(counts))
    values[order] = left + share / 2.0
    return scale * values
