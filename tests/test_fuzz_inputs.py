"""Generated client CSVs through the command line: a graph over the intended variables, or one
documented error line, never a traceback.

The grammar (:func:`federations`) draws a federation of 1-4 clients, each a small CSV over the
same intended variables (discrete columns with some dependence, or continuous ones for the
methods that take them), then applies a random mix of the mistakes users make with such files:
different column sets, other delimiters and a wrong ``--sep``, a saved row index (with and
without ``--keep-index``), repeated or empty names, a single client, text at one site and
integers at another, constant columns, one-row clients, empty, binary, absent or directory
"files", reordered columns, missing values, many-level columns, decimals given to a discrete test,
a file without a header, one site writing its own labels for a column's levels (``level_no``
for ``no``), a record-number column, an infinite value, a column copied or recoded at every site
(a warning naming both when the run goes on), a column without a value at one site, values too
large to square, the same site given twice (the same path, or a copy), values with blanks
around them, a few values of a text column written in another case, a file compressed (gzip,
bz2, xz, zip) or encoded otherwise (UTF-8 with a byte-order mark, UTF-16 with or without one),
Excel's ``sep=`` first line, decimals written with a comma, and an ``--out`` that is a folder,
under a file, in folders still to make or over an earlier file. Every federation runs through
``fedcausal_flwr.cli.main`` as a user would type it; :func:`check_outcome` states the property.
A file whose only change is its form (compression, encoding, ``sep=`` line, blanks around
values) must give what the plain file gives: the same graph or the same error.
(``test_fuzz_frames.py`` gives the grammar's frames to the Python API with categorical columns;
``test_compare_kill.py`` kills ``compare`` at random moments.)

CI runs a fixed, derandomised budget (``CI_EXAMPLES`` per method). To hunt for bugs with a larger
one, set ``FEDCAUSAL_FUZZ_EXAMPLES`` (examples per method; the runs are then random, so vary
``--hypothesis-seed``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import os
import re
import signal
import tempfile
import zipfile
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import compressed
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fedcausal_flwr.cli import main
from fedcausal_flwr.data.csv_input import INDEX_NAMES
from fedcausal_flwr.federation.core.registry import get_method
from fedcausal_flwr.result import Result

#: Examples per method in CI (seven methods: a few hundred in all).
CI_EXAMPLES = 50
HUNT_EXAMPLES = os.environ.get("FEDCAUSAL_FUZZ_EXAMPLES")
FUZZ_SETTINGS = settings(
    max_examples=int(HUNT_EXAMPLES) if HUNT_EXAMPLES else CI_EXAMPLES,
    # a hang guard, not a speed target: an example takes well under a second
    deadline=timedelta(seconds=60),
    derandomize=not HUNT_EXAMPLES,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)

#: Method -> fast options (fedlcs gets its --target from the draw).
METHODS = {
    "fedpc": [],
    "fedpc-vote": [],
    "fedci-pc": [],
    "fedcdnv": [],
    "fedecd": ["--bootstraps", "2"],
    "fedlcs": [],
    "pc-vote": [],
}
#: Methods that read continuous columns (fedpc with --test fisherz).
CONTINUOUS = ("fedpc", "fedci-pc")
#: Methods whose clients test on their own rows (a one-row client is refused).
LOCAL_TESTS = ("fedpc-vote", "fedcdnv", "fedecd", "fedlcs", "pc-vote")
NAME_POOL = ("A", "B", "C", "D", "E", "F", "smoker", "x1", "Age group", "β", "a.b", "index")
WORDS = {2: [("no", "yes"), ("low", "high"), ("False", "True")], 3: [("low", "mid", "high")]}
#: Text levels pandas reads as missing values (a trap: the column then "has missing values").
NA_LIKE = ("NA", "ok")
DELIMITERS = (",", ";", "\t", "|", " ")
SEP_FLAGS = (",", ";", "\t", "|", " ", "tab", "whitespace", ":")
PERTURBATIONS = (
    "drop_column",
    "extra_column",
    "delimiter",
    "wrong_sep",
    "saved_index",
    "repeated_name",
    "empty_name",
    "text_at_one_site",
    "na_like_text",
    "constant_at_one_site",
    "constant_everywhere",
    "one_row",
    "unreadable_file",
    "reordered",
    "missing_value",
    "many_levels",
    "decimals",
    "no_header",
    "recoded_levels",
    "identifier",
    "infinite",
    "duplicate_column",
    "recoded_copy",
    "empty_column",
    "huge_values",
    "duplicate_site",
    "blanks",
    "case_variant",
    "compressed",
    "encoded",
    "excel_sep_line",
    "decimal_comma",
    "out_target",
)
#: Perturbations after which the input is still good data (the run must then succeed).
BENIGN = {
    "delimiter", "reordered", "constant_at_one_site", "blanks", "compressed", "encoded",
    "excel_sep_line", "decimal_comma", "case_variant",
}  # fmt: skip
COMPRESSIONS = ("gzip", "bz2", "xz", "zip")
ENCODINGS = ("utf-8-sig", "utf-16", "utf-16-le")
#: --out as the user gives it: good targets, then ones that must be refused before the run
GOOD_OUT = ("file", "nested", "existing")
BAD_OUT = ("folder", "under_file")
#: Values pandas reads as a missing value or a truth value in some case: never re-cased.
SPECIAL_TEXT = {"na", "nan", "null", "none", "true", "false", "n/a", "<na>"}


@dataclass
class SiteFile:
    """One client's file as the grammar plans it (written by :func:`write_site`)."""

    frame: pd.DataFrame  # the values; column labels as the header shows them (may repeat)
    sep: str = ","
    index_label: str | None = None  # a saved row index: its header field
    index_start: int = 0
    na_rep: str = ""
    header: bool = True
    kind: str = "csv"  # or: empty, blank, header-only, binary, latin-1, directory, absent
    junk: bytes = b""
    same_as: int | None = None  # given as the path of this earlier client (the same file)
    # the file's form: what the plain file (:meth:`plain`) reads the same as
    compression: str | None = None
    encoding: str = "utf-8"
    excel_sep: bool = False
    blanks: int | None = None  # the seed that places blanks around some values
    # what a careful reader reads otherwise, or must say
    case_column: str | None = None  # a text column some values of which are re-cased
    decimal_comma: bool = False

    def plain(self) -> SiteFile:
        """The same data in the plain form: UTF-8, uncompressed, no ``sep=`` line or blanks."""
        return dataclasses.replace(
            self, compression=None, encoding="utf-8", excel_sep=False, blanks=None
        )

    def reformed(self) -> bool:
        return self.kind == "csv" and self != self.plain()

    def read_defect(self, sep_flag: str | None, keep_index: bool) -> bool:
        """Whether the reader must refuse this file, whatever the other files hold."""
        names = [str(c).strip() for c in self.frame.columns]
        sep = _flag_delimiter(sep_flag)
        return (
            self.kind != "csv"
            or len(set(names)) < len(names)
            or any(not n for n in names[1:])
            or bool(self.frame.isna().to_numpy().any())
            or (self.index_label is not None and not keep_index)
            or (sep is not None and not _splits_as(sep, self.sep))
            or (self.decimal_comma and _has_fractions(self.frame))
        )

    def variables(self, keep_index: bool) -> list[str]:
        """The variables this file declares, read as documented (a kept unnamed index is
        named ``index``)."""
        names = [str(c).strip() for c in self.frame.columns]
        if self.index_label is not None and keep_index:
            names = [self.index_label.strip() or "index", *names]
        return names


