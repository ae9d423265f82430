"""Notes for what a result would otherwise hide: untested pairs, split column names, rows lost to
list-wise deletion, sparse tables, skipped run records (one line each on the command line)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fedcausal_flwr
from fedcausal_flwr.cli import main
from fedcausal_flwr.compare import compare
from fedcausal_flwr.data.specs import sample_partition
from fedcausal_flwr.federation.core.input_notes import (
    ColumnCoverageNote,
    ListwiseDeletionNote,
    SparseLevelsNote,
)
from fedcausal_flwr.notes import InputNote
from fedcausal_flwr.report import SkippedRecordWarning, build_report


@pytest.fixture(scope="module")
def sites() -> list[pd.DataFrame]:
    partition, _ = sample_partition("asia", 600, 2, "iid", 0)
    return [frame.reset_index(drop=True) for frame in partition.clients]


def _notes(record: list[warnings.WarningMessage], kind: type[Warning]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, kind)]


def test_fedcdnv_names_pairs_never_observed_together(sites: list[pd.DataFrame]) -> None:
    a, b = sites
    cols = list(a.columns)
    # asia, tub, smoke only at client 0; either, xray, dysp only at client 1: 3 x 3 pairs
    with pytest.warns(
        ColumnCoverageNote, match=r"9 of 28 variable pairs are never observed"
    ) as got:
        fedcausal_flwr.run("fedcdnv", data=[a[cols[:5]], b[cols[3:]]])
    (line,) = _notes(got.list, ColumnCoverageNote)  # once per run, not again from the server
    assert "(asia-either, asia-xray, asia-dysp, tub-either, tub-xray and 4 more)" in line


def test_fedcdnv_notes_column_names_differing_by_case(sites: list[pd.DataFrame]) -> None:
    a, b = sites
    cols = list(a.columns)
    second = b[cols[2:]].rename(columns={"lung": "Lung"})
    with pytest.warns(
        ColumnCoverageNote, match=r"client 0's 'lung' and client 1's 'Lung' are read as 2 variables"
    ):
        fedcausal_flwr.run("fedcdnv", data=[a[cols[:5]], second])


def test_fedcdnv_identical_columns_give_no_coverage_note(sites: list[pd.DataFrame]) -> None:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        fedcausal_flwr.run("fedcdnv", data=sites)
    assert _notes(got, InputNote) == []


def _with_missing(sites: list[pd.DataFrame], keep: int) -> list[pd.DataFrame]:
    """Client 1 with all but ``keep`` rows missing one value."""
    second = sites[1].copy()
    second["asia"] = second["asia"].astype(object)
    second.loc[keep:, "asia"] = None
    return [sites[0], second]


def test_listwise_deletion_of_most_rows_is_noted(sites: list[pd.DataFrame]) -> None:
    data = _with_missing(sites, keep=10)
    with pytest.warns(
        ListwiseDeletionNote,
        match=r"client 1 keeps 10 of its 300 rows under missing='listwise' \(the other 290",
    ) as got:
        fedcausal_flwr.run("fedpc", data=data, missing="listwise")
    assert len(_notes(got.list, ListwiseDeletionNote)) == 1


def test_listwise_deletion_of_few_rows_is_not_noted(sites: list[pd.DataFrame]) -> None:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        fedcausal_flwr.run("fedpc", data=_with_missing(sites, keep=200), missing="listwise")
    assert _notes(got, ListwiseDeletionNote) == []


def test_many_level_column_is_noted_under_chi2(sites: list[pd.DataFrame]) -> None:
    rng = np.random.default_rng(0)
    data = [frame.assign(code=rng.integers(0, 80, len(frame))) for frame in sites]
    with pytest.warns(SparseLevelsNote, match=r"column 'code' has 80 levels") as got:
        fedcausal_flwr.run("fedpc", data=data, test="chi2")
    assert len(_notes(got.list, SparseLevelsNote)) == 1
    with warnings.catch_warnings(record=True) as clean:
        warnings.simplefilter("always")
        fedcausal_flwr.run("fedpc", data=sites, test="chi2")
    assert _notes(clean, SparseLevelsNote) == []


def test_cli_prints_listwise_note_once(
    sites: list[pd.DataFrame], tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = []
    for k, frame in enumerate(_with_missing(sites, keep=10)):
        files.append(str(tmp_path / f"site{k}.csv"))
        frame.to_csv(files[-1], index=False)
    code = main(["run", "--method", "fedpc", "--data", *files, "--missing", "listwise"])
    err = capsys.readouterr().err
    assert code == 0
    lines = [ln for ln in err.splitlines() if "keeps 10 of its 300 rows" in ln]
    assert lines == [
        "fedcausal-flwr: note: client 1 (site1.csv) keeps 10 of its 300 rows under "
        "--missing listwise (the other 290 have a missing value)"
    ]


def _cli_notes(tmp_path, capsys, frames: list[pd.DataFrame], *args: str) -> list[str]:
    """The note lines of a command-line run on ``frames`` written as site files."""
    files = []
    for k, frame in enumerate(frames):
        files.append(str(tmp_path / f"site{k}.csv"))
        frame.to_csv(files[-1], index=False)
    code = main(["run", "--backend", "inprocess", "--data", *files, *args])
    printed = capsys.readouterr()
    assert code == 0 and "Traceback" not in printed.err, printed.err
    return [ln for ln in printed.err.splitlines() if ln.startswith("fedcausal-flwr: note: ")]


def test_cli_names_untested_pairs_and_case_split_names(
    sites: list[pd.DataFrame], tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = sites
    cols = list(a.columns)
    second = b[cols[3:]].rename(columns={"lung": "Lung"})
    notes = _cli_notes(tmp_path, capsys, [a[cols[:5]], second], "--method", "fedcdnv")
    assert len(notes) == 2, notes
    assert notes[0].startswith(
        "fedcausal-flwr: note: 16 of 36 variable pairs are never observed together at one "
        "client (asia-Lung, asia-either,"
    )
    assert notes[1] == (
        "fedcausal-flwr: note: client 0 (site0.csv)'s 'lung' and client 1 (site1.csv)'s 'Lung' "
        "are read as 2 variables (their names differ only by case or blanks); rename them to "
        "one spelling if they are one variable"
    )


def test_cli_notes_a_column_whose_levels_make_tables_sparse(
    sites: list[pd.DataFrame], tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(0)
    data = [frame.assign(code=rng.integers(0, 80, len(frame))) for frame in sites]
    notes = _cli_notes(tmp_path, capsys, data, "--method", "fedpc", "--test", "chi2")
    assert [n for n in notes if "column 'code' has 80 levels" in n] == notes and len(notes) == 1


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """A two-seed sweep whose second run record is then cut short."""
    out = tmp_path_factory.mktemp("study")
    compare(["fedpc"], ["cancer"], [2], samples=300, seeds=[0, 1], out=out, progress=False)
    last = sorted((out / "runs").glob("*.json"))[-1]
    last.write_text(last.read_text()[:200])
    return out


def test_report_names_each_skipped_record(study: Path) -> None:
    name = sorted((study / "runs").glob("*.json"))[-1].name
    with pytest.warns(
        SkippedRecordWarning, match=rf"runs/{re.escape(name)} could not be read"
    ) as got:
        page = build_report(study)
    assert len(_notes(got.list, SkippedRecordWarning)) == 1
    assert name in page


def test_report_cli_warns_and_still_writes(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = sorted((study / "runs").glob("*.json"))[-1].name
    (study / "report.html").unlink(missing_ok=True)
    assert main(["report", str(study)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [ln for ln in err if "could not be read" in ln] == [
        f"fedcausal-flwr: warning: run record runs/{name} could not be read (cut short or not "
        "JSON) and is left out of the report; `compare` runs it again"
    ]
    assert (study / "report.html").exists()
