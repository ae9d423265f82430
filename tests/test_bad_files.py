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
