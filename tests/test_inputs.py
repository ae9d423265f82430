"""Bad input is one clear error, on every entry_point, for every method.

Each case the command line once answered with a wrong graph and exit code 0, a traceback, or a
refusal for the wrong reason, through ``fedcausal-flwr run --data ... --backend inprocess`` for
the five methods fedpc, fedpc-vote, fedci-pc, fedcdnv and fedecd; then the cross-client check
(:mod:`fedcausal_flwr.federation.core.input_checks`) on its own (the file reader's own tests are
in test_csv_reader.py).
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from helpers import cli_result, refused, run_cli

from fedcausal_flwr.cli import main
from fedcausal_flwr.data.inputs import Fix, InputError, client_label, frame_report
from fedcausal_flwr.federation.core.input_checks import (
    InputNeeds,
    check_client_inputs,
    client_info_of,
    value_type,
)
from fedcausal_flwr.federation.core.input_notes import (
    ConstantColumnNote,
    DependenceWarning,
    note_constant_columns,
    warn_dependence,
)
from fedcausal_flwr.federation.core.registry import builtin_methods, get_method
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.result import Result

METHODS = ("fedpc", "fedpc-vote", "fedci-pc", "fedcdnv", "fedecd")
VOTING = ("fedpc-vote", "fedcdnv", "fedecd")  # the clients' own results are combined
SUMMED = ("fedpc", "fedci-pc")  # the clients' statistics are summed: the pooled test


def site_frame(n: int, seed: int) -> pd.DataFrame:
    """Six discrete variables: a chain A - B - C, a collider C -> E <- D, E - F."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, n)
    b = (a + (rng.random(n) < 0.15)) % 2
    c = (b + rng.integers(0, 2, n) * (rng.random(n) < 0.3)) % 3
    d = rng.integers(0, 2, n)
    e = ((c > 0).astype(int) + d + (rng.random(n) < 0.15)) % 2
    f = (e + (rng.random(n) < 0.15)) % 2
    return pd.DataFrame({"A": a, "B": b, "C": c, "D": d, "E": e, "F": f})


@pytest.fixture
def sites(tmp_path):
    """Three clients' CSV files (400 rows each) and a writer for variants."""

    def write(name: str, frame: pd.DataFrame, **to_csv) -> str:
        path = tmp_path / name
        frame.to_csv(path, **{"index": False, **to_csv})
        return str(path)

    frames = [site_frame(400, seed) for seed in range(3)]
    paths = [write(f"site{k}.csv", f) for k, f in enumerate(frames)]
    return frames, paths, write


def graph_of(capsys, tmp_path, method: str, paths: list[str], *extra: str):
    return cli_result(capsys, tmp_path, method, paths, *extra).graph


# =============================================================== wrong graph, exit 0 -> errors
@pytest.mark.parametrize("method", METHODS)
def test_different_column_sets_are_refused_except_by_fedcdnv(capsys, sites, method):
    frames, paths, write = sites
    noise = frames[1].assign(N=np.random.default_rng(9).integers(0, 2, len(frames[1])))
    files = [paths[0], write("extra.csv", noise), paths[2]]
    if method == "fedcdnv":  # non-identical variable sets are what it is for
        code, out, err = run_cli(capsys, method, files)
        assert code == 0 and "over 7 nodes" in out, out + err
        return
    err = refused(capsys, method, files)
    assert "client 1 (extra.csv) has columns" in err and "but client 0 (site0.csv) has" in err
    assert "(extra: ['N'])" in err and f"{method} needs the same variables at every site" in err
    assert "use --method fedcdnv for sites with non-identical variable sets" in err


def test_fedci_fitted_a_site_only_variable_on_other_rows_than_its_null_model():
    """Why fedci-pc joined a pure-noise column to every other one: with no site effect, a client
    lacking N still answered the null model A ~ 1 but not A ~ N + 1, so the likelihood ratio
    compared different rows (p = 0). Each test now uses the same rows in all four models."""
    from fedcausal_flwr.citest import citest

    frames = [site_frame(400, seed) for seed in range(3)]
    frames[1] = frames[1].assign(N=np.random.default_rng(9).integers(0, 2, 400))
    federated = citest(frames, "A", "N", [])
    alone = citest([frames[1]], "A", "N", [])
    assert federated.clients == (1,) and federated.n == 400
    assert federated.p_value == pytest.approx(alone.p_value, rel=1e-9) and alone.p_value > 0.01


