"""Values read as the user means them, on the command line and in Python: nothing read silently
wrong.

Each case a tester once saw answered with exit code 0 and a changed graph, a run counting rows
twice, or a message about something else: blanks around a value made levels of their own, a site
given twice counted twice, unused categories of a pandas categorical widened fedECD's and fedCI's
models, decimal commas were called an identifier, compressed or UTF-16 files a binary file, and
Excel's ``sep=`` line a header. Small data: asia, 600 rows in two sites.
"""

from __future__ import annotations

import gzip
import io
import shutil
import warnings
import zipfile

import numpy as np
import pandas as pd
import pytest
from helpers import cli_result, compressed, refused, run_cli

import fedcausal_flwr
from fedcausal_flwr.data.columns import as_read, frame_columns
from fedcausal_flwr.data.csv_input import read_client_csv
from fedcausal_flwr.data.fingerprint import (
    data_fingerprint,
    frame_fingerprint,
    matches_recorded,
)
from fedcausal_flwr.data.inputs import InputError, frame_report
from fedcausal_flwr.data.specs import sample_partition
from fedcausal_flwr.federation.core.input_checks import (
    InputNeeds,
    check_client_inputs,
    client_info_of,
)
from fedcausal_flwr.federation.core.input_notes import (
    LevelSpellingWarning,
    warn_level_spellings,
)
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.result import Result

#: fedCI's GLMs on five of asia's columns (the eight take seconds)
GLM_COLUMNS = ["smoke", "lung", "bronc", "either", "dysp"]


@pytest.fixture(scope="module")
def asia() -> list[pd.DataFrame]:
    """Two sites of asia as pandas categoricals (the network's states, every one used)."""
    partition, _ = sample_partition("asia", 600, 2, "iid", 0)
    return list(partition.clients)


@pytest.fixture
def files(tmp_path, asia):
    """The two sites as CSV files, and a writer of variants (text or bytes)."""

    def write(name: str, content: pd.DataFrame | str | bytes, **to_csv) -> str:
        path = tmp_path / name
        if isinstance(content, pd.DataFrame):
            content.to_csv(path, **{"index": False, **to_csv})
        elif isinstance(content, str):
            path.write_text(content)
        else:
            path.write_bytes(content)
        return str(path)

    return [write(f"site{k}.csv", frame) for k, frame in enumerate(asia)], write


def text_sites(asia: list[pd.DataFrame]) -> list[pd.DataFrame]:
    """The sites with text columns (object dtype), as a user's own frames often are."""
    return [frame.astype(object) for frame in asia]


def with_blanks(frame: pd.DataFrame, column: str, rows: int = 40) -> pd.DataFrame:
    """``frame`` with blanks around some values of ``column`` (trailing, then leading)."""
    out = frame.copy()
    values = out[column].astype(object).to_numpy(copy=True)
    values[:rows] = [f"{v} " for v in values[:rows]]
    values[rows : 2 * rows] = [f"  {v}" for v in values[rows : 2 * rows]]
    out[column] = pd.Series(values, index=out.index, dtype=object)
    return out


def with_unused(
    frame: pd.DataFrame, columns: list[str], n: int, name: str = "unused"
) -> pd.DataFrame:
    """``frame`` with ``n`` categories no row holds added to each of ``columns``."""
    out = frame.copy()
    for column in columns:
        out[column] = out[column].cat.add_categories([f"{name}{i}" for i in range(n)])
    return out


def same_run(first: Result, second: Result, *, exact_up: bool = True) -> None:
    """The same graph, p-values and bytes (fedECD's replies carry timings: a few bytes)."""
    assert first.graph == second.graph
    assert first.extra.get("edge_pvalues") == second.extra.get("edge_pvalues")
    assert first.evidence == second.evidence
    assert first.bytes_down == second.bytes_down
    if exact_up:
        assert first.bytes_up == second.bytes_up
    else:
        assert abs(first.bytes_up - second.bytes_up) <= 16, (first.bytes_up, second.bytes_up)


