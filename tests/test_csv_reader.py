"""The file reader on its own (:mod:`fedcausal_flwr.data.csv_input`): the delimiter it sniffs,
what it refuses that pandas would turn into data, and the columns it keeps.

(Bad input through the command line, for every method: test_inputs.py.)
"""

from __future__ import annotations

import pytest

from fedcausal_flwr.cli import main
from fedcausal_flwr.data.csv_input import DELIMITERS, parse_sep, read_client_csv, sniff_delimiter
from fedcausal_flwr.data.inputs import InputError


def write_text(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "text,sep,columns",
    [
        ("A,B,C\n1,2,3\n4,5,6\n", ",", ["A", "B", "C"]),
        ("A;B;C\n1;2;3\n", ";", ["A", "B", "C"]),
        ("A\tB\n1\t2\n", "\t", ["A", "B"]),
        ("A|B\n1|2\n", "|", ["A", "B"]),
        ("A  B   C\n1 2  3\n", "whitespace", ["A", "B", "C"]),
        ("A;B,C\n1;2,3\n", ",", ["A;B", "C"]),  # both split evenly: the earlier one wins
        ('name,x\n"a;b",1\n"c;d",2\n', ",", ["name", "x"]),  # quotes respected
    ],
)
def test_the_delimiter_is_sniffed_by_one_rule(tmp_path, text, sep, columns):
    lines = text.splitlines()
    assert sniff_delimiter(lines) == sep
    assert list(read_client_csv(write_text(tmp_path, "f.csv", text), 0).columns) == columns


def test_the_sniffer_prefers_by_order_and_needs_two_equal_fields():
    assert DELIMITERS == (",", ";", "\t", "|", "whitespace")
    assert sniff_delimiter(["A", "1"]) is None  # one field only
    assert sniff_delimiter(["A,B", "1,2,3"]) is None  # the header and a line disagree
    assert [parse_sep(s) for s in (None, ";", "\\t", "\t", "tab", " ", "whitespace")] == [
        None,
        ";",
        "\t",
        "\t",
        "\t",
        "whitespace",
        "whitespace",
    ]
    with pytest.raises(ValueError, match="give one character"):
        parse_sep(";;")


@pytest.mark.parametrize(
    "text,problem",
    [
        ("0,1,1\n1,0,1\n", "seems to lack a header row: its first line ('0', '1', '1') holds"),
        ("A\n1\n2\n", "has a single column: none of ',', ';', tab, '|' or whitespace splits"),
        ("A,B,\n1,2,\n", "has columns without a name (column 3 of the header)"),
        (",A,B\n5,1,2\n7,3,4\n", "has a first column without a name; name every column"),
        ("A,B,A\n1,2,3\n", "has repeated column names ['A'] in its header"),
        ("A,B\n", "has a header but no data rows"),
        ("A,B\n1,2\n3,\n", "column 'B' has a missing value in data row 1 (line 3 of the file"),
        ("A,B\n1,2\n1,2,3\n", "has rows of different lengths: with the separator ',' the header"),
        ("index,A\n1,5\n2,6\n3,7\n", "column 'index' looks like a saved row index (values 1..3"),
        ("Unnamed: 0,A\n0,5\n1,6\n", "column 'Unnamed: 0' looks like a saved row index"),
        ("   \n\n", "is an empty file"),
        # found by the fuzz test: a text-coded file without its header row
        ("no,low\nyes,high\nno,low\n", "seems to lack a header row: its first line ('no', 'low')"),
    ],
)
def test_the_reader_refuses_what_pandas_would_turn_into_data(tmp_path, text, problem):
    path = write_text(tmp_path, "site.csv", text)
    with pytest.raises(InputError, match="^client 4 \\(site.csv\\) ") as caught:
        read_client_csv(path, 4)
    assert problem in str(caught.value)
    assert caught.value.client == 4 and caught.value.file == "site.csv"


def test_a_level_named_none_is_data_and_na_is_missing(tmp_path, capsys):
    """pgmpy's child names a DuctFlow level 'None': its own sample, saved by pandas, runs."""
    from fedcausal_flwr.data.networks import load_network

    sample = load_network("child").sample(400, seed=0)
    assert "None" in set(sample["DuctFlow"].astype(str))
    paths = []
    for k, part in enumerate((sample.iloc[:200], sample.iloc[200:])):
        paths.append(tmp_path / f"site{k}.csv")
        part.to_csv(paths[-1], index=False)
    back = read_client_csv(paths[0], 0)
    assert (
        back["DuctFlow"].astype(str).tolist() == sample["DuctFlow"].iloc[:200].astype(str).tolist()
    )
    assert main(["run", "--method", "fedpc", "--data", *map(str, paths), "--quiet"]) == 0
    na = write_text(tmp_path, "na.csv", "A,B\nx,None\ny,NA\n")
    with pytest.raises(InputError, match="column 'B' has a missing value in data row 1"):
        read_client_csv(na, 0)


def test_an_index_column_is_kept_on_request_and_data_like_one_is_data(tmp_path):
    counted = write_text(tmp_path, "counted.csv", "index,A\n0,5\n1,6\n2,7\n")
    kept = read_client_csv(counted, 0, keep_index=True)
    assert list(kept.columns) == ["index", "A"] and kept["index"].tolist() == [0, 1, 2]
    unnamed = write_text(tmp_path, "unnamed.csv", ",A\n0,5\n1,6\n")
    assert list(read_client_csv(unnamed, 0, keep_index=True).columns) == ["index", "A"]
    data = write_text(tmp_path, "data.csv", "index,A\n3,5\n1,6\n2,7\n")  # not 0..n-1: a variable
    assert list(read_client_csv(data, 0).columns) == ["index", "A"]


def test_the_reader_refuses_files_that_are_not_text(tmp_path):
    latin = tmp_path / "latin.csv"
    latin.write_bytes("A,B\ncaf\xe9,1\n".encode("latin-1"))
    with pytest.raises(
        InputError,
        match=r"client 0 \(latin.csv\) is not a text CSV file \(byte "
        r"0xe9 at byte 7 is not UTF-8\); save it as UTF-8 text",
    ):
        read_client_csv(latin, 0)
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbfA,B\n1,2\n")
    assert list(read_client_csv(bom, 0).columns) == ["A", "B"]


def test_a_given_separator_that_does_not_split_the_header_is_an_error(tmp_path):
    path = write_text(tmp_path, "s.csv", "A;B\n1;2\n")
    assert read_client_csv(path, 0, sep=";").shape == (1, 2)
    with pytest.raises(
        InputError,
        match=r"with the separator '\|' \(its lines split on ';'\); "
        r"give the file's separator with sep=';'",
    ):
        read_client_csv(path, 0, sep="|")