@dataclass
class Federation:
    """A drawn federation: the files, how the command line reads them, what was done to them."""

    method: str
    continuous: bool
    intended: list[str]
    sites: list[SiteFile]
    sep_flag: str | None = None
    keep_index: bool = False
    target: str | None = None
    options: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    twins: list[tuple[str, str]] = field(default_factory=list)  # (column, its copy)
    out_kind: str = "file"

    def describe(self) -> str:
        lines = [
            f"method {self.method}, intended {self.intended}, sep flag {self.sep_flag!r}, "
            f"keep_index {self.keep_index}, target {self.target!r}, out {self.out_kind}, "
            f"applied {self.applied}"
        ]
        for k, site in enumerate(self.sites):
            lines.append(
                f"  client {k}: {site.kind}, sep {site.sep!r}, index {site.index_label!r}, "
                f"header {site.header}, na_rep {site.na_rep!r}, same_as {site.same_as}, "
                f"form {site.compression}/{site.encoding}/sep= {site.excel_sep}/blanks "
                f"{site.blanks}, case {site.case_column!r}, decimal comma {site.decimal_comma}, "
                "columns "
                f"{list(site.frame.columns)}, dtypes {[str(t) for t in site.frame.dtypes]}, "
                f"{len(site.frame)} rows"
            )
        return "\n".join(lines)