@pytest.mark.parametrize("method", METHODS)
def test_a_semicolon_file_is_read_by_its_delimiter(capsys, tmp_path, sites, method):
    frames, paths, write = sites
    semicolons = [paths[0], paths[1], write("semi.csv", frames[2], sep=";")]
    assert graph_of(capsys, tmp_path, method, semicolons) == graph_of(
        capsys, tmp_path, method, paths
    )
    err = refused(capsys, method, semicolons, "--sep", ",")
    assert "client 2 (semi.csv) has a single column with the separator ','" in err
    assert "(its lines split on ';'); give the file's separator with --sep ';'" in err


@pytest.mark.parametrize("method", METHODS)
def test_a_file_saved_with_its_index_is_refused(capsys, sites, method):
    frames, paths, write = sites
    indexed = [paths[0], paths[1], write("indexed.csv", frames[2], index=True)]
    err = refused(capsys, method, indexed)
    assert (
        "client 2 (indexed.csv) has a first column without a name that looks like a saved row"
        in err
    )
    assert "(values 0..399, one per row)" in err and "with --keep-index" in err


@pytest.mark.parametrize("method", METHODS)
def test_repeated_column_names_are_refused(capsys, sites, method):
    frames, paths, write = sites
    repeated = write("dup.csv", frames[2].rename(columns={"F": "C"}))
    err = refused(capsys, method, [paths[0], paths[1], repeated])
    assert "client 2 (dup.csv) has repeated column names ['C'] in its header" in err


@pytest.mark.parametrize("method", METHODS)
def test_one_client_is_refused_where_the_method_combines_clients(capsys, sites, method):
    _, paths, _ = sites
    if method in SUMMED:  # the sums of one client are its pooled test
        code, out, err = run_cli(capsys, method, paths[:1])
        assert code == 0 and "over 6 nodes" in out, out + err
        return
    err = refused(capsys, method, paths[:1])
    assert (
        f"{method} combines the clients' own results and needs at least 2 clients, but 1 was" in err
    )
    assert "for a single site use --method local (its own graph) or --method pooled" in err


def test_every_method_declares_how_many_clients_it_needs():
    combining = {
        "pc-vote",
        "fci-vote",
        "pc-cit-vote",
        "fci-cit-vote",
        "fedpc-vote",
        "fedecd",
        "fedlcs",
        "fedcdnv",
        "fedcdnv-vote",
        "fci-base",
    }
    single = {
        "fedpc",
        "fedfci",
        "fedci-pc",
        "fedci-fci",
        "local",
        "pooled",
        "fedlcs-local",
        "lcs-pooled",
        "fedci-iod",  # one site's evidence is FCI's; IOD integrates as many as there are
        "iod-fisher",
        "iod-pooled",
        "fedcsl",  # one client: its own HITON-PC skeleton and hill-climbing DAG
        "rfcd",  # one client: GES on its own scores
        "notears-admm",  # one client: NOTEARS on its own rows
    }
    assert combining | single == set(builtin_methods())
    assert {m: get_method(m).min_sites for m in builtin_methods()} == {
        **dict.fromkeys(combining, 2),
        **dict.fromkeys(single, 1),
    }


@pytest.mark.parametrize("method", METHODS)
def test_a_site_coding_the_levels_its_own_way_is_refused(capsys, sites, method):
    """``level_LOW`` at one site and ``LOW`` at the others would pool into one variable with six
    levels, each confounded with the site; a level absent at one site is data."""
    frames, _, write = sites
    words = np.array(["LOW", "AVG", "HIGH"])
    coded = [f.assign(C=words[f["C"].to_numpy()]) for f in frames]
    odd = coded[2].assign(C="level_" + coded[2]["C"])
    files = [write("w0.csv", coded[0]), write("w1.csv", coded[1]), write("odd.csv", odd)]
    err = refused(capsys, method, files)
    assert (
        "column 'C' has levels 'level_AVG', 'level_HIGH', 'level_LOW' at client 2 (odd.csv) but "
        "'AVG', 'HIGH', 'LOW' at clients 0 (w0.csv), 1 (w1.csv): no level in common, so the sites "
        "code it differently; code its levels the same way at every site"
    ) in err
    two = write("two.csv", coded[2][coded[2]["C"] != "HIGH"])
    code, out, err = run_cli(capsys, method, [*files[:2], two])
    assert code == 0 and "over 6 nodes" in out, out + err


@pytest.mark.parametrize("method", METHODS)
def test_a_record_number_column_is_refused_as_an_identifier(capsys, sites, method):
    frames, _, write = sites
    numbered = [f.assign(record=np.arange(len(f)) + 1000 * k) for k, f in enumerate(frames)]
    err = refused(capsys, method, [write(f"id{k}.csv", f) for k, f in enumerate(numbered)])
    assert (
        "column 'record' looks like an identifier: 400 distinct values in 400 rows at client 0 "
        "(id0.csv)"
    ) in err and "drop the column" in err


