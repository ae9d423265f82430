"""FedCDnv's mathematics (Wang, Cao, Yu, Liang, ICML 2025), Flower-free.

FedCDnv learns one PAG over the union ``O`` of the clients' variable sets ``O_k`` and aggregates
with the two-level priority selection strategy (TPSS). This module holds every step that is not
message passing, so the strategy (``strategies/tpss.py``) and the client (``clients/tpss.py``)
only move arrays:

* client, round 1: :func:`local_fci` (FCI on the client's own variables, recording per pair the
  maximum p-value over the tests FCI ran and the separating set it found);
* server, round 1: :func:`union_graph` (G0), :func:`overlap_matrix`, :func:`status_matrix`
  (Theorem 3.1, Lemmas 3.2 and 3.3);
* client, round 2: :func:`c_update_steps` (Algorithm 2) and :func:`transform_pvalues` (Eq. 2);
* server, round 2: :func:`level1_explains` (Conditions 3.6 / 3.7), :func:`level2_values`
  (Eqs. 1 and 3), :func:`tpss_adjacency`, :func:`transfer_arrowheads` and
  :func:`restrict_to_definite` (FeddG); the baselines' :func:`majority_adjacency` and
  :func:`weighted_adjacency`.

Matrices over ``O`` are indexed by global variable ids ``0..d-1``; a client's matrices by its
local ids (its variables in global order), mapped by its ``observed`` id vector. Marks follow
:mod:`fedcausal_flwr.graphs.graph` (``marks[i, j]`` is the mark at ``j``). The readings of the
paper's open points are listed in :class:`TPSSOptions` and in the strategy module's docstring, and
explained with the paper's passages in docs/choices.md (FedCDnv).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.driver import Steps, drive
from fedcausal_flwr.discovery.fci import fci_steps
from fedcausal_flwr.graphs.fci_rules import apply_fci_rules
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.stats.batch_oracle import CIOracle, Query

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


# ============================================================================ options
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


# ============================================================================ client, round 1
@dataclass
class LocalFCI:
    """A client's round-1 outcome over its own variables (local ids)."""

    graph: Graph  # Pag0
    max_pvalues: np.ndarray  # (d_k, d_k): max p over the tests FCI ran per pair; NaN if none
    sepsets: dict[Pair, tuple[int, ...]]  # the separating set FCI found per removed pair
    n_tests: int = 0


def record_max_pvalues(steps: Steps, max_pvalues: np.ndarray) -> Steps:
    """Pass a search's batches through unchanged, keeping per pair the largest p-value answered.

    This is our reading of the paper's per-pair p-value (Algorithm 1 line 4; docs/choices.md,
    FedCDnv): the maximum over every test of ``(Xi, Xj | Z)`` the search ran. For a pair FCI
    keeps, every test had ``p <= alpha`` (Def. 3.4's statistic); for a removed pair the maximum
    exceeds ``alpha`` (Def. 3.5's "some Z with p > alpha + theta2" is "max p > alpha + theta2").
    NaN answers are ignored.
    """
    try:
        batch = next(steps)
        while True:
            answers = yield batch
            p = np.asarray(answers, dtype=float)
            if len(batch):
                xs = np.fromiter((q[0] for q in batch), dtype=np.int64, count=len(batch))
                ys = np.fromiter((q[1] for q in batch), dtype=np.int64, count=len(batch))
                np.fmax.at(max_pvalues, (xs, ys), p)
                np.fmax.at(max_pvalues, (ys, xs), p)
            batch = steps.send(answers)
    except StopIteration as stop:
        return stop.value


def first_sepsets(sepsets: Mapping) -> dict[Pair, tuple[int, ...]]:
    """One separating set per removed pair: the first one FCI recorded (sorted ids).

    The skeleton phase records every set of the removal level (sizes increase level by level, so
    the first is a minimum-size set among those tried: our reading of Condition 3.7's "minimal",
    docs/choices.md, FedCDnv); the Possible-D-Sep phase records the one set that removed the edge.
    """
    out: dict[Pair, tuple[int, ...]] = {}
    for (x, y), sets in sepsets.items():
        if isinstance(sets, (set, frozenset)):
            chosen = sets
        else:
            sets = list(sets)
            if not sets:
                continue
            chosen = sets[0]
        out[(min(x, y), max(x, y))] = tuple(sorted(int(v) for v in chosen))
    return out


def local_fci(oracle: CIOracle, alpha: float = 0.05, **fci_options: Any) -> LocalFCI:
    """C-InitPag: FCI on one client's oracle, with the per-pair max p-values and sepsets."""
    p = oracle.n_vars
    max_p = np.full((p, p), np.nan)
    before = oracle.n_computed
    result = drive(
        record_max_pvalues(fci_steps(oracle.variables, alpha, **fci_options), max_p), oracle
    )
    return LocalFCI(
        graph=result.graph,
        max_pvalues=max_p,
        sepsets=first_sepsets(result.sepsets),
        n_tests=oracle.n_computed - before,
    )