def _flag_delimiter(flag: str | None) -> str | None:
    return {None: None, "tab": "\t", "whitespace": " "}.get(flag, flag)


def _has_fractions(frame: pd.DataFrame) -> bool:
    """Whether a decimal column of ``frame`` holds a finite value with a fraction."""
    for k in range(frame.shape[1]):
        values = frame.iloc[:, k]
        if pd.api.types.is_float_dtype(values):
            finite = values[np.isfinite(values)]
            if (finite != finite.round()).any():
                return True
    return False


def reads_the_same(a: SiteFile, b: SiteFile) -> bool:
    """Whether two clients' files plainly hold the same data (the same site given twice)."""
    return (
        a.kind == b.kind == "csv"
        and a.header
        and b.header
        and a.index_label is None
        and b.index_label is None
        and a.case_column is None
        and b.case_column is None
        and list(map(str, a.frame.columns)) == list(map(str, b.frame.columns))
        and a.frame.astype(str)
        .reset_index(drop=True)
        .equals(b.frame.astype(str).reset_index(drop=True))
    )


def _splits_as(flag: str, written: str) -> bool:
    """Whether a file written with ``written`` reads correctly with the delimiter ``flag``."""
    return flag == written or (flag == " " and written in ("\t", " "))


# --------------------------------------------------------------------------- the grammar
def discrete_values(rng: np.random.Generator, cards: list[int], parents: list, n: int):
    columns = []
    for card, parent in zip(cards, parents, strict=True):
        fresh = rng.integers(0, card, n)
        if parent is None:
            columns.append(fresh)
        else:
            copied = columns[parent] % card
            columns.append(np.where(rng.random(n) < 0.2, fresh, copied))
    return columns


def continuous_values(rng: np.random.Generator, parents: list, n: int):
    columns = []
    for parent in parents:
        noise = rng.normal(size=n)
        columns.append(noise if parent is None else 0.9 * columns[parent] + noise)
    return columns


@st.composite
def federations(draw, method: str) -> Federation:
    """A federation for ``method``: clean client files, then zero or more perturbations."""
    continuous = method in CONTINUOUS and draw(st.booleans())
    names = draw(st.lists(st.sampled_from(NAME_POOL), min_size=2, max_size=6, unique=True))
    p = len(names)
    parents = [None] + [draw(st.one_of(st.none(), st.integers(0, j - 1))) for j in range(1, p)]
    cards = [draw(st.sampled_from((2, 2, 3))) for _ in range(p)]
    codings = [
        draw(st.sampled_from(("int", "int", "int", "text"))) if not continuous else "float"
        for _ in range(p)
    ]
    words = [draw(st.sampled_from(WORDS[card])) for card in cards]
    n_clients = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    sites = []
    for _ in range(n_clients):
        n = draw(st.integers(3, 60))
        if continuous:
            values = continuous_values(rng, parents, n)
        else:
            values = discrete_values(rng, cards, parents, n)
        frame = pd.DataFrame(
            {
                name: (np.asarray(words[j])[col] if codings[j] == "text" else col)
                for j, (name, col) in enumerate(zip(names, values, strict=True))
            }
        )
        sites.append(SiteFile(frame))
    fed = Federation(method, continuous, list(names), sites)
    if method == "fedpc" and continuous:
        fed.options = ["--test", "fisherz"]
    fed.options = fed.options + METHODS[method]
    if method == "fedlcs":
        fed.target = draw(st.sampled_from(names))
        fed.options = fed.options + ["--target", fed.target]
    for name in draw(st.lists(st.sampled_from(PERTURBATIONS), max_size=3)):
        perturb(draw, fed, name, rng)
    fed.keep_index = (
        draw(st.booleans())
        if "saved_index" in fed.applied
        else draw(st.sampled_from((False, False, False, True)))
    )
    return fed


