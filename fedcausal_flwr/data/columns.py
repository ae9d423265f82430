"""A frame's columns read once as integer codes or numbers (Flower-free).

Everything a client derives from its frame (the hello report, the fingerprint, the dependence
checks, the tables' codes over the global level sets) starts from the same per-column arrays:
a categorical column's own codes, a factorised code for any other non-decimal column, the
values of a decimal one. :func:`frame_columns` reads them once per frame object and keeps them
with the frame (:class:`~fedcausal_flwr.data.frame_cache.FrameCache`), so the rest is numpy.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fedcausal_flwr.data.frame_cache import FrameCache


@dataclass(frozen=True, eq=False)
class Column:
    """One column of a frame, by position.

    A decimal column (``codes is None``) keeps its ``values`` (float64, NaN where missing). Any
    other column keeps ``codes`` (-1 where missing) into ``uniques``: a categorical column's
    categories in their order (unused ones included), otherwise the distinct values in order
    of appearance.
    """

    name: str
    dtype: str
    categorical: bool
    codes: np.ndarray | None
    uniques: pd.Index
    values: np.ndarray | None = None


def is_decimal(dtype: Any) -> bool:
    """A float dtype that is not categorical (its values stay numbers, never levels)."""
    return pd.api.types.is_float_dtype(dtype) and not isinstance(dtype, pd.CategoricalDtype)


def _read(name: str, array: Any) -> Column:
    """One column from its values (a pandas extension array or a numpy array)."""
    dtype = array.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return Column(name, str(dtype), True, np.asarray(array.codes), array.categories)
    if is_decimal(dtype):
        if isinstance(array, np.ndarray):  # one copy, as float64 (NaN stays NaN)
            values = np.array(array, dtype=np.float64)
        else:  # a nullable Float array: NA becomes NaN
            values = array.to_numpy(dtype=np.float64, na_value=np.nan)
        return Column(name, str(dtype), False, None, pd.Index([]), values)
    codes, uniques = pd.factorize(array, use_na_sentinel=True)
    return Column(name, str(dtype), False, codes, pd.Index(uniques))


def frame_columns(frame: pd.DataFrame) -> list[Column]:
    """The frame's columns by position, read once per frame object (see the module docstring).
    The list is shared: do not change it."""
    return _COLUMNS.get(frame, "columns", lambda: _read_all(frame))


def _read_all(frame: pd.DataFrame) -> list[Column]:
    names = [str(name) for name in frame.columns]
    return [_read(name, array) for name, array in zip(names, _column_arrays(frame), strict=True)]


def _column_arrays(frame: pd.DataFrame) -> Iterable[Any]:
    """Each column's values by position. pandas' own column iterator (a private method of
    pandas 2 and 3) skips building a Series per column, a third of reading a frame of category
    columns; without it, the public ``items``."""
    arrays = getattr(frame, "_iter_column_arrays", None)
    if arrays is not None:
        return arrays()
    return (series.array for _, series in frame.items())


#: each frame's columns (released with the frame)
_COLUMNS = FrameCache()