def continuous_sites(tmp_path, n: int = 300) -> tuple[list[pd.DataFrame], list[str]]:
    rng = np.random.default_rng(4)
    frames = []
    for _ in range(3):
        a = rng.normal(size=n)
        b = a + rng.normal(size=n)
        frames.append(pd.DataFrame({"A": a, "B": b, "C": b + rng.normal(size=n)}))
    frames[2].loc[7, "B"] = np.inf
    paths = [str(tmp_path / f"g{k}.csv") for k in range(3)]
    for frame, path in zip(frames, paths, strict=True):
        frame.to_csv(path, index=False)
    return frames, paths


def test_an_infinite_value_stops_the_run_at_every_door(capsys, tmp_path):
    """Not a 100-line traceback, and with ``--min-clients 1`` not a dropout the run survives
    (a graph of the other sites' rows, exit 0)."""
    from fedcausal_flwr.federation.core.messages import ClientProtocolError

    frames, paths = continuous_sites(tmp_path)
    err = refused(capsys, "fedpc", paths, "--test", "fisherz", "--min-clients", "1")
    assert err.endswith(
        "client 2 (g2.csv) column 'B' has 1 infinite value (inf or -inf), which no test can use; "
        "replace the infinite values with numbers or drop their rows"
    )
    # a deployment: each site reads its own file, the server sees only the hello refusal
    with pytest.raises(ClientProtocolError, match=r"hello'?: client 2: column 'B' has 1 infin"):
        run_method("fedpc", frames, {"test": "fisherz"}, min_clients=1)


def test_a_truth_file_listing_both_directions_of_a_pair_is_refused(tmp_path):
    from fedcausal_flwr.scoring import read_truth

    path = tmp_path / "truth.csv"
    path.write_text("cause,effect\nA,B\nB,C\nB,A\n")
    with pytest.raises(ValueError, match=r"truth.csv: lists both A,B and B,A; a true DAG"):
        read_truth(path, ["A", "B", "C"])
    with pytest.raises(ValueError) as caught:
        read_truth(path, ["A", "B", "C"], quote=False)
    assert str(caught.value) == (
        f"{path}: 1 pair(s) are listed in both directions (cause,effect and effect,cause); a "
        "true DAG has one direction per pair"
    )


# =============================================================== crashes -> errors
@pytest.mark.parametrize("method", METHODS)
def test_a_column_coded_as_text_at_one_client_names_that_client(capsys, sites, method):
    frames, paths, write = sites
    text = frames[2].assign(A=frames[2]["A"].map({0: "no", 1: "yes"}))
    err = refused(capsys, method, [paths[0], paths[1], write("text.csv", text)])
    assert (
        "client 2 (text.csv) column 'A' holds text ('no', 'yes') but clients 0 (site0.csv), "
        "1 (site1.csv) hold integers (0, 1); code the column the same way at every site"
    ) in err


# =============================================================== refused for the wrong reason
@pytest.mark.parametrize("method", METHODS)
def test_a_column_constant_at_one_site_is_data(capsys, sites, method):
    frames, paths, write = sites
    files = [paths[0], paths[1], write("flat.csv", frames[2].assign(E=0))]
    code, out, err = run_cli(capsys, method, files)
    assert code == 0 and "over 6 nodes" in out, out + err
    everywhere = [write(f"flat{k}.csv", f.assign(E=1)) for k, f in enumerate(frames)]
    if method == "fedpc":  # exact summed tables: every test with E has p = 1, E stays isolated
        code, out, err = run_cli(capsys, method, everywhere)
        assert code == 0 and "over 6 nodes" in out, out + err
        notes = [line for line in err.splitlines() if "single level" in line]
        assert len(notes) == 1 and notes[0].startswith("fedcausal-flwr: note: column 'E' has a")
        with pytest.warns(ConstantColumnNote, match="column 'E' has a single level"):
            run_method(method, [pd.read_csv(path) for path in everywhere])
        return
    err = refused(capsys, method, everywhere)
    assert "column 'E' is constant (1) over all clients' rows" in err and "drop the column" in err
    assert f"{method} " in err  # the method that cannot use it says so by name


@pytest.mark.parametrize("method", METHODS)
def test_a_one_row_client_is_refused_only_where_clients_test_alone(capsys, sites, method):
    frames, paths, write = sites
    files = [paths[0], paths[1], write("tiny.csv", frames[2].iloc[:1])]
    if method in SUMMED:
        code, out, err = run_cli(capsys, method, files)
        assert code == 0 and "over 6 nodes" in out, out + err
        return
    err = refused(capsys, method, files)
    assert f"client 2 (tiny.csv) has only 1 row, but {method}'s clients run CI tests" in err