def holds_once(frame: pd.DataFrame, column) -> bool:
    """Whether ``column`` is one column of ``frame`` (a repeated name is several)."""
    return list(frame.columns).count(column) == 1


def perturb(draw, fed: Federation, name: str, rng: np.random.Generator) -> None:
    """Apply one named perturbation to a drawn client (or to all of them)."""
    k = draw(st.integers(0, len(fed.sites) - 1))
    site = fed.sites[k]
    frame = site.frame
    p = frame.shape[1]
    j = draw(st.integers(0, p - 1)) if p else 0
    n = len(frame)
    column = frame.columns[j] if p else None
    if name == "drop_column" and p > 1:
        site.frame = frame.drop(columns=[column])
    elif name == "extra_column":
        extra = draw(st.sampled_from(("N", "extra", "site")))
        if extra not in frame.columns:
            site.frame = frame.assign(**{extra: rng.integers(0, 2, n)})
    elif name == "delimiter":
        site.sep = draw(st.sampled_from(DELIMITERS))
    elif name == "wrong_sep":
        fed.sep_flag = draw(st.sampled_from(SEP_FLAGS))
    elif name == "saved_index":
        site.index_label = draw(st.sampled_from(("", "index", "Unnamed: 0")))
        site.index_start = draw(st.sampled_from((0, 1)))
    elif name == "repeated_name" and p > 1:
        other = draw(st.integers(0, p - 1).filter(lambda i: i != j))
        labels = list(frame.columns)
        labels[j] = labels[other]
        frame.columns = labels
    elif name == "empty_name":
        labels = list(frame.columns)
        labels[j] = draw(st.sampled_from(("", " ")))
        frame.columns = labels
    elif name == "text_at_one_site" and column is not None:
        if pd.api.types.is_integer_dtype(frame.iloc[:, j]):
            frame.isetitem(j, frame.iloc[:, j].map(lambda v: f"level{v}"))
    elif name == "na_like_text" and column is not None:
        for other in fed.sites:
            if holds_once(other.frame, column):
                values = other.frame[column]
                if pd.api.types.is_integer_dtype(values):
                    other.frame[column] = np.asarray(NA_LIKE)[values.to_numpy() % 2]
    elif name == "constant_at_one_site" and column is not None:
        frame.isetitem(j, frame.iloc[[0] * n, j].to_numpy())
    elif name == "constant_everywhere" and column is not None:
        for other in fed.sites:
            if holds_once(other.frame, column):
                first = fed.sites[k].frame.iloc[0, j]
                other.frame[column] = [first] * len(other.frame)
    elif name == "one_row":
        site.frame = frame.iloc[:1]
    elif name == "unreadable_file":
        site.kind = draw(
            st.sampled_from(
                ("empty", "blank", "header-only", "binary", "latin-1", "directory", "absent")
            )
        )
        site.junk = draw(st.binary(max_size=40))
    elif name == "reordered" and p > 1:
        order = draw(st.permutations(range(p)))
        site.frame = frame.iloc[:, list(order)]
    elif name == "missing_value" and column is not None:
        row = draw(st.integers(0, n - 1))
        site.frame = frame.astype(object)
        site.frame.iloc[row, j] = None
        site.na_rep = draw(st.sampled_from(("", "NA", "nan")))
    elif name == "many_levels":
        label = draw(st.sampled_from(("code", *fed.intended)))
        as_text = draw(st.booleans())
        for other in fed.sites:
            if label in other.frame.columns and not holds_once(other.frame, label):
                continue
            codes = rng.integers(0, 200, len(other.frame))
            other.frame[label] = [f"L{c}" for c in codes] if as_text else codes
    elif name == "decimals" and column is not None:
        everywhere = draw(st.booleans())
        for other in fed.sites if everywhere else [site]:
            if holds_once(other.frame, column) and pd.api.types.is_numeric_dtype(
                other.frame[column]
            ):
                other.frame[column] = other.frame[column] + rng.random(len(other.frame)).round(3)
    elif name == "no_header":
        site.header = False
    elif name == "recoded_levels" and column is not None and holds_once(frame, column):
        if frame[column].dtype == object:
            site.frame = frame.assign(**{str(column): "level_" + frame[column].astype(str)})
    elif name == "identifier":
        start = draw(st.integers(0, 5))
        for other in fed.sites:
            if "record" not in other.frame.columns:
                other.frame["record"] = np.arange(start, start + len(other.frame))
                start += len(other.frame)
    elif name == "infinite" and column is not None and holds_once(frame, column):
        row = draw(st.integers(0, n - 1))
        values = frame[column]
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            site.frame = frame.assign(**{str(column): values.astype(float)})
            site.frame.loc[site.frame.index[row], column] = draw(st.sampled_from((np.inf, -np.inf)))
    elif name in ("duplicate_column", "recoded_copy") and column is not None:
        twin = f"{column}_{'copy' if name == 'duplicate_column' else 'code'}"
        for other in fed.sites:
            if holds_once(other.frame, column) and twin not in other.frame.columns:
                values = other.frame[column]
                if name == "recoded_copy":
                    values = values.map(lambda v: f"c{v}")
                other.frame[twin] = values.to_numpy()
        if name == "duplicate_column":
            fed.twins.append((str(column), twin))
    elif name == "empty_column" and column is not None and holds_once(frame, column):
        site.frame = frame.astype(object)
        site.frame[column] = None
    elif name == "huge_values" and column is not None and holds_once(frame, column):
        values = frame[column]
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            site.frame = frame.assign(**{str(column): (values.astype(float) + 1.5) * 1e200})
    elif name == "duplicate_site" and site.same_as is None:
        twin = copy.deepcopy(site)
        twin.same_as = k if draw(st.booleans()) else None
        fed.sites.append(twin)
    elif (
        name == "blanks" and site.sep not in (" ", "\t") and fed.sep_flag not in (" ", "whitespace")
    ):
        site.blanks = draw(st.integers(0, 2**16))
    elif name == "case_variant":
        texts = [c for c in frame.columns if recasable(frame, c)]
        if not texts:
            return
        site.case_column = str(draw(st.sampled_from(texts)))
    elif name == "compressed":
        site.compression = draw(st.sampled_from(COMPRESSIONS))
    elif name == "encoded":
        site.encoding = draw(st.sampled_from(ENCODINGS))
    elif name == "excel_sep_line":
        site.excel_sep = True
    elif name == "decimal_comma":
        site.decimal_comma = True
    elif name == "out_target":
        fed.out_kind = draw(st.sampled_from(GOOD_OUT + BAD_OUT))
    else:
        return
    fed.applied.append(f"{name}@{k}")


