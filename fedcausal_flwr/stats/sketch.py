"""FedC2SL's sketched chi2 test: random projections of the Pearson residuals and Li's estimator.

Protocol for a batch of queries (all vectors follow a :class:`TableLayout`):

1. client k: ``tables_k, layout = local_tables(codes_k, cards, queries)`` and sends
   ``table_marginals(tables_k, layout)``; the server sums them (first secure aggregation).
2. server: ``expected = expected_counts(marginals, layout)`` and broadcasts it with one integer
   ``seed``. Query i's projection matrix is ``projection_matrix(seed, i, l, card_x * card_y)``:
   entries i.i.d. N(0, 2) (scipy's ``levy_stable(2, 0)``, characteristic function ``exp(-t^2)``),
   drawn from numpy's PCG64 seeded with ``[seed, i]`` (``[seed, i, z]`` per stratum), so every
   party derives the same matrix without shipping it.
3. client k: ``client_sketch(tables_k, expected, layout, n_clients, seed, l)`` projects its
   residual share ``(T_k - E / K) / sqrt(E)``; by linearity the sum over clients (second secure
   aggregation) is the projection of the pooled residual ``(T - E) / sqrt(E)``.
4. server: ``sketch_chi2(sketch_sum, marginals, layout, l)`` estimates each stratum's chi2
   contribution ``||u_z||^2`` with Li's geometric-mean estimator and sums them; dof as the exact
   test (:func:`~.contingency.discrete_tests`), computed from the margins.

Privacy caveat (the paper's Sec. 4.2 claims secrecy "under appropriate parameters"; see
docs/choices.md, FedC2SL): with ``l >= card_x * card_y`` the server can solve for the residuals, so
the sketch hides nothing beyond the exact table margins in that regime.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .contingency import TableLayout, expected_from_margins, marginal_offsets

PROJECTION_SCALE = math.sqrt(2.0)


def projection_matrix(
    seed: int, query_index: int, sketch_length: int, n_cells: int, n_strata: int | None = None
) -> np.ndarray:
    """Query ``query_index``'s N(0, 2) projection: ``(l, m)``, or ``(n_strata, l, m)`` per stratum.

    Deterministic in ``(seed, query_index)``: the server broadcasts only the seed.
    """
    if sketch_length < 2:
        raise ValueError(f"sketch length must be >= 2 for a finite estimator, got {sketch_length}")
    rng = np.random.default_rng([int(seed), int(query_index)])
    shape = (sketch_length, n_cells) if n_strata is None else (n_strata, sketch_length, n_cells)
    return rng.normal(scale=PROJECTION_SCALE, size=shape)


def sketch_offsets(layout: TableLayout, sketch_length: int) -> np.ndarray:
    """Offsets of each query's ``(card_S, l)`` block in a sketch vector."""
    offsets = np.zeros(layout.n_queries + 1, dtype=np.int64)
    np.cumsum(layout.shapes[:, 0] * sketch_length, out=offsets[1:])
    return offsets


def expected_counts(marginals: np.ndarray, layout: TableLayout) -> np.ndarray:
    """Expected cell counts ``n_xz n_yz / n_z`` from summed margins, in the table layout."""
    marginals = np.asarray(marginals)
    m_off = marginal_offsets(layout)
    if marginals.shape != (int(m_off[-1]),):
        raise ValueError(f"marginal vector has shape {marginals.shape}, expected ({m_off[-1]},)")
    out = np.empty(layout.total, dtype=np.float64)
    for i in range(layout.n_queries):
        cs, cx, cy = (int(v) for v in layout.shapes[i])
        block = marginals[m_off[i] : m_off[i + 1]]
        n_xz, n_yz = block[: cs * cx].reshape(cs, cx), block[cs * cx :].reshape(cs, cy)
        out[layout.offsets[i] : layout.offsets[i + 1]] = expected_from_margins(n_xz, n_yz).ravel()
    return out


def client_sketch(
    local_tables: np.ndarray,
    expected: np.ndarray,
    layout: TableLayout,
    n_clients: int,
    seed: int,
    sketch_length: int,
    *,
    per_stratum: bool = False,
) -> np.ndarray:
    """One client's projected residual share, ``P (T_k - E/K) / sqrt(E)`` per stratum, concatenated.

    Cells with ``E = 0`` have zero pooled (hence local) count and contribute 0. ``n_clients`` is the
    number of clients whose sketches are summed (the survivors, under dropout).
    """
    if n_clients < 1:
        raise ValueError(f"n_clients must be >= 1, got {n_clients}")
    local_tables = np.asarray(local_tables)
    expected = np.asarray(expected, dtype=np.float64)
    for name, vec in (("local table", local_tables), ("expected-count", expected)):
        if vec.shape != (layout.total,):
            raise ValueError(f"{name} vector has shape {vec.shape}, expected ({layout.total},)")
    s_off = sketch_offsets(layout, sketch_length)
    out = np.empty(int(s_off[-1]), dtype=np.float64)
    root = np.sqrt(np.where(expected > 0, expected, 1.0))
    residual = (local_tables - expected / n_clients) / root
    for i in range(layout.n_queries):
        cs, cx, cy = (int(v) for v in layout.shapes[i])
        u = residual[layout.offsets[i] : layout.offsets[i + 1]].reshape(cs, cx * cy)
        if per_stratum:
            proj = projection_matrix(seed, i, sketch_length, cx * cy, cs)
            e = np.einsum("zlm,zm->zl", proj, u)
        else:
            e = u @ projection_matrix(seed, i, sketch_length, cx * cy).T
        out[s_off[i] : s_off[i + 1]] = e.ravel()
    return out