# ============================================================================ server, round 1
def embed(local: np.ndarray, observed: Sequence[int], d: int, fill: float | int = 0) -> np.ndarray:
    """A client's ``d_k x d_k`` matrix placed in a ``d x d`` one at its global ids (``fill``
    elsewhere)."""
    local = np.asarray(local)
    ids = np.asarray(observed, dtype=np.int64)
    if local.shape != (len(ids), len(ids)):
        raise ValueError(f"a {len(ids)}-variable client matrix must be square, got {local.shape}")
    out = np.full((d, d), fill, dtype=np.result_type(local.dtype, np.asarray(fill).dtype))
    out[np.ix_(ids, ids)] = local
    return out


def observed_mask(observed: Sequence[Sequence[int] | np.ndarray], d: int) -> np.ndarray:
    """``(m, d)`` bool: client k observes variable v."""
    mask = np.zeros((len(observed), d), dtype=bool)
    for k, ids in enumerate(observed):
        mask[k, np.asarray(ids, dtype=np.int64)] = True
    return mask


def overlap_matrix(observed: np.ndarray) -> np.ndarray:
    """``(d, d)`` bool: some client observes both variables (the diagonal: observed at all)."""
    seen = np.asarray(observed, dtype=np.int64)
    return (seen.T @ seen) > 0


def union_graph(marks: np.ndarray) -> np.ndarray:
    """G0 from the clients' embedded PAGs ``(m, d, d)``: an adjacency if any client reports it,
    an arrowhead if any client has it there; every other mark (tails included) is a circle."""
    marks = np.asarray(marks)
    adjacent = (marks != NONE).any(axis=0)
    arrow = (marks == ARROW).any(axis=0)
    return np.where(adjacent, np.where(arrow, ARROW, CIRCLE), NONE).astype(np.int8)


def status_matrix(
    adjacency: np.ndarray, overlap: np.ndarray, lemma_scope: str = "all"
) -> np.ndarray:
    """The paper's ``stat`` (values -2, -1, 1, 2; 0 on the diagonal) from G's adjacency.

    * Non-overlapping pairs (Category I) start at -1 and become -2 by Theorem 3.1 iff
      ``A_X & A_Y`` is empty, both are non-empty, every ``Y' in A_Y`` overlaps X and every
      ``X' in A_X`` overlaps Y.
    * Overlapping pairs (Category II) are definite (+-2) unless Lemma 3.2 (X or Y lies in a
      non-overlapping pair still at -1) or Lemma 3.3 (some non-overlapping pair {A, B} lies in
      ``(A_X | A_Y) - {X, Y}``) makes them non-definite. Leaving X and Y out (a separating set of
      X, Y never contains them) changes nothing: a non-overlapping {X, B} with B next to Y has
      the common neighbour Y, so X is already in Z_n. Lemma 3.3 uses every non-overlapping pair,
      including those Theorem 3.1 settled. ``lemma_scope="adjacent"`` applies the lemmas to
      adjacent pairs only.
    """
    if lemma_scope not in LEMMA_SCOPES:
        raise ValueError(f"unknown lemma_scope {lemma_scope!r}; expected one of {LEMMA_SCOPES}")
    adj = np.asarray(adjacency, dtype=bool).copy()
    d = adj.shape[0]
    if adj.shape != (d, d) or np.any(adj != adj.T):
        raise ValueError(f"adjacency must be a symmetric square matrix, got shape {adj.shape}")
    overlap = np.asarray(overlap, dtype=bool)
    if overlap.shape != (d, d):
        raise ValueError(f"overlap must be {d}x{d}, got {overlap.shape}")
    eye = np.eye(d, dtype=bool)
    np.fill_diagonal(adj, False)
    overlap = overlap | eye
    apart = ~overlap  # non-overlapping pairs (diagonal excluded)
    if np.any(adj & apart):
        bad = np.argwhere(adj & apart)[0]
        raise ValueError(f"variables {tuple(bad)} are adjacent but never observed together")
    nb = adj.astype(np.int64)
    common = (nb @ nb.T) > 0
    has_nb = np.asarray(adj.any(axis=1))  # asarray: numpy's stubs allow a scalar here
    # unseen[i, j]: some neighbour of j is never observed with i
    unseen = (apart.astype(np.int64) @ nb.T) > 0
    definite_apart = apart & ~common & has_nb[:, None] & has_nb[None, :] & ~unseen & ~unseen.T
    stat = np.zeros((d, d), dtype=np.int8)
    stat[apart] = NONDEFINITE_NONCAUSAL
    stat[definite_apart] = DEFINITE_NONCAUSAL
    unresolved = np.asarray((apart & ~definite_apart).any(axis=1))  # Z_n of Lemma 3.2

    rows, cols = np.triu_indices(d, k=1)
    together = overlap[rows, cols]
    rows, cols = rows[together], cols[together]
    span = adj[rows] | adj[cols]
    span[np.arange(len(rows)), rows] = False
    span[np.arange(len(rows)), cols] = False
    lemma33 = ((span.astype(np.int64) @ apart.astype(np.int64)) * span).sum(axis=1) > 0
    tainted = unresolved[rows] | unresolved[cols] | lemma33
    adjacent = adj[rows, cols]
    taint_non_edges = tainted if lemma_scope == "all" else np.zeros_like(tainted)
    values = np.where(
        adjacent,
        np.where(tainted, NONDEFINITE_CAUSAL, DEFINITE_CAUSAL),
        np.where(taint_non_edges, NONDEFINITE_NONCAUSAL, DEFINITE_NONCAUSAL),
    )
    stat[rows, cols] = values
    stat[cols, rows] = values
    return stat


