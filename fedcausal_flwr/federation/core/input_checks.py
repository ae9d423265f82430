"""One input check for every method, on the clients' hello reports (Flower-free).

The server runs :func:`check_client_inputs` on the :class:`~.messages.ClientInfo` of every client
after the ``hello`` round, before the method's first step, so a deployment is protected too;
:func:`fedcausal_flwr.api.execute` runs it on reports built from the in-memory frames
(:func:`client_info_of`, the same function a client's ``hello`` calls) before any backend starts.
What a method needs is declared, not branched on by name: its strategy's :class:`InputNeeds`
(:meth:`~.protocol.ProtocolStrategy.input_needs`) and its registered ``min_sites``.

Checks, in this order (the first failure is an :class:`~fedcausal_flwr.data.inputs.InputError`):

1. enough clients: at least the method's ``min_sites`` (methods that combine the clients' own
   results need two);
2. every client: some data rows (at least 2 where the clients run their own CI tests: a 1-row
   client has no variation to test), columns with distinct, non-empty names, data of its own
   (two clients reporting one fingerprint hold the same columns and rows: the same site given
   twice, whose rows would count twice);
3. the same set of columns everywhere, in any order (clients encode columns by the names the
   server sends), unless the method accepts non-identical variable sets;
4. every column: no missing value; values a test can use (discrete tests: integers, text or
   true/false; the Fisher-z test: numbers); for categorical data, not an identifier (more than
   50 rows at a site and at least 90% of them distinct);
5. the same kind of values for a column at every client (integers here and text there is an
   error naming the client that differs and what each holds);
6. for categorical data, level sets that meet: sites whose levels of a column (2 or more at each)
   share none with the others' code it differently;
7. no column constant over all clients (one constant at some clients but varying overall is fine)
   for every method (a protocol that runs no CI test may say it does not need this), except
   methods whose tests make such a column an isolated node (``isolates_constants``: every
   discrete test with it has 0 degrees of freedom, p = 1, as in causal-learn); those print a note.

Then warnings, not errors (one line each): columns a CI test cannot separate at every site
(:class:`DependenceWarning`, :func:`warn_dependence`): duplicates, for discrete or mixed data a
column that is a function of another, for numbers a near-collinear set (at some sites only, it is
data); text levels that differ only by case or blanks, at one site or between sites
(:class:`LevelSpellingWarning`, :func:`warn_level_spellings`: ``yes`` and ``Yes`` are two levels
unless the user recodes them; surrounding blanks never make one:
:mod:`~fedcausal_flwr.data.columns`). Notes, once per run, for what a result would hide: pairs no
client observes together and column names differing only by case or blanks, for methods that
take non-identical variable sets (:class:`ColumnCoverageNote`); a client that keeps under half
its rows with ``missing=listwise`` (:class:`ListwiseDeletionNote`); a column whose levels make
chi2/G2 tables sparse (:class:`SparseLevelsNote`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fedcausal_flwr.data.inputs import (
    Fix,
    InputError,
    client_label,
    frame_report,
    shown_values,
)
from fedcausal_flwr.federation.core.input_notes import (
    note_column_coverage,
    note_listwise_loss,
    note_sparse_levels,
    overlap_groups,
    spelling_key,
    warn_dependence,
    warn_level_spellings,
)
from fedcausal_flwr.federation.core.messages import ClientInfo

#: What a method needs of the values: ``any`` (consistent across clients), ``discrete``
#: (integers, text or true/false: G2/chi2 tests), ``numeric`` (numbers: Fisher-z), ``mixed``
#: (each column one kind: continuous, binary or categorical, as fedCI models them).
VALUE_NEEDS = ("any", "discrete", "numeric", "mixed")
#: How a message describes the values of a column.
VALUE_WORDS = {
    "integer": "integers",
    "float": "decimal numbers",
    "boolean": "true/false values",
    "text": "text",
    "mixed": "a mix of text and numbers",
}
NUMBERS = ("integer", "float", "boolean")
#: The default fix for a column a discrete test cannot use.
DISCRETE_FIX = Fix(
    "discretise the column, or use a method for continuous or mixed data ({} with {}, or {})",
    (("method", "fedpc"), ("test", "fisherz"), ("method", "fedci-pc")),
)
SAME_COLUMNS_FIX = Fix(
    "drop the columns that are not at every site, or use {} for sites with non-identical "
    "variable sets (discrete data)",
    (("method", "fedcdnv"),),
)

MISSING_DROP = "drop or complete the rows with missing values"
MISSING_FIX = Fix(
    "drop or complete the rows with missing values, or let each test use the rows complete on "
    "its variables ({}) or each client drop its incomplete rows ({})",
    (("missing", "testwise"), ("missing", "listwise")),
)

#: A categorical column with more than this many rows at a site and at least this share of
#: distinct values there is taken for an identifier (a record number), not a variable.
IDENTIFIER_MIN_ROWS = 50
IDENTIFIER_SHARE = 0.9

#: What to do about a column constant over all clients, for a method that cannot keep it.
CONSTANT_FIX = Fix(
    "drop the column, or use {} or {} with {} (exact summed tables keep it as an isolated node)",
    (("method", "fedpc"), ("method", "fedfci"), ("test", "chi2")),
)


@dataclass(frozen=True)
class InputNeeds:
    """What a method needs of its clients' data (see the module docstring).

    ``same_columns``: every client holds the same variables (in any order); ``values``: one of
    :data:`VALUE_NEEDS`; ``local_tests``: each client runs CI tests on its own rows, so it needs at
    least 2; ``varying``: no column may be constant over all clients (a CI test learns nothing from
    it; off only for protocols that test nothing); ``test``: the test's name for messages;
    ``value_fix``: what to do about a column whose values do not suit the test (default:
    :data:`DISCRETE_FIX` for discrete tests); ``kind_fix``: what else to do about a column of
    different kinds at different clients. ``isolates_constants``: a column constant over all
    clients is kept and becomes an isolated node (the method's tests allow it), not refused.
    ``missing``: the method's ``missing`` option as chosen (``None``: it has none). ``"error"``
    refuses missing values (naming the option); ``"testwise"`` / ``"listwise"`` take them as data,
    and list-wise deletion needs a complete row at every client.
    """

    same_columns: bool = True
    values: str = "any"
    local_tests: bool = False
    varying: bool = True
    test: str = ""
    value_fix: Fix | None = None
    kind_fix: Fix | None = None
    isolates_constants: bool = False
    missing: str | None = None

    def __post_init__(self) -> None:
        if self.values not in VALUE_NEEDS:
            raise ValueError(f"InputNeeds.values: {self.values!r} is not one of {VALUE_NEEDS}")


def client_info_of(frame: pd.DataFrame, partition_id: int, max_levels: int) -> ClientInfo:
    """The hello report of ``frame`` as client ``partition_id`` gives it (same code)."""
    return ClientInfo.from_meta(frame_report(frame, partition_id, max_levels))


def value_type(dtype: str, levels: list | None) -> str:
    """``integer``, ``float``, ``boolean``, ``text`` or ``mixed``, from a hello report's dtype
    and levels (object and categorical columns by the Python types of their levels)."""
    name = dtype.lower()
    if name.startswith("float"):
        return "float"
    if name.startswith("bool"):
        return "boolean"
    if name.startswith(("int", "uint")):
        return "integer"
    if not levels:
        return "text"
    found = {_scalar_type(v) for v in levels}
    if len(found) == 1:
        return found.pop()
    return "float" if found <= {"integer", "float"} else "mixed"


def _scalar_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    return "text"


class _Check:
    """The check of one set of reports (see :func:`check_client_inputs`)."""

    def __init__(
        self,
        info: Mapping[int, ClientInfo],
        needs: InputNeeds,
        method: str,
        files: Mapping[int, str] | None,
        entry_point: str,
    ):
        self.info = {pid: info[pid] for pid in sorted(info)}
        self.needs, self.method, self.entry_point = needs, method, entry_point
        self.files = dict(files or {})

    def error(
        self,
        problem: str,
        *,
        client: int | None = None,
        column: str | None = None,
        fix: Fix | str | None = None,
    ) -> InputError:
        file = self.files.get(client) if client is not None else None
        return InputError(
            problem, client=client, file=file, column=column, fix=fix, entry_point=self.entry_point
        )

    def _read_as_missing(self, pid: int, col: str) -> str:
        """For a text column of a frame given in Python: pandas' ``read_csv`` reads levels named
        ``None``, ``NA`` or ``null`` (pgmpy's child and insurance have them) as missing values,
        where this package's reader keeps them, so the gaps may be levels it dropped."""
        levels = self.info[pid].levels.get(col) or []
        if pid in self.files or self.entry_point != "python" or not levels:
            return ""
        if not all(isinstance(level, str) for level in levels):
            return ""
        return (
            " (if the frame was read with pd.read_csv, a level written None, NA or null became a "
            "missing value: read the file with fedcausal_flwr.data.read_client_csv(path), or "
            "pd.read_csv(path, keep_default_na=False, na_values=['']))"
        )

    def label(self, pid: int) -> str:
        return client_label(pid, self.files.get(pid))

    def labels(self, pids: list[int]) -> str:
        names = [self.label(p) for p in pids]
        if len(names) == 1:
            return names[0]
        return "clients " + ", ".join(n.removeprefix("client ") for n in names)

    # ------------------------------------------------------------------ 1-2: clients
    def clients(self, min_sites: int) -> None:
        if len(self.info) < min_sites:
            raise self.error(
                f"{self.method} combines the clients' own results and needs at least {min_sites} "
                f"clients, but {len(self.info)} {'was' if len(self.info) == 1 else 'were'} given",
                fix=Fix(
                    "for a single site use {} (its own graph) or {} (the same graph here)",
                    (("method", "local"), ("method", "pooled")),
                ),
            )
        for pid, report in self.info.items():
            if report.n_rows == 0:
                raise self.error("has no data rows", client=pid)
            if self.needs.local_tests and report.n_rows < 2:
                raise self.error(
                    f"has only {report.n_rows} row, but {self.method}'s clients run CI tests on "
                    "their own rows, which need at least 2 rows each",
                    client=pid,
                    fix="drop this client or merge its rows into another site's data",
                )
            if not report.columns:
                raise self.error("has no columns", client=pid)
            names = report.columns
            repeated = sorted(c for c, k in Counter(names).items() if k > 1)
            if repeated:
                raise self.error(
                    f"has repeated column names {repeated}",
                    client=pid,
                    fix="give every column its own name",
                )
            if any(not c.strip() for c in names):
                raise self.error("has a column without a name", client=pid, fix="name every column")
        self.duplicates()

    def duplicates(self) -> None:
        """Two clients whose hello reports carry one fingerprint hold the same columns and rows
        (the same file given twice, or a copy): summed or voted, its rows would count twice."""
        seen: dict[str, int] = {}
        for pid, report in self.info.items():
            if not report.fingerprint:  # a client that reports none (an older version)
                continue
            first = seen.setdefault(report.fingerprint, pid)
            if first != pid:
                raise self.error(
                    f"{self.label(first)} and {self.label(pid)} hold the same data (the same "
                    f"columns and {report.n_rows} rows in the same order): the same site given "
                    "twice would count its rows twice",
                    fix="give each site's data once",
                )

    # ------------------------------------------------------------------ 3: column sets
    def column_sets(self) -> None:
        if not self.needs.same_columns or not self.info:
            return
        first, *others = self.info
        wanted = set(self.info[first].columns)
        for pid in others:
            columns = self.info[pid].columns
            if set(columns) == wanted:
                continue
            extra = [c for c in columns if c not in wanted]
            lacking = [c for c in self.info[first].columns if c not in set(columns)]
            detail = "; ".join(
                part
                for part in (
                    f"extra: {extra}" if extra else "",
                    f"lacking: {lacking}" if lacking else "",
                )
                if part
            )
            raise self.error(
                f"has columns {columns} but {self.label(first)} has {self.info[first].columns} "
                f"({detail}); {self.method} needs the same variables at every site (in any "
                "order)",
                client=pid,
                fix=SAME_COLUMNS_FIX,
            )

    # ------------------------------------------------------------------ 4: each column
    def columns(self) -> None:
        needs = self.needs
        for pid, report in self.info.items():
            if needs.missing == "listwise" and report.n_complete == 0:
                raise self.error(
                    f"has no row without a missing value ({report.n_rows} rows): list-wise "
                    "deletion would leave it empty",
                    client=pid,
                    fix=Fix(
                        "let each test use the rows complete on its variables ({})",
                        (("missing", "testwise"),),
                    ),
                )
            for col in report.columns:
                missing = report.n_missing.get(col, 0)
                if missing == report.n_rows:  # no value here: nothing of its kind to check
                    if needs.missing in (None, "error"):
                        raise self.error(
                            f"has no value (all {missing} rows are missing)",
                            client=pid,
                            column=col,
                            fix="drop the column",
                        )
                    continue
                if missing and needs.missing in (None, "error"):
                    raise self.error(
                        f"has {missing} missing value{'s' if missing > 1 else ''}; "
                        f"{self.method} needs complete data{self._read_as_missing(pid, col)}",
                        client=pid,
                        column=col,
                        fix=MISSING_DROP if needs.missing is None else MISSING_FIX,
                    )

                kind = value_type(report.dtypes[col], report.levels.get(col))
                if kind == "mixed":
                    raise self.error(
                        "holds a mix of text and numbers "
                        f"({shown_values(report.levels.get(col) or [])})",
                        client=pid,
                        column=col,
                        fix="code the column one way (numbers or text)",
                    )
                if needs.values in ("discrete", "mixed") and kind in ("integer", "text"):
                    self.identifier(pid, report, col)
                if needs.values == "discrete":
                    self.discrete(pid, report, col, kind)
                elif needs.values == "numeric" and kind not in NUMBERS:
                    raise self.error(
                        f"holds {VALUE_WORDS[kind]}"
                        f" ({shown_values(report.levels.get(col) or [])}), but "
                        f"{self._test()} needs numbers",
                        client=pid,
                        column=col,
                        fix=needs.value_fix or "code the column as numbers",
                    )
                elif needs.values == "mixed" and kind != "float" and report.levels.get(col) is None:
                    raise self.error(
                        f"holds {VALUE_WORDS[kind]} with too many distinct values to be a "
                        f"categorical variable (dtype {report.dtypes[col]})",
                        client=pid,
                        column=col,
                        fix=needs.kind_fix or "drop the column (an identifier?)",
                    )

    def empty_columns(self) -> None:
        """A column without a value at any client (missing values allowed) is no variable."""
        reports = list(self.info.values())
        for col in reports[0].columns if reports else []:
            if all(r.n_missing.get(col, 0) == r.n_rows for r in reports if col in r.columns):
                raise self.error(
                    f"has no value at any client (all {sum(r.n_rows for r in reports)} rows "
                    "are missing)",
                    column=col,
                    fix="drop the column",
                )

    def discrete(self, pid: int, report: ClientInfo, col: str, kind: str) -> None:
        if kind == "float":
            raise self.error(
                f"holds decimal numbers (dtype {report.dtypes[col]}), which are not discrete: "
                f"{self._test()} needs integer, text or true/false values",
                client=pid,
                column=col,
                fix=self.needs.value_fix or DISCRETE_FIX,
            )
        if report.levels.get(col) is None:
            raise self.error(
                f"has too many distinct values (dtype {report.dtypes[col]}) to be discrete: "
                f"{self._test()} needs few levels",
                client=pid,
                column=col,
                fix="drop the column (an identifier?) or discretise it",
            )

    def identifier(self, pid: int, report: ClientInfo, col: str) -> None:
        """A column with (nearly) one level per row is a record number, not a variable: every
        test with it would have as many cells as rows."""
        levels = report.levels.get(col)
        n = report.n_rows
        if levels is None or n <= IDENTIFIER_MIN_ROWS or len(levels) < IDENTIFIER_SHARE * n:
            return
        fix = Fix("drop the column, or discretise it into a few levels if it is a variable")
        if self.needs.kind_fix is not None:  # e.g. declare it continuous
            fix = Fix(fix.text + ", or " + self.needs.kind_fix.text, self.needs.kind_fix.settings)
        raise self.error(
            f"looks like an identifier: {len(levels)} distinct values in {n} rows at "
            f"{self.label(pid)}, so {self._test()} cannot use it as a categorical variable",
            column=col,
            fix=fix,
        )

    def _test(self) -> str:
        test = self.needs.test
        return f"{self.method}'s {test} test" if test else self.method

    # ------------------------------------------------------------------ 5: kinds agree
    def kinds(self) -> None:
        by_column: dict[str, dict[int, str]] = {}
        for pid, report in self.info.items():
            for col in report.columns:
                if report.n_missing.get(col, 0) == report.n_rows:
                    continue  # no value at this client: any kind elsewhere is fine
                by_column.setdefault(col, {})[pid] = value_type(
                    report.dtypes[col], report.levels.get(col)
                )
        for col, kinds in by_column.items():
            family = {pid: self._family(kind) for pid, kind in kinds.items()}
            groups: dict[str, list[int]] = {}
            for pid, fam in family.items():
                groups.setdefault(fam, []).append(pid)
            if len(groups) < 2:
                continue
            usual = max(groups, key=lambda f: (len(groups[f]), -groups[f][0]))
            odd = min(pid for pid, fam in family.items() if fam != usual)
            fix = Fix("code the column the same way at every site")
            if self.needs.kind_fix is not None:
                kind_fix = self.needs.kind_fix
                fix = Fix(fix.text + ", or " + kind_fix.text, kind_fix.settings)
            raise self.error(
                f"holds {self._values(odd, col, kinds[odd])} but "
                f"{self.labels(groups[usual])} hold{'s' if len(groups[usual]) == 1 else ''} "
                f"{self._values(groups[usual][0], col, kinds[groups[usual][0]])}",
                client=odd,
                column=col,
                fix=fix,
            )

    def _family(self, kind: str) -> str:
        """Kinds that must not meet in one column: all differ for discrete and mixed data (their
        levels or models differ); numbers of any kind go together otherwise."""
        if self.needs.values in ("discrete", "mixed"):
            return kind
        return "number" if kind in NUMBERS else kind

    def _values(self, pid: int, col: str, kind: str) -> str:
        levels = self.info[pid].levels.get(col)
        shown = f" ({shown_values(levels)})" if levels else ""
        return f"{VALUE_WORDS[kind]}{shown}"

    # ------------------------------------------------------------------ 6: level sets meet
    def level_sets(self) -> None:
        """Sites that code a categorical column with level sets sharing no label (``LOW`` here,
        ``level_LOW`` there) would be pooled as one variable with twice the levels, each
        confounded with the site: refused. Sites with fewer than 2 levels take no part (a level
        absent at one site is data)."""
        if self.needs.values not in ("discrete", "mixed"):
            return
        by_column: dict[str, dict[int, set]] = {}
        for pid, report in self.info.items():
            for col in report.columns:
                levels = report.levels.get(col)
                kind = value_type(report.dtypes[col], levels)
                if levels is not None and len(levels) >= 2 and kind != "float":
                    by_column.setdefault(col, {})[pid] = set(levels)
        for col, sets in by_column.items():
            groups = overlap_groups(sets)
            if len(groups) < 2:
                continue
            usual = max(groups, key=lambda g: (len(g), -g[0]))
            odd = min((g for g in groups if g is not usual), key=lambda g: g[0])
            spelled = {spelling_key(v) for p in usual for v in sets[p]}
            alike = any(spelling_key(v) in spelled for p in odd for v in sets[p])
            raise self.error(
                f"has levels {self._levels(odd, sets)} at {self.labels(odd)} but "
                f"{self._levels(usual, sets)} at {self.labels(usual)}: no level in common, "
                "so the sites code it differently"
                + (" (their levels differ only by case or blanks)" if alike else ""),
                column=col,
                fix="code its levels the same way at every site",
            )

    @staticmethod
    def _levels(pids: list[int], sets: Mapping[int, set]) -> str:
        return shown_values(sorted(set().union(*(sets[p] for p in pids)), key=str), limit=4)

    # ------------------------------------------------------------------ 7: constant columns
    def constants(self) -> None:
        if not self.needs.varying:
            return
        seen: dict[str, set | None] = {}
        for report in self.info.values():
            for col in report.columns:
                levels = report.levels.get(col)
                if levels is None:
                    local = {report.constant[col]} if col in report.constant else None
                else:
                    local = set(levels)
                known = seen.get(col, set())
                seen[col] = None if local is None or known is None else known | local
        for col, values in seen.items():
            if values is not None and len(values) < 2 and not self.needs.isolates_constants:
                shown = f" ({shown_values(sorted(values, key=str))})" if values else ""
                test = f" with the {self.needs.test} test" if self.needs.test else ""
                raise self.error(
                    f"is constant{shown} over all clients' rows: {self.method}{test} cannot "
                    "use a variable with one value (its CI tests are undefined or carry "
                    "nothing)",
                    column=col,
                    fix=CONSTANT_FIX,
                )


def check_client_inputs(
    info: Mapping[int, ClientInfo],
    needs: InputNeeds,
    *,
    method: str,
    min_sites: int = 1,
    files: Mapping[int, str] | None = None,
    entry_point: str = "python",
) -> None:
    """Raise an :class:`InputError` for the first problem of the clients' reports (the order of
    the module docstring). ``files``: partition id -> file name, for the messages of entry points
    that read files; ``entry_point``: the spelling of options in the fixes."""
    check = _Check(info, needs, method, files, entry_point)
    check.clients(min_sites)
    check.column_sets()
    check.columns()
    check.empty_columns()
    check.kinds()
    check.level_sets()
    check.constants()
    warn_dependence(
        info,
        discrete=needs.values in ("discrete", "mixed"),
        numeric=needs.values in ("numeric", "mixed", "any"),
    )
    warn_level_spellings(info, files)
    if not needs.same_columns:
        note_column_coverage(info, method, files)
    if needs.missing == "listwise":
        note_listwise_loss(info, files, entry_point)
    if needs.values == "discrete":
        note_sparse_levels(
            info, local_tests=needs.local_tests, listwise=needs.missing == "listwise"
        )


def require_same_columns(
    info: Mapping[int, ClientInfo],
    *,
    method: str = "this method",
    files: Mapping[int, str] | None = None,
    entry_point: str = "python",
) -> None:
    """Only check 3 of :func:`check_client_inputs`: the same set of columns at every client, in
    any order (for a strategy that checks its reports itself)."""
    _Check(info, InputNeeds(), method, files, entry_point).column_sets()
