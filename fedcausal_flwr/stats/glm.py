"""Federated GLM likelihood-ratio CI tests for mixed data (fedCI, Hahn et al.; Secs. II-B, III-A).

Why this shape: a GLM fit by Newton/IRLS only needs sums over rows of ``X^T W X``, ``X^T W z`` and
the log-likelihood, and rows are split over clients, so every client computes its blocks at the
server's current coefficients and the server adds them up. The server's fit is therefore exactly
the pooled maximum-likelihood fit (ridge 0 by default), and the LRT p-values equal the pooled ones.

Design matrices (global level sets from the :class:`~fedcausal_flwr.data.schema.Schema`, so all
clients encode alike): an intercept column first, then per predictor in the order given one column
for a continuous or binary variable, ``L - 1`` dummies (first level is the reference) for an
ordinal or categorical one. ``site_effect="fixed"`` appends ``K' - 1`` dummies for the clients
taking part in the test (first participant is the reference).

Response models (``m`` parameter blocks of ``p`` coefficients, stacked block by block):

* continuous: Gaussian, identity link, ``m = 1``; the log-likelihood uses the pooled MLE variance
  ``sigma^2 = sum RSS_k / sum n_k`` (local Gaussian log-likelihoods are never summed).
* binary: logit, ``m = 1``.
* categorical (L levels): multinomial logit against the first level, ``m = L - 1``.
* ordinal (L levels): as the authors' python-fedci and MXM::ordinal.reg (the paper only says
  "ordered logit": docs/choices.md, fedCI): ``L - 1`` cumulative logits
  ``P(Y <= l_j) = sigmoid(x beta_j)``, each fitted as its own logistic regression
  (block-diagonal information); the log-likelihood reported for the LRT is
  ``sum log P(Y = y_i)`` from the differenced cumulative probabilities (a row with a negative
  difference is replaced by ``|row| / sum |row|``; probabilities floored at 1e-8).

Site effects: ``"none"``; ``"fixed"`` (client dummies, the pooled model ``Y ~ X + Z + site``);
``"private"`` (each client keeps its own intercept per block, never sent). For ``"private"`` each
client maximises its intercepts for the given slopes and sends the Schur complement of its
information (the profile-likelihood Hessian) and the profile score; the server's Newton step is
then the exact joint Newton step, so ``"private"`` reaches the same MLE (and p-values) as
``"fixed"`` without the server seeing site coefficients. This replaces fedCI's coordinate-ascent
variant (CA), which has the same fixed point but converges slower.

Server step (Eq. (9) with Appendix A's ridge and line search; the constants are python-fedci's
server defaults, docs/choices.md, fedCI): ``beta_new = beta + a ((H + R)^-1 (H beta + g) - beta)``,
step ``a`` halved while the log-likelihood gets worse (give up at ``a <= 1e-8``: ``bad_fit``);
stop when ``|delta loglik| < tol`` (1e-5), ``||delta beta|| < 1e-8`` or 25 accepted iterations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import expit, log_expit

from fedcausal_flwr.data.schema import DataError, Schema, VariableSpec

SITE_EFFECTS = ("none", "fixed", "private")
PROB_FLOOR = 1e-8  # ordinal cell probabilities (as python-fedci; docs/choices.md, fedCI)
N_HEAD = 4  # packed vector head: objective, loglik, rss, n


# --------------------------------------------------------------------------- model description
@dataclass(frozen=True)
class GLMModel:
    """One GLM ``response ~ predictors`` over the rows of the clients ``sites`` (client indices);
    ``rows``: only the rows observed on these variables count (test-wise deletion: a test's x, y
    and S, so its four models use the same rows); a row missing a model variable never counts."""

    response: str
    predictors: tuple[str, ...]
    site_effect: str = "none"
    sites: tuple[int, ...] = ()
    rows: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.site_effect not in SITE_EFFECTS:
            raise ValueError(f"unknown site_effect {self.site_effect!r}; use one of {SITE_EFFECTS}")
        if self.response in self.predictors:
            raise ValueError(f"response {self.response!r} is also a predictor")

    @property
    def variables(self) -> tuple[str, ...]:
        return (self.response, *self.predictors)


def predictor_width(spec: VariableSpec) -> int:
    """Design columns a predictor contributes: 1, or ``L - 1`` dummies."""
    if spec.kind in ("continuous", "binary"):
        return 1
    return spec.card - 1


def response_blocks(spec: VariableSpec) -> int:
    """Parameter blocks ``m`` of a response: 1, or ``L - 1``."""
    if spec.kind in ("continuous", "binary"):
        return 1
    if spec.card < 2:
        raise DataError(f"response {spec.name!r} has fewer than two levels {spec.levels}")
    return spec.card - 1


def design_width(model: GLMModel, schema: Schema) -> int:
    """Columns ``p`` of the design (intercept, predictors, fixed site dummies)."""
    p = 1 + sum(predictor_width(schema[v]) for v in model.predictors)
    if model.site_effect == "fixed":
        p += max(len(model.sites) - 1, 0)
    return p


def n_global_params(model: GLMModel, schema: Schema) -> int:
    """Length of the server's coefficient vector (private intercepts excluded)."""
    p = design_width(model, schema)
    if model.site_effect == "private":
        p -= 1
    return p * response_blocks(schema[model.response])