# --------------------------------------------------------------------------- files and runs
def write_site(site: SiteFile, path: Path) -> None:
    if site.kind == "directory":
        path.mkdir()
        return
    if site.kind == "absent":
        return
    if site.kind == "empty":
        path.write_bytes(b"")
        return
    if site.kind == "blank":
        path.write_text(" \n\n\t\n")
        return
    if site.kind == "binary":
        path.write_bytes(b"\x00" + site.junk)
        return
    if site.kind == "latin-1":
        text = site.frame.to_csv(index=False, sep=site.sep)
        path.write_bytes(("café" + site.sep + text).encode("latin-1", errors="replace"))
        return
    frame = written_frame(site)
    if site.index_label is not None:
        frame = frame.set_axis(range(site.index_start, site.index_start + len(frame)))
    text = frame.to_csv(
        sep=site.sep,
        index=site.index_label is not None,
        index_label=site.index_label,
        header=site.header,
        na_rep=site.na_rep,
        decimal="," if site.decimal_comma else ".",
    )
    if site.kind == "header-only":
        text = text.splitlines()[0] + "\n"
    if site.excel_sep:
        text = f"sep={site.sep}\n{text}"
    path.write_bytes(compressed(text.encode(site.encoding), site.compression, zipfile.ZIP_DEFLATED))