# ====================================================================== blanks around values
def test_blanks_around_values_at_one_site_change_nothing_in_python(asia):
    clean = text_sites(asia)
    padded = [with_blanks(clean[0], "smoke"), clean[1]]
    same_run(fedcausal_flwr.run("fedpc", data=clean), fedcausal_flwr.run("fedpc", data=padded))
    glm = [frame[GLM_COLUMNS] for frame in clean]
    padded_glm = [with_blanks(glm[0], "lung"), glm[1]]
    same_run(
        fedcausal_flwr.run("fedci-pc", data=glm), fedcausal_flwr.run("fedci-pc", data=padded_glm)
    )


def test_blanks_around_values_in_a_file_change_nothing(capsys, tmp_path, asia, files):
    paths, write = files
    padded = write("padded.csv", with_blanks(asia[0], "smoke"))
    with open(padded) as handle:
        assert "yes ," in handle.read()  # the blanks are in the file
    clean = cli_result(capsys, tmp_path, "fedpc", paths)
    same_run(clean, cli_result(capsys, tmp_path, "fedpc", [padded, paths[1]]))
    assert "warning" not in capsys.readouterr().err
    same_run(clean, fedcausal_flwr.run("fedpc", data=[padded, paths[1]]))


def test_a_padded_category_is_the_category(asia):
    padded = asia[0].copy()
    padded["smoke"] = padded["smoke"].cat.rename_categories({"yes": "yes "})
    read = as_read(padded)
    assert read["smoke"].cat.categories.tolist() == ["yes", "no"]
    assert frame_fingerprint(padded) == frame_fingerprint(asia[0])
    same_run(
        fedcausal_flwr.run("fedpc", data=asia), fedcausal_flwr.run("fedpc", data=[padded, asia[1]])
    )


def test_a_field_is_read_as_the_file_would_be_without_its_blanks(files):
    _, write = files
    frame = read_client_csv(
        write("fields.csv", 'A,B,C,D\nyes ,1 ,"x ",0.5\n no,2,y,NA \nyes,3, x,1.5\n'),
        0,
        allow_missing=True,
    )
    assert frame["A"].tolist() == ["yes", "no", "yes"] and frame["C"].tolist() == ["x", "y", "x"]
    assert frame["B"].dtype == np.int64 and frame["D"].dtype == np.float64
    assert frame["D"].isna().tolist() == [False, True, False]  # 'NA ' is missing, as 'NA' is
    clean = read_client_csv(write("clean.csv", "A,B\nyes,1\nno,2\n"), 0)
    assert read_client_csv(write("pad.csv", "A,B\nyes  ,1\nno\t,2\n"), 0).equals(clean)


def test_clean_data_is_read_as_it_is(asia, files):
    """The rule changes nothing that has no blanks nor unused categories: the same object,
    the fingerprint results recorded before it carry."""
    paths, _ = files
    for frame in [*asia, *text_sites(asia), read_client_csv(paths[0], 0)]:
        assert as_read(frame) is frame
        assert all(column.read is None for column in frame_columns(frame))
    # recorded by the column scheme before values were read as meant (the same fingerprint)
    assert [frame_fingerprint(f) for f in asia] == ["7a146f67e91c4b29", "0dc395280092dbdb"]


# ====================================================================== case and blanks within
def test_levels_that_differ_by_case_are_named_in_one_warning(capsys, asia, files):
    sites = text_sites(asia)
    odd = sites[0].copy()
    odd.loc[odd.index[:5], "smoke"] = "Yes"
    with pytest.warns(LevelSpellingWarning) as caught:
        fedcausal_flwr.run("fedpc", data=[odd, sites[1]])
    (text,) = {str(w.message) for w in caught if w.category is LevelSpellingWarning}
    assert "column 'smoke': 'Yes' (client 0) and 'yes' (clients 0, 1)" in text
    assert "\n" not in text
    _, write = files
    code, _, err = run_cli(capsys, "fedpc", [write("odd.csv", odd), write("other.csv", sites[1])])
    assert code == 0
    lines = [line for line in err.splitlines() if "differ only by case" in line]
    assert len(lines) == 1, err  # once, though the server checks the hello reports again
    assert lines[0].startswith("fedcausal-flwr: warning: levels that differ only by case")
    assert "'Yes' (client 0 (odd.csv)) and 'yes' (clients 0 (odd.csv), 1 (other.csv))" in lines[0]