def model_dof(model: GLMModel, schema: Schema) -> int:
    """Parameters counted by the LRT (``m * p``; private intercepts as fixed site dummies)."""
    p = 1 + sum(predictor_width(schema[v]) for v in model.predictors)
    return p * response_blocks(schema[model.response])


# --------------------------------------------------------------------------- client data
class ClientTable:
    """One client's frame with cached encodings (design columns, responses) over the schema."""

    def __init__(self, data: pd.DataFrame, schema: Schema, name: str = "client"):
        if not isinstance(data, pd.DataFrame):
            raise TypeError(f"client {name!r}: expected a DataFrame, got {type(data).__name__}")
        self.data, self.schema, self.name = data, schema, str(name)
        self.columns = frozenset(data.columns)
        self._columns: dict[str, np.ndarray] = {}
        self._codes: dict[str, np.ndarray] = {}
        self._missing: dict[str, np.ndarray] = {}  # column -> rows where it is missing
        self._counted: dict[GLMModel, np.ndarray | None] = {}  # model -> its rows, every iteration
        self.private_intercepts: dict[GLMModel, np.ndarray] = {}  # warm starts, never sent

    @property
    def n_rows(self) -> int:
        return len(self.data)

    def observes(self, names: Sequence[str]) -> bool:
        return all(v in self.columns for v in names)

    def values(self, name: str) -> np.ndarray:
        """Level codes (discrete) or floats (continuous) of one column (a missing value's entry
        is 0: :meth:`complete` leaves its row out)."""
        if name not in self._codes:
            if name not in self.columns:
                raise DataError(f"client {self.name!r}: variable {name!r} is not observed")
            absent = self.data[name].isna().to_numpy()
            if not absent.any():
                self._codes[name] = self.schema.encode(self.data, self.name, [name])[:, 0]
            else:  # a bool column with gaps is of dtype object: its values are bools again
                seen_rows = self.data.loc[~absent, [name]].infer_objects()
                seen = self.schema.encode(seen_rows, self.name, [name])
                codes = np.zeros(self.n_rows, dtype=seen.dtype)
                codes[~absent] = seen[:, 0]
                self._codes[name], self._missing[name] = codes, absent
        return self._codes[name]

    def counted_rows(self, model: GLMModel) -> np.ndarray | None:
        """The rows a model counts (None: all): those observed on its ``rows`` (test-wise
        deletion); a missing value of a model variable in a counted row is an error. Kept per
        model: IRLS asks it at every iteration."""
        if model in self._counted:
            return self._counted[model]
        counted = self.complete(model.rows) if model.rows else None
        for name in model.variables:
            gaps = self.complete([name])
            if gaps is not None and (~gaps if counted is None else counted & ~gaps).any():
                raise DataError(
                    f"client {self.name!r}: variable {name!r} has missing values; delete them "
                    "test-wise (missing='testwise') or list-wise (missing='listwise')"
                )
        self._counted[model] = counted
        return counted

    def complete(self, names: Sequence[str]) -> np.ndarray | None:
        """Rows observed on every variable of ``names`` (None: all rows are)."""
        for name in names:
            self.values(name)
        gaps = [self._missing[n] for n in dict.fromkeys(names) if n in self._missing]
        if not gaps:
            return None
        return ~np.logical_or.reduce(gaps)

    def predictor(self, name: str) -> np.ndarray:
        """Design columns of one predictor (``n x width``)."""
        if name not in self._columns:
            spec = self.schema[name]
            v = self.values(name)
            if spec.kind in ("continuous", "binary"):
                cols = v.astype(np.float64)[:, None]
            else:
                cols = (v.astype(np.int64)[:, None] == np.arange(1, spec.card)[None, :]).astype(
                    np.float64
                )
            self._columns[name] = cols
        return self._columns[name]

    def design(self, model: GLMModel, client_index: int) -> np.ndarray:
        """``n x p`` design: intercept, predictors, fixed site dummies."""
        parts = [np.ones((self.n_rows, 1))]
        parts += [self.predictor(v) for v in model.predictors]
        if model.site_effect == "fixed" and len(model.sites) > 1:
            dummies = np.zeros((self.n_rows, len(model.sites) - 1))
            pos = model.sites.index(client_index)
            if pos > 0:
                dummies[:, pos - 1] = 1.0
            parts.append(dummies)
        return np.hstack(parts)