def written_frame(site: SiteFile) -> pd.DataFrame:
    """The values as the file shows them: some padded with blanks, some re-cased."""
    frame = site.frame
    if site.case_column is not None and recasable(frame, site.case_column):
        values = frame[site.case_column]
        rng = np.random.default_rng(len(frame))
        chosen = rng.random(len(frame)) < 0.4
        chosen[0] = True  # at least one value in the other case
        recased = values.map(lambda v: v[:1].swapcase() + v[1:] if isinstance(v, str) else v)
        frame = frame.assign(**{site.case_column: values.where(~chosen, recased)})
    if site.blanks is not None and site.sep not in " \t":  # blanks would split fields there
        rng = np.random.default_rng(site.blanks)
        frame = frame.copy()
        for k in range(frame.shape[1]):
            pads = rng.choice(["", " ", "  "], size=(len(frame), 2), p=[0.5, 0.35, 0.15])
            frame.isetitem(
                k,
                [
                    f"{left}{_as_written(value, site)}{right}" if _paddable(value) else value
                    for value, (left, right) in zip(frame.iloc[:, k], pads, strict=True)
                ],
            )
    return frame


def recasable(frame: pd.DataFrame, column: str) -> bool:
    """Whether ``column`` is still one text column of at most three levels (a later mistake
    may have dropped or recoded it), none of which pandas reads as a gap or a truth value."""
    if not holds_once(frame, column) or frame[column].dtype != object:
        return False
    values = frame[column].dropna()
    return (
        all(isinstance(v, str) and v for v in values)
        and 1 <= values.nunique() <= 3
        and not {v.lower() for v in values} & SPECIAL_TEXT
    )


def spellings_of(fed: Federation, column: str) -> set[str]:
    """The text values of ``column`` over the clients' files, as the reader strips them."""
    found: set[str] = set()
    for site in fed.sites:
        if site.kind == "csv" and holds_once(site.frame, column):
            values = written_frame(site)[column].dropna()
            found |= {v.strip() for v in values if isinstance(v, str)}
    return found


def _as_written(value, site: SiteFile) -> str:
    """A value as ``to_csv`` writes it for this file (its decimal mark)."""
    if site.decimal_comma and isinstance(value, (float, np.floating)):
        return str(value).replace(".", ",")
    return str(value)


def _paddable(value) -> bool:
    """Text, or a finite number (a padded ``inf`` or ``nan`` is no longer read as a number)."""
    if isinstance(value, str):
        return bool(value)
    return isinstance(value, (int, float, np.integer, np.floating)) and bool(np.isfinite(value))


def run_cli(fed: Federation, folder: Path) -> tuple[int, str, str, Path, list[Path]]:
    files = [folder / f"site{k}.csv" for k in range(len(fed.sites))]
    paths = [files[site.same_as] if site.same_as is not None else files[k]
             for k, site in enumerate(fed.sites)]  # fmt: skip
    for site, path in zip(fed.sites, paths, strict=True):
        if site.same_as is None:
            write_site(site, path)
    out_file = out_target(fed.out_kind, folder)
    argv = ["run", "--method", fed.method, "--backend", "inprocess", "--out", str(out_file)]
    argv += ["--data", *map(str, paths), *fed.options]
    if fed.sep_flag is not None:
        argv += ["--sep", fed.sep_flag]
    if fed.keep_index:
        argv.append("--keep-index")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue(), out_file, paths


