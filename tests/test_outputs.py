"""A finished run is never lost and no write ends in a traceback (``fedcausal_flwr.outputs``).

Every file or folder a command writes is checked before its work: one line naming the option as
typed, exit code 2. A write that fails after the work (disk full, quota, ``ulimit -f``,
permissions changed meanwhile) still shows the work and says in one line what was not written,
exit code 1; in Python, ``Result.save`` raises an ``OutputError`` naming the path, the result
attached. A closed stdout ends quietly (exit 141) and an unreadable input file is one line naming
it. The tests run as root, where a folder's mode does not stop a write: a read-only folder is
simulated through ``os.access`` and a failing write by making ``os.replace`` raise.
"""

from __future__ import annotations

import errno
import os
import pickle
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import fedcausal_flwr
from fedcausal_flwr.cli import main
from fedcausal_flwr.data.inputs import InputError
from fedcausal_flwr.outputs import OutputError
from fedcausal_flwr.result import Result

RUN = ["run", "--method", "fedpc", "--network", "asia", "--samples", "500", "--clients", "2"]
CLI = f"{shlex.quote(sys.executable)} -m fedcausal_flwr.cli"


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([*argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    """The one error line on stderr, after checking it is all there is (no traceback)."""
    assert "Traceback" not in err and "Exception ignored" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fedcausal-flwr: error: "), err
    return lines[0].removeprefix("fedcausal-flwr: error: ")


def graph_printed(out: str) -> bool:
    """The run's summary as ``run`` prints it: the summary line and the learned edges."""
    return "fedpc: CPDAG with" in out and "learned CPDAG" in out and " --- " in out


@pytest.fixture(scope="module")
def sites(tmp_path_factory) -> Path:
    """``sample``'s site0.csv, site1.csv and truth.csv, and a result JSON (result.json)."""
    folder = tmp_path_factory.mktemp("sites")
    assert main(["sample", "--network", "asia", "--samples", "500", "--clients", "2",
                 "--out", str(folder)]) == 0  # fmt: skip
    fedcausal_flwr.run("fedpc", network="asia", samples=500, clients=2).save(folder / "r.json")
    return folder


@pytest.fixture
def read_only(tmp_path, monkeypatch) -> Path:
    """A folder nothing may be written in (``os.access`` says so, as for a user, not root)."""
    folder = (tmp_path / "ro").resolve()
    folder.mkdir()
    real = os.access

    def access(path, mode, *args, **kwargs):
        where = Path(path).resolve()
        if (where == folder or folder in where.parents) and mode & os.W_OK:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
    return folder


def failing_replace(monkeypatch, code: int, name: str, calls: list | None = None) -> None:
    """``os.replace`` onto a file called ``name`` fails with ``code`` (after ``calls``' length
    of successes: ``[None]`` lets the first through), as a full disk or a quota would."""
    real = os.replace
    allowed = list(calls or [])

    def replace(src, dst, *args, **kwargs):
        if Path(dst).name == name:
            if allowed:
                allowed.pop()
            else:
                raise OSError(code, os.strerror(code), str(src))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


# ------------------------------------------------------------------ outputs checked first


@pytest.mark.parametrize(
    "target,expected",
    [
        ("folder", "--out {p}: {p} is a folder, not a file; give a file name, e.g. "
         "{p}/result.json"),
        ("file/sub.json", "--out {p}: {d}/file is a file, not a folder"),
        ("ro/result.json", "--out {p}: cannot write in the folder {d}/ro (permission denied)"),
        ("ro/new/deeper/result.json", "--out {p}: cannot write in the folder {d}/ro "
         "(permission denied)"),
    ],
)  # fmt: skip
def test_run_refuses_an_out_it_cannot_write_before_the_run(
    tmp_path, capsys, read_only, target, expected
):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    path = tmp_path / target
    code, out, err = cli(capsys, *RUN, "--out", str(path))
    assert code == 2
    assert "running" not in out  # before any work
    assert one_line(err) == expected.format(p=path, d=tmp_path)
    assert not (tmp_path / "ro" / "new").exists()


def test_run_refuses_a_draw_it_cannot_write_before_the_run(tmp_path, capsys, read_only):
    (tmp_path / "g.png").mkdir()
    code, out, err = cli(capsys, *RUN, "--draw", str(tmp_path / "g.png"))
    assert code == 2 and "running" not in out
    assert one_line(err).endswith("g.png is a folder, not a file; give a file name, e.g. "
                                  f"{tmp_path}/g.png/g.png")  # fmt: skip
    code, out, err = cli(capsys, *RUN, "--draw", str(read_only / "g.png"))
    assert code == 2 and "running" not in out
    assert one_line(err) == (
        f"--draw {read_only}/g.png: cannot write in the folder {read_only} (permission denied)"
    )


def test_a_folder_that_access_calls_writable_is_still_tried(tmp_path, capsys):
    """Root on /proc: access(2) says yes, creating a file there fails; checked all the same."""
    code, out, err = cli(capsys, *RUN, "--out", "/proc/fedcausal-result.json")
    assert code == 2 and "running" not in out
    assert one_line(err).startswith("--out /proc/fedcausal-result.json: cannot write in the "
                                    "folder /proc (")  # fmt: skip


def test_sample_checks_its_out_folder_first(tmp_path, capsys, read_only, monkeypatch):
    import fedcausal_flwr.data.specs as specs

    def never(*args, **kwargs):
        raise AssertionError("sampled before the check")

    monkeypatch.setattr(specs, "sample_partition", never)
    (tmp_path / "file").write_text("x")
    sample = ["sample", "--network", "asia", "--samples", "500", "--clients", "2", "--out"]
    for folder, why in [
        (read_only / "s", f"cannot write in the folder {read_only} (permission denied)"),
        (tmp_path / "file", f"{tmp_path}/file is a file, not a folder"),
        (tmp_path / "file" / "s", f"{tmp_path}/file is a file, not a folder"),
    ]:
        code, out, err = cli(capsys, *sample, str(folder))
        assert (code, out) == (2, "")
        assert one_line(err) == f"--out {folder}: {why}"


def test_export_checks_its_out_file_first(sites, tmp_path, capsys, read_only):
    result = str(sites / "r.json")
    code, out, err = cli(capsys, "export", result, "--format", "dot", "--out", str(read_only))
    assert (code, out) == (2, "")
    assert one_line(err) == f"--out {read_only}: {read_only} is a folder, not a file"
    target = read_only / "g.dot"
    code, out, err = cli(capsys, "export", result, "--format", "dot", "--out", str(target))
    assert (code, out) == (2, "")
    assert one_line(err) == (
        f"--out {target}: cannot write in the folder {read_only} (permission denied)"
    )


def test_export_default_out_is_named_as_the_default(tmp_path, capsys, read_only, sites):
    (read_only / "r.json").write_bytes((sites / "r.json").read_bytes())
    code, out, err = cli(capsys, "export", str(read_only / "r.json"), "--format", "gml")
    assert (code, out) == (2, "")
    assert one_line(err) == (
        f"--out {read_only}/r.gml (the default): cannot write in the folder {read_only} "
        "(permission denied)"
    )


def test_report_checks_its_page_first(tmp_path, capsys, read_only, monkeypatch):
    import fedcausal_flwr.report as report

    def never(*args, **kwargs):
        raise AssertionError("built before the check")

    monkeypatch.setattr(report, "build_report", never)
    (tmp_path / "study" / "report.html").mkdir(parents=True)
    code, out, err = cli(capsys, "report", str(tmp_path / "study"))
    assert (code, out) == (2, "")
    assert one_line(err) == (
        f"report {tmp_path}/study: {tmp_path}/study/report.html is a folder, not a file"
    )
    code, out, err = cli(capsys, "report", str(read_only))
    assert (code, out) == (2, "")
    assert one_line(err) == (
        f"report {read_only}: cannot write in the folder {read_only} (permission denied)"
    )


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["up", "--sites", "{s}/site0.csv", "--workdir", "{t}/file"],
         "--workdir {t}/file: {t}/file is a file, not a folder"),
        (["credentials", "--out", "{ro}/creds", "--host", "localhost", "--sites", "a"],
         "--out {ro}/creds: cannot write in the folder {ro} (permission denied)"),
        (["keys", "--site", "a", "--out", "{t}/file/keys"],
         "--out {t}/file/keys: {t}/file is a file, not a folder"),
        (["roster", "{t}/a.pub", "--out", "{t}"], "--out {t}: {t} is a folder, not a file"),
    ],
)  # fmt: skip
def test_federation_checks_what_it_writes_before_it_starts(
    sites, tmp_path, capsys, read_only, monkeypatch, argv, expected
):
    import fedcausal_flwr.federation.deployment.localhost as localhost

    def never(*args, **kwargs):
        raise AssertionError("started before the check")

    monkeypatch.setattr(localhost, "federation_command", never)
    (tmp_path / "file").write_text("x")
    names = {"s": sites, "t": tmp_path, "ro": read_only}
    code, out, err = cli(capsys, "federation", *[a.format(**names) for a in argv])
    assert (code, out) == (2, "")
    assert one_line(err) == expected.format(**names)


