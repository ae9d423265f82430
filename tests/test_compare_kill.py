"""``compare`` loses no finished run and leaves no process: killed with SIGKILL at random moments
its workers and the pool's resource tracker end by themselves and a rerun resumes; ``--out`` is
checked before any run; a write that fails after the runs (a full disk) keeps the runs and the
table and says in one line what was not written."""

from __future__ import annotations

import errno
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

import fedcausal_flwr.compare as compare_module
import fedcausal_flwr.plots as plots_module
from fedcausal_flwr.cli import main
from fedcausal_flwr.compare import compare
from fedcausal_flwr.outputs import reason
from fedcausal_flwr.processes import descendants, processes_with_env

MARK = "FEDCAUSAL_COMPARE_KILL_TEST"
SWEEP = dict(methods=["fedpc", "pc-vote"], networks=["asia"], samples=300, clients=[2],
             seeds=[0, 1, 2, 3])  # fmt: skip
ARGS = ["compare", "--methods", "fedpc,pc-vote", "--networks", "asia", "--samples", "300",
        "--clients", "2", "--seeds", "0-3", "--no-plots"]  # fmt: skip
N_RUNS = 8
#: the columns two sweeps of the same runs agree on (the wall time differs)
SAME = ["key", "method", "seed", "status", "shd", "adj_f1", "arrow_f1", "rounds", "data_hash"]
#: seconds a killed sweep's processes have to end by themselves
ORPHAN_S = 5.0
#: a note or warning about a run's data, on stderr beside the line a test looks at
NOTE = re.compile(r"fedcausal-flwr: (note|warning): column ")


# ============================================================================ processes
def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of a process from /proc, None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[0], fields[19]


def _running_since(pid: int) -> str | None:
    """The start time of a running process; None once it ended (a zombie has ended)."""
    stat = _stat(pid)
    return None if stat is None or stat[0] in "ZX" else stat[1]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


class Sweep:
    """``fedcausal-flwr compare ... --jobs 2`` in its own session, marked in its environment;
    every process below it is noted (with its start time: a PID may be reused) while it runs."""

    def __init__(self, out: Path) -> None:
        self.out, self.mark = out, uuid.uuid4().hex
        self.log = (out.parent / f"{out.name}.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fedcausal_flwr.cli", *ARGS, "--jobs", "2", "--out", str(out)],
            env={**os.environ, MARK: self.mark, "FLWR_TELEMETRY_ENABLED": "0"},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.started = time.monotonic()
        self.seen: dict[int, str] = {}  # pid -> start time
        self.workers_seen: list[float] = []  # seconds since the start a worker was seen at

    def watch(self, until: float) -> None:
        """Note the processes below the sweep every 20 ms until ``until`` (monotonic) or its end."""
        while time.monotonic() < until and self.proc.poll() is None:
            self.note()
            time.sleep(0.02)
        self.note()

    def note(self) -> None:
        for pid in descendants(self.proc.pid):
            stat = _stat(pid)
            if stat is not None:
                self.seen.setdefault(pid, stat[1])
                if "spawn_main" in _cmdline(pid):
                    self.workers_seen.append(time.monotonic() - self.started)

    def workers_now(self) -> int:
        return sum("spawn_main" in _cmdline(p) for p in descendants(self.proc.pid))

    def left(self) -> list[str]:
        """What still runs of this sweep: a process seen below it (the same one, not a reused
        PID), one started with its environment mark, or one naming its folder; zombies ended."""
        pids = {p for p, start in self.seen.items() if _running_since(p) == start}
        pids |= set(processes_with_env(MARK, self.mark))
        pids |= {int(e.name) for e in Path("/proc").iterdir()
                 if e.name.isdigit() and str(self.out) in _cmdline(int(e.name))}  # fmt: skip
        running = [p for p in pids if _running_since(p) is not None]
        return [f"{p}: {_cmdline(p)[:120]}" for p in sorted(running)]

    def end(self) -> None:
        """End by PID whatever is left (a failing test leaves nothing running)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for line in self.left():
            try:
                os.kill(int(line.split(":")[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()


def _intact(out: Path) -> pd.DataFrame:
    """results.csv parses, one whole row per run, no duplicates; returned sorted by key."""
    frame = pd.read_csv(out / "results.csv")
    assert not frame["key"].duplicated().any(), "a run has two rows"
    assert not frame[SAME].isna().any().any(), "a half row"
    return frame.sort_values("key").reset_index(drop=True)


#: a process pool as compare starts it, its workers busy for a minute, then it waits to be killed
POOL = """
import os, sys, time
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from fedcausal_flwr.interrupts import sweep_worker_init