# --------------------------------------------------------------------------- family blocks
@dataclass
class LocalBlocks:
    """What one client contributes for one model at one coefficient vector."""

    objective: float  # the log-likelihood the Newton iteration maximises (Gaussian: -RSS/2)
    loglik: float  # the log-likelihood reported to the LRT (ordinal: differenced; Gaussian: 0)
    rss: float
    n: float
    info: np.ndarray  # P x P (Fisher information / negative Hessian)
    grad: np.ndarray  # P


def _blocks(
    theta: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    spec: VariableSpec,
    weights: np.ndarray | None = None,
) -> LocalBlocks:
    """Local blocks for the stacked parameters ``theta`` (``m`` blocks of ``p``); ``weights``
    scale every row's terms (a differentially private fit's clipping; None: each row once)."""
    n, p = X.shape
    kind = spec.kind

    def wt(v: np.ndarray) -> np.ndarray:  # a per-row quantity, weighted
        if weights is None:
            return v
        return v * (weights if v.ndim == 1 else weights[:, None])

    count = float(n) if weights is None else float(weights.sum())
    if kind == "continuous":
        resid = y - X @ theta
        rss = float(resid @ wt(resid))
        return LocalBlocks(-0.5 * rss, 0.0, rss, count, X.T @ wt(X), X.T @ wt(resid))
    if kind == "binary":
        eta = X @ theta
        mu = expit(eta)
        ll = float(np.sum(wt(y * log_expit(eta) + (1 - y) * log_expit(-eta))))
        info = X.T @ (X * wt(mu * (1 - mu))[:, None])
        return LocalBlocks(ll, ll, 0.0, count, info, X.T @ wt(y - mu))
    m = spec.card - 1
    B = theta.reshape(m, p).T  # p x m
    eta = X @ B  # n x m
    codes = y.astype(np.int64)
    if kind == "categorical":
        lse, prob = _softmax(eta)  # prob: the non-reference probabilities, n x m
        ll = float(np.sum(wt(_chosen(eta, codes) - lse)))
        onehot = codes[:, None] == np.arange(1, m + 1)[None, :]
        grad = (X.T @ wt(onehot - prob)).T.ravel()
        info = np.empty((m * p, m * p))
        for a in range(m):
            for b in range(a, m):
                w = wt(prob[:, a] * ((a == b) - prob[:, b]))
                block = X.T @ (X * w[:, None])
                info[a * p : (a + 1) * p, b * p : (b + 1) * p] = block
                info[b * p : (b + 1) * p, a * p : (a + 1) * p] = block
        return LocalBlocks(ll, ll, 0.0, count, info, grad)
    # ordinal: m independent cumulative logits
    below = (codes[:, None] <= np.arange(m)[None, :]).astype(np.float64)  # 1{y <= l_j}
    objective = float(np.sum(wt(below * log_expit(eta) + (1 - below) * log_expit(-eta))))
    mu = expit(eta)
    grad = (X.T @ wt(below - mu)).T.ravel()
    info = np.zeros((m * p, m * p))
    for j in range(m):
        w = wt(mu[:, j] * (1 - mu[:, j]))
        info[j * p : (j + 1) * p, j * p : (j + 1) * p] = X.T @ (X * w[:, None])
    ll = float(np.sum(wt(np.log(ordinal_cell_probs(mu)[np.arange(n), codes]))))
    return LocalBlocks(objective, ll, 0.0, count, info, grad)