def test_experiment_checks_its_out_folder_first(tmp_path, capsys, monkeypatch):
    import fedcausal_flwr.experiments_registry as registry

    def never(*args, **kwargs):
        raise AssertionError("ran before the check")

    monkeypatch.setattr(registry, "run_experiment", never)
    (tmp_path / "file").write_text("x")
    code, out, err = cli(capsys, "experiment", "fedc2sl-sachs", "--quick", "--out",
                         str(tmp_path / "file"))  # fmt: skip
    assert (code, out) == (2, "")
    assert one_line(err) == f"--out {tmp_path}/file: {tmp_path}/file is a file, not a folder"


# ------------------------------------------------------------------ a write that fails later


@pytest.mark.parametrize(
    "code,why",
    [
        (errno.ENOSPC, "no space left on the device"),
        (errno.EDQUOT, "disk quota exceeded"),
        (errno.EFBIG, "file too large: over the file size limit, ulimit -f"),
        (errno.EACCES, "permission denied"),
    ],
)
def test_a_run_whose_result_cannot_be_written_still_prints_its_graph(
    tmp_path, capsys, monkeypatch, code, why
):
    failing_replace(monkeypatch, code, "result.json")
    out_file = tmp_path / "result.json"
    exit_code, out, err = cli(capsys, *RUN, "--out", str(out_file))
    assert exit_code == 1
    assert graph_printed(out) and "result written" not in out
    assert one_line(err) == f"--out {out_file}: the result was not written ({why})"
    assert list(tmp_path.iterdir()) == []  # no half file, no temporary file


