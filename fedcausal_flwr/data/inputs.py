"""Bad input as one error type, and the report a client gives of its data (Flower-free).

Input a method cannot use stops the run with an :class:`InputError` before anything is learned.
It names the client the one way every message does, ``client <partition id>``, followed by
``(<file name>)`` when the entry point read the client's data from a file, the column, and a fix. A
fix may name an option or a run setting; it is written in the spelling of the entry point the user
typed on (``--test fisherz`` on the command line, ``test='fisherz'`` in Python, ``test=fisherz`` in
a run config), so the message says what to type where the user is.

:func:`frame_report` is what a client says about its data in the built-in ``hello`` round (row
count, columns, dtypes, level sets, missing values, constant columns, columns a test cannot
separate, a fingerprint), from the columns read once as codes and as the user means them
(:func:`~fedcausal_flwr.data.columns.frame_columns`: blanks around a text value and unused
categories are no levels). The server
checks the reports before a method's first step, and :mod:`fedcausal_flwr.api` builds the same
reports from in-memory frames to check them before a backend starts: one function, so both judge
the same facts.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fedcausal_flwr.data.columns import Column, frame_columns
from fedcausal_flwr.data.dependence import dependence_report
from fedcausal_flwr.data.fingerprint import column_digests, frame_fingerprint
from fedcausal_flwr.data.frame_cache import FrameCache
from fedcausal_flwr.data.schema import DataError
from fedcausal_flwr.environment import VERSION
from fedcausal_flwr.options import show_value, spell

#: The SuperNode ``node_config`` keys of the file reader's settings (a deployment's spelling).
NODE_KEYS = {"sep": "data-sep", "keep_index": "data-keep-index"}


def client_label(client: int | None, file: str | None = None) -> str:
    """``client 2`` or, when the entry point read a file, ``client 2 (site_c.csv)`` (a file read for
    no single client, e.g. a pooled file split later: ``file pooled.csv``)."""
    if client is None:
        return f"file {file}" if file else "a client"
    return f"client {client} ({file})" if file else f"client {client}"


def setting_text(name: str, value: Any, entry_point: str) -> str:
    """One setting as the user types it on ``entry_point``: ``--test fisherz``,
    ``test='fisherz'``."""
    if entry_point == "cli":
        flag = spell(name, "cli")
        if value is True:
            return flag
        shown = "\\t" if value == "\t" else show_value(value)
        return f"{flag} {shlex.quote(shown)}"
    if entry_point == "python":
        return f"{name}={value!r}"
    key = NODE_KEYS.get(name, spell(name, "config")) if entry_point == "config" else name
    return f"{key}={shlex.quote(show_value(value))}"


@dataclass(frozen=True)
class Fix:
    """A remedy: ``text`` with one ``{}`` per setting, each filled in the entry point's spelling."""

    text: str
    settings: tuple[tuple[str, Any], ...] = ()

    def render(self, entry_point: str) -> str:
        return self.text.format(*(setting_text(n, v, entry_point) for n, v in self.settings))


class InputError(DataError):
    """Client data a method cannot use: the client, the column, the problem and a fix.

    ``problem`` is a predicate of the subject (``has 3 missing values``); the message is
    ``<client> column '<name>' <problem>; <fix>``, with the fix in the spelling of ``entry_point``.
    """

    def __init__(
        self,
        problem: str,
        *,
        client: int | None = None,
        file: str | None = None,
        column: str | None = None,
        fix: Fix | str | None = None,
        entry_point: str = "python",
    ):
        self.problem, self.client, self.file, self.column = problem, client, file, column
        self.fix = Fix(fix) if isinstance(fix, str) else fix
        self.entry_point = entry_point
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

    def render(self, entry_point: str | None = None) -> str:
        """The message, its fix written for ``entry_point`` (default: the entry point it was
        raised for)."""
        text = " ".join(part for part in (self.subject, self.problem) if part)
        if self.fix is not None:
            text += "; " + self.fix.render(entry_point or self.entry_point)
        return text

    def in_entry_point(self, entry_point: str) -> InputError:
        """This error, its fix spelled for ``entry_point`` from now on."""
        self.entry_point = entry_point
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
            "entry_point": self.entry_point,
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


