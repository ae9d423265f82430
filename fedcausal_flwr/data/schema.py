"""Variable types and global level sets shared by all clients.

Federated statistics only add up when every client encodes a value the same way, so the level set
of every discrete variable is fixed globally (the union over clients) before any statistic is
computed. :class:`Schema` holds those specs, infers them from client frames and encodes frames to
integer codes (discrete) or floats (continuous), refusing anything it cannot encode exactly.

Kinds inferred from pandas dtypes (:meth:`Schema.infer`):

============================  ===========  ==================================================
dtype                         kind         levels
============================  ===========  ==================================================
float (incl. ``Float64``)     continuous   ``None``
bool (incl. ``boolean``)      binary       ``(False, True)``
ordered ``Categorical``       ordinal      declared categories (merged, see below)
unordered ``Categorical``     categorical  declared categories (merged)
``str`` / ``object``          categorical  observed non-missing values, sorted union
integer (incl. ``Int64``)     categorical  sorted union of the observed integers
============================  ===========  ==================================================

Integers are read as *categorical* codes, not as ordinal scores (fedCI reads ``Int`` as ordinal):
CSV files of discrete benchmark data store states as integers and have no order semantics. Declare
ordinal variables with an ordered ``Categorical`` or an explicit schema.

Merging over clients: if every client stores the column as a ``Categorical`` with the same
category list, that list (and its order) is kept, so data sampled from a network keeps the
network's state order. Otherwise the union of levels is sorted when the values are mutually
comparable, and kept in first-seen order when they are not. Ordinal columns must agree in order.

pandas 3 note: text columns default to the ``str`` dtype (``StringDtype`` with NaN as missing
value) instead of ``object``; both are treated alike. Concatenating ``Categorical`` columns with
different category lists silently falls back to ``object``/``str``, which is why partitions keep
one schema and :meth:`Schema.decode` rebuilds typed frames.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd
from pandas.api import types as ptypes


class StateNames(Protocol):
    """What :meth:`Schema.for_network` reads of a network (its kind, variables and states)."""

    kind: str
    variables: list[str]
    states: dict[str, list[str]]


KINDS = ("continuous", "binary", "ordinal", "categorical")
DISCRETE_KINDS = ("binary", "ordinal", "categorical")


class DataError(ValueError):
    """Client data that cannot be used as given (names the client, the column and the problem)."""


def _python_scalar(value: Any) -> Any:
    """numpy scalars -> Python scalars, so levels compare, hash and serialise predictably."""
    return value.item() if isinstance(value, np.generic) else value


def _sorted_if_sortable(values: Iterable[Any]) -> tuple:
    """Sorted tuple when the values are mutually comparable, else first-seen order."""
    seen = list(dict.fromkeys(values))
    try:
        return tuple(sorted(seen))
    except TypeError:
        return tuple(seen)


def small_int_dtype(max_code: int) -> np.dtype:
    """Smallest signed integer dtype holding codes ``0..max_code``."""
    for dt in (np.int8, np.int16, np.int32):
        if max_code <= np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.int64)


@dataclass(frozen=True)
class VariableSpec:
    """One variable: its name, kind and (for discrete kinds) its global ordered level labels."""

    name: str
    kind: str
    levels: tuple | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(
                f"variable {self.name!r}: unknown kind {self.kind!r}; use one of {KINDS}"
            )
        if self.kind == "continuous":
            if self.levels is not None:
                raise ValueError(f"continuous variable {self.name!r} cannot have levels")
            return
        if self.levels is None or len(self.levels) == 0:
            raise ValueError(f"{self.kind} variable {self.name!r} needs at least one level")
        levels = tuple(_python_scalar(v) for v in self.levels)
        if len(set(levels)) != len(levels):
            raise ValueError(f"variable {self.name!r} has duplicate levels {levels}")
        if self.kind == "binary" and len(levels) != 2:
            raise ValueError(f"binary variable {self.name!r} needs exactly 2 levels, got {levels}")
        object.__setattr__(self, "levels", levels)

    @property
    def is_discrete(self) -> bool:
        return self.kind != "continuous"

    @property
    def card(self) -> int:
        """Number of levels; 0 for a continuous variable."""
        return 0 if self.levels is None else len(self.levels)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "levels": None if self.levels is None else list(self.levels),
        }

    @classmethod
    def from_json(cls, obj: dict) -> VariableSpec:
        levels = obj.get("levels")
        return cls(obj["name"], obj["kind"], None if levels is None else tuple(levels))


@dataclass(frozen=True)
class Schema:
    """An ordered tuple of :class:`VariableSpec` (the union of all clients' variables)."""

    variables: tuple[VariableSpec, ...]

    def __post_init__(self) -> None:
        specs = tuple(self.variables)
        for s in specs:
            if not isinstance(s, VariableSpec):
                raise TypeError(f"Schema takes VariableSpec items, got {type(s).__name__}")
        names = [s.name for s in specs]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"duplicate variable names in schema: {dup}")
        object.__setattr__(self, "variables", specs)
        object.__setattr__(self, "_index", {n: i for i, n in enumerate(names)})

    # ----------------------------------------------------------------- queries
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.variables)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(s.kind for s in self.variables)

    @property
    def cards(self) -> np.ndarray:
        """Level counts in schema order (0 for continuous variables)."""
        return np.array([s.card for s in self.variables], dtype=np.int64)

    @property
    def is_discrete(self) -> np.ndarray:
        return np.array([s.is_discrete for s in self.variables], dtype=bool)

    def index(self, name: str) -> int:
        try:
            return self._index[name]  # type: ignore[attr-defined]
        except KeyError:
            raise KeyError(f"unknown variable {name!r}; schema has {list(self.names)}") from None

    def spec(self, name: str) -> VariableSpec:
        return self.variables[self.index(name)]

    def subset(self, names: Sequence[str]) -> Schema:
        """The specs of ``names``, in the order given."""
        return Schema(tuple(self.spec(n) for n in names))

    def __len__(self) -> int:
        return len(self.variables)

    def __iter__(self) -> Iterator[VariableSpec]:
        return iter(self.variables)

    def __getitem__(self, key: int | str) -> VariableSpec:
        return self.spec(key) if isinstance(key, str) else self.variables[key]

    def __repr__(self) -> str:
        parts = [
            f"{s.name}:{s.kind}" + (f"[{s.card}]" if s.is_discrete else "") for s in self.variables
        ]
        return f"Schema({', '.join(parts)})"

    # ----------------------------------------------------------------- construction
    @classmethod
    def for_network(cls, net: StateNames) -> Schema:
        """Categorical specs with the network's state names (continuous for Gaussian networks)."""
        if net.kind == "gaussian":
            return cls(tuple(VariableSpec(v, "continuous") for v in net.variables))
        return cls(
            tuple(VariableSpec(v, "categorical", tuple(net.states[v])) for v in net.variables)
        )

    @classmethod
    def infer(
        cls, dfs: Sequence[pd.DataFrame], client_names: Sequence[str] | None = None
    ) -> Schema:
        """Kinds from dtypes and global levels as the union over clients (see module docstring).

        Variables are ordered by first appearance (client order, then column order).
        """
        if isinstance(dfs, pd.DataFrame):
            dfs = [dfs]
        names = name_clients(len(dfs), client_names)
        seen: dict[str, list[tuple[str, _ColumnInfo]]] = {}
        for client, df in zip(names, dfs, strict=True):
            if not isinstance(df, pd.DataFrame):
                raise TypeError(f"client {client!r}: expected a DataFrame, got {type(df).__name__}")
            _check_column_names(df, client)
            for col in df.columns:
                seen.setdefault(col, []).append((client, _column_info(df[col], client)))
        return cls(tuple(_merge_column(col, infos) for col, infos in seen.items()))

    # ----------------------------------------------------------------- encoding
    def encode(
        self, df: pd.DataFrame, client: str = "data", columns: Sequence[str] | None = None
    ) -> np.ndarray:
        """An ``(n, len(columns))`` array: level indices for discrete columns, floats otherwise.

        ``columns`` defaults to every schema variable, in which case ``df`` must hold exactly the
        schema's variables. The result is a small signed integer array when every requested column
        is discrete, else float64 (codes stored as exact floats). Raises :class:`DataError` naming
        ``client`` and the column for a missing column, a missing value, or a value outside the
        level set.
        """
        if columns is None:
            extra = [c for c in df.columns if c not in self._index]  # type: ignore[attr-defined]
            if extra:
                raise DataError(f"client {client!r}: columns {extra} are not in the schema")
            columns = self.names
        columns = list(columns)
        specs = [self._spec_for(c, client) for c in columns]
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise DataError(f"client {client!r}: missing column(s) {missing}")
        all_discrete = all(s.is_discrete for s in specs)
        if all_discrete:
            dtype = small_int_dtype(max((s.card for s in specs), default=1))
        else:
            dtype = np.dtype(np.float64)
        out = np.empty((len(df), len(columns)), dtype=dtype)
        for j, spec in enumerate(specs):
            col = df[spec.name]
            if spec.is_discrete:
                out[:, j] = _encode_discrete(col, spec, client)
            else:
                out[:, j] = _encode_continuous(col, spec, client)
        return out

    def decode(self, codes: np.ndarray, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """Typed frame from codes: Categorical (ordered for ordinal), bool for binary, float."""
        columns = list(self.names if columns is None else columns)
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[1] != len(columns):
            raise ValueError(f"codes must be (n, {len(columns)}), got {codes.shape}")
        data = {}
        for j, name in enumerate(columns):
            spec = self.spec(name)
            data[name] = _decode_column(codes[:, j], spec)
        return pd.DataFrame(data)

    def _spec_for(self, name: str, client: str) -> VariableSpec:
        try:
            return self.spec(name)
        except KeyError:
            raise DataError(f"client {client!r}: column {name!r} is not in the schema") from None

    # ----------------------------------------------------------------- serialisation
    def to_json(self) -> dict:
        return {"variables": [s.to_json() for s in self.variables]}

    def dumps(self) -> str:
        return json.dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: dict | str) -> Schema:
        data = json.loads(obj) if isinstance(obj, str) else obj
        return cls(tuple(VariableSpec.from_json(v) for v in data["variables"]))


