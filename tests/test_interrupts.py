"""Ctrl-C and SIGTERM: one line on stderr, exit 130 / 143 within 5 s, no process of the run left,
no half-written file; and a finished run is saved before it is scored."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from fedcausal_flwr.processes import descendants, processes_with_env

MARK = "FEDCAUSAL_INTERRUPT_TEST"
#: a run of a minute or more whose rounds (GLM fits over alarm) each take a second or two, so the
#: first round shown (past the 2 s mark) comes early and the signal lands inside a round
LONG_RUN = ["--method", "fedci-pc", "--network", "alarm", "--samples", "2000", "--clients", "4"]


class Command:
    """``fedcausal-flwr ARGS`` in its own session, stderr read line by line as it comes."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.mark = uuid.uuid4().hex
        environment = {**os.environ, MARK: self.mark, **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fedcausal_flwr.cli", *args],
            cwd=cwd,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))
            self.lines.put(line)

    def wait_for(self, pattern: str, timeout: float = 60.0) -> str:
        """The first stderr line matching ``pattern``; fails after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                assert self.proc.poll() is None, f"ended early: {self.stderr}"
                continue
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no line matching {pattern!r} in {timeout} s: {self.stderr}")

    def interrupt(self, signum: int) -> tuple[int, float, set[int]]:
        """Send ``signum`` to the main process only; its exit code, seconds to exit, and the
        processes it had (and those started for it) just before."""
        before = set(descendants(self.proc.pid)) | set(self.live())
        started = time.monotonic()
        os.kill(self.proc.pid, signum)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"still running 20 s after {signum}: {self.stderr}") from None
        elapsed = time.monotonic() - started
        self._reader.join(timeout=5)
        return self.proc.returncode, elapsed, before - {self.proc.pid}

    def live(self) -> list[int]:
        """Processes started for this command (its environment mark), zombies excluded."""
        return [p for p in processes_with_env(MARK, self.mark) if _running(p)]

    def end(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for pid in self.live():
            os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return not stat[stat.rfind(")") + 2 :].startswith(("Z", "X"))


def _assert_nothing_left(command: Command, children: set[int]) -> None:
    deadline = time.monotonic() + 2.0  # SIGKILL is delivered asynchronously
    while time.monotonic() < deadline and (command.live() or any(_running(p) for p in children)):
        time.sleep(0.1)
    assert not [p for p in children if _running(p)], "a child process outlived the run"
    assert not command.live(), "a process started for the run outlived it"


@pytest.fixture
def command(tmp_path):
    started: list[Command] = []

    def start(args: list[str], **kwargs) -> Command:
        started.append(Command(args, tmp_path, **kwargs))
        return started[-1]

    yield start
    for c in started:
        c.end()


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_run_interrupted_in_process(command, tmp_path, signum, code):
    run = command(["run", *LONG_RUN, "--progress", "--no-edges", "--out", "result.json"])
    done = int(run.wait_for(r"^  round \d+: ").split()[1].rstrip(":"))  # quick rounds are not shown
    rc, elapsed, children = run.interrupt(signum)
    assert rc == code
    assert elapsed < 5
    assert run.stderr[-1] == f"fedcausal-flwr: interrupted in round {done + 1}; nothing saved"
    assert not [line for line in run.stderr if "Traceback" in line]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no result, no temporary file
    _assert_nothing_left(run, children)


@pytest.mark.slow
def test_compare_interrupted_keeps_finished_runs_and_resumes(command, tmp_path):
    args = ["compare", "--methods", "fedpc", "--networks", "alarm", "--clients", "2-7",
            "--samples", "3000", "--jobs", "2", "--out", "study", "--no-plots"]  # fmt: skip
    sweep = command([*args, "--progress"])
    sweep.wait_for(r"1/6 runs")
    rc, elapsed, children = sweep.interrupt(signal.SIGINT)
    assert rc == 130
    assert elapsed < 5
    kept = sorted((tmp_path / "study" / "runs").iterdir())
    assert all(p.suffix == ".json" for p in kept)  # whole records only
    assert 1 <= len(kept) < 6
    line = sweep.stderr[-1]
    assert re.fullmatch(
        rf"compare: interrupted; {len(kept)} finished runs? kept in study, run again to resume",
        line,
    ), sweep.stderr
    assert not [line for line in sweep.stderr if "Traceback" in line]
    _assert_nothing_left(sweep, children)

    again = command(args)
    assert again.proc.wait(timeout=120) == 0, again.stderr
    assert again.proc.stdout is not None
    assert f"{len(kept)} already done" in again.proc.stdout.read()


@pytest.mark.slow
def test_ray_run_interrupted_after_its_first_round(command, tmp_path):
    # conftest's RAY_TMPDIR as it is: it is as short as Ray's socket paths allow (a folder
    # below it could be too long, depending on pytest's numbering)
    ray_tmp = Path(os.environ.get("RAY_TMPDIR", tmp_path))
    spilled_before = set(ray_tmp.glob("fedcausal-*"))
    args = ["run", *LONG_RUN, "--backend", "ray", "--progress", "--no-edges", "--out", "r.json"]
    run = command(args, env={"RAY_TMPDIR": str(ray_tmp)})
    done = int(run.wait_for(r"^  round \d+: ", timeout=120).split()[1].rstrip(":"))
    rc, elapsed, children = run.interrupt(signal.SIGINT)
    assert rc == 130, run.stderr[-20:]  # (what the command said instead of being interrupted)
    assert elapsed < 5
    assert run.stderr[-1] == f"fedcausal-flwr: interrupted in round {done + 1}; nothing saved"
    assert not (tmp_path / "r.json").exists()
    assert not list(tmp_path.glob(".r.json.tmp*"))
    left = set(ray_tmp.glob("fedcausal-*")) - spilled_before
    assert not left, "the spilled client data was left behind"
    assert children, "Ray started no process?"
    _assert_nothing_left(run, children)


def test_run_saves_the_result_before_scoring_it(tmp_path, monkeypatch, capsys):
    from fedcausal_flwr import api
    from fedcausal_flwr.cli import main
    from fedcausal_flwr.result import Result

    def broken(result, dag):
        raise ValueError("the truth cannot be scored")

    monkeypatch.setattr(api, "score_result", broken)
    out = tmp_path / "result.json"
    args = ["run", "--method", "fedpc", "--network", "asia", "--samples", "500", "--clients", "2"]
    assert main([*args, "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the truth cannot be scored" in err[0] and str(out) in err[0]
    saved = Result.load(out)
    assert saved.method == "fedpc" and saved.graph is not None and not saved.metrics


def test_run_writes_its_result_once_unless_scoring_changed_it(tmp_path, monkeypatch):
    """A run from files (nothing to score) writes its file once, before the summary; a sampled
    run is scored after the first write, so its file is written again, with the metrics."""
    from fedcausal_flwr import interrupts
    from fedcausal_flwr.cli import main
    from fedcausal_flwr.data import load_network
    from fedcausal_flwr.result import Result

    writes: list[Path] = []
    save = interrupts.save_result

    def counted(result, out):
        writes.append(Path(out))
        return save(result, out)

    monkeypatch.setattr(interrupts, "save_result", counted)
    frame = load_network("asia").sample(600, seed=1)
    files = []
    for k, part in enumerate((frame.iloc[:300], frame.iloc[300:])):
        files.append(tmp_path / f"site{k}.csv")
        part.to_csv(files[-1], index=False)
    out = tmp_path / "files.json"
    assert main(["run", "--method", "fedpc", "--data", *map(str, files), "--out", str(out)]) == 0
    assert writes == [out] and Result.load(out).metrics == {}
    writes.clear()
    scored = tmp_path / "sampled.json"
    args = ["run", "--method", "fedpc", "--network", "asia", "--samples", "500", "--clients", "2"]
    assert main([*args, "--out", str(scored)]) == 0
    assert writes == [scored, scored] and "shd" in Result.load(scored).metrics


def test_compare_records_a_scoring_failure_with_the_run(monkeypatch):
    from fedcausal_flwr import api
    from fedcausal_flwr.study_runs import RunSpec, execute_run

    def broken(result, dag):
        raise ValueError("the truth cannot be scored")

    monkeypatch.setattr(api, "score_result", broken)
    record = execute_run(RunSpec("fedpc", "asia", 500, 2, "iid", 0))
    assert record["status"] == "failed"
    assert record["error"] == "scoring failed: ValueError: the truth cannot be scored"
    assert record["result"] is not None and record["result"]["method"] == "fedpc"


def test_a_long_round_says_it_is_still_running():
    from fedcausal_flwr.federation.runtime.workflow import Heartbeat

    lines: list[str] = []
    beat = Heartbeat(lines.append, every=0.3)
    beat.begin(3, "glm")
    time.sleep(1.2)
    beat.stop()
    assert lines and all(line.startswith("round 3 still running: glm, ") for line in lines)
    assert len(lines) <= 4


def test_the_interrupt_line_says_where_a_run_was():
    from fedcausal_flwr.interrupts import RunState

    state = RunState(None)
    assert state.interrupted().endswith("before the run started; nothing saved")
    state.started = True
    for line in ("starting Ray ...", "round 1: hello (2 of 2 clients) 0.1 s"):
        state(line)
    assert state.interrupted() == "fedcausal-flwr: interrupted in round 2; nothing saved"
    state("round 2 still running: glm, 10 s so far")
    assert state.interrupted() == "fedcausal-flwr: interrupted in round 2; nothing saved"