def test_spellings_between_sites_and_blanks_within_a_level_are_warned():
    first = pd.DataFrame({"a": ["no smoke", "smoker"] * 3, "b": [0, 1, 1, 0, 1, 0]})
    second = pd.DataFrame({"a": ["no  smoke", "Smoker"] * 3, "b": [1, 0, 0, 1, 1, 0]})
    info = {k: client_info_of(f, k, 100) for k, f in enumerate([first, second])}
    with pytest.warns(LevelSpellingWarning) as caught:
        text = warn_level_spellings(info, {0: "a.csv", 1: "b.csv"})
    assert text is not None and len(caught) == 1
    assert "'no smoke' (client 0 (a.csv)) and 'no  smoke' (client 1 (b.csv))" in text
    assert "'smoker' (client 0 (a.csv)) and 'Smoker' (client 1 (b.csv))" in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_level_spellings({0: info[0]}) is None  # one spelling each: nothing to say


def test_sites_coding_a_column_in_other_cases_are_told_so():
    lower = pd.DataFrame({"a": ["yes", "no"] * 3, "b": [0, 1, 1, 0, 1, 0]})
    upper = pd.DataFrame({"a": ["YES", "NO"] * 3, "b": [1, 0, 0, 1, 1, 0]})
    info = {k: client_info_of(f, k, 100) for k, f in enumerate([lower, upper])}
    with pytest.raises(InputError, match="no level in common") as caught:
        check_client_inputs(info, InputNeeds(values="discrete"), method="m")
    assert "(their levels differ only by case or blanks)" in str(caught.value)


# ====================================================================== one site given twice
def test_a_site_given_twice_is_refused_naming_both(capsys, tmp_path, asia, files):
    paths, _ = files
    err = refused(capsys, "fedpc", [paths[0], paths[0], paths[1]])
    assert "client 0 (site0.csv) and client 1 (site0.csv) hold the same data" in err
    assert "count its rows twice" in err
    copy = str(shutil.copy(paths[0], tmp_path / "copy.csv"))  # renamed, same bytes
    err = refused(capsys, "fedpc", [paths[0], paths[1], copy])
    assert "client 0 (site0.csv) and client 2 (copy.csv) hold the same data" in err
    for data in ([asia[0], asia[0], asia[1]], [asia[0], asia[1], asia[0].copy()]):
        with pytest.raises(InputError, match="^client 0 and client [12] hold the same data"):
            fedcausal_flwr.run("fedpc", data=data)
    # the server's own check on the hello reports (a deployment's sites): the same refusal
    with pytest.raises(InputError, match="^client 0 and client 1 hold the same data"):
        run_method("fedpc", [asia[0], asia[0].copy()])
    # the same rows with blanks added are the same data as read
    with pytest.raises(InputError, match="hold the same data"):
        sites = text_sites(asia)
        fedcausal_flwr.run("fedpc", data=[sites[0], sites[1], with_blanks(sites[0], "smoke")])


# ====================================================================== unused categories
@pytest.mark.parametrize("method", ["fedecd", "fedci-pc", "fedpc"])
def test_unused_categories_change_nothing(asia, method):
    sites = [f[GLM_COLUMNS] for f in asia] if method == "fedci-pc" else asia
    widened = [with_unused(f, ["dysp", "either"], 10) for f in sites]
    if method == "fedecd":  # every column: fedECD's BDeu scores counted unused levels
        widened = [with_unused(f, list(f.columns), 2, "absent") for f in widened]
    assert [frame_fingerprint(f) for f in widened] == [frame_fingerprint(f) for f in sites]
    assert frame_report(widened[0], 0, 100)["levels"] == frame_report(sites[0], 0, 100)["levels"]
    same_run(
        fedcausal_flwr.run(method, data=sites),
        fedcausal_flwr.run(method, data=widened),
        exact_up=method != "fedecd",
    )


