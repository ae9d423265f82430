"""FedCDnv's second server step: the two-level priority selection and the graphs built on it.

Disagreeing pairs go first to Level 1 (:func:`level1_explains`: Conditions 3.6 / 3.7, a
disagreement explained by the clients' different variable sets), then to Level 2
(:func:`level2_values`: the weighted vote of Eqs. 1 and 3); :func:`tpss_adjacency` runs both.
:func:`transfer_arrowheads` makes FedG and :func:`restrict_to_definite` FeddG; the baselines'
:func:`majority_adjacency` and :func:`weighted_adjacency` (and :func:`adjacency_share`) are the
votes TPSS replaces. Apart because these are the aggregation rules, the only ones that weigh
clients against each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fedcausal_flwr.discovery.tpss import (
    DEFINITE_CAUSAL,
    DEFINITE_NONCAUSAL,
    LEVEL1_RULES,
    TAIL_RULES,
    Pair,
    TPSSOptions,
    in_band,
)
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL


def level2_values(
    adjacent: np.ndarray,
    ptil: np.ndarray,
    observed: np.ndarray,
    sizes: Sequence[int] | np.ndarray,
    status: np.ndarray,
    options: TPSSOptions | None = None,
) -> np.ndarray:
    """Eq. (1) with Eq. (3): ``val`` per pair from the clients' reports (client axis first).

    ``adjacent``, ``ptil``, ``observed``: ``(m, ...)`` (the pair axes after the client axis);
    ``sizes``: ``n_k``; ``status``: ``stat`` of each pair. A client c observing the pair is
    *stable* when the pair is definite (see ``stable_reading``) and its p-value is outside the
    band on the side of its own report (adjacent with ``p < alpha - theta1``, non-adjacent with
    ``p > alpha + theta2``); it votes ``+-1``. Otherwise it votes ``+-w`` with
    ``w = phat * N / (sum of phat over the non-stable + #stable)`` (``N`` per ``w_numerator``; 0
    if the denominator is 0), ``phat = -ptil`` inside the band and the raw p (or 1) outside.
    ``val = sum_c (n_c / n') * (+-1 or +-w)``, ``n'`` over the clients observing the pair.
    """
    options = options or TPSSOptions()
    adjacent = np.asarray(adjacent, dtype=bool)
    ptil = np.asarray(ptil, dtype=float)
    observed = np.asarray(observed, dtype=bool)
    status = np.asarray(status)
    sizes = np.asarray(sizes, dtype=float).reshape((-1,) + (1,) * (adjacent.ndim - 1))
    if not adjacent.shape == ptil.shape == observed.shape or adjacent.shape[1:] != status.shape:
        raise ValueError(
            f"shapes differ: adjacent {adjacent.shape}, ptil {ptil.shape}, observed "
            f"{observed.shape}, status {status.shape}"
        )
    lo, hi = options.band
    band = in_band(ptil)
    raw = np.where(band | np.isnan(ptil), np.nan, ptil)
    if options.stable_reading == "abs":
        causal_ok = noncausal_ok = np.abs(status) == 2
    else:
        causal_ok, noncausal_ok = status == DEFINITE_CAUSAL, status == DEFINITE_NONCAUSAL
    with np.errstate(invalid="ignore"):
        stable = observed & (
            (adjacent & causal_ok & (raw < lo)) | (~adjacent & noncausal_ok & (raw > hi))
        )
    outside = raw if options.out_of_band == "raw" else np.ones_like(raw)
    phat = np.where(band, -ptil, outside)
    phat = np.where(np.isnan(phat), 0.0, phat)
    nonstable = observed & ~stable
    sum_ns = np.where(nonstable, phat, 0.0).sum(axis=0)
    n_stable = stable.sum(axis=0)
    count = observed.sum(axis=0) if options.w_numerator == "all" else nonstable.sum(axis=0)
    denominator = sum_ns + n_stable
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = np.where(denominator > 0, phat * count / denominator, 0.0)
    if options.clip_w:
        weight = np.minimum(weight, 1.0)
    magnitude = np.where(stable, 1.0, weight)
    vote = np.where(adjacent, magnitude, -magnitude) * observed
    n = np.where(observed, sizes, 0.0)
    total = n.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, n / total, 0.0)
    return (share * vote).sum(axis=0)


def edge_kind(mark_at_i: int, mark_at_j: int) -> str:
    """``"bidirected"`` (``<->``), ``"circle"`` (a circle and no tail: ``o-o``, ``o->``,
    ``<-o``) or ``"tailed"`` (anything with a tail)."""
    if TAIL in (mark_at_i, mark_at_j):
        return "tailed"
    if mark_at_i == ARROW and mark_at_j == ARROW:
        return "bidirected"
    return "circle"


def level1_explains(
    i: int,
    j: int,
    reporting: Sequence[int],
    denying: Sequence[int],
    marks: np.ndarray,
    observed: np.ndarray,
    sepsets: Sequence[Mapping[Pair, tuple[int, ...]]],
    rule: str = "per_edge_type",
    tail_at_confounder: bool = True,
) -> tuple[bool, dict[int, str]]:
    """Level 1: is the disagreement on ``(i, j)`` explained by non-identical variable sets?

    ``reporting`` / ``denying``: clients that have / lack the adjacency (both observe i and j);
    ``marks``: embedded updated PAGs ``(m, d, d)``; ``sepsets[c]``: client c's separating sets
    (global ids). For each reporting client a, by its edge type:

    * ``<->`` (Condition 3.6): some denying client n has ``Xi <-o Y o-> Xj`` with Y observed by n
      but not by a (``tail_at_confounder``: tails at Y also count);
    * ``o-o``, ``o->``, ``<-o`` (Condition 3.7): every denying client's separating set is
      non-empty and not inside ``O_a`` (an empty set is observed everywhere: a marginal
      independence blames a CI error, left to Level 2);
    * an edge with a tail: never explained.

    Returns (explained, reason per reporting client). ``rule``: see :class:`TPSSOptions`.
    """
    if rule not in LEVEL1_RULES:
        raise ValueError(f"unknown Level-1 rule {rule!r}; expected one of {LEVEL1_RULES}")
    if rule == "off" or not reporting or not denying:
        return False, {}
    key = (min(i, j), max(i, j))
    at_y = (CIRCLE, TAIL) if tail_at_confounder else (CIRCLE,)
    reasons: dict[int, str] = {}
    for a in reporting:
        kind = edge_kind(int(marks[a][j, i]), int(marks[a][i, j]))
        if kind == "bidirected":
            ok = False
            for n in denying:
                mn = marks[n]
                shape = (
                    observed[n]
                    & ~observed[a]
                    & (mn[:, i] == ARROW)
                    & (mn[:, j] == ARROW)
                    & np.isin(mn[i, :], at_y)
                    & np.isin(mn[j, :], at_y)
                )
                if shape.any():
                    ok = True
                    reasons[a] = f"3.6: confounder {int(np.flatnonzero(shape)[0])} seen by {n}"
                    break
            if not ok:
                reasons[a] = "3.6 fails"
        elif kind == "circle":
            ok = True
            for n in denying:
                sep = sepsets[n].get(key)
                if sep is None:
                    raise ValueError(f"client {n} denies the adjacency {key} without a sepset")
                if not sep or observed[a, list(sep)].all():
                    ok = False
                    break
            reasons[a] = "3.7: sepsets never co-observed" if ok else "3.7 fails"
        else:
            ok = False
            reasons[a] = "tailed edge: not covered"
        if ok and rule == "any":
            return True, reasons
        if not ok and rule == "per_edge_type":
            return False, reasons
    return rule == "per_edge_type", reasons


@dataclass
class PairDecision:
    """Why a disagreeing pair ended as it did (for the result's audit trail)."""

    pair: Pair
    reporting: list[int]
    denying: list[int]
    level: int  # 1: removed by Level 1; 2: decided by val
    value: float | None
    adjacent: bool
    reasons: dict[int, str]


def tpss_adjacency(
    marks: np.ndarray,
    observed: np.ndarray,
    ptil: np.ndarray,
    sizes: Sequence[int],
    status: np.ndarray,
    sepsets: Sequence[Mapping[Pair, tuple[int, ...]]],
    options: TPSSOptions | None = None,
) -> tuple[np.ndarray, list[PairDecision]]:
    """Algorithm 3's adjacencies: consensus where every observing client agrees, else Level 1,
    then Level 2 (``val > 0``). Pairs nobody observes jointly are not adjacent.

    TPSS runs only on disagreements, as Section 3.2 says ("if Xi and Xj are adjacent in {G_a}
    but not adjacent in the remaining graphs ... TPSS begins to execute"); agreeing clients keep
    their consensus even where Eq. (3) would give every one of them weight 0.
    """
    options = options or TPSSOptions()
    marks = np.asarray(marks)
    adj_c = marks != NONE
    obs_pairs = observed[:, :, None] & observed[:, None, :]
    n_obs = obs_pairs.sum(axis=0)
    n_adj = (adj_c & obs_pairs).sum(axis=0)
    result = (n_adj == n_obs) & (n_obs > 0)
    np.fill_diagonal(result, False)
    values = level2_values(adj_c, ptil, obs_pairs, sizes, status, options)
    decisions = []
    rows, cols = np.nonzero(np.triu((n_adj > 0) & (n_adj < n_obs), k=1))
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        clients = np.flatnonzero(obs_pairs[:, i, j])
        reporting = [int(c) for c in clients if adj_c[c, i, j]]
        denying = [int(c) for c in clients if not adj_c[c, i, j]]
        explained, reasons = level1_explains(
            i,
            j,
            reporting,
            denying,
            marks,
            observed,
            sepsets,
            options.level1,
            options.tail_at_confounder,
        )
        if explained:
            keep, level, value = False, 1, None
        else:
            value = float(values[i, j])
            keep, level = value > 0, 2
        result[i, j] = result[j, i] = keep
        decisions.append(PairDecision((i, j), reporting, denying, level, value, keep, reasons))
    return result, decisions


def majority_adjacency(marks: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """FedCDnv-vote: adjacent iff more than half of the clients observing the pair report it
    (a tie is not adjacent, mirroring ``val > 0``; the paper gives no tie rule: docs/choices.md,
    FedCDnv)."""
    adj_c = np.asarray(marks) != NONE
    obs_pairs = observed[:, :, None] & observed[:, None, :]
    return 2 * (adj_c & obs_pairs).sum(axis=0) > obs_pairs.sum(axis=0)


def weighted_adjacency(marks: np.ndarray, observed: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """FCI-base: adjacent iff ``sum_c (n_c / n') * (+1 if adjacent else -1) > 0`` over the clients
    observing the pair (a tie is not adjacent)."""
    adj_c = np.asarray(marks) != NONE
    obs_pairs = observed[:, :, None] & observed[:, None, :]
    n = np.asarray(sizes, dtype=np.int64)[:, None, None]
    signed = np.where(adj_c, n, -n) * obs_pairs
    return signed.sum(axis=0) > 0


def adjacency_share(
    marks: np.ndarray, observed: np.ndarray, weights: Sequence[float]
) -> np.ndarray:
    """``(d, d)``: per pair the weighted share of the clients observing both variables whose
    graph has the edge (NaN where no client observes both): the number the two votes above
    compare with 1/2 (they do so in integers, so a tie is exact)."""
    w = np.asarray(weights, dtype=np.float64)[:, None, None]
    both = (observed[:, :, None] & observed[:, None, :]) * w
    seen = both.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(seen > 0, ((np.asarray(marks) != NONE) * both).sum(axis=0) / seen, np.nan)


def transfer_arrowheads(
    adjacency: np.ndarray, marks: np.ndarray, tails: str = "drop"
) -> np.ndarray:
    """FedG's marks: circles on every kept adjacency, an arrowhead wherever a client reporting the
    edge has one (union; both ends give ``<->``). ``tails="consensus"`` also puts a tail where
    every client reporting the edge has a tail."""
    if tails not in TAIL_RULES:
        raise ValueError(f"unknown tails rule {tails!r}; expected one of {TAIL_RULES}")
    adjacency = np.asarray(adjacency, dtype=bool)
    marks = np.asarray(marks)
    reports = marks != NONE
    arrow = (marks == ARROW).any(axis=0)
    out = np.where(arrow, ARROW, CIRCLE)
    if tails == "consensus":
        all_tail = ((marks == TAIL) | ~reports).all(axis=0) & reports.any(axis=0)
        out = np.where(all_tail & ~arrow, TAIL, out)
    return np.where(adjacency, out, NONE).astype(np.int8)


def restrict_to_definite(
    fedg: np.ndarray, status: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FeddG: FedG's edges on pairs with ``stat = 2`` (marks kept), plus the definite non-edges
    (``stat = -2``, never adjacent in FedG). A ``stat = 2`` pair TPSS removed is neither
    (the paper does not say: docs/choices.md, FedCDnv).

    Returns (FeddG marks, definite-edge mask, definite-non-edge mask), masks symmetric.
    """
    fedg = np.asarray(fedg)
    adjacent = fedg != NONE
    definite_edges = (status == DEFINITE_CAUSAL) & adjacent
    definite_non_edges = (status == DEFINITE_NONCAUSAL) & ~adjacent
    return np.where(definite_edges, fedg, NONE).astype(np.int8), definite_edges, definite_non_edges