def test_a_scored_result_that_cannot_be_written_leaves_the_unscored_one(
    tmp_path, capsys, monkeypatch
):
    failing_replace(monkeypatch, errno.ENOSPC, "result.json", calls=[None])
    out_file = tmp_path / "result.json"
    exit_code, out, err = cli(capsys, *RUN, "--out", str(out_file))
    assert exit_code == 1 and graph_printed(out)
    assert one_line(err) == (
        f"--out {out_file}: the result was not written (no space left on the device); "
        f"{out_file} holds it unscored"
    )
    assert Result.load(out_file).metrics == {}  # the run is kept, unscored


def test_a_drawing_that_cannot_be_written_is_told_after_the_graph(tmp_path, capsys, monkeypatch):
    import fedcausal_flwr.plots as plots

    def full(graph, truth, path, **kwargs):
        Path(path).write_bytes(b"\x89PNG cut short")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(plots, "plot_graph_vs_truth", full)
    drawing, out_file = tmp_path / "g.png", tmp_path / "result.json"
    code, out, err = cli(capsys, *RUN, "--draw", str(drawing), "--out", str(out_file))
    assert code == 1 and graph_printed(out)
    assert "graph drawn" not in out and "result written" in out
    assert one_line(err) == f"--draw {drawing}: the graph was not written (no space left on the " \
        "device)"  # fmt: skip
    assert not drawing.exists()  # a cut-short picture is removed
    assert Result.load(out_file).metrics["shd"] >= 0