def test_results_recorded_with_unused_categories_still_match(asia):
    """A re-run accepts the fingerprint a result recorded before unused categories were
    dropped (the columns as given)."""
    from fedcausal_flwr.data.fingerprint import combine_fingerprints, given_frame_fingerprint

    widened = [with_unused(f, ["smoke"], 1) for f in asia]
    recorded = combine_fingerprints(given_frame_fingerprint(f) for f in widened)
    assert recorded != data_fingerprint(widened)
    assert matches_recorded(widened, recorded) and matches_recorded(widened, data_fingerprint(asia))
    assert not matches_recorded(asia[::-1], recorded)


# ====================================================================== decimal commas
def decimal_comma_sites() -> list[pd.DataFrame]:
    rng = np.random.default_rng(3)
    return [
        pd.DataFrame(rng.normal(size=(100, 3)).round(2), columns=["x", "y", "z"])
        .astype(str)
        .apply(lambda column: column.str.replace(".", ",", regex=False))
        for _ in range(2)
    ]


@pytest.mark.parametrize("test", ["chi2", "fisherz"])
def test_decimal_commas_are_named_with_how_to_read_them(capsys, files, test):
    _, write = files
    sites = decimal_comma_sites()
    paths = [write(f"comma{k}.csv", f, sep=";") for k, f in enumerate(sites)]
    with open(paths[0]) as handle:
        written = handle.read()
    assert written.startswith("x;y;z\n") and "," in written
    err = refused(capsys, "fedpc", paths, "--test", test)
    assert "client 0 (comma0.csv) column 'x' holds numbers written with a decimal comma" in err
    assert "read_csv(path, sep=';', decimal=',')" in err
    assert "identifier" not in err and "--test chi2" not in err
    with pytest.raises(InputError, match="column 'x' holds numbers written with a decimal comma"):
        fedcausal_flwr.run("fedpc", data=sites, test=test)
    with pytest.raises(InputError, match=r"decimal=','"):
        fedcausal_flwr.run("fedpc", data=paths, test=test)


def test_text_with_commas_that_is_no_number_is_text(files):
    _, write = files
    frame = read_client_csv(write("words.csv", "a;b\n1,5 kg;x\n2,x;y\n1,5 kg;x\n"), 0)
    assert frame["a"].tolist() == ["1,5 kg", "2,x", "1,5 kg"]


# ====================================================================== compression, encodings
@pytest.mark.parametrize("how", ["gzip", "xz", "bz2", "zip"])
def test_a_compressed_file_is_read_decompressed(capsys, tmp_path, files, how):
    paths, write = files
    with open(paths[0], "rb") as handle:
        packed = write(f"site0.csv.{how}", compressed(handle.read(), how))
    assert frame_fingerprint(read_client_csv(packed, 0)) == frame_fingerprint(
        read_client_csv(paths[0], 0)
    )
    if how == "gzip":  # the whole run, both entry points
        clean = cli_result(capsys, tmp_path, "fedpc", paths)
        same_run(clean, cli_result(capsys, tmp_path, "fedpc", [packed, paths[1]]))
        same_run(clean, fedcausal_flwr.run("fedpc", data=[packed, paths[1]]))


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-8-sig"])
def test_a_utf16_or_utf32_file_is_read(capsys, tmp_path, files, encoding):
    paths, write = files
    with open(paths[0], encoding="utf-8") as handle:
        wide = write("wide.csv", handle.read().encode(encoding))
    assert frame_fingerprint(read_client_csv(wide, 0)) == frame_fingerprint(
        read_client_csv(paths[0], 0)
    )
    if encoding == "utf-16":
        clean = cli_result(capsys, tmp_path, "fedpc", paths)
        same_run(clean, cli_result(capsys, tmp_path, "fedpc", [wide, paths[1]]))
        same_run(clean, fedcausal_flwr.run("fedpc", data=[wide, paths[1]]))


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"\x28\xb5\x2f\xfd" + bytes(40), "is zstd-compressed; decompress it first"),
        (b"\xd0\xcf\x11\xe0" + bytes(40), "is an Excel workbook (.xls), not a CSV file"),
        (b"PAR1" + bytes(40), "is a Parquet file, not a CSV file"),
        (gzip.compress(b"A,B\n\x00\x01\x02\x03"), "(a NUL byte at byte 4: a binary file? It is"),
        (b"A,B\ncaf\xe9,1\n", "save it as UTF-8 text (it may be Windows-1252 or Latin-1 text"),
    ],
    ids=["zstd", "xls", "parquet", "binary-in-gzip", "latin-1"],
)
def test_a_file_pandas_cannot_read_as_text_is_named(capsys, files, content, problem):
    paths, write = files
    err = refused(capsys, "fedpc", [paths[0], write("odd.csv", content)])
    assert err.startswith("fedcausal-flwr: error: client 1 (odd.csv) ") and problem in err, err


