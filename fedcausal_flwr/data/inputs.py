"""Bad input as one error type, and the report a client gives of its data (Flower-free).

Input a method cannot use stops the run with an :class:`InputError` before anything is learned.
It names the client the one way every message does, ``client <partition id>``, followed by
``(<file name>)`` when the door read the client's data from a file, the column, and a fix. A fix
may name an option or a run setting; it is written in the spelling of the door the user typed on
(``--test fisherz`` on the command line, ``test='fisherz'`` in Python, ``test=fisherz`` in a run
config), so the message says what to type where the user is.

:func:`frame_report` is what a client says about its data in the built-in ``hello`` round (row
count, columns, dtypes, level sets, missing values, constant columns, a fingerprint). The server
checks the reports before a method's first step, and :mod:`fedcausal_flwr.api` builds the same
reports from in-memory frames to check them before a backend starts: one function, so both judge
the same facts.
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fedcausal_flwr.data.fingerprint import frame_fingerprint
from fedcausal_flwr.data.frame_cache import FrameCache
from fedcausal_flwr.data.schema import DataError
from fedcausal_flwr.environment import VERSION
from fedcausal_flwr.options import show_value, spell

#: The SuperNode ``node_config`` keys of the file reader's settings (a deployment's spelling).
NODE_KEYS = {"sep": "data-sep", "keep_index": "data-keep-index"}


def client_label(client: int | None, file: str | None = None) -> str:
    """``client 2`` or, when the door read a file, ``client 2 (site_c.csv)`` (a file read for
    no single client, e.g. a pooled file split later: ``file pooled.csv``)."""
    if client is None:
        return f"file {file}" if file else "a client"
    return f"client {client} ({file})" if file else f"client {client}"


def setting_text(name: str, value: Any, door: str) -> str:
    """One setting as the user types it on ``door``: ``--test fisherz``, ``test='fisherz'``."""
    if door == "cli":
        flag = spell(name, "cli")
        if value is True:
            return flag
        shown = "\\t" if value == "\t" else show_value(value)
        return f"{flag} {shlex.quote(shown)}"
    if door == "python":
        return f"{name}={value!r}"
    key = NODE_KEYS.get(name, spell(name, "config")) if door == "config" else name
    return f"{key}={shlex.quote(show_value(value))}"


@dataclass(frozen=True)
class Fix:
    """A remedy: ``text`` with one ``{}`` per setting, each filled in the door's spelling."""

    text: str
    settings: tuple[tuple[str, Any], ...] = ()

    def render(self, door: str) -> str:
        return self.text.format(*(setting_text(n, v, door) for n, v in self.settings))


class InputError(DataError):
    """Client data a method cannot use: the client, the column, the problem and a fix.

    ``problem`` is a predicate of the subject (``has 3 missing values``); the message is
    ``<client> column '<name>' <problem>; <fix>``, with the fix in the spelling of ``door``.
    """

    def __init__(
        self,
        problem: str,
        *,
        client: int | None = None,
        file: str | None = None,
        column: str | None = None,
        fix: Fix | str | None = None,
        door: str = "python",
    ):
        self.problem, self.client, self.file, self.column = problem, client, file, column
        self.fix = Fix(fix) if isinstance(fix, str) else fix
        self.door = door
        super().__init__(self.render())

    @property
    def subject(self) -> str:
        """Who and what the problem is about: ``client 1 (b.csv) column 'x'``."""
        parts = []
        if self.client is not None or self.file:
            parts.append(client_label(self.client, self.file))
        if self.column is not None:
            parts.append(f"column {self.column!r}")
        return " ".join(parts)

    def render(self, door: str | None = None) -> str:
        """The message, its fix written for ``door`` (default: the door it was raised for)."""
        text = " ".join(part for part in (self.subject, self.problem) if part)
        if self.fix is not None:
            text += "; " + self.fix.render(door or self.door)
        return text

    def in_door(self, door: str) -> InputError:
        """This error, its fix spelled for ``door`` from now on."""
        self.door = door
        self.args = (self.render(),)
        return self

    def __str__(self) -> str:
        return self.render()

    def __reduce__(self) -> tuple:
        fields = {
            "client": self.client,
            "file": self.file,
            "column": self.column,
            "fix": self.fix,
            "door": self.door,
        }
        return _rebuild_input_error, (self.problem, fields)


def _rebuild_input_error(problem: str, fields: dict[str, Any]) -> InputError:
    return InputError(problem, **fields)


