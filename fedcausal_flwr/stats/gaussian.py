"""Gaussian sufficient statistics (summable moments) and the Fisher-z partial-correlation test.

The federated Fisher-z test is three calls::

    m_k = local_moments(data_k)                  # on every client: (n, sum x, sum x x^T)
    total = sum_moments([m_1, ..., m_K])         # secure aggregation (or sum of .to_vector())
    pvals = fisher_z_pvalues(total, queries)     # on the server

The p-values reproduce causal-learn 0.1.4.8 ``FisherZ`` on the pooled data: its ``np.corrcoef``
correlation matrix (rebuilt from the moments), ``np.linalg.inv`` of the sub-matrix ordered
``[x, y, *S]``, ``r`` clipped to ``+-(1 - eps)``, ``sqrt(n - |S| - 3) * |atanh r|`` and
``p = 2 * (1 - Phi(|z|))`` (the same formula, so tiny p-values round as causal-learn's do).
Moments are raw sums, so they suffer cancellation when means are huge relative to the spread; a
public ``shift`` (e.g. a rough location agreed before the run) removes that without changing the
correlation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .batch_oracle import Query, by_conditioning_size, normalise_query


def _where(client: str | None) -> str:
    return f" of client {client!r}" if client is not None else ""


def _name(variables: Sequence[str] | None, v: int) -> str:
    return f"{variables[v]!r} (column {v})" if variables is not None else f"column {v}"


def _singular(matrices: np.ndarray, queries: Sequence[Query], variables) -> ValueError:
    """The error for the first singular correlation matrix of a batch: the columns of its test,
    by name (collinear columns, which Fisher-z cannot test)."""
    for (x, y, s), m in zip(queries, matrices, strict=True):
        if not np.all(np.isfinite(m)) or np.linalg.matrix_rank(m) < m.shape[0]:
            names = [variables[v] if variables is not None else f"#{v}" for v in (x, y, *s)]
            given = ", ".join(repr(n) for n in names[2:]) or "nothing"
            return ValueError(
                f"columns {', '.join(repr(n) for n in names)} are collinear: the correlation "
                f"matrix of {names[0]!r} and {names[1]!r} given {given} is singular, so Fisher-z "
                "cannot test them; drop one of them"
            )
    return ValueError("a correlation matrix of the batch is singular; Fisher-z cannot test it")


@dataclass(frozen=True, eq=False)
class GaussianMoments:
    """``n``, ``sum_x = sum (x - shift)`` and ``cross = sum (x - shift)(x - shift)^T`` (float64)."""

    n: int
    sum_x: np.ndarray
    cross: np.ndarray
    shift: np.ndarray

    @property
    def n_vars(self) -> int:
        return int(self.sum_x.size)

    def __add__(self, other: GaussianMoments) -> GaussianMoments:
        if other.n_vars != self.n_vars:
            raise ValueError(f"cannot add moments over {self.n_vars} and {other.n_vars} variables")
        if not np.array_equal(self.shift, other.shift):
            raise ValueError("cannot add moments computed with different shifts")
        return GaussianMoments(
            self.n + other.n, self.sum_x + other.sum_x, self.cross + other.cross, self.shift
        )

    def to_vector(self) -> np.ndarray:
        """``[n, sum_x, cross.ravel()]`` as one float64 vector (the aggregation payload)."""
        return np.concatenate(([float(self.n)], self.sum_x, self.cross.ravel()))

    @classmethod
    def from_vector(
        cls, vector: np.ndarray, n_vars: int, shift: np.ndarray | None = None
    ) -> GaussianMoments:
        vector = np.asarray(vector, dtype=np.float64)
        if vector.shape != (1 + n_vars + n_vars * n_vars,):
            raise ValueError(
                f"moment vector has shape {vector.shape}, expected ({1 + n_vars + n_vars**2},)"
            )
        if vector[0] != round(vector[0]) or vector[0] < 0:
            raise ValueError(f"moment vector has a non-integer sample size {vector[0]!r}")
        shift_arr = np.zeros(n_vars) if shift is None else np.asarray(shift, dtype=np.float64)
        return cls(
            int(vector[0]),
            vector[1 : 1 + n_vars].copy(),
            vector[1 + n_vars :].reshape(n_vars, n_vars).copy(),
            shift_arr,
        )


def local_moments(
    data: np.ndarray,
    *,
    shift: np.ndarray | None = None,
    variables: Sequence[str] | None = None,
    client: str | None = None,
) -> GaussianMoments:
    """One client's moments; NaN/inf or non-numeric data is an error naming client and variable."""
    arr = np.asarray(data)
    if arr.ndim != 2:
        raise ValueError(f"data{_where(client)} must be a 2-d (n, p) array, got shape {arr.shape}")
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"data{_where(client)} must be numeric, got dtype {arr.dtype}")
    if variables is not None and len(variables) != arr.shape[1]:
        raise ValueError(
            f"data{_where(client)} has {arr.shape[1]} columns for {len(variables)} names"
        )
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr).all(axis=0)
    for v in np.flatnonzero(bad):
        raise ValueError(
            f"variable {_name(variables, int(v))}{_where(client)} has NaN or inf values"
        )
    p = arr.shape[1]
    shift_arr = np.zeros(p) if shift is None else np.asarray(shift, dtype=np.float64)
    if shift_arr.shape != (p,):
        raise ValueError(f"shift must have shape ({p},), got {shift_arr.shape}")
    centred = arr - shift_arr if shift is not None else arr
    return GaussianMoments(arr.shape[0], centred.sum(axis=0), centred.T @ centred, shift_arr)