# ============================================================================ client, round 2
@dataclass
class CUpdateResult:
    """Algorithm 2's outcome on one client (local ids)."""

    graph: Graph  # PagU: Pag0's adjacencies, updated marks
    imported: list[tuple[int, int, int]]  # (Xi, Y, Xj) G0 colliders that added an arrowhead
    propagated: list[tuple[int, int]]  # (Y, B): Y --> B oriented after an extra CI test
    conflicts: list[tuple[int, int]]  # (Y, B) skipped: an arrowhead already at Y
    n_queries: int = 0


def g0_v_structures(g0: np.ndarray) -> list[tuple[int, int, int]]:
    """Every ``(Xi, Y, Xj)`` with ``Xi *-> Y <-* Xj`` in G0 and Xi, Xj not adjacent (Xi < Xj)."""
    g0 = np.asarray(g0)
    adjacent = g0 != NONE
    out = []
    for y in range(g0.shape[0]):
        into = np.flatnonzero(g0[:, y] == ARROW)
        for a, b in combinations(into.tolist(), 2):
            if not adjacent[a, b]:
                out.append((a, y, b))
    return out


def c_update_steps(
    pag0: Graph,
    observed: Sequence[int] | np.ndarray,
    g0: np.ndarray,
    alpha: float = 0.05,
    max_depth: int | None = 3,
    rerun_rules: bool = False,
    sepsets: Mapping | None = None,
) -> Steps[CUpdateResult]:
    """Generator (one batch of extra CI tests, local ids): C-Update, Algorithm 2.

    For every v-structure ``Xi *-> Y <-* Xj`` of G0 (global ids, mapped to the client's):

    (a) if Xi, Y, Xj are all observed and ``Xi ~ Y``, ``Xj ~ Y`` in Pag0, put arrowheads at Y on
        both edges [REC: only the arrowhead; a collider does not make Xi an ancestor of Y];
    (b) if Y is observed, for each observed ``X in {Xi, Xj}`` adjacent to Y in Pag0, and each
        ``B in adj(Y) - {Xi, Xj}`` not adjacent to X: if ``X _||_ B | Z + {Y}`` for some
        ``Z <= adj(Y) - {B, Xi, Xj}`` with ``|Z| <= max_depth``, orient ``Y --> B`` (Y is a
        non-collider on X *-> Y - B, Zhang's R1 with a fresh test for the non-adjacency).

    All (a) imports are applied before any (b) orientation, so the result does not depend on the
    order of the v-structures. A (b) candidate whose tail would replace an arrowhead at Y, or
    that is already ``Y --> B``, costs no test; one made conflicting by an earlier (b)
    orientation (``B --> Y``, in candidate order) is skipped and reported. (b)'s tests form
    one batch. Adjacencies never change. ``rerun_rules`` applies Zhang's rules afterwards with
    the client's separating sets.
    """
    local = {int(g): k for k, g in enumerate(observed)}
    if len(local) != pag0.n_nodes:
        raise ValueError(
            f"{len(local)} distinct observed ids for a PAG over {pag0.n_nodes} variables"
        )
    graph = pag0.copy()
    adj0 = pag0.marks != NONE
    structures = g0_v_structures(g0)
    imported = _import_colliders(graph.marks, adj0, structures, local)
    candidates = _propagation_candidates(graph.marks, adj0, structures, local, max_depth)
    batch = [q for *_, queries in candidates for q in queries]
    pvalues = np.asarray((yield batch) if batch else [], dtype=float)
    propagated, conflicts = _orient_propagated(graph.marks, candidates, pvalues, alpha)
    if rerun_rules:
        sets = {pair: [set(s)] for pair, s in (sepsets or {}).items()}
        apply_fci_rules(graph, sets, mode="zhang")
    return CUpdateResult(graph, imported, propagated, conflicts, len(batch))