# --------------------------------------------------------------------------- the hello report
def _json_value(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value


def describe_column(series: pd.Series, max_levels: int) -> tuple[str, list | None, int]:
    """``(dtype, sorted levels or None, n_missing)`` of one column, for the hello report.

    Float columns report no levels (their values stay private); other columns report their
    distinct values if there are at most ``max_levels``.
    """
    n_missing = int(series.isna().sum())
    dtype = str(series.dtype)
    if isinstance(series.dtype, pd.CategoricalDtype):
        levels = [_json_value(v) for v in series.cat.categories]
        return dtype, levels if len(levels) <= max_levels else None, n_missing
    if pd.api.types.is_float_dtype(series.dtype):
        return dtype, None, n_missing
    uniques = pd.unique(series.dropna())
    if len(uniques) > max_levels:
        return dtype, None, n_missing
    try:
        levels = sorted(_json_value(v) for v in uniques)
    except TypeError:  # mixed types: sort by text so the report stays deterministic
        levels = sorted((_json_value(v) for v in uniques), key=str)
    return dtype, levels, n_missing


def constant_value(series: pd.Series) -> tuple[bool, Any]:
    """``(True, value)`` if the column's non-missing values are all one value, else ``(False,
    None)``; a column without values is not constant (it is missing)."""
    values = series.dropna()
    if values.empty:
        return False, None
    if pd.api.types.is_float_dtype(values.dtype) and not isinstance(
        values.dtype, pd.CategoricalDtype
    ):
        low, high = values.min(), values.max()
        return bool(low == high), _json_value(low) if low == high else None
    if values.nunique() == 1:
        return True, _json_value(values.iloc[0])
    return False, None


def infinite_counts(frame: pd.DataFrame) -> dict[str, int]:
    """Column -> how many ``inf`` / ``-inf`` values it holds (columns without any left out);
    one vectorised pass over the decimal columns, by position."""
    positions = [
        i
        for i, dtype in enumerate(frame.dtypes)
        if pd.api.types.is_float_dtype(dtype) and not isinstance(dtype, pd.CategoricalDtype)
    ]
    if not positions:
        return {}
    values = frame.iloc[:, positions].to_numpy(dtype=float, na_value=np.nan)
    counts = np.isinf(values).sum(axis=0)
    return {str(frame.columns[i]): int(n) for i, n in zip(positions, counts, strict=True) if n}


def refuse_infinite(frame: pd.DataFrame, partition_id: int) -> None:
    """An :class:`InputError` for the first column holding ``inf``: no method can use it, and a
    test that met it mid-run would fail at this site alone (a dropout the run survives)."""
    found = infinite_counts(frame)
    if found:
        column, n = next(iter(found.items()))
        raise InputError(
            f"has {n} infinite value{'s' if n > 1 else ''} (inf or -inf), which no test can use",
            client=partition_id,
            column=column,
            fix="replace the infinite values with numbers or drop their rows",
        )


def frame_report(frame: pd.DataFrame, partition_id: int, max_levels: int) -> dict[str, Any]:
    """What a client reports in ``hello``: its partition id, rows, columns (as named, repeats
    included), dtypes, level sets, missing values (per column, and the rows without any),
    constant columns (with their value), the
    package version and a fingerprint of the data. Columns are read by position, so repeated
    names are reported, not merged. Infinite values are refused here (:func:`refuse_infinite`),
    so every door stops on them the same way.

    Computed once per frame object (a copy each call): the API's check before a backend starts
    and an in-process client's ``hello`` describe the same frame, so the second is a lookup."""
    key = (int(partition_id), int(max_levels))
    report = _REPORTS.get(frame, key, lambda: _frame_report(frame, partition_id, max_levels))
    return copy.deepcopy(report)


#: each frame's last report (released with the frame)
_REPORTS = FrameCache()


def _frame_report(frame: pd.DataFrame, partition_id: int, max_levels: int) -> dict[str, Any]:
    refuse_infinite(frame, partition_id)
    columns = [str(c) for c in frame.columns]
    dtypes: dict[str, str] = {}
    levels: dict[str, list | None] = {}
    n_missing: dict[str, int] = {}
    constant: dict[str, Any] = {}
    for position, name in enumerate(columns):
        series = frame.iloc[:, position]
        dtypes[name], levels[name], n_missing[name] = describe_column(series, max_levels)
        is_constant, value = constant_value(series)
        if is_constant:
            constant[name] = value
    return {
        "partition_id": int(partition_id),
        "n_rows": int(len(frame)),
        "columns": columns,
        "dtypes": dtypes,
        "levels": levels,
        "n_missing": n_missing,
        "n_complete": int(frame.notna().all(axis=1).sum()),
        "constant": constant,
        "version": VERSION,
        "fingerprint": frame_fingerprint(frame),
    }


def shown_values(values: Sequence[Any], limit: int = 3) -> str:
    """A few values for a message: ``'no', 'yes'`` or ``0, 1, 2, ...``."""
    head = ", ".join(repr(v) for v in list(values)[:limit])
    return head + (", ..." if len(values) > limit else "")