@pytest.mark.parametrize("method", METHODS)
def test_unreadable_files_name_the_client_and_say_what_is_wrong(capsys, tmp_path, sites, method):
    _, paths, _ = sites
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "binary.csv").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "folder").mkdir()
    for name, problem in [
        ("empty.csv", "client 2 (empty.csv) is an empty file"),
        ("binary.csv", "client 2 (binary.csv) is not a text CSV file (a NUL byte at byte 0"),
        ("folder", "client 2 (folder) is a directory, not a CSV file"),
        ("missing.csv", "client 2 (missing.csv) does not exist (no file "),
    ]:
        assert problem in refused(capsys, method, [*paths[:2], str(tmp_path / name)])


@pytest.mark.parametrize("method", METHODS)
def test_a_client_with_its_columns_in_another_order_gives_the_same_graph(
    capsys, tmp_path, sites, method
):
    frames, paths, write = sites
    permuted = write("permuted.csv", frames[2][["F", "D", "A", "E", "C", "B"]])
    reference = graph_of(capsys, tmp_path, method, paths)
    assert graph_of(capsys, tmp_path, method, [paths[0], paths[1], permuted]) == reference
    assert reference.adjacency().sum() >= 6  # a graph with several edges, not an empty one


@pytest.mark.parametrize("method", sorted(set(builtin_methods()) - set(METHODS)))
def test_every_client_encodes_columns_by_name(method):
    """Every other method too: a client holding the columns in another order changes nothing
    (each client reads the columns the server names, in the server's order)."""
    frames = [site_frame(300, seed) for seed in range(3)]
    options = {"target": "E"} if "lcs" in method else {}
    if method == "notears-admm":
        options = {"max_iter": 20}  # its rounds, not its convergence, read the columns
    reference = run_method(method, frames, options)
    permuted = [*frames[:2], frames[2][["F", "D", "A", "E", "C", "B"]]]
    assert run_method(method, permuted, options).graph == reference.graph


def test_messages_name_options_as_the_door_spells_them(capsys, sites):
    frames, paths, write = sites
    decimals = write("decimals.csv", frames[2].assign(D=frames[2]["D"] + 0.5))
    files = [paths[0], paths[1], decimals]
    err = refused(capsys, "fedpc", files)
    assert "client 2 (decimals.csv) column 'D' holds decimal numbers (dtype float64)" in err
    assert "for continuous data use --test fisherz" in err
    with pytest.raises(InputError, match=r"for continuous data use test='fisherz'"):
        run_method("fedpc", [*frames[:2], frames[2].assign(D=frames[2]["D"] + 0.5)])
    err = refused(capsys, "fedci-pc", files)  # integers here, decimals there: two model kinds
    assert (
        "client 2 (decimals.csv) column 'D' holds decimal numbers but clients 0 (site0.csv)" in err
    )
    assert "or declare the variable kinds with --schema FILE" in err
    err = refused(capsys, "pc-vote", files)
    assert "use a method for continuous or mixed data (--method fedpc with --test fisherz" in err


def test_too_few_rows_for_fisher_z_names_the_option_that_helps(capsys, tmp_path):
    """Found by the fuzz test: three pooled rows cannot carry any Fisher-z test, and the message
    named no option a user could change."""
    tiny = tmp_path / "tiny.csv"
    tiny.write_text("A,B,C\n0.1,0.5,1.2\n0.7,0.2,0.4\n1.5,0.9,0.3\n")
    err = refused(capsys, "fedpc", [str(tiny)], "--test", "fisherz")
    assert "the clients hold 3 rows in all" in err
    assert err.endswith("give at least 4 rows, or discretise the columns for --test chi2")


def test_sep_and_keep_index_are_recorded_for_a_rerun(capsys, tmp_path, sites):
    frames, _, write = sites
    # 50 rows: the kept index (a row number) is taken for an identifier above 50 rows
    files = [write(f"pipe{k}.csv", f.iloc[:50], sep="|", index=True) for k, f in enumerate(frames)]
    out_file = str(tmp_path / "kept.json")
    code, out, err = run_cli(
        capsys, "fedpc", files, "--sep", "|", "--keep-index", "--out", out_file
    )
    assert code == 0 and "over 7 nodes" in out, out + err  # the kept index is a variable
    recorded = Result.load(out_file)
    assert (recorded.config["data"]["sep"], recorded.config["data"]["keep_index"]) == ("|", True)
    assert main(["run", "--config", out_file, "--backend", "inprocess"]) == 0
    assert "over 7 nodes" in capsys.readouterr().out
    from fedcausal_flwr.data.partition import from_csv_files

    assert from_csv_files(files, sep="|", keep_index=True).schema.names[0] == "index"
    code = main(["run", "--method", "fedpc", "--network", "asia", "--sep", ";"])
    assert code == 2 and "--sep ';': only for data read from files" in capsys.readouterr().err