def _softmax(eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's log-partition ``log(1 + sum_j exp(eta_j))`` (the reference level's logit is 0)
    and its non-reference probabilities ``exp(eta - lse)``.

    The arithmetic of scipy's ``logsumexp`` (1.17) for finite rows, step for step, so the fits
    are bit for bit the same: the row's largest terms are split off (``log1p`` of the others'
    scaled sum plus the log of their count); what scipy adds around it (array-namespace
    dispatch, a second exponential for infinite sums) took most of a categorical fit's time."""
    full = np.empty((eta.shape[0], eta.shape[1] + 1))
    full[:, 0], full[:, 1:] = 0.0, eta
    largest = full.max(axis=1, keepdims=True)
    at_max = full == largest
    ties = at_max.sum(axis=1, keepdims=True, dtype=np.float64)
    full[at_max] = -np.inf  # (in place from here: the terms are not needed again)
    full -= largest
    total = np.exp(full, out=full).sum(axis=1, keepdims=True)
    np.divide(total, ties, out=total, where=total != 0)
    lse = (np.log1p(total) + np.log(ties) + largest)[:, 0]
    return lse, np.exp(eta - lse[:, None])


def _chosen(eta: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Each row's logit of its own level (0 for the reference level, code 0)."""
    rows = np.arange(len(codes))
    return np.where(codes > 0, eta[rows, np.maximum(codes - 1, 0)], 0.0)


def ordinal_cell_probs(cum: np.ndarray) -> np.ndarray:
    """Cell probabilities from cumulative ones (``n x (L-1)``), repaired as python-fedci does."""
    n = cum.shape[0]
    probs = np.diff(np.hstack([np.zeros((n, 1)), cum, np.ones((n, 1))]), axis=1)
    bad = (probs < 0).any(axis=1)
    if bad.any():
        fixed = np.abs(probs[bad])
        probs[bad] = fixed / fixed.sum(axis=1, keepdims=True)
    return np.maximum(probs, PROB_FLOOR)


def pack(b: LocalBlocks) -> np.ndarray:
    """One float vector ``[objective, loglik, rss, n, H beta + g (P), H (P*P)]`` (sums add up)."""
    return np.concatenate([[b.objective, b.loglik, b.rss, b.n], b.grad, b.info.ravel()])


def packed_size(n_params: int) -> int:
    return N_HEAD + n_params + n_params * n_params


def local_contribution(
    table: ClientTable,
    client_index: int,
    model: GLMModel,
    beta: np.ndarray,
    clip: float | None = None,
) -> np.ndarray:
    """A client's packed contribution at the server's ``beta`` (zeros if it lacks a variable,
    or is not one of the model's ``sites``); ``clip``: each row's own packed contribution is
    scaled to L2 norm at most ``clip`` first (:func:`row_norms`; a differentially private fit).

    The vector part is ``H beta + g`` (IRLS's ``X^T W z``), so the server's update is
    ``(H + R)^-1 (sum) `` without knowing local quantities. The four models of one test must be
    fitted on the same rows, so a client outside ``sites`` sends zeros even for a model whose
    variables it holds (without that, a client lacking ``y`` would join ``x ~ S`` but not
    ``x ~ y + S``, and their likelihood ratio would compare different rows). Empty ``sites``
    with no site effect means every client.
    """
    schema = table.schema
    P = n_global_params(model, schema)
    beta = np.asarray(beta, dtype=np.float64)
    if beta.shape != (P,):
        raise ValueError(f"model {model}: beta has shape {beta.shape}, expected ({P},)")
    outside = client_index not in model.sites and (bool(model.sites) or model.site_effect != "none")
    if outside or not table.observes(model.variables):
        return np.zeros(packed_size(P))
    spec = schema[model.response]
    X = table.design(model, client_index)
    y = table.values(model.response)
    rows = table.counted_rows(model)
    if rows is not None:  # test-wise deletion
        X, y = X[rows], y[rows]
    if model.site_effect != "private":
        weights = None
        if clip is not None:
            weights = np.minimum(1.0, clip / np.maximum(row_norms(beta, X, y, spec), 1e-300))
        b = _blocks(beta, X, y, spec, weights)
        b.grad = b.info @ beta + b.grad
        return pack(b)
    if clip is not None:
        raise ValueError("a private site effect's blocks cannot be clipped row by row")
    alpha = table.private_intercepts.get(model)
    blocks, table.private_intercepts[model] = _profile_blocks(beta, X, y, spec, alpha)
    return pack(blocks)


def row_norms(theta: np.ndarray, X: np.ndarray, y: np.ndarray, spec: VariableSpec) -> np.ndarray:
    """The L2 norm of each row's own packed contribution ``[objective, loglik, rss, 1,
    H_i theta + g_i, H_i]`` (what :func:`local_contribution` sums), from closed forms: ``H_i`` is
    a weight matrix ``M_i`` times ``x_i x_i^T`` (norm ``||M_i||_F ||x_i||^2``) and ``H_i theta +
    g_i`` is ``x_i`` times a vector ``v_i`` (norm ``||x_i|| ||v_i||``)."""
    n, p = X.shape
    x2 = np.einsum("ij,ij->i", X, X)  # ||x_i||^2
    kind = spec.kind
    if kind == "continuous":
        resid = y - X @ theta
        head = 0.25 * resid**4 + resid**4  # objective -r^2/2, rss r^2
        v2, m2 = y**2, np.ones(n)
    elif kind == "binary":
        eta = X @ theta
        mu = expit(eta)
        w = mu * (1 - mu)
        ll = y * log_expit(eta) + (1 - y) * log_expit(-eta)
        head = 2 * ll**2
        v2, m2 = (w * eta + y - mu) ** 2, w**2
    else:
        m = spec.card - 1
        eta = X @ theta.reshape(m, p).T  # n x m
        codes = y.astype(np.int64)
        if kind == "categorical":
            lse, prob = _softmax(eta)
            ll = _chosen(eta, codes) - lse
            onehot = codes[:, None] == np.arange(1, m + 1)[None, :]
            weight = prob[:, :, None] * (np.eye(m)[None] - prob[:, None, :])  # n x m x m
            v = np.einsum("iab,ib->ia", weight, eta) + onehot - prob
            head = 2 * ll**2
            m2 = np.einsum("iab,iab->i", weight, weight)
        else:  # ordinal
            below = (codes[:, None] <= np.arange(m)[None, :]).astype(np.float64)
            mu = expit(eta)
            w = mu * (1 - mu)
            objective = np.sum(below * log_expit(eta) + (1 - below) * log_expit(-eta), axis=1)
            ll = np.log(ordinal_cell_probs(mu)[np.arange(n), codes])
            v = w * eta + below - mu
            head = objective**2 + ll**2
            m2 = np.sum(w**2, axis=1)
        v2 = np.einsum("ia,ia->i", v, v)
    return np.sqrt(head + 1.0 + x2 * v2 + x2**2 * m2)


def _profile_blocks(
    beta: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    spec: VariableSpec,
    alpha: np.ndarray | None = None,
) -> tuple[LocalBlocks, np.ndarray]:
    """Private intercepts maximised locally (warm start ``alpha``); Schur complement and profile
    score for the slopes, and the intercepts to start from next time."""
    n, p = X.shape
    m = response_blocks(spec)
    is_alpha = np.zeros(m * p, dtype=bool)
    is_alpha[np.arange(m) * p] = True
    theta = np.zeros(m * p)
    theta[~is_alpha] = beta
    if alpha is not None:
        theta[is_alpha] = alpha
    b = _blocks(theta, X, y, spec)
    for _ in range(50):  # Newton on the m local intercepts, with step halving
        h_aa = b.info[np.ix_(is_alpha, is_alpha)]
        step = _solve(h_aa, b.grad[is_alpha])
        a = 1.0
        while True:
            trial = theta.copy()
            trial[is_alpha] += a * step
            tb = _blocks(trial, X, y, spec)
            if tb.objective >= b.objective - 1e-12 * (1 + abs(b.objective)) or a < 1e-8:
                break
            a *= 0.5
        theta, b = trial, tb
        if np.max(np.abs(a * step)) < 1e-11:
            break
    h_ab = b.info[np.ix_(is_alpha, ~is_alpha)]
    h_aa = b.info[np.ix_(is_alpha, is_alpha)]
    solved = _solve(h_aa, np.column_stack([h_ab, b.grad[is_alpha]]))
    h_bb = b.info[np.ix_(~is_alpha, ~is_alpha)] - h_ab.T @ solved[:, :-1]
    g_b = b.grad[~is_alpha] - h_ab.T @ solved[:, -1]
    blocks = LocalBlocks(b.objective, b.loglik, b.rss, b.n, h_bb, h_bb @ beta + g_b)
    return blocks, theta[is_alpha]


def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(a, b, rcond=None)[0]


# --------------------------------------------------------------------------- server step
@dataclass
class NewtonState:
    """The server's IRLS/Newton state for one model: what to evaluate next, and when to stop."""

    model: GLMModel
    n_params: int
    kind: str
    ridge: float = 0.0
    ridge_mask: np.ndarray | None = None
    tol: float = 1e-5
    max_iter: int = 25
    min_step: float = 1e-8
    objective_noise: float = 0.0  # absolute noise of the summed objective (fixed-point sums)
    #: variance of the differential-privacy noise on every summed entry (0: exact sums)
    sum_noise: float = 0.0
    #: variance of the noise in :attr:`loglik` (from :attr:`sum_noise`; 0: exact)
    loglik_noise: float = field(init=False, default=0.0)
    beta_eval: np.ndarray = field(init=False)
    beta: np.ndarray = field(init=False)
    loglik: float = field(init=False, default=float("nan"))
    objective: float | None = field(init=False, default=None)
    n: float = field(init=False, default=0.0)
    iterations: int = field(init=False, default=0)
    rounds: int = field(init=False, default=0)
    status: str = field(init=False, default="running")
    _target: np.ndarray = field(init=False)
    _step: float = field(init=False, default=1.0)

    def __post_init__(self) -> None:
        self.beta_eval = np.zeros(self.n_params)
        self.beta = self.beta_eval.copy()
        self._target = self.beta_eval.copy()

    @property
    def done(self) -> bool:
        return self.status != "running"

    def update(self, summed: np.ndarray) -> None:
        """Take the summed packed contributions at ``beta_eval``; set the next point or stop."""
        P = self.n_params
        summed = np.asarray(summed, dtype=np.float64)
        if summed.shape != (packed_size(P),):
            raise ValueError(f"summed blocks have shape {summed.shape}, expected {packed_size(P)}")
        self.rounds += 1
        objective, loglik, rss, n = summed[:N_HEAD]
        if n <= 0:
            self.status = "no_data"
            return
        if self.kind == "continuous":
            if self.sum_noise:  # a noisy RSS may fall below zero: floor it (post-processing)
                rss = max(rss, 1e-8 * n)
            sigma2 = max(rss / n, 1e-300)
            objective = loglik = -0.5 * n * (np.log(2 * np.pi * sigma2) + 1)
            # the noise of rss and n, carried to the log-likelihood (delta method)
            slope_n = 0.5 * np.log(2 * np.pi * sigma2)
            noise = self.sum_noise * ((n / (2 * max(rss, 1e-300))) ** 2 + slope_n**2)
        else:
            noise = self.sum_noise
        slack = max(1e-12 * (1 + abs(self.objective or 0.0)), self.objective_noise)
        if self.objective is not None and objective < self.objective - slack:
            self._step *= 0.5
            if self._step <= self.min_step:
                self.status = "bad_fit"
                return
            self.beta_eval = self.beta + self._step * (self._target - self.beta)
            return
        previous = self.objective
        self.objective, self.loglik, self.n = float(objective), float(loglik), float(n)
        self.loglik_noise = float(noise)
        self.beta, self._step = self.beta_eval, 1.0
        if previous is not None and abs(self.objective - previous) < self.tol:
            self.status = "converged"
            return
        if self.iterations >= self.max_iter:
            self.status = "max_iter"
            return
        rhs = summed[N_HEAD : N_HEAD + P]
        info = summed[N_HEAD + P :].reshape(P, P)
        if self.sum_noise:  # noisy information: symmetric again (post-processing)
            info = 0.5 * (info + info.T)
        if self.ridge and self.ridge_mask is not None:
            info = info + np.diag(self.ridge * self.ridge_mask)
        self._target = _solve(info, rhs) if P else np.zeros(0)
        self.iterations += 1
        if np.linalg.norm(self._target - self.beta) < 1e-8:
            self.status = "converged"
            return
        self.beta_eval = self._target


def new_state(model: GLMModel, schema: Schema, ridge: float = 0.0, **options) -> NewtonState:
    """A fresh :class:`NewtonState` (ridge on every coefficient but the intercepts)."""
    P = n_global_params(model, schema)
    mask = np.ones(P)
    if model.site_effect != "private":
        p = design_width(model, schema)
        mask[np.arange(response_blocks(schema[model.response])) * p] = 0.0
    return NewtonState(model, P, schema[model.response].kind, ridge, mask, **options)


# --------------------------------------------------------------------------- in-process fitting
def fit_models(
    tables: Sequence[ClientTable],
    models: Sequence[GLMModel],
    ridge: float = 0.0,
    **options,
) -> tuple[list[NewtonState], int]:
    """Fit several models in lockstep (one simulated round advances every unfinished model).

    Contributions are summed in client order. Returns the final states and the number of rounds.
    """
    if not tables:
        raise ValueError("need at least one client")
    schema = tables[0].schema
    states = [new_state(m, schema, ridge, **options) for m in models]
    rounds = 0
    while not all(s.done for s in states):
        rounds += 1
        for s in states:
            if s.done:
                continue
            total = None
            for k, t in enumerate(tables):
                c = local_contribution(t, k, s.model, s.beta_eval)
                total = c if total is None else total + c
            assert total is not None  # tables is not empty
            s.update(total)
    return states, rounds


# --------------------------------------------------------------------------- LRT
def lrt(restricted: NewtonState, full: NewtonState, df: int) -> tuple[float, float]:
    """``T = 2 (l1 - l0)`` and its chi2 p-value with ``df`` degrees of freedom."""
    statistic = 2.0 * (full.loglik - restricted.loglik)
    noise = 4.0 * (full.loglik_noise + restricted.loglik_noise)
    return float(statistic), noisy_chi2_sf(float(statistic), df, noise)


def symmetric_pvalue(p_x: float, p_y: float) -> float:
    """Tsagris et al.'s combination of the two directions: ``min(2 min, max)``."""
    return float(min(2.0 * min(p_x, p_y), max(p_x, p_y)))


def fisher_combine(pvalues: Sequence[float]) -> tuple[float, int, float]:
    """Fisher's method: ``T = -2 sum log p_i``, ``df = 2k``, ``p = chi2_sf(T, df)``."""
    p = np.asarray(pvalues, dtype=np.float64)
    if p.size == 0:
        raise ValueError("Fisher's method needs at least one p-value")
    if np.any((p < 0) | (p > 1)) or np.any(~np.isfinite(p)):
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()}")
    statistic = float(-2.0 * np.sum(np.log(np.maximum(p, 1e-300))))
    df = 2 * p.size
    return statistic, df, float(stats.chi2.sf(statistic, df))