def out_target(kind: str, folder: Path) -> Path:
    """The ``--out`` path of a kind (:data:`GOOD_OUT`, :data:`BAD_OUT`), made as it says."""
    if kind == "nested":
        return folder / "results" / "today" / "result.json"
    if kind == "existing":
        (folder / "result.json").write_text("an earlier result\n")
    if kind == "folder":
        (folder / "result.json").mkdir()
    if kind == "under_file":
        (folder / "notes").write_text("a file\n")
        return folder / "notes" / "result.json"
    return folder / "result.json"


# --------------------------------------------------------------------------- the property
def must_succeed(fed: Federation) -> bool:
    """Clean data with only benign perturbations, enough clients, nothing constant overall."""
    if any(a.split("@")[0] not in BENIGN for a in fed.applied):
        return False
    spec = get_method(fed.method)
    if len(fed.sites) < spec.min_sites:
        return False
    if any(site.frame.columns[0] in INDEX_NAMES for site in fed.sites):
        return False  # a data column named like an index may count the rows
    if any(site.sep in str(name) for site in fed.sites for name in site.frame.columns):
        return False  # a name holding its file's separator splits the header
    if fed.out_kind in BAD_OUT or twice_given(fed):
        return False
    if any(site.read_defect(fed.sep_flag, fed.keep_index) for site in fed.sites):
        return False  # decimals written with a comma
    pooled = pd.concat([site.frame for site in fed.sites], ignore_index=True)
    if "--test" in fed.options and len(pooled) <= len(fed.intended) + 1:
        return False  # Fisher-z given p - 2 variables needs more than p + 1 rows
    return not (pooled.nunique() < 2).any()


def twice_given(fed: Federation) -> list[tuple[int, int]]:
    """Pairs of clients given the same data (the same file, or a copy)."""
    return [(a, b) for b in range(len(fed.sites)) for a in range(b)
            if reads_the_same(fed.sites[a], fed.sites[b])]  # fmt: skip


def check_outcome(fed: Federation, code: int, out: str, err: str, out_file: Path, paths) -> None:
    """The property: exit 0 and a graph over exactly the variables the files declare, or exit 2
    and one ``fedcausal-flwr: error:`` line naming a client, file, column or option; never a
    traceback."""
    story = f"{fed.describe()}\nexit {code}\nstdout:\n{out}\nstderr:\n{err}"
    assert "Traceback" not in out + err, story
    assert code in (0, 2), story
    declared = [site.variables(fed.keep_index) for site in fed.sites]
    defect = [
        k for k, site in enumerate(fed.sites) if site.read_defect(fed.sep_flag, fed.keep_index)
    ]
    if code == 0:
        assert not defect, f"a file the reader must refuse was read\n{story}"
        assert fed.out_kind not in BAD_OUT, f"--out {fed.out_kind} was taken\n{story}"
        assert not twice_given(fed), f"a site given twice was run\n{story}"
        result = Result.load(out_file)
        learned = set(result.variables)
        assert result.graph is not None and set(result.graph.names) == learned, story
        if fed.method == "fedcdnv":
            expected = set().union(*map(set, declared))
        else:
            expected = set(declared[0])
            assert all(set(d) == expected for d in declared), f"different columns ran\n{story}"
        if fed.method == "fedlcs":
            assert result.graph.kind == "LOCAL" and fed.target in learned, story
            assert learned <= expected, story
        else:
            assert learned == expected, f"learned over {sorted(learned)}\n{story}"
        for column, twin in fed.twins:  # equal at every site as written: the user is told
            if fed.method != "fedcdnv" and all(
                holds_once(site.frame, column)
                and holds_once(site.frame, twin)
                and site.frame[column].astype(str).equals(site.frame[twin].astype(str))
                for site in fed.sites
            ):
                constant = f"column {column!r} has a single level" in err  # an isolated node
                assert constant or f"columns {column!r} and {twin!r} are equal" in err, story
        for column in {site.case_column for site in fed.sites} - {None}:
            spelled = {}
            for value in spellings_of(fed, column):
                spelled.setdefault(value.casefold(), set()).add(value)
            if column in learned and any(len(v) > 1 for v in spelled.values()):
                warned = [line for line in err.splitlines() if "differ only by case" in line]
                assert warned and f"column {column!r}" in warned[0], f"no case note\n{story}"
        return
    assert not must_succeed(fed), f"good data was refused\n{story}"
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith("fedcausal-flwr: error: "), story
    notes = ("  ", "fedcausal-flwr: warning: ", "fedcausal-flwr: note: ")  # progress and notes
    assert all(line.startswith(notes) for line in lines[:-1]), story
    message = lines[-1].removeprefix("fedcausal-flwr: error: ")
    named = (
        re.search(r"\bclients? \d", message)
        or any(path.name in message for path in paths)
        or re.search(r"(^|\s)--[a-z]", message)
        or re.search(r"\bcolumns? '", message)
    )
    assert named, f"the error names no client, file, column or option\n{story}"
    if message.startswith("--out "):  # checked before the run: nothing learned, nothing shown
        assert fed.out_kind in BAD_OUT and not out.strip(), story
    if defect and not message.startswith(
        "--out "
    ):  # files are read in order: the first refused file is at most the first bad one
        client = re.match(r"client (\d+) \(", message)
        assert client and int(client.group(1)) <= defect[0], story