def sum_moments(moments: Sequence[GaussianMoments]) -> GaussianMoments:
    """Pool the clients' moments."""
    if not moments:
        raise ValueError("no moments to sum")
    total = moments[0]
    for m in moments[1:]:
        total = total + m
    return total


def correlation_from_moments(
    moments: GaussianMoments, variables: Sequence[str] | None = None
) -> np.ndarray:
    """The pooled sample correlation matrix, computed the way ``np.corrcoef`` does."""
    n = moments.n
    if n < 2:
        raise ValueError(f"a correlation needs at least 2 samples, got n = {n}")
    cov = moments.cross - np.outer(moments.sum_x, moments.sum_x) / n
    cov = cov * np.true_divide(1, n - 1)
    var = np.diag(cov)
    # raw moments leave rounding noise where a column is constant: compare with its magnitude
    scale = np.diag(moments.cross) / n
    for v in np.flatnonzero(~(var > 1e-12 * scale)):
        raise ValueError(
            f"variable {_name(variables, int(v))} has zero variance in the pooled data; "
            "Fisher-z cannot test a constant variable"
        )
    std = np.sqrt(var)
    corr = cov / std[:, None]
    corr /= std[None, :]
    np.clip(corr, -1, 1, out=corr)
    return corr


class TooFewSamplesError(ValueError):
    """A Fisher-z test given ``k`` variables on ``n <= k + 3`` rows: it has no degrees of
    freedom. Typed, so a method can say which option caps the conditioning sets."""

    def __init__(self, k: int, n: int, query: Query):
        self.k, self.n, self.query = k, n, query
        super().__init__(
            f"Fisher-z with |S| = {k} needs n > {k + 3} samples, got n = {n} (e.g. query {query})"
        )


def fisher_z_from_correlation(
    corr: np.ndarray,
    n: int,
    queries: Sequence[Sequence],
    variables: Sequence[str] | None = None,
) -> np.ndarray:
    """Fisher-z p-values from a correlation matrix, vectorised over queries with equal |S|
    (``variables`` names the columns in errors)."""

    keys: list[Query] = [normalise_query(*q) for q in queries]
    p_vars = corr.shape[0]
    pvals = np.empty(len(keys))
    by_size: dict[int, list[int]] = {}
    for i, (x, y, s) in enumerate(keys):
        for v in (x, y, *s):
            if not 0 <= v < p_vars:
                raise KeyError(f"query {(x, y, s)} uses variable {v}; only {p_vars} are known")
        by_size.setdefault(len(s), []).append(i)
    for k, members in by_size.items():
        dof = n - k - 3
        if dof <= 0:
            raise TooFewSamplesError(k, n, keys[members[0]])
        idx = np.array([(keys[i][0], keys[i][1], *keys[i][2]) for i in members], dtype=np.int64)
        sub = corr[idx[:, :, None], idx[:, None, :]]
        try:
            inv = np.linalg.inv(sub)
        except np.linalg.LinAlgError:
            raise _singular(sub, [keys[i] for i in members], variables) from None
        pvals[members] = _fisher_z(inv, math.sqrt(dof))
    return pvals


def _fisher_z(inv: np.ndarray, root_dof: np.ndarray | float) -> np.ndarray:
    """p-values from stacked inverse correlation matrices of ``(x, y, S...)``: the partial
    correlation of x and y, Fisher's z, ``sqrt(n - |S| - 3) |z|`` (``root_dof``), two-sided."""
    from scipy import stats as sps

    r = -inv[:, 0, 1] / np.sqrt(np.abs(inv[:, 0, 0] * inv[:, 1, 1]))
    big = np.abs(r) >= 1
    r[big] = (1.0 - np.finfo(float).eps) * np.sign(r[big])
    z = 0.5 * np.log((1 + r) / (1 - r))
    stat = root_dof * np.abs(z)
    return 2 * (1 - sps.norm.cdf(np.abs(stat)))


def fisher_z_pvalues(
    moments: GaussianMoments,
    queries: Sequence[Sequence],
    variables: Sequence[str] | None = None,
) -> np.ndarray:
    """Fisher-z p-values for a batch of queries from (summed) moments."""
    return fisher_z_from_correlation(
        correlation_from_moments(moments, variables), moments.n, queries, variables
    )