@dataclass(frozen=True)
class CITestResult:
    """A symmetric LRT ``x _||_ y | given`` (p-value nan when no client observes all of them)."""

    x: str
    y: str
    given: tuple[str, ...]
    p_value: float
    p_x: float  # x ~ given  vs  x ~ y + given
    p_y: float  # y ~ given  vs  y ~ x + given
    statistic_x: float
    statistic_y: float
    df_x: int
    df_y: int
    clients: tuple[int, ...]
    n: int
    rounds: int = 0
    status: tuple[str, ...] = ()

    @property
    def statistic(self) -> tuple[float, float]:
        return (self.statistic_x, self.statistic_y)

    @property
    def df(self) -> tuple[int, int]:
        return (self.df_x, self.df_y)


def test_models(
    x: str,
    y: str,
    given: Sequence[str],
    site_effect: str,
    clients: Sequence[int],
    testwise: bool = False,
) -> list[GLMModel]:
    """The four models of a symmetric LRT: x~S, x~y+S, y~S, y~x+S (``testwise``: each over the
    rows observed on x, y and S)."""
    s = tuple(given)
    sites = tuple(clients)
    rows = (x, y, *s) if testwise else ()
    return [
        GLMModel(x, s, site_effect, sites, rows),
        GLMModel(x, (y, *s), site_effect, sites, rows),
        GLMModel(y, s, site_effect, sites, rows),
        GLMModel(y, (x, *s), site_effect, sites, rows),
    ]