#: A decimal value above this in size is refused: the tests sum squares and products of values
#: over rows and sites, which must stay finite (1e100 squared, times any row count, does).
LARGEST_VALUE = 1e100


def refuse_infinite(columns: Sequence[Column], partition_id: int) -> None:
    """An :class:`InputError` for the first decimal column holding ``inf`` or a value too large
    to square and sum (:data:`LARGEST_VALUE`): no method can use it, and a test that met it
    mid-run would fail at this site alone (a reply the server cannot use)."""
    for column in columns:
        if column.values is None:
            continue
        n = int(np.isinf(column.values).sum())
        if n:
            raise InputError(
                f"has {n} infinite value{'s' if n > 1 else ''} (inf or -inf), which no test "
                "can use",
                client=partition_id,
                column=column.name,
                fix="replace the infinite values with numbers or drop their rows",
            )
        size = np.abs(column.values)
        largest = float(np.nanmax(size)) if len(size) and not np.isnan(size).all() else 0.0
        if largest > LARGEST_VALUE:
            raise InputError(
                f"has values too large for the tests (up to {largest:.3g} in size, above "
                f"{LARGEST_VALUE:.0e}: their sums of squares overflow)",
                client=partition_id,
                column=column.name,
                fix="rescale the column (divide it by a power of ten)",
            )


#: A number written with a decimal comma (``1,5``, ``-0,25``, ``1.234,5``), or a whole number
#: beside such numbers in the same column.
_COMMA_NUMBER = r"[+-]?(?:\d+|\d{1,3}(?:\.\d{3})+)?(?:,\d+)?"


def decimal_comma_fix(sep: str = ";") -> str:
    """How to turn a file of decimal-comma numbers (delimiter ``sep``) into one pandas and this
    reader read as numbers."""
    shown = r"\s+" if sep == "whitespace" else sep
    return (
        "write the numbers with a decimal point (pandas reads such a file with "
        f"read_csv(path, sep={shown!r}, decimal=','); save it back with to_csv(path, index=False))"
    )


def decimal_comma_columns(columns: Sequence[Column]) -> list[tuple[str, list[str]]]:
    """The text columns whose every value is a number written with a decimal comma (``1,5``;
    whole numbers among them allowed, one comma at least), each with a few of its values:
    numbers read as text, which a test would take for levels (or an identifier)."""
    found = []
    for column in columns:
        if column.codes is None or len(column.uniques) == 0:
            continue
        uniques = column.uniques
        if pd.api.types.infer_dtype(uniques, skipna=True) != "string":
            continue
        values = np.asarray(uniques, dtype=object)
        comma = np.strings.find(values.astype(np.str_), ",") >= 0  # numpy: no pandas per column
        if not comma.any():
            continue
        text = pd.Series(values, dtype=object)
        if text.str.fullmatch(_COMMA_NUMBER).all() and text.str.contains(r"\d").all():
            found.append((column.name, values[comma][:3].tolist()))
    return found


def refuse_decimal_commas(columns: Sequence[Column], partition_id: int) -> None:
    """An :class:`InputError` for the first text column of decimal-comma numbers
    (:func:`decimal_comma_columns`): its values are numbers the frame holds as text."""
    found = decimal_comma_columns(columns)
    if found:
        name, examples = found[0]
        raise InputError(
            f"holds numbers written with a decimal comma ({shown_values(examples)}), which are "
            "text, not numbers, to every test",
            client=partition_id,
            column=name,
            fix="convert them to numbers (a column: .str.replace(',', '.').astype(float); a "
            "file: pandas' read_csv(path, sep=';', decimal=','))",
        )


def _sorted_levels(values: list[Any]) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:  # mixed types: sort by text so the report stays deterministic
        return sorted(values, key=str)