def _import_colliders(
    m: np.ndarray,
    adj0: np.ndarray,
    structures: Sequence[tuple[int, int, int]],
    local: Mapping[int, int],
) -> list[tuple[int, int, int]]:
    """C-Update's step (a) on the marks ``m``: arrowheads at Y on both edges of each G0 collider
    whose three nodes are observed and both edges in Pag0. Returns the colliders that changed a
    mark (local ids)."""
    imported = []
    for a, y, b in structures:
        if a in local and y in local and b in local:
            la, ly, lb = local[a], local[y], local[b]
            if adj0[la, ly] and adj0[lb, ly] and (m[la, ly] != ARROW or m[lb, ly] != ARROW):
                m[la, ly] = ARROW
                m[lb, ly] = ARROW
                imported.append((la, ly, lb))
    return imported


def _propagation_candidates(
    m: np.ndarray,
    adj0: np.ndarray,
    structures: Sequence[tuple[int, int, int]],
    local: Mapping[int, int],
    max_depth: int | None,
) -> list[tuple[int, int, int, list[Query]]]:
    """C-Update's step (b) candidates ``(X, Y, B, queries)`` (local ids), each with the tests
    ``X _||_ B | Z + {Y}`` that decide it; candidates that need no test are left out."""
    candidates: list[tuple[int, int, int, list[Query]]] = []
    seen: set[tuple[int, int, int]] = set()
    for a, y, b in structures:
        if y not in local:
            continue
        ly = local[y]
        pool = [int(v) for v in np.flatnonzero(adj0[ly])]
        ends = {local[v] for v in (a, b) if v in local}
        for x in (a, b):
            if x not in local or not adj0[local[x], ly]:
                continue
            lx = local[x]
            for lb_ in pool:
                if lb_ in ends or adj0[lx, lb_] or (lx, ly, lb_) in seen:
                    continue
                seen.add((lx, ly, lb_))
                if m[lb_, ly] == ARROW or (m[ly, lb_] == ARROW and m[lb_, ly] == TAIL):
                    continue  # an arrowhead at Y would conflict; or Y --> B already
                rest = [v for v in pool if v != lb_ and v not in ends]
                top = len(rest) if max_depth is None else min(max_depth, len(rest))
                queries = [
                    (lx, lb_, tuple(sorted((*z, ly))))
                    for size in range(top + 1)
                    for z in combinations(rest, size)
                ]
                candidates.append((lx, ly, lb_, queries))
    return candidates


def _orient_propagated(
    m: np.ndarray,
    candidates: Sequence[tuple[int, int, int, list[Query]]],
    pvalues: np.ndarray,
    alpha: float,
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """C-Update's step (b) orientations on the marks ``m``, in candidate order: ``Y --> B`` when
    a test of the candidate's block says independent, unless an arrowhead is at Y by then.
    Returns the pairs oriented and the pairs skipped as conflicting."""
    propagated, conflicts = [], []
    done: set[tuple[int, int]] = set()
    start = 0
    for _, ly, lb_, queries in candidates:
        block = pvalues[start : start + len(queries)]
        start += len(queries)
        if (ly, lb_) in done or not np.any(block > alpha):
            continue
        if m[lb_, ly] == ARROW:
            conflicts.append((ly, lb_))
            done.add((ly, lb_))
            continue
        m[lb_, ly] = TAIL
        m[ly, lb_] = ARROW
        propagated.append((ly, lb_))
        done.add((ly, lb_))
    return propagated, conflicts


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


# ============================================================================ server, round 2
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


def stitch_order(column_lists: Sequence[Sequence[str]]) -> list[str]:
    """The union of the clients' columns in an order consistent with every client's order where
    possible (ties by first appearance); first-appearance order if the orders conflict."""
    first: dict[str, int] = {}
    for cols in column_lists:
        for c in cols:
            first.setdefault(str(c), len(first))
    after: dict[str, set[str]] = {c: set() for c in first}
    indegree = dict.fromkeys(first, 0)
    for cols in column_lists:
        for u, v in zip(cols, list(cols)[1:], strict=False):
            if str(v) not in after[str(u)]:
                after[str(u)].add(str(v))
                indegree[str(v)] += 1
    ready = sorted((c for c, k in indegree.items() if k == 0), key=first.__getitem__)
    order: list[str] = []
    while ready:
        c = ready.pop(0)
        order.append(c)
        for v in after[c]:
            indegree[v] -= 1
            if indegree[v] == 0:
                ready.append(v)
        ready.sort(key=first.__getitem__)
    return order if len(order) == len(first) else list(first)