def participants(tables: Sequence[ClientTable], names: Sequence[str]) -> tuple[int, ...]:
    """Indices of the clients that observe every variable in ``names``."""
    return tuple(k for k, t in enumerate(tables) if t.observes(names))


def check_test(schema: Schema, x: str, y: str, given: Sequence[str]) -> None:
    names = [x, y, *given]
    for v in names:
        schema.index(v)
    if x == y or len(set(names)) != len(names):
        raise ValueError(f"CI test {x!r} _||_ {y!r} | {list(given)} repeats a variable")


def result_from_states(
    x: str,
    y: str,
    given: Sequence[str],
    states: Sequence[NewtonState],
    schema: Schema,
    clients: Sequence[int],
    rounds: int,
) -> CITestResult:
    """Combine the four fitted models into a :class:`CITestResult`."""
    x0, x1, y0, y1 = states
    df_x = model_dof(x1.model, schema) - model_dof(x0.model, schema)
    df_y = model_dof(y1.model, schema) - model_dof(y0.model, schema)
    status = tuple(s.status for s in states)
    if not clients or any(s == "no_data" for s in status):
        nan = float("nan")
        return CITestResult(x, y, tuple(given), nan, nan, nan, nan, nan, df_x, df_y, (), 0,
                            rounds, status)  # fmt: skip
    t_x, p_x = lrt(x0, x1, df_x)
    t_y, p_y = lrt(y0, y1, df_y)
    return CITestResult(
        x, y, tuple(given), symmetric_pvalue(p_x, p_y), p_x, p_y, t_x, t_y, df_x, df_y,
        tuple(clients), int(x1.n), rounds, status,
    )  # fmt: skip


