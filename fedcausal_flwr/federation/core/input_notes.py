"""What a run's inputs hide, said as notes and warnings (Flower-free): pairs of variables no site
observes together, column names that differ only by case, sites that list-wise deletion empties,
columns whose levels make every table sparse, level spellings that differ only by case or
blanks, columns a test cannot separate, constant columns. Each is said once per run; the checks
that refuse inputs are :mod:`.input_checks`, which calls these after them."""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from fedcausal_flwr.data.inputs import client_label
from fedcausal_flwr.federation.core.messages import ClientInfo
from fedcausal_flwr.notes import InputNote


class ColumnCoverageNote(InputNote):
    """Sites with different variable sets: pairs no client holds together, and column names that
    differ only by case or blanks (two variables), are invisible in the graph itself."""


#: At most this many pairs or columns named in one note (the rest are counted).
MAX_NAMED = 5


def note_column_coverage(
    info: Mapping[int, ClientInfo], method: str, files: Mapping[int, str] | None = None
) -> list[str]:
    """Note, once per run, the variable pairs no client observes together (an absent edge
    between them was never tested, not found independent) and the column names that differ
    only by case or surrounding blanks across clients (read as separate variables). Returns
    the notes' texts."""
    names = dict(files or {})
    union = list(dict.fromkeys(c for pid in sorted(info) for c in info[pid].columns))
    held = {pid: set(info[pid].columns) for pid in info}
    never = [
        (a, b)
        for k, a in enumerate(union)
        for b in union[k + 1 :]
        if not any(a in cols and b in cols for cols in held.values())
    ]
    lines = []
    total = len(union) * (len(union) - 1) // 2
    if never and _first_in_run(("never together", tuple(never))):
        shown = ", ".join(f"{a}-{b}" for a, b in never[:MAX_NAMED])
        more = f" and {len(never) - MAX_NAMED} more" if len(never) > MAX_NAMED else ""
        lines.append(
            f"note: {len(never)} of {total} variable pairs are never observed together at one "
            f"client ({shown}{more}): {method} has no data on them, so no edge between such a "
            "pair means untested, not independent"
        )
    groups: dict[str, dict[str, list[int]]] = {}  # folded name -> spelling -> clients
    for pid in sorted(info):
        for col in info[pid].columns:
            groups.setdefault(col.strip().casefold(), {}).setdefault(col, []).append(pid)
    for spellings in groups.values():
        if len(spellings) < 2 or not _first_in_run(("column spelling", tuple(spellings))):
            continue
        shown = " and ".join(
            f"{_clients_text(pids, names)}'s {col!r}" for col, pids in spellings.items()
        )
        lines.append(
            f"note: {shown} are read as {len(spellings)} variables (their names differ only by "
            "case or blanks); rename them to one spelling if they are one variable"
        )
    return _said(lines, ColumnCoverageNote)


class ListwiseDeletionNote(InputNote):
    """List-wise deletion that drops most of a site's rows: the result rests on far fewer rows
    than the data has, which only the result's record said."""


def note_listwise_loss(
    info: Mapping[int, ClientInfo], files: Mapping[int, str] | None, entry_point: str
) -> list[str]:
    """Note, once per run, each client that keeps fewer than half its rows under list-wise
    deletion (its hello's ``n_complete`` against ``n_rows``). Returns the notes' texts."""
    from fedcausal_flwr.data.inputs import setting_text

    setting = setting_text("missing", "listwise", entry_point)
    lines = []
    for pid in sorted(info):
        report = info[pid]
        kept = report.n_complete
        if kept is None or 2 * kept >= report.n_rows:
            continue
        if not _first_in_run(("listwise", pid, kept, report.n_rows)):
            continue
        lines.append(
            f"note: {client_label(pid, (files or {}).get(pid))} keeps {kept:,} of its "
            f"{report.n_rows:,} rows under {setting} (the other {report.n_rows - kept:,} have a "
            "missing value)"
        )
    return _said(lines, ListwiseDeletionNote)


class SparseLevelsNote(InputNote):
    """A column with so many levels that its tables are mostly empty cells: chi2/G2 lose power
    on every test it enters, so its edges are removed more easily."""