def test_an_excel_workbook_and_an_archive_of_several_files_are_named(files):
    _, write = files
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("xl/workbook.xml", "<workbook/>")
    with pytest.raises(InputError, match=r"is an Excel workbook \(.xlsx\), not a CSV file"):
        read_client_csv(write("book.csv", buffer.getvalue()), 0)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("a.csv", "A,B\n1,2\n")
        archive.writestr("b.csv", "A,B\n1,2\n")
    with pytest.raises(InputError, match="is a zip archive of 2 files; a client reads one"):
        read_client_csv(write("two.zip", buffer.getvalue()), 0)


# ====================================================================== Excel's sep= line
def test_excels_separator_line_is_read(capsys, tmp_path, asia, files):
    paths, write = files
    excel = write(
        "excel.csv", "sep=;\r\n" + asia[0].to_csv(sep=";", index=False, lineterminator="\r\n")
    )
    assert frame_fingerprint(read_client_csv(excel, 0)) == frame_fingerprint(
        read_client_csv(paths[0], 0)
    )
    same_run(
        cli_result(capsys, tmp_path, "fedpc", paths),
        cli_result(capsys, tmp_path, "fedpc", [excel, paths[1]]),
    )
    err = refused(capsys, "fedpc", [excel, paths[1]], "--sep", ",")
    assert "client 0 (excel.csv) names its separator ';' in its first line 'sep=;'" in err
    assert "give --sep ';' or leave the separator out" in err
    holes = write("holes.csv", "sep=;\nA;B\n1;2\n2;\n")
    with pytest.raises(InputError, match=r"data row 1 \(line 4 of the file"):
        read_client_csv(holes, 0)


def test_a_separator_line_that_does_not_split_the_header_says_so(files):
    """The ``sep=`` line decides the separator, so a single column is the line's fault (or
    the file's), not a ``--sep`` the user never gave."""
    _, write = files
    wrong = write("wrong.csv", "sep=;\nA,B\n1,0\n0,1\n")
    with pytest.raises(InputError) as caught:
        read_client_csv(wrong, 0, entry_point="cli")
    assert "the separator ';' its first line names, but its lines split on ','" in str(caught.value)
    assert "correct its first line to sep=, or remove that line" in str(caught.value)
    assert "--sep" not in str(caught.value)
    single = write("single.csv", "sep=,\nA\n1\n0\n")
    with pytest.raises(InputError, match="a client file needs at least two columns") as caught:
        read_client_csv(single, 0, entry_point="cli")
    assert "--sep" not in str(caught.value)


def test_a_separator_line_naming_a_blank_is_read(files):
    """``sep= `` names the space (the blank is the separator, not padding to strip)."""
    _, write = files
    spaced = write("spaced.csv", "sep= \nA B\n1 0\n0 1\n")
    assert read_client_csv(spaced, 0).columns.tolist() == ["A", "B"]
    padded = write("padded.csv", "sep=; \r\nA;B\r\n1;0\r\n0;1\r\n")
    assert read_client_csv(padded, 0).columns.tolist() == ["A", "B"]