def test_a_run_over_the_file_size_limit_prints_its_graph_and_one_line(tmp_path):
    """A real ``ulimit -f``: the JSON is larger than the limit, the run's output is not."""
    command = f"ulimit -f 1; {CLI} {shlex.join(RUN)} --out result.json"
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert graph_printed(done.stdout)
    assert one_line(done.stderr) == (
        "--out result.json: the result was not written (file too large: over the file size "
        "limit, ulimit -f)"
    )
    assert list(tmp_path.iterdir()) == []


def test_sample_export_report_tell_a_failed_write_in_one_line(sites, tmp_path, capsys, monkeypatch):
    import pandas as pd

    import fedcausal_flwr.report as report

    def full(self, path, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    with monkeypatch.context() as patch:
        patch.setattr(pd.DataFrame, "to_csv", full)
        code, out, err = cli(capsys, "sample", "--network", "asia", "--samples", "500",
                             "--clients", "2", "--out", str(tmp_path / "s"))  # fmt: skip
    assert code == 1
    assert one_line(err) == (
        f"--out {tmp_path}/s: the sample was not written (no space left on the device)"
    )
    assert list((tmp_path / "s").iterdir()) == []  # no temporary file left
    target = tmp_path / "g.dot"
    target.write_text("earlier")
    failing_replace(monkeypatch, errno.EDQUOT, "g.dot")
    code, out, err = cli(capsys, "export", str(sites / "r.json"), "--format", "dot", "--out",
                         str(target))  # fmt: skip
    assert (code, out) == (1, "")
    assert one_line(err) == f"--out {target}: the dot file was not written (disk quota exceeded)"
    assert target.read_text() == "earlier"  # never half a file
    monkeypatch.setattr(report, "build_report", lambda folder, title=None: "<html></html>")
    failing_replace(monkeypatch, errno.EFBIG, "report.html")
    code, out, err = cli(capsys, "report", str(tmp_path))
    assert (code, out) == (1, "")
    assert one_line(err) == (
        f"report {tmp_path}: {tmp_path}/report.html was not written (file too large: over the "
        "file size limit, ulimit -f)"
    )


def test_result_save_names_the_path_and_keeps_the_result(tmp_path, monkeypatch):
    result = fedcausal_flwr.run("fedpc", network="asia", samples=500, clients=2)
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    for target, why in [
        (tmp_path / "folder", "it is a folder"),
        (tmp_path / "file" / "r.json", "a part of its path is a file, not a folder"),
    ]:
        with pytest.raises(OutputError) as caught:
            result.save(target)
        assert str(caught.value) == f"{target} was not written: {why}"
        assert caught.value.result is result and caught.value.path == target
    (tmp_path / "r.json").write_text("earlier")
    failing_replace(monkeypatch, errno.ENOSPC, "r.json")
    with pytest.raises(OSError) as caught:  # an OSError, as before
        result.save(tmp_path / "r.json")
    assert str(caught.value) == f"{tmp_path}/r.json was not written: no space left on the device"
    assert caught.value.errno == errno.ENOSPC
    assert (tmp_path / "r.json").read_text() == "earlier"
    copy = pickle.loads(pickle.dumps(caught.value))  # crosses a process pool as it is
    assert str(copy) == str(caught.value) and copy.result.graph == result.graph


# ------------------------------------------------------------------ a closed stdout


def test_a_closed_stdout_ends_quietly(tmp_path):
    """No reader (``| head`` done before the first line): no traceback, no "Exception
    ignored" message, exit 141; for ``run`` and a command that prints all at the end."""
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "fedcausal_flwr.cli", *argv],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for argv in ([*RUN, "--out", "r.json"], ["methods", "--markdown"])
    ]
    for child in children:
        child.stdout.close()  # before the child's first line
    for child in children:
        _, err = child.communicate(timeout=120)
        assert (child.returncode, err) == (141, ""), child.args