#: The chi-square rule of thumb: a table is trusted when its cells expect at least this many rows.
MIN_ROWS_PER_CELL = 5


def note_sparse_levels(
    info: Mapping[int, ClientInfo], *, local_tests: bool, listwise: bool = False
) -> list[str]:
    """Note, once per run, the columns whose smallest table is sparse: ``L`` levels times the
    fewest levels of another column (at least 2) is more cells than the rows tested divided by
    :data:`MIN_ROWS_PER_CELL` (the usual expected count of 5 per cell). Conditional tables have
    more cells, so every test with such a column is sparser. Rows tested: all clients' rows
    where the tables are summed, the largest site's where each client tests its own rows. Data
    too small for even the two fewest-levelled columns' table is no one column's doing: no note."""
    levels: dict[str, set] = {}
    for report in info.values():
        for col in report.columns:
            listed = report.levels.get(col)
            if listed is not None:
                levels.setdefault(col, set()).update(listed)
    if len(levels) < 2:
        return []
    rows = [
        (r.n_complete if listwise and r.n_complete is not None else r.n_rows) for r in info.values()
    ]
    n = max(rows) if local_tests else sum(rows)
    counts = {col: max(len(v), 2) for col, v in levels.items()}
    two = sorted(counts.values())[:2]
    if two[0] * two[1] * MIN_ROWS_PER_CELL > n:  # too few rows for any table: not a column's doing
        return []
    sparse = []
    for col, count in counts.items():
        fewest = two[1] if count == two[0] else two[0]  # the fewest levels of another column
        if count * fewest * MIN_ROWS_PER_CELL > n:
            sparse.append((col, count, fewest))
    if not sparse or not _first_in_run(("sparse", n, tuple(sparse))):
        return []
    rows_text = f"{n:,} rows" + (" at the largest site" if local_tests else "")
    lines = [
        f"note: column {col!r} has {count} levels: its smallest table ({count} x {fewest} "
        f"cells) expects fewer than {MIN_ROWS_PER_CELL} of the {rows_text} per cell (the "
        "chi-square rule of thumb), so every test with it is sparse and weak; merge its levels "
        "if it should take part"
        for col, count, fewest in sparse[:MAX_NAMED]
    ]
    if len(sparse) > MAX_NAMED:
        lines.append(
            f"note: {len(sparse) - MAX_NAMED} more columns have too many levels for the "
            f"{rows_text} (fewer than {MIN_ROWS_PER_CELL} expected per cell)"
        )
    return _said(lines, SparseLevelsNote)


class LevelSpellingWarning(InputNote):
    """Text levels of a column that differ only by case or blanks (``yes``, ``Yes``,
    ``no smoke``, ``no  smoke``): each is a level of its own, which the user may not mean."""


def spelling_key(value: object) -> object:
    """What is left of a level once case and blanks are ignored (text only; other values as
    they are)."""
    return re.sub(r"\s+", "", value).casefold() if isinstance(value, str) else value


#: At most this many columns named in the spelling warning (the rest are counted).
MAX_SPELLING_COLUMNS = 5


def warn_level_spellings(
    info: Mapping[int, ClientInfo], files: Mapping[int, str] | None = None
) -> str | None:
    """One warning naming every column whose reported text levels, at one client or over the
    clients, differ only by case or blanks, with the clients that hold each spelling; returns
    its text (None: no such column). Levels are compared as the hello reports list them (a
    column with more than the reported number of levels is not compared)."""
    names = dict(files or {})
    found: list[str] = []
    facts: list[tuple] = []
    columns = list(dict.fromkeys(c for report in info.values() for c in report.columns))
    for col in columns:
        holders: dict[str, list[int]] = {}  # spelling -> the clients that hold it
        for pid in sorted(info):
            for level in info[pid].levels.get(col) or []:
                if isinstance(level, str):
                    holders.setdefault(level, []).append(pid)
        groups: dict[object, list[str]] = {}
        for level in holders:
            groups.setdefault(spelling_key(level), []).append(level)
        for spellings in groups.values():
            if len(spellings) < 2:
                continue
            shown = " and ".join(
                f"{level!r} ({_clients_text(holders[level], names)})" for level in spellings
            )
            found.append(f"column {col!r}: {shown}")
            facts.append((col, *((level, *holders[level]) for level in spellings)))
    if not found or not _first_in_run(("spellings", *facts)):
        return None
    if len(found) > MAX_SPELLING_COLUMNS:
        found = found[:MAX_SPELLING_COLUMNS] + [f"{len(found) - MAX_SPELLING_COLUMNS} more"]
    text = (
        "levels that differ only by case or blanks are read as different levels: "
        + "; ".join(found)
        + "; recode them to one spelling if they mean the same"
    )
    warnings.warn(text, LevelSpellingWarning, stacklevel=2)
    return text