# --------------------------------------------------------------------------- inference helpers
@dataclass(frozen=True)
class _ColumnInfo:
    kind: str
    levels: tuple  # () for a continuous column
    declared: bool  # levels come from a Categorical dtype (order meaningful)


def name_clients(
    k: int, client_names: Sequence[str] | None, counted: str = "data frames"
) -> list[str]:
    """The names of ``k`` clients: ``client_names`` as strings, or ``client_0`` ... by default;
    a list of another length is refused, naming what the ``k`` are (``counted``)."""
    if client_names is None:
        return [f"client_{i}" for i in range(k)]
    names = [str(c) for c in client_names]
    if len(names) != k:
        raise ValueError(f"{len(names)} client names for {k} {counted}")
    return names


def _check_column_names(df: pd.DataFrame, client: str) -> None:
    cols = list(df.columns)
    bad = [c for c in cols if not isinstance(c, str)]
    if bad:
        raise DataError(f"client {client!r}: column names must be strings, got {bad}")
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise DataError(f"client {client!r}: duplicate column names {dup}")


def _column_info(col: pd.Series, client: str) -> _ColumnInfo:
    dtype = col.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        levels = tuple(_python_scalar(v) for v in dtype.categories)
        return _ColumnInfo("ordinal" if dtype.ordered else "categorical", levels, True)
    if ptypes.is_bool_dtype(dtype):
        return _ColumnInfo("binary", (False, True), True)
    if ptypes.is_float_dtype(dtype):
        return _ColumnInfo("continuous", (), False)
    if ptypes.is_integer_dtype(dtype):
        values = pd.unique(col.dropna().to_numpy())
        return _ColumnInfo("categorical", tuple(sorted(int(v) for v in values)), False)
    if ptypes.is_string_dtype(dtype) or ptypes.is_object_dtype(dtype):
        values = pd.unique(col.dropna().to_numpy())
        return _ColumnInfo("categorical", tuple(_python_scalar(v) for v in values), False)
    raise DataError(
        f"client {client!r}, column {col.name!r}: unsupported dtype {dtype}; use float, bool, "
        "integer, string or Categorical"
    )


