"""FedCSL's maths (Guo et al., AAAI 2024): HITON-PC per client, client weights, skeleton, merge.

Flower-free; the protocol is :mod:`fedcausal_flwr.strategies.fedcsl`. The FedCSL paper itself
was not available to us: the steps follow the authors' MATLAB code (github.com/Xianjie-Guo/FedCSL,
``FedCSL.m`` and its ``com_func``), read for facts only. Where the code leaves a choice open (or
makes one that depends on the column order) the choice made here is named at the function.

* :func:`hiton_pc` / :func:`hiton_pc_all`: the code's ``HITONPC_G2_plus`` on any
  :class:`~fedcausal_flwr.stats.batch_oracle.CIOracle`: candidates are the variables dependent
  on the target unconditionally (a NaN p-value, i.e. an unreliable test, is *independent* here),
  taken strongest first (:func:`marginal_strength`: the G2 statistic, as the code; ascending p-value
  when no strength is given, ties to the lower index); after adding candidate ``Y`` every
  member ``X`` is re-tested given subsets (size ``0 .. max_depth``) of the other members, and an
  old member ``X != Y`` only given subsets that contain ``Y`` (the "MMHC idea" of the code); a
  NaN conditional p-value is *dependent*.
* :func:`client_weight`: ``calculate_weight.m``: each reliable unconditional p-value (one per
  pair) is mapped to the confidence of its decision, ``(p - alpha) / (1 - alpha)`` above alpha,
  ``1 - p / alpha`` at or below, and the weight is their mean. Larger samples give more extreme
  p-values, hence larger weights: the paper's "relative sample size inferred from p-values".
  A client without any reliable unconditional test gets weight 0 (the code's mean of nothing is
  NaN, which would poison every sum).
* :func:`federated_skeleton`: ``FedCSL.m`` steps 1-3 / 1-4 and ``TGS2skeleton.m``: per variable,
  the neighbour count with the largest total client weight (ties to the smaller count) and then
  that many variables with the largest total weight (ties to the lower index, as MATLAB's stable
  ``sort``); the resulting asymmetric pairs are settled by ``sum_k w_k * (+2 if both endpoints
  list each other on client k, -2 if neither does, else 0) >= 0``.
  A pair every client lists from one side only scores 0 and is kept: HITON-PC's one-sided
  false positives (a descendant of a child that only non-members separate, e.g. asia's
  tub - dysp under a d-separation oracle) survive even with identical clients, as in the code.
* :func:`weighted_direction_votes`: step 3's merge: ``sum_k w_k A_k`` of the clients' DAGs. The
  code then keeps every pair some client has and points it to the heavier side, ties to the
  higher index as parent; :func:`~fedcausal_flwr.discovery.bootstrap.vote_directions` does that
  with the project's tie rules (see the strategy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from fedcausal_flwr.stats.batch_oracle import CIOracle
from fedcausal_flwr.stats.contingency import count_tables, discrete_tests, make_layout
from fedcausal_flwr.stats.oracles import DiscreteOracle

#: weighted votes are put on this integer grid before the direction vote and the cycle repair
#: (both compare votes exactly; the grid makes equal sums of equal weights compare equal
#: whatever the summation order)
VOTE_SCALE = float(1 << 30)


@dataclass(frozen=True)
class NeighbourSets:
    """One client's HITON-PC result: ``members[t, v]`` iff ``v`` is in PC(t) (rows need not be
    symmetric), the unconditional p-value of every pair ``i < j`` (row-major upper triangle) and
    the number of distinct tests computed."""

    members: np.ndarray
    pair_pvalues: np.ndarray
    tests: int


def _check_alpha(alpha: float) -> float:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return float(alpha)


def _check_depth(max_depth: int | None, p: int) -> int:
    if max_depth is None:
        return max(p - 2, 0)
    if max_depth < 0:
        raise ValueError(f"max_depth must be >= 0 or None, got {max_depth}")
    return int(max_depth)


def _is_independent(pvalues: np.ndarray, alpha: float) -> np.ndarray:
    """Conditional tests: p > alpha; NaN (unreliable) is dependent."""
    with np.errstate(invalid="ignore"):
        return np.asarray(pvalues, dtype=float) > alpha


def marginal_strength(oracle: DiscreteOracle) -> np.ndarray:
    """Symmetric ``p x p`` unconditional test statistics (G2 or chi2, the oracle's test) of a
    client's data: the code's order of HITON-PC candidates (p-values of strong dependencies
    underflow to 0 and could not rank them)."""
    p = oracle.n_vars
    upper_i, upper_j = np.triu_indices(p, k=1)
    queries = [(i, j, ()) for i, j in zip(upper_i.tolist(), upper_j.tolist(), strict=True)]
    strength = np.zeros((p, p))
    if queries:
        layout = make_layout(queries, oracle.cards, normalised=True)
        tables = count_tables(oracle.codes_t, layout)
        statistic = discrete_tests(tables, layout, oracle.test_name).statistic
        strength[upper_i, upper_j] = statistic
        strength[upper_j, upper_i] = statistic
    return strength


def hiton_pc(
    oracle: CIOracle,
    target: int,
    alpha: float,
    max_depth: int | None = 3,
    strength: np.ndarray | None = None,
) -> list[int]:
    """The parents-and-children set of ``target`` (see the module docstring for the rules).

    Candidates enter by decreasing ``strength[target]`` (e.g. :func:`marginal_strength`), or
    by increasing p-value without it; ties to the lower index. Tests go to ``oracle`` in batches
    (all subsets of one size for one member); its cache answers a repeated test for free.
    """
    alpha = _check_alpha(alpha)
    p = oracle.n_vars
    if not 0 <= target < p:
        raise ValueError(f"target {target} is not a variable index (0..{p - 1})")
    depth = _check_depth(max_depth, p)
    others = [v for v in range(p) if v != target]
    marginal = oracle.test_batch([(target, v, ()) for v in others])
    with np.errstate(invalid="ignore"):
        dependent = marginal <= alpha  # NaN: not a candidate
    if strength is None:
        key = np.where(dependent, marginal, np.inf)
    else:
        strength = np.asarray(strength, dtype=float)
        if strength.shape != (p, p):
            raise ValueError(f"strength must be {p}x{p}, got shape {strength.shape}")
        key = -strength[target, others]
    order = np.argsort(key, kind="stable")
    candidates = [others[i] for i in order.tolist() if dependent[i]]
    members: list[int] = []
    for newcomer in candidates:
        members.append(newcomer)
        # newest first, as the code; a removal shrinks the later members' conditioning pool
        for member in list(reversed(members)):
            pool = [v for v in members if v != member]
            removed = False
            for size in range(min(depth, len(pool)) + 1):
                subsets = [
                    s for s in combinations(pool, size) if member == newcomer or newcomer in s
                ]
                if not subsets:
                    continue
                pvalues = oracle.test_batch([(member, target, s) for s in subsets])
                if _is_independent(pvalues, alpha).any():
                    removed = True
                    break
            if removed:
                members.remove(member)
                if member == newcomer:
                    break  # the newcomer left: nothing else needs re-testing
    return members


def hiton_pc_all(
    oracle: CIOracle,
    alpha: float,
    max_depth: int | None = 3,
    strength: np.ndarray | None = None,
) -> NeighbourSets:
    """HITON-PC of every variable on one client; the unconditional tests go in one batch."""
    p = oracle.n_vars
    upper_i, upper_j = np.triu_indices(p, k=1)
    pair_pvalues = oracle.test_batch(
        [(i, j, ()) for i, j in zip(upper_i.tolist(), upper_j.tolist(), strict=True)]
    )
    members = np.zeros((p, p), dtype=bool)
    for target in range(p):
        members[target, hiton_pc(oracle, target, alpha, max_depth, strength)] = True
    return NeighbourSets(members, pair_pvalues, oracle.n_computed)


def client_weight(pair_pvalues: np.ndarray, alpha: float) -> float:
    """Mean decision confidence of the reliable unconditional p-values (0 if there is none)."""
    alpha = _check_alpha(alpha)
    pvalues = np.asarray(pair_pvalues, dtype=float)
    pvalues = pvalues[~np.isnan(pvalues)]
    if pvalues.size == 0:
        return 0.0
    if np.any((pvalues < 0) | (pvalues > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    confidence = np.where(pvalues > alpha, (pvalues - alpha) / (1 - alpha), 1 - pvalues / alpha)
    return float(confidence.mean())


@dataclass(frozen=True)
class FederatedSkeleton:
    """The server's skeleton step: per-variable neighbour counts, the tentative (asymmetric)
    skeleton ``tentative[t, v]`` = v chosen for t, the asymmetric pairs' scores and the result."""

    neighbour_counts: np.ndarray
    tentative: np.ndarray
    asymmetric: np.ndarray
    scores: np.ndarray
    skeleton: np.ndarray


def _check_sets(members: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    members = np.asarray(members, dtype=bool)
    weights = np.asarray(weights, dtype=float)
    if members.ndim != 3 or members.shape[1] != members.shape[2]:
        raise ValueError(f"neighbour sets must be K x p x p, got shape {members.shape}")
    if weights.shape != (members.shape[0],):
        raise ValueError(f"{members.shape[0]} clients' neighbour sets but weights {weights.shape}")
    if np.any(~np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("client weights must be finite and >= 0")
    if np.any(members[:, np.arange(members.shape[1]), np.arange(members.shape[1])]):
        raise ValueError("a variable cannot be its own neighbour")
    return members, weights


def federated_skeleton(members: np.ndarray, weights: Sequence[float]) -> FederatedSkeleton:
    """Weighted neighbour-count and membership votes, then the asymmetric-pair repair."""
    members, w = _check_sets(members, np.asarray(weights, dtype=float))
    k, p, _ = members.shape
    sizes = members.sum(axis=2)  # K x p
    count_votes = np.zeros((p, p))  # variable x neighbour count (0 .. p - 1)
    np.add.at(count_votes, (np.broadcast_to(np.arange(p), (k, p)), sizes), w[:, None])
    counts = count_votes.argmax(axis=1)  # first maximum: ties to the smaller count
    member_votes = np.einsum("k,ktv->tv", w, members.astype(float))
    np.fill_diagonal(member_votes, -np.inf)
    tentative = np.zeros((p, p), dtype=bool)
    for t in range(p):
        ranked = np.argsort(-member_votes[t], kind="stable")  # ties to the lower index
        tentative[t, ranked[: counts[t]]] = True
    asymmetric = np.argwhere(np.triu(tentative != tentative.T, k=1))
    mutual = members & members.transpose(0, 2, 1)
    neither = ~members & ~members.transpose(0, 2, 1)
    per_pair = 2.0 * mutual.astype(float) - 2.0 * neither.astype(float)  # K x p x p
    scores = np.einsum("k,kab->ab", w, per_pair)[asymmetric[:, 0], asymmetric[:, 1]]
    skeleton = tentative & tentative.T
    keep = asymmetric[scores >= 0]
    skeleton[keep[:, 0], keep[:, 1]] = skeleton[keep[:, 1], keep[:, 0]] = True
    return FederatedSkeleton(counts, tentative, asymmetric, scores, skeleton)


def weighted_direction_votes(dags: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """``sum_k w_k A_k`` on the integer grid :data:`VOTE_SCALE` (``A_k[i, j] = 1``: i -> j)."""
    dags = np.asarray(dags)
    w = np.asarray(weights, dtype=float)
    if dags.ndim != 3 or dags.shape[1] != dags.shape[2] or not np.isin(dags, (0, 1)).all():
        raise ValueError(f"DAGs must be a K x p x p 0/1 stack, got shape {dags.shape}")
    if w.shape != (dags.shape[0],) or np.any(~np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"need one finite weight >= 0 per DAG, got {w.tolist()}")
    total = np.einsum("k,kab->ab", w, dags.astype(float))
    return np.rint(total * VOTE_SCALE).astype(np.int64)