#: the run (:mod:`~fedcausal_flwr.data.frame_cache`'s generation) and the facts last warned
_WARNED: list[tuple[int, tuple]] = []


def _first_in_run(facts: tuple) -> bool:
    """Whether ``facts`` were not warned yet in this run: the API's check before the backend
    (which names the files) and the server's after ``hello`` (which cannot) find the same."""
    from fedcausal_flwr.data import frame_cache

    run = frame_cache._generation  # one per run scope (an entry point's run)
    if (run, facts) in _WARNED:
        return False
    _WARNED[:] = [*_WARNED[-63:], (run, facts)]
    return True


def _clients_text(pids: list[int], files: Mapping[int, str]) -> str:
    """``client 0 (a.csv)`` or ``clients 0 (a.csv), 1 (b.csv)``."""
    shown = [client_label(p, files.get(p)) for p in pids]
    if len(shown) == 1:
        return shown[0]
    return "clients " + ", ".join(n.removeprefix("client ") for n in shown)


def _pair(kind: str, pair: Sequence[str]) -> tuple[str, ...]:
    """A reported pair as compared between sites: duplicates in either order are one pair."""
    return tuple(sorted(pair)) if kind == "duplicates" else tuple(pair)


def _constant_pair(kind: str, pair: tuple[str, ...], report: ClientInfo) -> bool:
    """Whether a site where ``pair`` is not reported holds it anyway through a constant column:
    two columns of one level, the same, are equal; a column of one level is determined by any
    other."""
    single = [report.levels.get(c) for c in pair]
    if kind == "duplicates":
        return all(lv is not None and len(lv) == 1 for lv in single) and single[0] == single[1]
    if kind == "determines":
        return pair[0] in report.levels and single[1] is not None and len(single[1]) == 1
    return False


class DependenceWarning(InputNote):
    """Columns a CI test cannot separate at every site (duplicates, a function of another,
    near-collinear): their tests remove true edges silently, so the user is told."""


def warn_dependence(info: Mapping[int, ClientInfo], *, discrete: bool, numeric: bool) -> list[str]:
    """Warn once per column pair or set every site's hello report flags (module docstring):
    duplicates always, ``a`` determines ``b`` when the tests are discrete (``discrete``), a
    near-collinear set when they take numbers (``numeric``). Returns the warnings' texts."""
    if not info:
        return []
    reports = [report.dependence for report in info.values()]

    def everywhere(kind: str) -> list[tuple[str, ...]]:
        """Pairs some site reports and every other site holds as well: reported there, or
        implied by a column constant there (a site reports only columns that vary)."""
        sets = [{_pair(kind, pair) for pair in found.get(kind, [])} for found in reports]
        return sorted(
            pair
            for pair in set.union(*sets)
            if all(pair in found or _constant_pair(kind, pair, report)
                   for found, report in zip(sets, info.values(), strict=True))
        )  # fmt: skip

    lines = [
        f"columns {a!r} and {b!r} are equal at every site (duplicates): a CI test given one "
        "finds the other independent of everything, so true edges are removed; drop one"
        for a, b in everywhere("duplicates")
    ]
    if discrete:
        determines = set(everywhere("determines"))
        for a, b in sorted(determines):
            if (b, a) in determines:
                if a < b:
                    lines.append(
                        f"columns {a!r} and {b!r} determine each other at every site (one is a "
                        "recoding of the other): a discrete test given one finds the other "
                        "independent of everything, so true edges are removed; drop one"
                    )
                continue
            lines.append(
                f"column {a!r} determines column {b!r} at every site (one value of {b!r} per "
                f"value of {a!r}): a discrete test given {a!r} finds {b!r} independent of "
                f"everything, so true edges of {b!r} are removed"
            )
    if numeric:
        groups: dict[tuple[str, ...], list] = {}
        for found in reports:
            for entry in found.get("collinear", []):
                groups.setdefault(tuple(entry["columns"]), []).append(entry["condition"])
        for columns, conditions in sorted(groups.items()):
            if len(conditions) < len(reports):
                continue
            finite = [c for c in conditions if c is not None]
            how = (
                f"condition number of their correlation matrix at least {min(finite):.2g}"
                if len(finite) == len(conditions)
                else "their correlation matrix is singular"
                + (
                    f" at some sites, condition number {min(finite):.2g} at others"
                    if finite
                    else ""
                )
            )
            names = ", ".join(repr(c) for c in columns[:-1]) + f" and {columns[-1]!r}"
            lines.append(
                f"columns {names} are near-collinear at every site ({how}): a test given some "
                "of them finds the others independent of everything, so true edges are removed; "
                "drop one"
            )
    if len(lines) > MAX_DEPENDENCE_WARNINGS:  # a network of copies (munin) would fill the screen
        rest = len(lines) - MAX_DEPENDENCE_WARNINGS + 1
        lines = lines[: MAX_DEPENDENCE_WARNINGS - 1] + [
            f"{rest} more pairs or sets of columns a test cannot separate at every site (each "
            "site's hello report lists them, by name)"
        ]
    return _said(lines, DependenceWarning)