def test_the_check_runs_before_any_backend_starts(monkeypatch, sites):
    """A Ray run with bad input fails at once: the API checks the frames before it starts one."""
    import fedcausal_flwr.api as api

    frames, paths, _ = sites

    def no_backend(*args, **kwargs):
        raise AssertionError("a backend was started")

    monkeypatch.setattr(api, "run_prepared", no_backend)
    bad = [*frames[:2], frames[2].assign(A=frames[2]["A"].map({0: "no", 1: "yes"}))]
    with pytest.raises(InputError, match="client 2 column 'A' holds text"):
        api.run("fedpc", data=bad, backend="ray")
    with pytest.raises(InputError, match="fedecd combines the clients' own results"):
        api.execute("fedecd", {"backend": "ray"}, {}, files=paths[:1])


def test_the_server_checks_the_hello_reports_too(sites):
    """An entry point that skips the API's check (a deployment: each site reads its own file) is
    protected by the same check on the hello reports, before the method's first step."""
    frames, _, _ = sites
    bad = [*frames[:2], frames[2].assign(A=frames[2]["A"].map({0: "no", 1: "yes"}))]
    with pytest.raises(InputError, match="client 2 column 'A' holds text") as caught:
        run_method("fedpc-vote", bad, entry_point="config")
    assert caught.value.client == 2 and caught.value.column == "A"
    with pytest.raises(InputError, match="use method=local .* or method=pooled"):
        run_method("fedpc-vote", frames[:1], entry_point="config")


def test_a_supernode_reads_its_file_with_the_same_reader(tmp_path, sites):
    from fedcausal_flwr import flwr_app

    frames, _, write = sites
    semi = write("semi-site.csv", frames[0], sep=";")
    pd.testing.assert_frame_equal(flwr_app.read_site_csv(semi, client=3), frames[0])
    pd.testing.assert_frame_equal(flwr_app.read_site_csv(semi, ";", client=3), frames[0])
    indexed = write("indexed-site.csv", frames[0], index=True)
    with pytest.raises(InputError, match=r"client 3 \(indexed-site.csv\).*data-keep-index=true"):
        flwr_app.read_site_csv(indexed, client=3)
    kept = flwr_app.read_site_csv(indexed, keep_index=True, client=3)
    assert list(kept.columns) == ["index", *frames[0].columns]


# =============================================================== the cross-client check
def reports(*frames: pd.DataFrame) -> dict:
    return {k: client_info_of(f, k, 1000) for k, f in enumerate(frames)}


def test_the_hello_report_is_the_one_the_check_reads():
    from fedcausal_flwr.clients.base import ProtocolClient

    frame = pd.DataFrame({"a": [1, 1, 2], "x": [0.5, 0.5, 0.5], "t": ["u", "v", "u"]})
    _, meta = ProtocolClient(3, frame).answer("hello", {"max_levels": 1000}, [])
    assert meta == frame_report(frame, 3, 1000)
    assert meta["constant"] == {"x": 0.5} and meta["levels"]["x"] is None
    repeated = pd.DataFrame([[1, 2]], columns=["a", "a"])
    assert frame_report(repeated, 0, 10)["columns"] == ["a", "a"]  # reported, not merged


def test_value_types_come_from_dtypes_and_levels():
    assert [
        value_type(d, lv)
        for d, lv in [
            ("int64", [0, 1]),
            ("float64", None),
            ("bool", [False, True]),
            ("object", ["a"]),
            ("str", None),
            ("category", [1, 2]),
            ("object", [1, "a"]),
            ("object", [1, 2.5]),
        ]
    ] == ["integer", "float", "boolean", "text", "text", "integer", "mixed", "float"]