def _merge_column(name: str, infos: list[tuple[str, _ColumnInfo]]) -> VariableSpec:
    kinds = {info.kind for _, info in infos}
    if len(kinds) > 1:
        detail = ", ".join(f"{c}: {i.kind}" for c, i in infos)
        raise DataError(
            f"column {name!r} has different kinds on different clients ({detail}); "
            "pass an explicit schema"
        )
    kind = kinds.pop()
    if kind == "continuous":
        return VariableSpec(name, kind)
    if kind == "binary":
        return VariableSpec(name, kind, (False, True))
    level_lists = [info.levels for _, info in infos]
    all_declared = all(info.declared for _, info in infos)
    if all_declared and all(lv == level_lists[0] for lv in level_lists):
        levels = level_lists[0]
    else:
        levels = _sorted_if_sortable(v for lv in level_lists for v in lv)
        if kind == "ordinal":
            for client, info in infos:
                pos = [levels.index(v) for v in info.levels]
                if pos != sorted(pos):
                    raise DataError(
                        f"column {name!r}: ordinal levels of client {client!r} {info.levels} "
                        f"disagree with the merged order {levels}; pass an explicit schema"
                    )
    if len(levels) == 0:
        clients = [c for c, _ in infos]
        raise DataError(f"column {name!r} has no observed values on clients {clients}")
    return VariableSpec(name, kind, levels)


