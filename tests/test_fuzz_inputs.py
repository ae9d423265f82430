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
large to square. Every federation runs through
``fedcausal_flwr.cli.main`` as a user would type it; :func:`check_outcome` states the property.

CI runs a fixed, derandomised budget (``CI_EXAMPLES`` per method). To hunt for bugs with a larger
one, set ``FEDCAUSAL_FUZZ_EXAMPLES`` (examples per method; the runs are then random, so vary
``--hypothesis-seed``).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import tempfile
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
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
)
#: Perturbations after which the input is still good data (the run must then succeed).
BENIGN = {"delimiter", "reordered", "constant_at_one_site"}


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

    def describe(self) -> str:
        lines = [
            f"method {self.method}, intended {self.intended}, sep flag {self.sep_flag!r}, "
            f"keep_index {self.keep_index}, target {self.target!r}, applied {self.applied}"
        ]
        for k, site in enumerate(self.sites):
            lines.append(
                f"  client {k}: {site.kind}, sep {site.sep!r}, index {site.index_label!r}, "
                f"header {site.header}, na_rep {site.na_rep!r}, columns "
                f"{list(site.frame.columns)}, dtypes {[str(t) for t in site.frame.dtypes]}, "
                f"{len(site.frame)} rows"
            )
        return "\n".join(lines)


def _flag_delimiter(flag: str | None) -> str | None:
    return {None: None, "tab": "\t", "whitespace": " "}.get(flag, flag)


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
    frame = site.frame
    if site.index_label is not None:
        frame = frame.set_axis(range(site.index_start, site.index_start + len(frame)))
    text = frame.to_csv(
        sep=site.sep,
        index=site.index_label is not None,
        index_label=site.index_label,
        header=site.header,
        na_rep=site.na_rep,
    )
    if site.kind == "header-only":
        text = text.splitlines()[0] + "\n"
    path.write_text(text, encoding="utf-8")


def run_cli(fed: Federation, folder: Path) -> tuple[int, str, str, Path, list[Path]]:
    paths = [folder / f"site{k}.csv" for k in range(len(fed.sites))]
    for site, path in zip(fed.sites, paths, strict=True):
        write_site(site, path)
    out_file = folder / "result.json"
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
    pooled = pd.concat([site.frame for site in fed.sites], ignore_index=True)
    if "--test" in fed.options and len(pooled) <= len(fed.intended) + 1:
        return False  # Fisher-z given p - 2 variables needs more than p + 1 rows
    return not (pooled.nunique() < 2).any()


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
                assert f"columns {column!r} and {twin!r} are equal at every site" in err, story
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
    if defect:  # files are read in order: the first refused file is at most the first bad one
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
            check_outcome(fed, code, out, err, out_file, paths)

    property_holds()
