"""Messages that named the wrong problem now say what is really wrong (or the input is read as
the user meant it): one DataFrame given as data, a compare run record given to export, a truth
file's self-loop or cycle, a truth over variables that only some sites hold."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import fedcausal_flwr
from fedcausal_flwr.cli import main
from fedcausal_flwr.data import load_network
from fedcausal_flwr.options import OptionError
from fedcausal_flwr.scoring import read_truth

ASIA = ["asia", "tub", "smoke", "lung", "bronc", "either", "xray", "dysp"]


def test_one_dataframe_as_data_says_to_give_a_list():
    frame = load_network("asia").sample(300, seed=1)
    with pytest.raises(OptionError, match=r"data= is one DataFrame \(300 rows, 8 columns\): give a"
                       r" list with one DataFrame per client"):  # fmt: skip
        fedcausal_flwr.run("fedpc", data=frame)


def test_export_reads_a_compare_run_record(tmp_path, capsys):
    result = fedcausal_flwr.run("fedpc", network="asia", samples=400, clients=2)
    record = {"record_version": 3, "status": "ok", "key": "k", "result": result.to_json()}
    (tmp_path / "run.json").write_text(json.dumps(record))
    assert main(["export", str(tmp_path / "run.json"), "--format", "edges"]) == 0
    assert "CPDAG over nodes" in capsys.readouterr().out
    failed = {"record_version": 3, "status": "failed", "key": "k", "result": None}
    (tmp_path / "failed.json").write_text(json.dumps(failed))
    assert main(["export", str(tmp_path / "failed.json"), "--format", "edges"]) == 2
    assert "a compare run record of a run that did not finish" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("rows", "quoted", "unquoted"),
    [
        ("asia,asia\n", "(asia,asia); a true DAG has no self-loop", "1 row(s) name a variable"),
        ("asia,tub\ntub,either\neither,asia\n", "directed cycle through", "directed cycle;"),
    ],
)
def test_a_truth_files_self_loop_or_cycle_names_the_file(tmp_path, rows, quoted, unquoted):
    path = tmp_path / "truth.csv"
    path.write_text("cause,effect\n" + rows)
    with pytest.raises(ValueError, match=rf"^{path}: .*") as caught:
        read_truth(path, ASIA)
    assert quoted in str(caught.value)
    with pytest.raises(ValueError) as hidden:  # a coordinator's truth: never its names
        read_truth(path, ASIA, quote=False)
    assert unquoted in str(hidden.value) and "asia" not in str(hidden.value).split(": ", 1)[1]


def test_a_truth_over_a_variable_only_some_sites_hold_is_scored(tmp_path):
    frames = [
        load_network("asia").sample(600, seed=k).drop(columns=["asia"] if k == 0 else [])
        for k in range(2)
    ]
    truth = tmp_path / "truth.csv"
    truth.write_text("cause,effect\n" + "".join(f"{a},{b}\n" for a, b in
                                                 load_network("asia").edges))  # fmt: skip
    result = fedcausal_flwr.run("fedcdnv", data=frames, truth=str(truth))
    assert "asia" in result.variables and result.metrics


def test_a_level_pandas_read_as_missing_is_named_with_the_reader_that_keeps_it(tmp_path):
    """child's ``DuctFlow`` has a level written ``None``: ``pd.read_csv`` makes it a gap, so
    the error says how to read the file keeping it; read so, the run goes on."""
    from fedcausal_flwr.data import read_client_csv
    from fedcausal_flwr.data.inputs import InputError
    from fedcausal_flwr.data.specs import write_sample

    write_sample("child", 600, 2, "iid", 0, tmp_path)
    files = [tmp_path / f"site{k}.csv" for k in range(2)]
    with pytest.raises(InputError) as refused:
        fedcausal_flwr.run("fedpc", data=[pd.read_csv(f) for f in files])
    assert "read the file with fedcausal_flwr.data.read_client_csv(path)" in str(refused.value)
    assert "keep_default_na=False" in str(refused.value)
    kept = [read_client_csv(f, k) for k, f in enumerate(files)]
    assert fedcausal_flwr.run("fedpc", data=kept).graph is not None
    numbers = [pd.DataFrame({"A": [1.0, None, 0.0, 1.0], "B": [0, 1, 1, 0]})]
    with pytest.raises(InputError) as plain:  # numbers: no level can have been read as a gap
        fedcausal_flwr.run("fedpc", data=numbers)
    assert "read_client_csv" not in str(plain.value)