#: A run still going after this long is a hang (the reader or a guard failed to refuse).
HANG_SECONDS = 120


@contextlib.contextmanager
def hang_guard(seconds: int, fed: Federation):
    """Turn a run that never returns into a failure that shows the federation."""

    def hung(signum, frame):
        raise AssertionError(f"no outcome after {seconds} s\n{fed.describe()}")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_learns_the_declared_variables_or_says_what_is_wrong(method):
    @FUZZ_SETTINGS
    @given(fed=federations(method))
    def property_holds(fed: Federation) -> None:
        with tempfile.TemporaryDirectory() as folder, hang_guard(HANG_SECONDS, fed):
            code, out, err, out_file, paths = run_cli(fed, Path(folder))
            event("learned a graph" if code == 0 else f"exit {code}")
            for applied in fed.applied:
                event(applied.split("@")[0])
            check_outcome(fed, code, out, err, out_file, paths)
            if any(site.reformed() for site in fed.sites):
                same_as_plain(fed, code, err, out_file)

    property_holds()


def same_as_plain(fed: Federation, code: int, err: str, out_file: Path) -> None:
    """A file's form changes nothing: the plain files give the same graph or the same error."""
    plain = dataclasses.replace(fed, sites=[site.plain() for site in fed.sites])
    with tempfile.TemporaryDirectory() as folder:
        plain_code, _, plain_err, plain_out, _ = run_cli(plain, Path(folder))
        story = f"{fed.describe()}\nexit {code} (plain {plain_code})\n{err}\nplain:\n{plain_err}"
        assert code == plain_code, f"the form changed the outcome\n{story}"
        if code == 0:
            graph, plain_graph = Result.load(out_file).graph, Result.load(plain_out).graph
            assert graph == plain_graph, f"the form changed the graph\n{story}"
        else:  # the same culprit (the words may differ: a sep= line or a line number tells more)
            assert culprit(err) == culprit(plain_err), story


def culprit(err: str) -> tuple[str | None, ...]:
    """What an error line blames: the option, the client and the column it names first."""
    line = err.strip().splitlines()[-1]
    found = (
        re.search(p, line) for p in (r"error: (--[a-z-]+)", r"clients? (\d+)", r"column '([^']*)'")
    )
    return tuple(m.group(1) if m else None for m in found)