def test_the_checks_run_in_order_and_name_client_and_column():
    good = pd.DataFrame({"a": [0, 1, 0, 1], "b": ["x", "y", "y", "x"]})
    discrete = InputNeeds(values="discrete", local_tests=True, test="chi2")

    def fails(*frames, needs=discrete, **kwargs):
        with pytest.raises(InputError) as caught:
            check_client_inputs(reports(*frames), needs, method="m", **kwargs)
        return caught.value

    # (the same rows in another order: the same rows in the same order are one site twice)
    check_client_inputs(reports(good, good[::-1]), discrete, method="m", min_sites=2)
    assert "needs at least 3 clients, but 2 were given" in str(fails(good, good, min_sites=3))
    assert str(fails(good, good.iloc[:0])) == "client 1 has no data rows"
    assert "has only 1 row" in str(fails(good, good.iloc[:1]))
    check_client_inputs(reports(good, good.iloc[:1]), InputNeeds(values="discrete"), method="m")
    assert "(lacking: ['b'])" in str(fails(good, good[["a"]]))
    check_client_inputs(reports(good, good[["b", "a"]]), discrete, method="m")  # any order
    holes = good.assign(b=["x", None, "y", "x"])
    err = fails(good, holes)
    assert str(err).startswith("client 1 column 'b' has 1 missing value; m needs complete data")
    assert (err.client, err.column) == (1, "b")
    assert "holds a mix of text and numbers" in str(fails(good.assign(b=[1, "y", "x", 2])))
    numeric = InputNeeds(values="numeric", test="Fisher-z")
    assert "but m's Fisher-z test needs numbers" in str(fails(good, needs=numeric))
    floats = good.assign(a=[0.0, 1.0, 0.0, 1.0])
    check_client_inputs(reports(good[["a"]], floats[["a"]]), numeric, method="m")  # numbers agree
    err = fails(good, floats, good[::-1], needs=InputNeeds(values="mixed"))
    assert str(err).startswith("client 1 column 'a' holds decimal numbers but clients 0, 2 hold")


def test_constant_columns_are_judged_over_all_clients():
    needs = InputNeeds(values="any")
    half = pd.DataFrame({"a": [1, 1], "x": [0.5, 0.5]})
    other = pd.DataFrame({"a": [2, 2], "x": [1.5, 1.5]})
    check_client_inputs(reports(half, other), needs, method="m")  # each constant, not overall
    with pytest.raises(InputError, match=r"^column 'x' is constant \(0.5\) over all clients"):
        check_client_inputs(reports(half, half.assign(a=[1, 2])), needs, method="m")
    check_client_inputs(reports(half, half.iloc[:1]), InputNeeds(varying=False), method="m")
    # a declared category no row holds is no level: the column is constant all the same
    categories = half.assign(a=pd.Categorical([1, 1], categories=[1, 2]))
    with pytest.raises(InputError, match=r"^column 'a' is constant \(1\) over all clients"):
        check_client_inputs(reports(categories[["a"]]), needs, method="m")


def test_input_errors_render_for_each_door_and_survive_pickling():
    fix = Fix("use {} or {}", (("test", "fisherz"), ("keep_index", True)))
    err = InputError("holds decimal numbers", client=2, file="c.csv", column="x", fix=fix)
    assert str(err) == (
        "client 2 (c.csv) column 'x' holds decimal numbers; use test='fisherz' or keep_index=True"
    )
    assert err.render("cli").endswith("use --test fisherz or --keep-index")
    assert err.render("config").endswith("use test=fisherz or data-keep-index=true")
    assert str(err.in_entry_point("cli")) == err.render("cli") and err.args == (err.render("cli"),)
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.client == 2 and again.column == "x"
    assert [client_label(2), client_label(2, "c.csv"), client_label(None, "all.csv")] == [
        "client 2",
        "client 2 (c.csv)",
        "file all.csv",
    ]
    assert Fix("give {}", (("sep", "\t"),)).render("cli") == "give --sep '\\t'"


def test_an_in_process_run_describes_each_frame_once(monkeypatch):
    """The API's check before the backend and each in-process client's hello describe the same
    frame: the report is computed once per frame, and both see the same facts."""
    import fedcausal_flwr
    import fedcausal_flwr.data.inputs as inputs
    from fedcausal_flwr.data.specs import sample_partition

    part, _ = sample_partition("asia", 900, 3, "iid", 0)
    calls = []
    compute = inputs._frame_report

    def counted(frame, partition_id, max_levels):
        calls.append(partition_id)
        return compute(frame, partition_id, max_levels)

    monkeypatch.setattr(inputs, "_frame_report", counted)
    result = fedcausal_flwr.run("fedpc", data=part.clients)
    assert sorted(calls) == [0, 1, 2]
    again = fedcausal_flwr.run("fedpc", data=[f.copy() for f in part.clients])
    assert sorted(calls) == [0, 0, 1, 1, 2, 2]  # new frames: described anew
    assert again.config["data"]["fingerprint"] == result.config["data"]["fingerprint"]


# --------------------------------------------------------------------------- dependence warnings
def dependence_warnings(recorder) -> list[str]:
    return [str(w.message) for w in recorder if issubclass(w.category, DependenceWarning)]


def checked_warnings(frames: list[pd.DataFrame], values: str) -> list[str]:
    with warnings.catch_warnings(record=True) as recorder:
        warnings.simplefilter("always")
        check_client_inputs(reports(*frames), InputNeeds(values=values), method="fedpc")
    return dependence_warnings(recorder)