def log_li_constant(sketch_length: int) -> float:
    """``l * log C`` with ``C = (2/pi) Gamma(2/l) Gamma(1 - 1/l) sin(pi/l)`` = ``E|e_k|^(2/l)``.

    ``C`` is the (2/l)-th absolute moment of a standard 2-stable variable, so dividing the product
    of ``|e_k|^(2/l)`` by ``C^l`` makes the estimator unbiased for ``||u||^2`` (Li 2008).
    """
    from scipy import special  # here, not at import: a client sketching needs none

    lg = sketch_length
    if lg < 2:
        raise ValueError(f"sketch length must be >= 2, got {lg}")
    log_c = (
        math.log(2 / math.pi)
        + special.gammaln(2 / lg)
        + special.gammaln(1 - 1 / lg)
        + math.log(math.sin(math.pi / lg))
    )
    return lg * log_c


def geometric_mean_estimate(projections: np.ndarray) -> np.ndarray:
    """Li's geometric-mean estimate of ``||u||^2`` from ``l`` N(0, 2)-projections (last axis).

    A *product* of ``|e_k|^(2/l)`` (the paper's "sum" is a conversion error), in log space;
    any zero projection gives 0.
    """
    e = np.abs(np.asarray(projections, dtype=np.float64))
    lg = e.shape[-1]
    offset = log_li_constant(lg)
    zero = (e == 0).any(axis=-1)
    with np.errstate(divide="ignore"):
        log_sum = np.log(np.where(e == 0, 1.0, e)).sum(axis=-1)
    return np.where(zero, 0.0, np.exp(2.0 / lg * log_sum - offset))


@dataclass(frozen=True)
class SketchTestResult:
    """Per-query estimated chi2, dof and p-value."""

    statistic: np.ndarray
    dof: np.ndarray
    pvalue: np.ndarray


def marginal_dof(
    marginals: np.ndarray, layout: TableLayout, *, empty_strata_add_dof: bool = False
) -> np.ndarray:
    """Degrees of freedom from summed margins, with causal-learn's rule (see contingency)."""
    m_off = marginal_offsets(layout)
    dof = np.zeros(layout.n_queries, dtype=np.int64)
    for i in range(layout.n_queries):
        cs, cx, cy = (int(v) for v in layout.shapes[i])
        block = np.asarray(marginals)[m_off[i] : m_off[i + 1]]
        n_xz, n_yz = block[: cs * cx].reshape(cs, cx), block[cs * cx :].reshape(cs, cy)
        nonempty = n_xz.sum(axis=1) > 0
        per_stratum = ((n_xz > 0).sum(axis=1) - 1) * ((n_yz > 0).sum(axis=1) - 1)
        dof[i] = per_stratum[nonempty].sum() + (
            int((~nonempty).sum()) if empty_strata_add_dof else 0
        )
    return dof


def sketch_chi2(
    sketch_sum: np.ndarray,
    marginals: np.ndarray,
    layout: TableLayout,
    sketch_length: int,
    *,
    empty_strata_add_dof: bool = False,
) -> SketchTestResult:
    """Estimated Pearson chi2 (sum of per-stratum Li estimates), dof and p (1 when dof = 0)."""
    s_off = sketch_offsets(layout, sketch_length)
    sketch_sum = np.asarray(sketch_sum, dtype=np.float64)
    if sketch_sum.shape != (int(s_off[-1]),):
        raise ValueError(f"sketch vector has shape {sketch_sum.shape}, expected ({s_off[-1]},)")
    per_stratum = geometric_mean_estimate(sketch_sum.reshape(-1, sketch_length))
    strata = layout.shapes[:, 0]
    stat = np.add.reduceat(per_stratum, s_off[:-1] // sketch_length) if strata.size else per_stratum
    dof = marginal_dof(marginals, layout, empty_strata_add_dof=empty_strata_add_dof)
    from scipy import stats as sps  # here, not at import: a client sketching needs none

    pvalue = np.ones(layout.n_queries)
    pos = dof > 0
    pvalue[pos] = sps.chi2.sf(stat[pos], dof[pos])
    return SketchTestResult(stat, dof, pvalue)
