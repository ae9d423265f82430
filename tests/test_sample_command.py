"""`fedcausal-flwr sample` writes the rows `run --network` draws as one CSV per site plus the
truth DAG, so `run --data ... --truth ...` learns what `run --network` learns; the Python API's
`data=` reads CSV paths with the same reader."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import fedcausal_flwr
from fedcausal_flwr.cli import main
from fedcausal_flwr.data.csv_input import read_client_csv, site_file_names
from fedcausal_flwr.data.specs import sample_partition
from fedcausal_flwr.result import Result
from fedcausal_flwr.scoring import read_truth


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([*argv])
    out, err = capsys.readouterr()
    return code, out, err


def sites(folder: Path) -> list[str]:
    """``DIR/site*.csv`` as a shell expands it (sorted by name)."""
    return [str(p) for p in sorted(folder.glob("site*.csv"))]


@pytest.mark.parametrize(
    "network,samples,clients,extra",
    [
        ("child", "4500", "3", []),
        ("asia", "3000", "4", ["--partition", "dirichlet:alpha=2", "--seed", "3"]),
    ],
)
def test_sample_then_run_data_learns_what_run_network_learns(
    tmp_path, capsys, network, samples, clients, extra
):
    drawn = ["--network", network, "--samples", samples, "--clients", clients, *extra]
    code, out, _ = cli(capsys, "sample", *drawn, "--out", str(tmp_path / "d"))
    assert code == 0, out
    assert f"{network}: {samples} rows split" in out and "truth.csv" in out
    files = sites(tmp_path / "d")
    assert [Path(f).name for f in files] == site_file_names(int(clients))
    seed = extra[extra.index("--seed") :][:2] if "--seed" in extra else []  # the method's seed
    code, from_network, _ = cli(
        capsys, "run", "--method", "fedpc", *drawn, "--out", str(tmp_path / "n.json")
    )
    assert code == 0
    code, from_files, _ = cli(
        capsys, "run", "--method", "fedpc", "--data", *files, "--truth",
        str(tmp_path / "d" / "truth.csv"), *seed, "--out", str(tmp_path / "f.json"),
    )  # fmt: skip
    assert code == 0
    a, b = Result.load(tmp_path / "n.json"), Result.load(tmp_path / "f.json")
    assert a.graph == b.graph and a.graph.n_edges() > 0
    assert a.metrics == b.metrics and "shd" in a.metrics
    printed = [
        out.split("\n  result written")[0].split("learned ")[1]
        for out in (from_network, from_files)
    ]
    assert printed[0] == printed[1] and "-" in printed[0]  # the same edges, with their p-values
    assert b.config["data"]["source"] == "files" and b.config["truth"].endswith("truth.csv")


def test_site_files_read_back_as_the_drawn_rows(tmp_path, capsys):
    code, _, _ = cli(
        capsys, "sample", "--network", "child", "--samples", "2000", "--clients", "2",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0
    part, net = sample_partition("child", 2000, 2, "iid", 0)
    for k, path in enumerate(sites(tmp_path)):
        back = read_client_csv(path, k)
        drawn = part.clients[k]
        assert list(back.columns) == list(drawn.columns)
        assert all(pd.api.types.is_string_dtype(back[c]) for c in back.columns)
        assert back.notna().all().all()
        pd.testing.assert_frame_equal(
            back, drawn.astype(str).reset_index(drop=True), check_dtype=False
        )
        for column in drawn.columns:  # every level drawn is read back, the level 'None' too
            assert set(back[column]) == set(drawn[column].astype(str))
    assert "None" in set(back["DuctFlow"])
    assert read_truth(tmp_path / "truth.csv", list(net.variables)) == net.dag
    assert sorted(map(tuple, pd.read_csv(tmp_path / "truth.csv").values.tolist())) == sorted(
        net.edges
    )


def test_sample_refuses_to_overwrite_unless_forced(tmp_path, capsys):
    args = ["sample", "--network", "asia", "--samples", "300", "--out", str(tmp_path)]
    assert cli(capsys, *args, "--clients", "3")[0] == 0
    before = (tmp_path / "site0.csv").read_text()
    code, _, err = cli(capsys, *args, "--clients", "3", "--seed", "1")
    assert code == 2
    assert f"--out {tmp_path}: {tmp_path / 'site0.csv'} exists; give --force" in err
    assert (tmp_path / "site0.csv").read_text() == before
    (tmp_path / "site0.csv").unlink()
    (tmp_path / "site1.csv").unlink()
    (tmp_path / "truth.csv").unlink()
    code, _, err = cli(capsys, *args, "--clients", "2")  # site2.csv would join a site*.csv glob
    assert code == 2 and f"{tmp_path / 'site2.csv'} exists (left from an earlier sample" in err
    code, out, _ = cli(capsys, *args, "--clients", "2", "--force")
    assert code == 0 and "removed site2.csv" in out
    assert [Path(f).name for f in sites(tmp_path)] == ["site0.csv", "site1.csv"]
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize(
    "argv,message",
    [
        ([], "give --network NET"),
        (["--network", "asai"], "unknown network 'asai' (did you mean 'asia'?)"),
        (["--network", "asia", "--samples", "0"], "option --samples: expected an integer >= 1"),
        (["--network", "asia", "--partition", "dirichlet:alpah=2"],
         "partition 'dirichlet:alpah=2' has no option 'alpah' (did you mean alpha?)"),
        (["--network", "asia", "--samples", "2", "--clients", "3"],
         "cannot split 2 rows into 3 clients"),
        (["--network", "pathfinder", "--samples", "50", "--clients", "1"],
         "network 'pathfinder': variable 'F2' has the level 'NA', which a CSV file cannot hold"),
    ],
)  # fmt: skip
def test_sample_errors_name_the_option_and_the_problem(tmp_path, capsys, argv, message):
    code, _, err = cli(capsys, "sample", *argv, "--out", str(tmp_path / "d"))
    assert code == 2
    assert message in err
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").iterdir())


def test_more_than_ten_sites_sort_in_client_order():
    names = site_file_names(12)
    assert names[:2] == ["site00.csv", "site01.csv"] and names == sorted(names)
    assert site_file_names(3) == ["site0.csv", "site1.csv", "site2.csv"]


def test_python_data_takes_csv_paths_read_as_run_data_reads_them(tmp_path, capsys):
    assert cli(capsys, "sample", "--network", "child", "--samples", "3000", "--clients", "3",
               "--out", str(tmp_path))[0] == 0  # fmt: skip
    files, truth = sites(tmp_path), tmp_path / "truth.csv"
    code, _, _ = cli(
        capsys, "run", "--method", "fedpc", "--data", *files, "--truth", str(truth),
        "--out", str(tmp_path / "cli.json"),
    )  # fmt: skip
    assert code == 0
    on_cli = Result.load(tmp_path / "cli.json")
    for given in (files, [Path(f) for f in files]):
        result = fedcausal_flwr.run("fedpc", data=given, truth=truth)
        assert result.graph == on_cli.graph and result.metrics == on_cli.metrics
        assert result.config["data"]["source"] == "files"
    with pytest.raises(ValueError, match="column 'DuctFlow' has"):  # pandas reads 'None' as NaN
        fedcausal_flwr.run("fedpc", data=[pd.read_csv(f) for f in files])


def test_python_data_paths_name_a_missing_file_and_refuse_a_mix(tmp_path):
    assert main(["sample", "--network", "asia", "--samples", "200", "--clients", "2",
                 "--out", str(tmp_path)]) == 0  # fmt: skip
    missing = tmp_path / "site9.csv"
    with pytest.raises(ValueError, match=r"client 1 \(site9.csv\) does not exist"):
        fedcausal_flwr.run("fedpc", data=[tmp_path / "site0.csv", missing])
    with pytest.raises(ValueError, match="data= mixes CSV paths and DataFrame"):
        fedcausal_flwr.run("fedpc", data=[tmp_path / "site0.csv", pd.DataFrame({"a": [1]})])
    with pytest.raises(ValueError, match="give a list with one CSV file per client"):
        fedcausal_flwr.run("fedpc", data=str(tmp_path / "site0.csv"))
    with pytest.raises(ValueError, match="sep=';': only for data read from files"):
        fedcausal_flwr.run("fedpc", data=[pd.DataFrame({"a": [1, 0]})], sep=";")