# ------------------------------------------------------------------------ test-wise deletion
#: Elements (rows x queries x variables) of one chunk of :func:`query_moments`.
_QUERY_CHUNK_ELEMENTS = 2**22


def query_block_sizes(queries: Sequence[Query]) -> np.ndarray:
    """Length of each query's block ``[n, sum v, cross v v^T]`` over ``v = (x, y, *S)``."""
    m = np.array([len(s) + 2 for _, _, s in queries], dtype=np.int64)
    return 1 + m + m * m


def query_moments(
    data: np.ndarray,
    queries: Sequence[Query],
    variables: Sequence[str] | None = None,
    client: str | None = None,
) -> np.ndarray:
    """Per query, the moments of its variables over the rows complete on them (test-wise
    deletion: NaN marks a missing value; inf is an error naming the variable), concatenated in
    query order (blocks of :func:`query_block_sizes`). Summed over clients they are the pooled
    blocks."""
    arr = np.asarray(data, dtype=np.float64)
    for v in np.flatnonzero(np.isinf(arr).any(axis=0)):
        raise ValueError(f"variable {_name(variables, int(v))}{_where(client)} has inf values")
    out = np.empty(int(query_block_sizes(queries).sum()))
    offsets = np.concatenate(([0], np.cumsum(query_block_sizes(queries))))
    by_size = by_conditioning_size(queries)
    n = arr.shape[0]
    for k, members in by_size.items():
        m = k + 2
        chunk = max(1, _QUERY_CHUNK_ELEMENTS // max(1, n * m))
        for start in range(0, len(members), chunk):
            part = members[start : start + chunk]
            idx = np.array([(queries[i][0], queries[i][1], *queries[i][2]) for i in part])
            values = arr[:, idx.reshape(len(part), m)]  # (n, g, m)
            complete = np.asarray(np.isfinite(values).all(axis=2))  # (n, g)
            values = np.where(complete[:, :, None], values, 0.0)
            counts = complete.sum(axis=0).astype(np.float64)
            sums = values.sum(axis=0)
            cross = np.einsum("ngi,ngj->gij", values, values)
            blocks = np.concatenate(
                (counts[:, None], sums, cross.reshape(len(part), m * m)), axis=1
            )
            rows = offsets[part][:, None] + np.arange(1 + m + m * m)
            out[rows] = blocks
    return out


def fisher_z_from_query_moments(
    vector: np.ndarray, queries: Sequence[Query], variables: Sequence[str] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(p-values, rows used)`` of Fisher-z tests from (summed) per-query moment blocks: each
    test on its own complete rows, as causal-learn's ``mv_fisherz`` (corrcoef of the complete
    rows, partial correlation from its inverse, ``sqrt(n - |S| - 3) |z|``)."""

    vector = np.asarray(vector, dtype=np.float64)
    sizes = query_block_sizes(queries)
    if vector.shape != (int(sizes.sum()),):
        raise ValueError(f"query moments have shape {vector.shape}, expected ({int(sizes.sum())},)")
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    pvals = np.empty(len(queries))
    rows = np.empty(len(queries), dtype=np.int64)
    by_size = by_conditioning_size(queries)
    for k, members in by_size.items():
        m = k + 2
        blocks = vector[offsets[members][:, None] + np.arange(1 + m + m * m)]
        n = blocks[:, 0]
        if np.any(n != np.round(n)) or np.any(n < 0):
            raise ValueError("query moments hold a non-integer row count")
        rows[members] = n.astype(np.int64)
        for short in np.flatnonzero(n - k - 3 <= 0).tolist():
            raise TooFewSamplesError(k, int(n[short]), queries[members[short]])
        sums = blocks[:, 1 : 1 + m]
        cov = (
            blocks[:, 1 + m :].reshape(-1, m, m)
            - sums[:, :, None] * sums[:, None, :] / n[:, None, None]
        )
        cov /= (n - 1)[:, None, None]
        var = np.diagonal(cov, axis1=1, axis2=2)
        for i, j in zip(*np.nonzero(~(var > 0)), strict=True):
            x, y, s = queries[members[i]]
            v = (x, y, *s)[j]
            raise ValueError(
                f"variable {_name(variables, int(v))} has zero variance on the rows complete for "
                f"the test of {_name(variables, x)} and {_name(variables, y)}; Fisher-z cannot "
                "test it"
            )
        std = np.sqrt(var)
        corr = cov / std[:, :, None] / std[:, None, :]
        try:
            inv = np.linalg.inv(corr)
        except np.linalg.LinAlgError:
            found = _singular(corr, [queries[i] for i in members], variables)
            raise ValueError(f"{found} (on the rows complete for the test)") from None
        pvals[members] = _fisher_z(inv, np.sqrt(n - k - 3))
    return pvals, rows