def ci_test_inprocess(
    tables: Sequence[ClientTable],
    x: str,
    y: str,
    given: Sequence[str] = (),
    site_effect: str = "none",
    ridge: float = 0.0,
    testwise: bool = False,
    **options,
) -> CITestResult:
    """fedCI's symmetric LRT with the federation simulated in this process (``testwise``: over
    the rows observed on x, y and S)."""
    schema = tables[0].schema
    check_test(schema, x, y, given)
    clients = participants(tables, [x, y, *given])
    models = test_models(x, y, given, site_effect, clients, testwise)
    states, rounds = fit_models(tables, models, ridge, **options)
    return result_from_states(x, y, given, states, schema, clients, rounds)


def noisy_chi2_sf(statistic: float, df: float, noise_variance: float) -> float:
    """``P(chi2_df + N(0, noise_variance) >= statistic)``: the p-value of a likelihood-ratio
    statistic computed from noisy log-likelihoods (its noise Gaussian with that variance), by
    Gauss-Hermite quadrature over the noise (exact chi2 without noise)."""
    if noise_variance <= 0:
        return float(stats.chi2.sf(statistic, df))
    nodes, weights = _hermite()
    tails = stats.chi2.sf(statistic - math.sqrt(noise_variance) * nodes, df)
    return float(min(1.0, max(0.0, (weights @ tails) / math.sqrt(2 * math.pi))))


@cache
def _hermite() -> tuple[np.ndarray, np.ndarray]:
    """Probabilists' Gauss-Hermite rule (weight exp(-z^2 / 2)): enough nodes for a chi2 tail's
    kink. Computed on first use: few p-values need it."""
    return np.polynomial.hermite_e.hermegauss(160)