DUPLICATE_LINE = (
    "columns 'B' and 'B2' are equal at every site (duplicates): a CI test given one finds the "
    "other independent of everything, so true edges are removed; drop one"
)


def test_duplicate_columns_at_every_site_are_warned_once_in_one_line(capsys, sites):
    _, _, write = sites
    paths = [write(f"dup{k}.csv", site_frame(400, k).assign(B2=lambda f: f["B"])) for k in range(3)]
    assert checked_warnings([pd.read_csv(p) for p in paths], "discrete") == [DUPLICATE_LINE]
    code, _, err = run_cli(capsys, "fedpc", paths)
    assert code == 0
    assert [line for line in err.splitlines() if "duplicates" in line] == [
        "fedcausal-flwr: warning: " + DUPLICATE_LINE
    ]
    assert "Traceback" not in err and "warnings.warn" not in err


@pytest.mark.parametrize("method", ["fedpc-vote", "fedci-pc", "fedecd", "pc-vote"])
def test_every_method_warns_about_duplicates(capsys, sites, method):
    _, _, write = sites
    paths = [write(f"dup{k}.csv", site_frame(400, k).assign(B2=lambda f: f["B"])) for k in range(3)]
    code, _, err = run_cli(capsys, method, paths)
    assert "fedcausal-flwr: warning: " + DUPLICATE_LINE in err.splitlines(), err


def test_a_column_determined_by_another_is_warned_for_discrete_tests_only():
    frames = [site_frame(400, k) for k in range(3)]
    for frame in frames:
        frame["G"] = np.where(frame["C"] == 2, "high", "low")  # a function of C
    assert checked_warnings(frames, "discrete") == [
        "column 'C' determines column 'G' at every site (one value of 'G' per value of 'C'): "
        "a discrete test given 'C' finds 'G' independent of everything, so true edges of 'G' "
        "are removed"
    ]
    assert checked_warnings(frames, "any") == []


def test_a_recoded_column_is_one_warning_for_both_directions():
    frames = [site_frame(400, k) for k in range(3)]
    for frame in frames:
        frame["Cx"] = frame["C"].map({0: "zero", 1: "one", 2: "two"})
    assert checked_warnings(frames, "discrete") == [
        "columns 'C' and 'Cx' determine each other at every site (one is a recoding of the "
        "other): a discrete test given one finds the other independent of everything, so true "
        "edges are removed; drop one"
    ]


def test_a_relationship_held_through_a_constant_or_another_column_order_is_warned():
    """A site reports only columns that vary, in its own column order: one where both copies
    are one constant value (or the determined column is), or that lists the copy first, still
    holds the relationship."""
    frames = [site_frame(400, k).assign(B2=lambda f: f["B"]) for k in range(3)]
    frames[0][["B", "B2"]] = 1  # both copies constant, and equal, at one site
    frames[1] = frames[1][["B2", *frames[1].columns.drop("B2")]]  # the copy first
    assert checked_warnings(frames, "discrete") == [DUPLICATE_LINE]
    frames[0] = frames[0].assign(B2=0)  # now different constants: not copies there
    assert checked_warnings(frames, "discrete") == []
    determined = [site_frame(400, k) for k in range(3)]
    for frame in determined:
        frame["G"] = np.where(frame["C"] == 2, "high", "low")
    determined[2]["G"] = "low"  # one value at a site: determined by anything there
    assert [w.split(":")[0] for w in checked_warnings(determined, "discrete")] == [
        "column 'C' determines column 'G' at every site (one value of 'G' per value of 'C')"
    ]


def test_a_relationship_at_some_sites_only_is_data():
    frames = [site_frame(400, k) for k in range(3)]
    frames[0]["B2"] = frames[0]["B"]
    frames[0]["G"] = frames[0]["C"] % 2
    for frame in frames[1:]:
        frame["B2"] = frame["B"].sample(frac=1, random_state=0).to_numpy()
        frame["G"] = (frame["C"] + frame["D"]) % 2
    assert checked_warnings(frames, "discrete") == []
    assert reports(*frames)[0].dependence["duplicates"] == [["B", "B2"]]
    assert reports(*frames)[0].dependence["determines"] == [["C", "G"]]


def test_a_function_is_found_whatever_the_row_order_and_missing_rows():
    """The screen takes every k-th row of a long frame: a function over all rows is one over
    those; rows missing either column do not count."""
    rng = np.random.default_rng(3)
    n = 20_000  # over the screen's rows
    a = np.sort(rng.integers(0, 4, n))  # sorted: the first rows hold one value
    b = np.where(a % 2 == 1, "odd", "even").astype(object)
    b[::7] = None
    frame = pd.DataFrame({"A": a, "B": b, "N": rng.integers(0, 3, n)})
    assert frame_report(frame, 0, 100)["dependence"]["determines"] == [["A", "B"]]
    broken = frame.copy()
    broken.loc[n - 1, "B"] = "even"  # one row breaks it (A is 3 there)
    assert frame_report(broken, 0, 100)["dependence"]["determines"] == []