def frame_report(frame: pd.DataFrame, partition_id: int, max_levels: int) -> dict[str, Any]:
    """What a client reports in ``hello``: its partition id, rows, columns (as named, repeats
    included), dtypes, level sets, missing values (per column, and the rows without any),
    constant columns (with their value), columns a CI test cannot separate (names only, and a
    near-collinear set's condition number: :mod:`~fedcausal_flwr.data.dependence`), the
    package version and a fingerprint of the data. Columns are read by position, so repeated
    names are reported, not merged. Infinite values and numbers written with a decimal comma
    are refused here (:func:`refuse_infinite`, :func:`refuse_decimal_commas`), so every entry
    point stops on them the same way.

    Computed once per frame object (a copy each call): the API's check before a backend starts
    and an in-process client's ``hello`` describe the same frame, so the second is a lookup."""
    key = (int(partition_id), int(max_levels))
    report = _REPORTS.get(frame, key, lambda: _frame_report(frame, partition_id, max_levels))
    return _copied(report)


def _copied(value: Any) -> Any:
    """A copy of the report's dicts and lists (its leaves are immutable: no deepcopy memo)."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


#: each frame's last report (released with the frame)
_REPORTS = FrameCache()


def _frame_report(frame: pd.DataFrame, partition_id: int, max_levels: int) -> dict[str, Any]:
    columns = frame_columns(frame)
    refuse_infinite(columns, partition_id)
    refuse_decimal_commas(columns, partition_id)
    names = [c.name for c in columns]
    n = len(frame)
    dtypes = {c.name: c.dtype for c in columns}
    levels: dict[str, list | None] = dict.fromkeys(names)
    constant: dict[str, Any] = {}
    coded = [c for c in columns if c.codes is not None]
    decimal = [c for c in columns if c.values is not None]
    code_arrays = [c.codes for c in columns if c.codes is not None]
    value_arrays = [c.values for c in columns if c.values is not None]
    # the coded columns' value counts in one bincount (code -1, missing, first)
    codes = np.column_stack(code_arrays) if code_arrays else np.empty((n, 0), np.int64)
    cards = np.array([len(c.uniques) + 1 for c in coded], dtype=np.int64)
    starts = np.cumsum(cards) - cards
    counts = np.bincount((codes + 1 + starts).ravel(), minlength=int(cards.sum()))
    values = np.column_stack(value_arrays) if value_arrays else np.empty((n, 0))
    missing = dict(zip([c.name for c in coded], (codes < 0).sum(axis=0).tolist(), strict=True))
    missing.update(
        zip([c.name for c in decimal], np.isnan(values).sum(axis=0).tolist(), strict=True)
    )
    n_missing = {name: int(missing[name]) for name in names}
    complete = ~(codes < 0).any(axis=1) & ~np.isnan(values).any(axis=1)
    varies: dict[str, bool] = {}  # two different values present
    seen = counts > 0
    # values present per column: its segment's nonzero counts but the missing slot's
    n_present = (np.add.reduceat(seen, starts) - seen[starts]) if coded else starts
    for column, start, card, k in zip(
        coded, starts.tolist(), cards.tolist(), n_present.tolist(), strict=True
    ):
        if len(column.uniques) <= max_levels:
            shown = [_json_value(v) for v in column.uniques.tolist()]
            levels[column.name] = shown if column.categorical else _sorted_levels(shown)
        varies[column.name] = k > 1
        if k == 1:
            present = int(np.flatnonzero(counts[start + 1 : start + card])[0])
            constant[column.name] = _json_value(column.uniques[present])
    for column, column_values in zip(decimal, value_arrays, strict=True):
        varies[column.name] = False
        if n_missing[column.name] < n:
            low, high = np.nanmin(column_values), np.nanmax(column_values)
            varies[column.name] = bool(low != high)
            if low == high:
                constant[column.name] = float(low)
    discrete = [levels[c.name] is not None for c in columns]
    varying = [varies[c.name] for c in columns]
    return {
        "partition_id": int(partition_id),
        "n_rows": int(len(frame)),
        "columns": names,
        "dtypes": dtypes,
        "levels": levels,
        "n_missing": n_missing,
        "n_complete": int(complete.sum()),
        "constant": constant,
        "dependence": dependence_report(columns, column_digests(frame), discrete, varying),
        "version": VERSION,
        "fingerprint": frame_fingerprint(frame),
    }


def shown_values(values: Sequence[Any], limit: int = 3) -> str:
    """A few values for a message: ``'no', 'yes'`` or ``0, 1, 2, ...``."""
    head = ", ".join(repr(v) for v in list(values)[:limit])
    return head + (", ..." if len(values) > limit else "")