def test_a_reader_that_stops_after_two_lines_loses_no_result(tmp_path, capsys, monkeypatch):
    class Head:
        """stdout whose reader leaves after two lines, as ``| head -2``."""

        def __init__(self) -> None:
            self.text = ""

        def write(self, text: str) -> int:
            if self.text.count("\n") >= 2:
                raise BrokenPipeError(errno.EPIPE, "Broken pipe")
            self.text += text
            return len(text)

        def flush(self) -> None:
            pass

    head = Head()
    monkeypatch.setattr(sys, "stdout", head)
    out_file = tmp_path / "result.json"
    assert main([*RUN, "--out", str(out_file)]) == 141
    first, second = head.text.splitlines()[:2]
    assert first.startswith("running fedpc") and second.startswith("fedpc: CPDAG")
    assert capsys.readouterr().err == ""
    assert Result.load(out_file).metrics["shd"] >= 0  # scored and written before the summary


# ------------------------------------------------------------------ unreadable input files


@pytest.fixture
def unreadable(monkeypatch):
    """``site0.csv`` and ``r.json`` cannot be read (permission denied, as for a user)."""
    real_bytes, real_text = Path.read_bytes, Path.read_text

    def deny(path: Path) -> None:
        if path.name in ("site0.csv", "r.json"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    def read_bytes(self):
        deny(self)
        return real_bytes(self)

    def read_text(self, *args, **kwargs):
        deny(self)
        return real_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    monkeypatch.setattr(Path, "read_text", read_text)


def test_an_unreadable_input_file_is_one_line_naming_it(sites, capsys, unreadable):
    data = [str(sites / "site0.csv"), str(sites / "site1.csv")]
    code, out, err = cli(capsys, "run", "--method", "fedpc", "--data", *data)
    assert (code, out) == (2, "")
    assert one_line(err) == "client 0 (site0.csv) cannot be read (permission denied)"
    code, out, err = cli(capsys, "citest", "--data", *data, "--x", "asia", "--y", "tub")
    assert (code, out) == (2, "")
    assert one_line(err) == "client 0 (site0.csv) cannot be read (permission denied)"
    for argv in (["run", "--config", str(sites / "r.json")],
                 ["export", str(sites / "r.json"), "--format", "dot"]):  # fmt: skip
        code, out, err = cli(capsys, *argv)
        assert (code, out) == (2, "")
        assert one_line(err) == f"{sites}/r.json: permission denied"
    with pytest.raises(InputError, match=r"^client 0 \(site0.csv\) cannot be read \(perm"):
        fedcausal_flwr.run("fedpc", data=data)


def test_a_folder_given_as_an_input_file_is_one_line_naming_it(sites, tmp_path, capsys):
    data = [str(sites / "site0.csv"), str(sites / "site1.csv")]
    code, out, err = cli(capsys, "run", "--method", "fedpc", "--data", *data, "--truth",
                         str(tmp_path))  # fmt: skip
    assert code == 2 and "learned" not in out
    assert one_line(err) == f"--truth {tmp_path}: cannot be read (it is a folder)"
    code, out, err = cli(capsys, "run", "--method", "fedpc", "--data", data[0], str(tmp_path))
    assert (code, out) == (2, "")
    assert one_line(err) == f"client 1 ({tmp_path.name}) is a directory, not a CSV file"
    with pytest.raises(ValueError, match=r"^truth='.*': cannot be read \(it is a folder\)$"):
        fedcausal_flwr.run("fedpc", data=data, truth=tmp_path)