method = sys.argv[1]
parent = None if method == "forkserver" else os.getpid()
pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(method),
                           initializer=sweep_worker_init, initargs=(parent,))
workers = {pool.submit(os.getpid).result() for _ in range(8)}
busy = [pool.submit(time.sleep, 60) for _ in range(2)]
print(*workers, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_pool_workers_end_with_their_killed_parent(tmp_path, method):
    """The workers of a parent killed with SIGKILL, busy in a run, end by themselves within
    5 s, and so do the resource tracker and the fork server."""
    mark = uuid.uuid4().hex
    proc = subprocess.Popen(
        [sys.executable, "-c", POOL, method],
        env={**os.environ, MARK: mark},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        workers = {int(pid) for pid in proc.stdout.readline().split()}
        below = {p: _running_since(p) for p in descendants(proc.pid)}
        assert workers and workers <= set(below), (workers, below)
        proc.kill()
        proc.wait()
        killed = time.monotonic()

        def left() -> list[int]:
            alive = {p for p, start in below.items() if _running_since(p) == start}
            return sorted(alive | set(processes_with_env(MARK, mark)))

        while left() and time.monotonic() - killed < ORPHAN_S:
            time.sleep(0.05)
        assert not left(), [_cmdline(p) for p in left()]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in processes_with_env(MARK, mark):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.slow
def test_a_killed_sweep_leaves_no_process_and_a_rerun_resumes(tmp_path):
    """Five SIGKILLs at seeded random moments of a ``--jobs 2`` sweep, one in each fifth of the
    time an uninterrupted sweep took to the end of its pool (what follows, the tables and the
    report, runs in the main process alone): 5 s later nothing of it runs (workers, resource
    tracker), and a rerun in the same folder finishes with the uninterrupted sweep's results.
    CI kills at fixed moments; set ``FEDCAUSAL_KILL_SEED`` to draw others."""
    reference = Sweep(tmp_path / "reference")
    try:
        reference.watch(time.monotonic() + 180)
        assert reference.proc.poll() == 0, (tmp_path / "reference.log").read_text()
    finally:
        reference.end()
    assert reference.workers_seen, "the sweep ran no worker process"
    expected = _intact(tmp_path / "reference")
    assert len(expected) == N_RUNS and (expected["status"] == "ok").all()

    rng = random.Random(int(os.environ.get("FEDCAUSAL_KILL_SEED", "20240917")))
    window = reference.workers_seen[-1] + 0.5  # the pool's end, and a little after
    moments = [window * (i + rng.random()) / 5 for i in range(5)]
    killed_workers = 0
    for i, moment in enumerate(moments):
        out = tmp_path / f"killed{i}"
        sweep = Sweep(out)
        try:
            sweep.watch(sweep.started + moment)
            workers = sweep.workers_now()
            sweep.proc.send_signal(signal.SIGKILL)
            sweep.proc.wait()
            killed = time.monotonic()
            killed_workers += workers > 0
            while sweep.left() and time.monotonic() - killed < ORPHAN_S:
                time.sleep(0.1)
            assert not sweep.left(), (
                f"killed at {moment:.1f}s ({workers} workers): still running {ORPHAN_S:.0f}s "
                f"later: {sweep.left()}"
            )
        finally:
            sweep.end()
        for record in (out / "runs").glob("*.json") if (out / "runs").is_dir() else []:
            assert json.loads(record.read_text())["key"] + ".json" == record.name
        if (out / "results.csv").exists():  # written whole or not at all
            _intact(out)
        kept = len(list((out / "runs").glob("*.json"))) if (out / "runs").is_dir() else 0
        study = compare(**SWEEP, out=out, plots=False, report=False, progress=False)
        assert (study.n_skipped, study.n_run, study.n_failed) == (kept, N_RUNS - kept, 0)
        pd.testing.assert_frame_equal(_intact(out)[SAME], expected[SAME])
    # the moments covered the pool's life: at least one kill found workers running
    assert killed_workers >= 1, f"no kill hit the workers (moments {moments} of {window:.1f}s)"


# ============================================================================ --out
def _no_run(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    started: list[object] = []
    monkeypatch.setattr(compare_module, "execute_run", started.append)
    return started


def _why(code: int) -> str:
    """How the one-line messages say an errno."""
    return reason(OSError(code, os.strerror(code)))


def _one_error_line(err: str) -> str:
    """The one line an error is said in (notes about the data may come before it)."""
    lines = [line for line in err.splitlines() if not NOTE.match(line)]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_out_naming_a_file_is_refused_before_any_run(tmp_path, monkeypatch, capsys):
    started = _no_run(monkeypatch)
    target = tmp_path / "results.csv"
    target.write_text("kept\n")
    assert main([*ARGS, "--out", str(target)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"fedcausal-flwr: error: --out {target}: ")
    assert "is a file, not a folder" in line
    assert not started and target.read_text() == "kept\n"


def test_out_under_a_file_is_refused_before_any_run(tmp_path, monkeypatch, capsys):
    started = _no_run(monkeypatch)
    (tmp_path / "plain").write_text("")
    target = tmp_path / "plain" / "study"
    assert main([*ARGS, "--out", str(target)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"fedcausal-flwr: error: --out {target}: ")
    assert f"{tmp_path / 'plain'} is a file" in line
    assert not started


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES, errno.ENOSPC])
def test_out_that_cannot_be_written_is_refused_before_any_run(tmp_path, monkeypatch, capsys, code):
    """The folder exists, but a file written in it fails (tests run as root, whom a read-only
    folder does not stop: the file system's answer is what the test gives)."""
    started = _no_run(monkeypatch)
    target = tmp_path / "study"
    target.mkdir()
    real_open = Path.open

    def refusing_open(self: Path, *args, **kwargs):
        if target in self.parents and "w" in (args[0] if args else kwargs.get("mode", "r")):
            raise OSError(code, os.strerror(code), str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refusing_open)
    assert main([*ARGS, "--out", str(target)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"fedcausal-flwr: error: --out {target}: cannot write")
    assert f"({_why(code)})" in line
    assert not started and not [p for p in target.rglob("*") if p.is_file()]


def test_out_without_write_permission_is_refused_before_any_run(tmp_path, monkeypatch, capsys):
    """What the permission bits say (``os.access``; root passes them, so the test says no)."""
    started = _no_run(monkeypatch)
    target = tmp_path / "study"
    target.mkdir()
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode, **kw: Path(path) != target and real_access(path, mode)
    )
    assert main([*ARGS, "--out", str(target)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"fedcausal-flwr: error: --out {target}: ")
    assert "permission denied" in line or "read-only" in line
    assert not started


# ============================================================================ later writes
def test_a_record_that_cannot_be_written_stops_the_sweep_in_one_line(tmp_path, monkeypatch, capsys):
    """The disk fills during the sweep: the records written are kept, the sweep stops (every
    later run would be lost too) with one line, and a rerun resumes."""
    real_write = compare_module.write_record
    written: list[str] = []

    def filling(out, record):
        if len(written) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written.append(record["key"])
        return real_write(out, record)

    monkeypatch.setattr(compare_module, "write_record", filling)
    out = tmp_path / "study"
    assert main([*ARGS, "--out", str(out)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert re.fullmatch(
        rf"fedcausal-flwr: error: --out {re.escape(str(out))}: a finished run's record was not "
        rf"written \({re.escape(_why(errno.ENOSPC))}\); the sweep stops, 3 finished runs kept "
        rf"in {re.escape(str(out / 'runs'))}, run again to resume",
        line,
    ), line
    assert sorted(p.stem for p in (out / "runs").iterdir()) == sorted(written)

    monkeypatch.setattr(compare_module, "write_record", real_write)
    study = compare(**SWEEP, out=out, plots=False, report=False, progress=False)
    assert (study.n_skipped, study.n_run) == (3, N_RUNS - 3)
    assert len(_intact(out)) == N_RUNS


def test_a_plot_on_a_full_disk_keeps_the_runs_and_prints_the_table(tmp_path, monkeypatch, capsys):
    out = tmp_path / "study"
    saved: list[Path] = []

    def full_disk(fig, path):
        import matplotlib.pyplot as plt

        plt.close(fig)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(b"\x89PNG\r\n\x1a\n half an image")  # cut short by the full disk
        saved.append(Path(path))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(plots_module, "_save", full_disk)
    args = [a for a in ARGS if a != "--no-plots"]
    code = main([*args, "--out", str(out)])
    printed = capsys.readouterr()
    assert code in (0, 1)  # 1 once the command line reports failed writes as other commands do
    assert "Traceback" not in printed.err + printed.out
    assert "asia: shd (mean ± sd over seeds)" in printed.out  # the table
    assert f"{N_RUNS} runs planned: {N_RUNS} run now" in printed.out
    told = [line for line in printed.err.splitlines() if "not written" in line]
    assert len(told) == 1, printed.err
    assert re.fullmatch(
        rf"fedcausal-flwr: (warning|error): --out {re.escape(str(out))}: not written "
        rf"\({re.escape(_why(errno.ENOSPC))}\): plots; the runs are kept in "
        rf"{re.escape(str(out / 'runs'))}",
        told[0],
    ), told[0]
    assert saved and not any(p.exists() for p in saved)  # no half image left
    assert len(list((out / "runs").glob("*.json"))) == N_RUNS
    assert len(_intact(out)) == N_RUNS
    assert (out / "report.html").is_file()


def test_every_write_after_the_runs_failing_loses_no_run_and_no_table(tmp_path, monkeypatch):
    """The disk is full once the runs are done: results.csv, the summaries, study.json and the
    report are not written (the earlier results.csv stays whole), the study comes back with its
    table, and one line names them all."""
    out = tmp_path / "study"
    first = compare(**SWEEP, out=out, plots=False, report=False, progress=False)
    before = (out / "results.csv").read_bytes()
    real_open = Path.open

    def full(self: Path, mode: str = "r", *args, **kwargs):
        if "w" in mode and out in self.parents and ".tmp" in self.name:  # what is written
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", full)
    told: list[str] = []
    study = compare(**SWEEP, out=out, plots=False, progress=False, warn=told.append)
    assert (study.n_skipped, study.n_run) == (N_RUNS, 0)
    assert study.summary_text() == first.summary_text()
    assert set(study.not_written) == {
        "results.csv", "summary.csv", "summary.txt", "study.json", "report.html"
    }  # fmt: skip
    assert told == [
        f"--out {out}: not written ({_why(errno.ENOSPC)}): results.csv, summary.csv, "
        f"summary.txt, study.json, report.html; the runs are kept in {out / 'runs'}"
    ]
    assert study.report is None
    assert (out / "results.csv").read_bytes() == before
    assert not [p.name for p in out.iterdir() if ".tmp" in p.name]
