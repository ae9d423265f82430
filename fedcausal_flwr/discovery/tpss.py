"""FedCDnv's mathematics (Wang, Cao, Yu, Liang, ICML 2025), Flower-free: its options and the
uncertain band.

FedCDnv learns one PAG over the union ``O`` of the clients' variable sets ``O_k`` and aggregates
with the two-level priority selection strategy (TPSS). Every step that is not message passing
lives in the discovery layer, so the strategy (``strategies/tpss.py``) and the client
(``clients/tpss.py``) only move arrays:

* client, round 1: :func:`~.tpss_local.local_fci` (FCI on the client's own variables, recording
  per pair the maximum p-value over the tests FCI ran and the separating set it found);
* server, round 1: :mod:`~.tpss_union` (G0, the overlap matrix, the status matrix: Theorem 3.1,
  Lemmas 3.2 and 3.3);
* client, round 2: :func:`~.tpss_update.c_update_steps` (Algorithm 2) and
  :func:`transform_pvalues` (Eq. 2);
* server, round 2: :mod:`~.tpss_select` (Conditions 3.6 / 3.7, Eqs. 1 and 3, FedG and FeddG, the
  baselines' votes).

This module holds what they all read: :class:`TPSSOptions`, the status values and the band
``[alpha - theta1, alpha + theta2]`` with Eq. (2)'s encoding of a p-value inside it
(:func:`transform_pvalues`) and its reading (:func:`in_band`).

Matrices over ``O`` are indexed by global variable ids ``0..d-1``; a client's matrices by its
local ids (its variables in global order), mapped by its ``observed`` id vector. Marks follow
:mod:`fedcausal_flwr.graphs.graph` (``marks[i, j]`` is the mark at ``j``). The readings of the
paper's open points are listed in :class:`TPSSOptions` and in the strategy module's docstring, and
explained with the paper's passages in docs/choices.md (FedCDnv).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Pair = tuple[int, int]

DEFINITE_CAUSAL, NONDEFINITE_CAUSAL = 2, 1
DEFINITE_NONCAUSAL, NONDEFINITE_NONCAUSAL = -2, -1

LEMMA_SCOPES = ("all", "adjacent")
LEVEL1_RULES = ("per_edge_type", "any", "off")
NUMERATORS = ("all", "nonstable")
OUT_OF_BAND = ("raw", "one")
STABLE_READINGS = ("abs", "signed")
TAIL_RULES = ("drop", "consensus")
FEDDG_STATUS = ("g0", "fedg")


@dataclass(frozen=True)
class TPSSOptions:
    """Every tunable choice of FedCDnv; defaults are the paper's values where it gives them.

    "(default)" marks a default that settles a point the paper leaves open; docs/choices.md
    (FedCDnv) gives the paper's passage and the reason.

    * ``alpha, theta1, theta2``: the G2 level and the uncertain band ``[alpha - theta1,
      alpha + theta2]`` = [0.001, 0.5] (paper defaults).
    * ``lemma_scope``: ``"all"`` (default) applies Lemmas 3.2 / 3.3 to non-adjacent overlapping
      pairs too (-2 -> -1); ``"adjacent"`` only downgrades learned adjacencies (2 -> 1).
    * ``level1``: ``"per_edge_type"`` (default) fires when *every* adjacency-reporting client is
      explained by the condition of its edge type (3.6 for ``<->``, 3.7 for ``o-o``, ``o->``,
      ``<-o``; an edge with a tail is never explained); ``"any"``: one explained client suffices;
      ``"off"``: Level 1 disabled (ablation). The literal "3.6 and 3.7 both" is not offered: no
      single edge meets the premises of both.
    * ``tail_at_confounder``: Condition 3.6 also accepts tails at Y (``Xi <-- Y --> Xj``) (default).
    * ``w_numerator``: Eq. (3)'s numerator ``phat * |K|`` with K all clients observing the pair
      (``"all"``, default) or ``phat * #non-stable`` (``"nonstable"``).
    * ``clip_w``: clip Eq. (3)'s weight to 1 (the paper claims ``0 < w < 1``; off by default).
    * ``out_of_band``: ``phat`` of a non-stable relationship whose p-value is outside the band:
      the raw p-value (``"raw"``, the paper's sentence) or 1 (``"one"``).
    * ``stable_reading``: "definite" in Defs. 3.4 / 3.5 read as ``|stat| = 2`` with the client's
      own adjacency deciding causal / non-causal (``"abs"``, default) or as the sign of ``stat``
      matching the client's report (``"signed"``, literal; a non-adjacent client then never counts
      as stable in a disagreement, because such pairs are adjacent in G0).
    * ``tails``: FedG carries the arrowheads of the client PAGs and also a tail where every
      client reporting the edge has one (``"consensus"``, default: a tail all clients agree on is
      knowledge, and with perfect tests FedG is then exactly the true PAG) or arrowheads only,
      every other mark a circle (``"drop"``, the paper's Algorithm 3 line 17). Arrowhead metrics
      are the same under both.
    * ``feddg_status``: FeddG keeps the pairs definite by the status matrix of G0 (``"g0"``,
      default) or of FedG recomputed (``"fedg"``).
    * ``update_depth``: cap on ``|Z|`` in C-Update's extra tests (``None``: no cap).
    * ``update_rules``: re-run Zhang's rules on the client after C-Update (off: the literal
      Algorithm 2).
    """

    alpha: float = 0.05
    theta1: float = 0.049
    theta2: float = 0.45
    lemma_scope: str = "all"
    level1: str = "per_edge_type"
    tail_at_confounder: bool = True
    w_numerator: str = "all"
    clip_w: bool = False
    out_of_band: str = "raw"
    stable_reading: str = "abs"
    tails: str = "consensus"
    feddg_status: str = "g0"
    update_depth: int | None = 3
    update_rules: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if not 0 < self.theta1 < self.alpha:
            raise ValueError(f"theta1 must be in (0, alpha={self.alpha}), got {self.theta1}")
        if not 0 < self.theta2 < 1 - self.alpha:
            raise ValueError(
                f"theta2 must be in (0, 1 - alpha={1 - self.alpha}), got {self.theta2}"
            )
        for name, allowed in (
            ("lemma_scope", LEMMA_SCOPES),
            ("level1", LEVEL1_RULES),
            ("w_numerator", NUMERATORS),
            ("out_of_band", OUT_OF_BAND),
            ("stable_reading", STABLE_READINGS),
            ("tails", TAIL_RULES),
            ("feddg_status", FEDDG_STATUS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"unknown {name} {getattr(self, name)!r}; expected one of {allowed}"
                )
        if self.update_depth is not None and self.update_depth < 0:
            raise ValueError(f"update_depth must be >= 0 or None, got {self.update_depth}")

    @property
    def band(self) -> tuple[float, float]:
        return band_edges(self.alpha, self.theta1, self.theta2)


def band_edges(alpha: float, theta1: float, theta2: float) -> tuple[float, float]:
    """``(alpha - theta1, alpha + theta2)`` rounded to 12 decimals, so that the paper's band
    [0.001, 0.5] has exactly those edges (``0.05 - 0.049`` is 0.0010000000000000009 in binary)."""
    return round(alpha - theta1, 12), round(alpha + theta2, 12)


def transform_pvalues(
    pvalues: np.ndarray, alpha: float = 0.05, theta1: float = 0.049, theta2: float = 0.45
) -> np.ndarray:
    """Eq. (2): p-values inside ``[alpha - theta1, alpha + theta2]`` become ``-phat``.

    ``phat = (alpha - p) / theta1`` on ``[alpha - theta1, alpha]`` and ``(p - alpha) / theta2`` on
    ``(alpha, alpha + theta2]``; values outside the band are sent raw (>= 0; the paper only
    defines the in-band values: docs/choices.md, FedCDnv). The sign bit marks the band, so
    ``p = alpha`` gives ``-0.0`` (in the band, ``phat = 0``). NaN stays NaN.
    """
    p = np.asarray(pvalues, dtype=float)
    lo, hi = band_edges(alpha, theta1, theta2)
    low = (p >= lo) & (p <= alpha)
    high = (p > alpha) & (p <= hi)
    with np.errstate(invalid="ignore"):
        phat = np.where(low, (alpha - p) / theta1, (p - alpha) / theta2)
    return np.where(low | high, np.negative(phat), p)


def in_band(ptil: np.ndarray) -> np.ndarray:
    """Which transformed values came from inside the band (negative, or ``-0.0``)."""
    ptil = np.asarray(ptil, dtype=float)
    return np.signbit(ptil) & ~np.isnan(ptil)