# --------------------------------------------------------------------------- encoding helpers
def _first_bad_row(col: pd.Series, mask: np.ndarray) -> tuple[Any, Any]:
    pos = int(np.flatnonzero(mask)[0])
    return col.index[pos], col.iloc[pos]


def _encode_discrete(col: pd.Series, spec: VariableSpec, client: str) -> np.ndarray:
    levels = spec.levels
    assert levels is not None
    is_bool_col = ptypes.is_bool_dtype(col.dtype)
    bool_levels = all(isinstance(v, bool) for v in levels)
    if is_bool_col != bool_levels and not isinstance(col.dtype, pd.CategoricalDtype):
        raise DataError(
            f"client {client!r}, column {spec.name!r}: dtype {col.dtype} does not match the "
            f"{spec.kind} levels {levels} (bool values only encode bool levels)"
        )
    if isinstance(col.dtype, pd.CategoricalDtype):
        position = {v: i for i, v in enumerate(levels)}
        lookup = np.array(
            [position.get(_python_scalar(c), -1) for c in col.dtype.categories] + [-2],
            dtype=np.int64,
        )
        raw = col.cat.codes.to_numpy()
        codes = lookup[np.where(raw < 0, len(lookup) - 1, raw)]
    else:
        codes = pd.Index(levels, dtype=object).get_indexer(col.to_numpy(dtype=object))
        codes = np.where(col.isna().to_numpy(), -2, codes.astype(np.int64))
    missing = codes == -2
    if missing.any():
        row, _ = _first_bad_row(col, missing)
        raise DataError(
            f"client {client!r}, column {spec.name!r}: missing value at row {row!r} "
            f"({int(missing.sum())} missing in total)"
        )
    unknown = codes < 0
    if unknown.any():
        row, value = _first_bad_row(col, unknown)
        raise DataError(
            f"client {client!r}, column {spec.name!r}: value {value!r} at row {row!r} is not "
            f"one of the levels {levels}"
        )
    return codes


def _encode_continuous(col: pd.Series, spec: VariableSpec, client: str) -> np.ndarray:
    if not ptypes.is_numeric_dtype(col.dtype) or ptypes.is_bool_dtype(col.dtype):
        raise DataError(
            f"client {client!r}, column {spec.name!r}: continuous variable has dtype {col.dtype}"
        )
    values = col.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(values)
    if bad.any():
        row, value = _first_bad_row(col, bad)
        raise DataError(
            f"client {client!r}, column {spec.name!r}: non-finite value {value!r} at row {row!r}"
        )
    return values


def _decode_column(codes: np.ndarray, spec: VariableSpec) -> pd.Series | np.ndarray:
    if not spec.is_discrete:
        return codes.astype(np.float64)
    int_codes = codes.astype(np.int64)
    if int_codes.size and (int_codes.min() < 0 or int_codes.max() >= spec.card):
        raise ValueError(f"codes for {spec.name!r} outside 0..{spec.card - 1}")
    levels = list(spec.levels)  # type: ignore[arg-type]
    if spec.kind == "binary" and all(isinstance(v, bool) for v in levels):
        return np.asarray(levels, dtype=bool)[int_codes]
    dtype = pd.CategoricalDtype(levels, ordered=spec.kind == "ordinal")
    return pd.Categorical.from_codes(int_codes, dtype=dtype)
