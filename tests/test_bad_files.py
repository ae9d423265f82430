"""Files that are not what a command expects: one line naming the file and the problem."""

from __future__ import annotations

import json

import pytest

from fedcausal_flwr.cli import main
from fedcausal_flwr.compare import compare
from fedcausal_flwr.result import Result


@pytest.mark.parametrize(
    "content, problem",
    [
        (
            "[1, 2]",
            "not a fedcausal-flwr result (a JSON object with 'method', 'graph', ...); got list",
        ),
        ('{"graph": null}', "an object without method"),
        ('{"method": "fedpc", "gra', "not a result JSON (cut short or not JSON"),
    ],
)
def test_export_and_rerun_refuse_a_json_that_is_no_result(tmp_path, capsys, content, problem):
    path = tmp_path / "r.json"
    path.write_text(content)
    for argv in (["export", str(path), "--format", "edges"], ["run", "--config", str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("fedcausal-flwr: error: ") and str(path) in err, err
        assert problem in err and "\n" not in err and "Traceback" not in err
    with pytest.raises(ValueError, match="not a"):
        Result.load(path)


def test_export_of_a_folder_says_it_is_a_folder(tmp_path, capsys):
    assert main(["export", str(tmp_path), "--format", "edges"]) == 2
    assert f"{tmp_path} is a folder; give a result JSON file" in capsys.readouterr().err


def test_report_names_run_records_it_cannot_read(tmp_path):
    compare(["fedpc", "pc-vote"], ["asia"], [2], 600, seeds=[0], out=tmp_path, plots=False)
    records = sorted((tmp_path / "runs").glob("*.json"))
    assert len(records) == 2 and all(json.loads(p.read_text())["status"] == "ok" for p in records)
    records[0].write_text(records[0].read_text()[:200])  # cut short, as a killed writer might
    assert main(["report", str(tmp_path)]) == 0
    html = (tmp_path / "report.html").read_text()
    assert "Every run succeeded" not in html
    assert "1 run record(s) could not be read" in html and records[0].name in html


def test_a_random_network_too_large_for_this_machine_is_refused_with_its_limit(capsys):
    argv = ["run", "--method", "fedpc", "--network", "er:d=1000000", "--samples", "100"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "network 'er:d=1000000': 1,000,000 nodes need dense" in err and "use at most d=" in err


def test_a_comment_line_before_the_header_is_named_as_such(tmp_path, capsys):
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text("# exported from the registry\nA,B\n0,1\n1,0\n1,1\n")
    second.write_text("A,B\n0,1\n1,0\n1,1\n")
    assert main(["run", "--method", "fedpc", "--data", str(first), str(second)]) == 2
    err = capsys.readouterr().err
    assert "client 0 (a.csv) starts with a comment line ('#'), not its header row" in err
    assert "whitespace" not in err


def binary_sites(tmp_path, extra: dict[str, list] | None = None, rows: int = 60) -> list[str]:
    """Two sites' CSV files with binary A, B and the ``extra`` columns (per site: a value list)."""
    import numpy as np
    import pandas as pd

    paths = []
    for k in range(2):
        rng = np.random.default_rng(k)
        a = rng.integers(0, 2, rows)
        frame = pd.DataFrame({"A": a, "B": (a + (rng.random(rows) < 0.2)) % 2})
        for name, values in (extra or {}).items():
            frame[name] = values[k]
        path = tmp_path / f"site{k}.csv"
        frame.to_csv(path, index=False)
        paths.append(str(path))
    return paths


def one_error_line(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fedcausal-flwr: error: ") and "\n" not in err and "Traceback" not in err
    return err


def test_an_empty_column_is_called_empty_not_decimal_numbers(tmp_path, capsys):
    paths = binary_sites(tmp_path, {"E": [[None] * 60, [None] * 60]})
    run = ["run", "--method", "fedpc", "--data", *paths]
    err = one_error_line(capsys, run)
    assert "client 0 (site0.csv) column 'E' has no value (all 60 data rows are empty)" in err
    for extra in (["--missing", "testwise"], ["--missing", "testwise", "--test", "fisherz"]):
        err = one_error_line(capsys, run + extra)
        assert "column 'E' has no value at any client (all 120 rows are missing)" in err
        assert "decimal" not in err


def test_a_column_empty_at_one_site_is_data_when_missing_values_are(tmp_path, capsys):
    paths = binary_sites(tmp_path, {"E": [[None] * 60, [0, 1] * 30]})
    assert main(["run", "--method", "fedpc", "--missing", "testwise", "--data", *paths]) == 0
    out = capsys.readouterr().out
    assert "learned CPDAG" in out


def test_values_too_large_to_square_are_refused_at_the_site_not_as_a_malformed_reply(
    tmp_path, capsys
):
    import numpy as np

    huge = [np.linspace(1, 2, 60) * 1e200, np.linspace(1, 2, 60)]
    paths = binary_sites(tmp_path, {"C": huge})
    for argv in (
        ["run", "--method", "fedpc", "--test", "fisherz", "--data", *paths],
        ["run", "--method", "fedci-pc", "--data", *paths],
    ):
        err = one_error_line(capsys, argv)
        assert "client 0 (site0.csv) column 'C' has values too large for the tests" in err
        assert "malformed" not in err and "rescale the column" in err


def test_an_empty_truth_file_is_called_empty(tmp_path, capsys):
    paths = binary_sites(tmp_path)
    empty = tmp_path / "truth.csv"
    empty.write_text("")
    err = one_error_line(
        capsys, ["run", "--method", "fedpc", "--data", *paths, "--truth", str(empty)]
    )
    assert f"{empty}: an empty file; a truth file is a CSV with a header cause,effect" in err
