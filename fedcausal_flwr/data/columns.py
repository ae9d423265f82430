"""A frame's columns read once as integer codes or numbers (Flower-free).

Everything a client derives from its frame (the hello report, the fingerprint, the dependence
checks, the tables' codes over the global level sets) starts from the same per-column arrays:
a categorical column's own codes, a factorised code for any other non-decimal column, the
values of a decimal one. :func:`frame_columns` reads them once per frame object and keeps them
with the frame (:class:`~fedcausal_flwr.data.frame_cache.FrameCache`), so the rest is numpy.

Values are read as the user means them, one rule for every entry point and method: a text value
is read without its surrounding blanks (``'yes '`` is ``'yes'``: a stray blank is no level of
its own), and a categorical column's categories that no row holds are no levels (a declared but
unused category would widen every table and model). :func:`as_read` is the frame with its
columns so read, for code that reads the frame itself (a client's data).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fedcausal_flwr.data.frame_cache import FrameCache


@dataclass(frozen=True, eq=False)
class Column:
    """One column of a frame, by position, as read (see the module docstring).

    A decimal column (``codes is None``) keeps its ``values`` (float64, NaN where missing). Any
    other column keeps ``codes`` (-1 where missing) into ``uniques``: a categorical column's
    used categories in their order, otherwise the distinct values in order of appearance.
    ``read``: the column's values as read (a pandas array of the frame's dtype) when they differ
    from the frame's (blanks stripped, unused categories dropped), else ``None``.
    """

    name: str
    dtype: str
    categorical: bool
    codes: np.ndarray | None
    uniques: pd.Index
    values: np.ndarray | None = None
    read: Any = None


def is_decimal(dtype: Any) -> bool:
    """A float dtype that is not categorical (its values stay numbers, never levels)."""
    return pd.api.types.is_float_dtype(dtype) and not isinstance(dtype, pd.CategoricalDtype)


def _read(name: str, array: Any, as_meant: bool = True) -> Column:
    """One column from its values (a pandas extension array or a numpy array); ``as_meant``
    False: as given (blanks and unused categories kept, as results recorded before read them)."""
    dtype = array.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        read = _categorical_as_read(array) if as_meant else None
        if read is not None:
            array = read
        return Column(name, str(dtype), True, np.asarray(array.codes), array.categories, read=read)
    if is_decimal(dtype):
        if isinstance(array, np.ndarray):  # one copy, as float64 (NaN stays NaN)
            values = np.array(array, dtype=np.float64)
        else:  # a nullable Float array: NA becomes NaN
            values = array.to_numpy(dtype=np.float64, na_value=np.nan)
        return Column(name, str(dtype), False, None, pd.Index([]), values)
    codes, uniques = pd.factorize(array, use_na_sentinel=True)
    index = pd.Index(uniques)  # (once: an Index costs more than a small column's factorize)
    stripped = stripped_text(index) if as_meant else None
    if stripped is None:
        return Column(name, str(dtype), False, codes, index)
    # a value with surrounding blanks: the column with each text value stripped, read again
    original = np.asarray(array, dtype=object)
    values = np.where(codes >= 0, np.asarray(stripped, dtype=object)[codes], original)
    read = pd.array(values, dtype=dtype) if not isinstance(array, np.ndarray) else values
    codes, uniques = pd.factorize(read, use_na_sentinel=True)
    return Column(name, str(dtype), False, codes, pd.Index(uniques), read=read)


def stripped_text(values: pd.Index) -> np.ndarray | None:
    """``values`` with every text value stripped of surrounding blanks (others as they are), or
    ``None`` when no text value has any (the usual case: nothing to rebuild)."""
    if len(values) == 0 or not (
        pd.api.types.is_object_dtype(values.dtype) or pd.api.types.is_string_dtype(values.dtype)
    ):
        return None
    kind = pd.api.types.infer_dtype(values, skipna=True)
    original = np.asarray(values, dtype=object)
    if kind == "string":  # numpy's string functions: no pandas overhead per small level set
        text = original.astype(np.str_)
        padded = np.strings.strip(text) != text
    elif kind in ("mixed", "mixed-integer", "mixed-integer-float"):
        # pandas' strip of an object column gives NaN for a value that is not text
        stripped = pd.Series(original, dtype=object).str.strip()
        padded = stripped.notna().to_numpy() & (stripped.to_numpy(dtype=object) != original)
    else:
        return None  # no text among them (numbers, booleans, dates in an object column)
    if not padded.any():
        return None
    out = original.copy()
    out[padded] = pd.Series(original[padded], dtype=object).str.strip().to_numpy(dtype=object)
    return out


def _used(codes: np.ndarray, n: int) -> np.ndarray:
    """Which of ``n`` levels some row's code (``-1``: missing) points at (the first rows
    usually show every level: the whole column is counted only when they do not)."""
    for part in (codes[:_HEAD_ROWS], codes) if len(codes) > _HEAD_ROWS else (codes,):
        if part.dtype in (np.int8, np.int16):  # -1 counted in the unsigned view's top slot
            counts = np.bincount(part.view(np.uint8 if part.dtype == np.int8 else np.uint16))
        else:
            counts = np.bincount(part[part >= 0])
        used = np.zeros(n, dtype=bool)
        used[: min(n, len(counts))] = counts[:n] > 0
        if used.all():
            break
    return used


#: Rows :func:`_used` looks at first.
_HEAD_ROWS = 4096


def _categorical_as_read(array: pd.Categorical) -> pd.Categorical | None:
    """A categorical column as read: categories stripped of surrounding blanks (two that then
    agree are one, at the first's place) and unused ones dropped, the order kept; ``None`` when
    it is read as it is."""
    categories = array.categories
    codes = np.asarray(array.codes)
    used = _used(codes, len(categories))
    stripped = stripped_text(categories)
    if stripped is None and used.all():
        return None
    if stripped is not None:  # merge the categories that agree once stripped
        merge, merged = pd.factorize(pd.Index(stripped, dtype=categories.dtype))
        codes = np.append(merge, -1)[codes]
        merged_used = np.zeros(len(merged), dtype=bool)
        merged_used[merge[used]] = True
        categories, used = pd.Index(merged), merged_used
    keep = np.flatnonzero(used)
    renumber = np.full(len(categories) + 1, -1, dtype=np.int64)
    renumber[keep] = np.arange(len(keep))
    dtype = pd.CategoricalDtype(categories[keep], ordered=array.ordered)
    return pd.Categorical.from_codes(renumber[codes], dtype=dtype)


def frame_columns(frame: pd.DataFrame) -> list[Column]:
    """The frame's columns by position, read once per frame object (see the module docstring).
    The list is shared: do not change it."""
    return _COLUMNS.get(frame, "columns", lambda: _read_all(frame))


def keep_columns(frame: pd.DataFrame, columns: list[Column]) -> None:
    """Take ``columns`` as ``frame``'s :func:`frame_columns`: read from an equal frame before
    (kept with it in a site's cache), so they need not be read again."""
    _COLUMNS.get(frame, "columns", lambda: columns)


def columns_of(frame: pd.DataFrame) -> list[Column]:
    """:func:`frame_columns` read now and not kept: for a frame its maker may still change in
    place (a file reader's), whose cached columns would then be stale."""
    return _read_all(frame)


def _read_all(frame: pd.DataFrame) -> list[Column]:
    names = [str(name) for name in frame.columns]
    return [_read(name, array) for name, array in zip(names, _column_arrays(frame), strict=True)]


def given_columns(frame: pd.DataFrame) -> list[Column]:
    """The frame's columns as given, not as read (surrounding blanks and unused categories
    kept; not kept with the frame): the data fingerprints of results recorded before the rule."""
    names = [str(name) for name in frame.columns]
    arrays = _column_arrays(frame)
    return [_read(name, array, False) for name, array in zip(names, arrays, strict=True)]


def _column_arrays(frame: pd.DataFrame) -> Iterable[Any]:
    """Each column's values by position. pandas' own column iterator (a private method of
    pandas 2 and 3) skips building a Series per column, a third of reading a frame of category
    columns; without it, the public ``items``."""
    arrays = getattr(frame, "_iter_column_arrays", None)
    if arrays is not None:
        return arrays()
    return (series.array for _, series in frame.items())


def as_read(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its columns as :func:`frame_columns` reads them (module docstring): the
    same object when every column reads as it is, else a copy with the other columns replaced,
    so code that reads the frame itself sees the values the checks and reports saw. Kept per
    frame object (a simulation builds a client per message)."""
    return _AS_READ.get(frame, "as_read", lambda: _as_read(frame))


def _as_read(frame: pd.DataFrame) -> pd.DataFrame:
    columns = frame_columns(frame)
    changed = [(k, column) for k, column in enumerate(columns) if column.read is not None]
    if not changed:
        return frame
    out = frame.copy(deep=False)
    for k, column in changed:
        out.isetitem(k, pd.Series(column.read, index=frame.index, dtype=column.read.dtype))
    # its columns are these, read already (each now as it is)
    read = [dataclasses.replace(column, read=None) for column in columns]
    _COLUMNS.get(out, "columns", lambda: read)
    return out


#: each frame's columns (released with the frame)
_COLUMNS = FrameCache()
#: each frame as read (released with the frame)
_AS_READ = FrameCache()