def test_near_collinear_columns_are_warned_for_tests_on_numbers():
    rng = np.random.default_rng(2)
    frames = []
    for _ in range(3):
        x, y, w = rng.normal(size=(3, 300))
        frames.append(
            pd.DataFrame({"X": x, "Y": y, "W": w, "S": x + y + 1e-7 * rng.normal(size=300)})
        )
    found = checked_warnings(frames, "numeric")
    assert len(found) == 1, found
    assert found[0].startswith(
        "columns 'X', 'Y' and 'S' are near-collinear at every site (condition number of their "
        "correlation matrix at least "
    )
    condition = frame_report(frames[0], 0, 100)["dependence"]["collinear"][0]["condition"]
    assert 1e10 < condition < 1e16
    frames[0] = frames[0].assign(S=rng.normal(size=300))  # one site without it: data
    assert checked_warnings(frames, "numeric") == []


def test_exactly_collinear_columns_are_called_singular():
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(2, 200))
    frame = pd.DataFrame({"X": x, "Y": y, "S": x + y})
    (found,) = frame_report(frame, 0, 10)["dependence"]["collinear"]
    assert found["columns"] == ["X", "Y", "S"]
    assert found["condition"] is None or found["condition"] > 1e15
    singular = {"columns": ["X", "Y", "S"], "condition": None}  # a smallest eigenvalue <= 0
    info = reports(frame, frame.copy())
    for report in info.values():
        report.dependence["collinear"] = [singular]
    with pytest.warns(DependenceWarning, match="their correlation matrix is singular"):
        warn_dependence(info, discrete=False, numeric=True)


def test_benchmark_data_raises_no_dependence_warning():
    from fedcausal_flwr.data.specs import sample_partition

    partition, _ = sample_partition("alarm", 10000, 10, "iid", 0)
    assert checked_warnings(list(partition.clients), "discrete") == []


def test_a_benchmark_network_with_deterministic_nodes_is_warned():
    """win95pts holds nodes that copy or recode a parent (0/1 conditional tables)."""
    from fedcausal_flwr.data.specs import sample_partition

    partition, _ = sample_partition("win95pts", 3000, 3, "iid", 0)
    found = checked_warnings(list(partition.clients), "discrete")
    assert any("'GrbldPS' and 'Problem6' are equal" in line for line in found), found


def test_a_frame_changed_in_place_between_runs_is_read_afresh():
    """Reports and codes are kept per frame for one run only: a column replaced in place
    between two runs is the second run's data (its graph and fingerprint)."""
    rng = np.random.default_rng(0)
    frames = []
    for _ in range(2):
        a = rng.integers(0, 2, 500)
        b = (a + (rng.random(500) < 0.1)) % 2
        frames.append(pd.DataFrame({"A": a, "B": b, "C": rng.integers(0, 2, 500)}))
    first = run_method("fedpc", frames)
    for frame in frames:
        frame["C"] = frame["A"] ^ (rng.random(500) < 0.1)  # now C follows A
    second = run_method("fedpc", frames)
    assert not first.graph.adjacent(0, 2) and second.graph.adjacent(0, 2)
    assert first.config["data"]["fingerprint"] != second.config["data"]["fingerprint"]


def test_many_dependence_warnings_end_in_a_count():
    frames = [site_frame(400, k) for k in range(2)]
    for frame in frames:
        for j in range(12):
            frame[f"B{j}"] = frame["B"]
    found = checked_warnings(frames, "discrete")
    assert len(found) == 10
    assert found[-1].startswith(f"{78 - 9} more pairs or sets of columns a test cannot separate")


def test_many_constant_columns_are_noted_in_ten_lines_naming_the_first():
    """munin has over two hundred single-level columns: a note each filled the screen."""
    levels = {f"c{k}": ["NO"] for k in range(25)} | {"x": [0, 1]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        constant = note_constant_columns("fedpc", levels, True)
    assert constant == [f"c{k}" for k in range(25)]  # every one kept (isolated) and returned
    said = [str(w.message) for w in caught if issubclass(w.category, ConstantColumnNote)]
    assert len(said) == 10
    assert all(f"column 'c{k}' has a single level" in said[k] for k in range(9))
    assert said[9].startswith("note: 16 more columns have a single level over all clients")
    assert "constant_columns" in said[9]