#: At most this many dependence warnings per run (the last one counts the rest).
MAX_DEPENDENCE_WARNINGS = 10


def overlap_groups(sets: Mapping[int, set]) -> list[list[int]]:
    """The clients joined by shared levels (each group sorted, groups by their first client)."""
    owner = {pid: pid for pid in sets}

    def root(pid: int) -> int:
        while owner[pid] != pid:
            owner[pid] = pid = owner[owner[pid]]
        return pid

    first: dict[Any, int] = {}
    for pid, levels in sets.items():
        for level in levels:
            other = first.setdefault(level, pid)
            owner[root(pid)] = root(other)
    groups: dict[int, list[int]] = {}
    for pid in sorted(sets):
        groups.setdefault(root(pid), []).append(pid)
    return sorted(groups.values())


class ConstantColumnNote(InputNote):
    """A single-level column was kept as an isolated node (printed, not an error)."""


def note_constant_columns(method: str, levels: Mapping[str, list], allowed: bool) -> list[str]:
    """The columns with one level over all clients, noted (past ten, the first nine by name
    and the rest counted): a discrete test with such a column has 0 degrees of freedom, so
    p = 1 and the column ends isolated, as in causal-learn (its water benchmark has six). Where
    the tests cannot carry it (``allowed`` False: the sketch), the method says so by name."""
    constant = [v for v, values in levels.items() if len(values) < 2]
    if constant and not allowed:
        v = constant[0]
        raise ValueError(
            f"variable {v!r} has a single level {levels[v]} over all clients; {method}'s "
            "sketch cannot test it: drop the column, or use ci='exact' (exact tables keep "
            "it as an isolated node)"
        )
    named = constant if len(constant) <= MAX_DEPENDENCE_WARNINGS else constant[:MAX_NAMED_ALONE]
    lines = [
        f"note: column {v!r} has a single level {levels[v]} over all clients: every test "
        f"with it is independent (0 degrees of freedom), so {method} keeps it as an "
        "isolated node"
        for v in named
    ]
    if len(named) < len(constant):  # munin has over two hundred: a note each fills the screen
        lines.append(
            f"note: {len(constant) - len(named)} more columns have a single level over all "
            f"clients: {method} keeps them as isolated nodes too (the result's constant_columns "
            "lists them all)"
        )
    _said(lines, ConstantColumnNote)
    return constant


#: Constant columns noted one by one before the rest are counted in one note.
MAX_NAMED_ALONE = MAX_DEPENDENCE_WARNINGS - 1


def _said(lines: list[str], category: type[Warning]) -> list[str]:
    """Issue each of ``lines`` as a ``category`` warning (from the caller's caller); return them."""
    for line in lines:
        warnings.warn(line, category, stacklevel=3)
    return lines
