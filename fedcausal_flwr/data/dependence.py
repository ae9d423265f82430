"""Columns a CI test cannot separate, found at one site from its coded columns (Flower-free).

Given a column that duplicates, determines or (for numbers) is a linear combination of others,
a CI test finds the rest independent of everything, so PC removes true edges without a word
(causal-learn does the same). A client reports such columns in ``hello`` by name only (and, for
a near-collinear set, the condition number of its correlation matrix); the server warns about
what every site reports (:func:`fedcausal_flwr.federation.core.input_checks.warn_dependence`).

* ``duplicates``: two varying columns equal row for row (equal
  :func:`~.fingerprint.column_digest`).
* ``determines``: ``[a, b]``, each value of discrete ``a`` occurs with one value of ``b`` (rows
  holding both), ``b`` varies and ``a`` has at most half as many values as such rows (with more,
  a function is chance). Candidates come from one product of indicator matrices over at most
  :data:`SCREEN_ROWS` rows (a function over all rows is one over any of them); each is
  confirmed over all rows.
* ``collinear``: decimal columns whose correlation matrix (complete rows, duplicates left out)
  has a condition number above :data:`COLLINEAR_CONDITION`; the set is the columns carrying the
  near-null directions. Only with more complete rows than columns (otherwise the matrix is
  singular whatever the data).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.data.columns import Column

#: A correlation matrix with a condition number above this is near-singular: some columns are
#: (nearly) a linear combination of others (``S = X + Y``).
COLLINEAR_CONDITION = 1e10
#: Rows of the indicator product that screens for functions (candidates are confirmed on all).
SCREEN_ROWS = 4096
#: Segments at most this many levels wide are reduced as strided slices (:func:`_segments`).
FOLDED_WIDTH = 8
#: Levels per block of the indicator product (bounds its memory: block x levels floats).
LEVEL_BLOCK = 2048


def dependence_report(
    columns: Sequence[Column],
    hashes: Sequence[bytes],
    discrete: Sequence[bool],
    varies: Sequence[bool],
) -> dict[str, list]:
    """``{"duplicates": [[a, b]], "determines": [[a, b]], "collinear": [{"columns": [...],
    "condition": c}]}`` for one site's columns (see the module docstring); ``hashes`` are the
    columns' hashes, ``discrete[j]``: column ``j`` is reported with levels (a test can treat it
    as discrete), ``varies[j]``: it holds two different values (a constant column is the
    constant check's business, here it takes no part). ``condition`` is rounded to two digits,
    ``None`` for a singular matrix."""
    names = [c.name for c in columns]
    groups: dict[tuple[bytes, str], list[int]] = {}
    for j, key in enumerate(hashes):
        if varies[j]:
            groups.setdefault((key, columns[j].dtype), []).append(j)
    duplicates = [  # every pair of a group of equal columns
        [names[a], names[b]]
        for group in groups.values()
        for position, a in enumerate(group)
        for b in group[position + 1 :]
    ]
    twin_of = {j: group[0] for group in groups.values() for j in group[1:]}
    coded = [j for j, c in enumerate(columns) if discrete[j] and varies[j] and c.codes is not None]
    twins = {frozenset(pair) for pair in duplicates}
    determines = []
    for a, b in _functions([columns[j] for j in coded]):
        pair = [names[coded[a]], names[coded[b]]]
        if frozenset(pair) not in twins:
            determines.append(pair)
    decimal = [j for j, c in enumerate(columns) if c.codes is None and j not in twin_of]
    collinear = _collinear([columns[j] for j in decimal])
    return {
        "duplicates": duplicates,
        "determines": determines,
        "collinear": [
            {"columns": [names[decimal[k]] for k in group], "condition": condition}
            for group, condition in collinear
        ],
    }


def _functions(columns: Sequence[Column]) -> list[tuple[int, int]]:
    """``(a, b)`` positions in ``columns`` where ``a`` determines ``b`` (module docstring)."""
    p = len(columns)
    if p < 2:
        return []
    n = len(columns[0].codes)  # type: ignore[arg-type]
    screen = slice(None, None, max(1, math.ceil(n / SCREEN_ROWS)))  # spread over the rows
    cards = np.array([len(c.uniques) for c in columns])
    starts = np.cumsum(cards) - cards
    owner = np.repeat(np.arange(p), cards)  # level -> its column
    by_column = np.stack([c.codes[screen] for c in columns])  # type: ignore[index]
    indicator = _indicator(by_column, owner, starts)
    whole = screen.step == 1  # the screen is every row: its answer is final but for "few"
    found = np.zeros((p, p), dtype=bool)
    # one level count for all (binary data, say): segments are a reshape, not a reduceat
    width = int(cards[0]) if np.all(cards == cards[0]) else None
    for first, last in _blocks(cards):
        levels = slice(starts[first], starts[last - 1] + cards[last - 1])
        seen = (indicator[:, levels].T @ indicator) > 0  # level of a x level of b: rows with both
        met = _segments(np.add, seen, starts, 1, width, np.int32)  # levels of b each meets
        local = starts[first:last] - starts[first]
        many = _segments(np.maximum, met, local, 0, width) > 1
        meets = _segments(np.add, met > 0, local, 0, width, np.int32) > 0
        candidate = ~many & meets
        if whole:
            met_any = _segments(np.logical_or, seen, local, 0, width)  # a x level of b
            candidate &= _segments(np.add, met_any, starts, 1, width, np.int32) >= 2
        found[first:last] = candidate
    np.fill_diagonal(found, False)
    return [
        (int(a), int(b))
        for a, b in zip(*np.nonzero(found), strict=True)
        if _determines(columns[a], columns[b])
    ]


def _indicator(by_column: np.ndarray, owner: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Rows x levels, 1.0 where the row holds the level (a missing code, -1, holds none), from
    the codes column by column (``by_column``: columns x rows); laid out level by level, as
    the products below read it."""
    level = np.arange(len(owner)) - starts[owner]  # each level's code in its column
    by_level = np.empty((len(owner), by_column.shape[1]), dtype=np.float32)
    np.equal(by_column[owner], level[:, None].astype(by_column.dtype), out=by_level)
    return by_level.T


def _segments(
    ufunc: np.ufunc,
    array: np.ndarray,
    starts: np.ndarray,
    axis: int,
    width: int | None,
    dtype: type | None = None,
) -> np.ndarray:
    """``ufunc.reduceat(array, starts, axis)``; segments all ``width`` long are reduced as a
    reshaped axis (several times faster), or, a few levels wide, as that many strided slices
    (faster again: numpy reduces a short axis slowly)."""
    if width is None:
        return ufunc.reduceat(array, starts, axis=axis, dtype=dtype)
    if width <= FOLDED_WIDTH:
        parts = [array[k::width] if axis == 0 else array[:, k::width] for k in range(width)]
        out = parts[0].astype(dtype or array.dtype)
        for part in parts[1:]:
            ufunc(out, part, out=out)
        return out
    if axis == 0:
        shaped = array.reshape(-1, width, array.shape[1])
    else:
        shaped = array.reshape(array.shape[0], -1, width)
    return ufunc.reduce(shaped, axis=axis + 1, dtype=dtype)


def _blocks(cards: np.ndarray) -> list[tuple[int, int]]:
    """Runs of columns ``[first, last)`` with at most :data:`LEVEL_BLOCK` levels together (a
    column with more alone)."""
    blocks, first, total = [], 0, 0
    for j, card in enumerate(cards):
        if total and total + card > LEVEL_BLOCK:
            blocks.append((first, j))
            first, total = j, 0
        total += int(card)
    blocks.append((first, len(cards)))
    return blocks


def _determines(a: Column, b: Column) -> bool:
    """Over all rows holding both: each value of ``a`` with one value of ``b``, ``b`` varying,
    ``a`` with at most half as many values as rows."""
    both = (a.codes >= 0) & (b.codes >= 0)  # type: ignore[operator]
    codes_a, codes_b = a.codes[both], b.codes[both]  # type: ignore[index]
    n = len(codes_a)
    if n < 2:
        return False
    pairs = np.unique(codes_a.astype(np.int64) * len(b.uniques) + codes_b)
    values_a = np.unique(pairs // len(b.uniques))
    values_b = np.unique(pairs % len(b.uniques))
    return len(pairs) == len(values_a) and len(values_b) >= 2 and 2 * len(values_a) <= n


def _collinear(columns: Sequence[Column]) -> list[tuple[list[int], Any]]:
    """``[(positions, condition)]``: the near-collinear set of ``columns``, if any."""
    q = len(columns)
    if q < 2:
        return []
    values = np.column_stack([c.values for c in columns if c.values is not None])
    values = values[~np.isnan(values).any(axis=1)]
    n = len(values)
    if n <= q + 1:
        return []
    centred = values - values.mean(axis=0)
    scale = np.sqrt((centred**2).sum(axis=0))
    varying = scale > 0  # a constant column is the constant check's business
    if varying.sum() < 2:
        return []
    kept = np.flatnonzero(varying)
    standard = centred[:, kept] / scale[kept]
    eigenvalues, vectors = np.linalg.eigh(standard.T @ standard)
    largest = eigenvalues[-1]
    near = eigenvalues * COLLINEAR_CONDITION < largest
    if not near.any():
        return []
    smallest = eigenvalues[0]
    condition = None if smallest <= 0 else float(f"{largest / smallest:.2g}")
    if condition is not None and not math.isfinite(condition):
        condition = None
    weight = np.sqrt((vectors[:, near] ** 2).sum(axis=1))
    group = [int(kept[k]) for k in np.flatnonzero(weight >= 0.1 * weight.max())]
    return [(group, condition)]
