"""A real deployment on 127.0.0.1: SuperLink + 3 SuperNodes (one CSV each) + ``flwr run``.

The tuned set-up (``fedcausal-supernode --isolation process`` + ``fedcausal-executor`` per site,
which keeps these tests fast) runs FedPC, refuses a run-config key the app does not declare, then
runs FedPC again with one site killed after the hello round (a real dropout); the stock set-up
(docs/deployment.md's ``flower-supernode`` commands) runs FedPC once; both give the in-process
result. docs/flwr-run.md's ``flwr run . local`` commands run on Flower's default local
simulation. Every process started (and everything it starts) has Flower's update check and
runtime dependency installation off. The tuned SuperNode refuses a Flower whose loop it was not
written for, and the warm executor runs each task in a forked child.

The SuperLink/SuperNode subprocesses import the installed package; the FAB built from this repo's
pyproject.toml carries only the app manifest (staged in a directory with a valid app name, since
``flwr run`` validates the directory name and CI may clone the repo under any name). Every process
started here is ended by PID.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fedcausal_flwr
from fedcausal_flwr.data import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.discovery.pc import pc
from fedcausal_flwr.federation.core.messages import FederationError
from fedcausal_flwr.federation.deployment import tuned_supernode
from fedcausal_flwr.federation.deployment.local_deployment import (
    NO_PHONING_OUT,
    LocalDeployment,
    free_port,
)
from fedcausal_flwr.federation.deployment.warm_executor import Stop, WarmExecutor
from fedcausal_flwr.federation.runtime import flower_internals
from fedcausal_flwr.processes import (
    alive,
    descendants,
    end_processes,
    process_environment,
    processes_with_env,
)
from fedcausal_flwr.result import Result
from fedcausal_flwr.stats.oracles import DiscreteOracle

REPO_ROOT = Path(__file__).resolve().parents[1]
#: A round waits this long for replies in the dropout run (a dead SuperNode never replies; the
#: SuperLink itself only notices it after 2 missed 30 s heartbeats). Generous for a loaded
#: 2-core machine, where a round of the tuned set-up's live nodes takes 1-7 s.
DROPOUT_ROUND_TIMEOUT = 20.0


def pooled_pc(frames: list[pd.DataFrame]):
    """Pooled PC (chi2, alpha 0.05) on the union of ``frames``."""
    union = pd.concat(frames, ignore_index=True)
    levels = {v: sorted(union[v].unique()) for v in union.columns}
    codes = np.column_stack([np.searchsorted(levels[v], union[v]) for v in union.columns])
    cards = [len(levels[v]) for v in union.columns]
    return pc(DiscreteOracle(codes, cards, list(union.columns), test="chi2"), alpha=0.05)


class KillWhenLogged(threading.Thread):
    """Kills a site (its SuperNode and executor processes and every descendant, SIGKILL, by PID)
    as soon as the SuperNode's log, from ``offset`` on, shows ``pattern``: e.g. the moment it
    receives the message of round 2, before the ClientApp task it creates for it can answer (the
    reply would go through the SuperNode, which is gone)."""

    def __init__(
        self, procs: list[subprocess.Popen], log: Path, pattern: str, timeout: float = 240.0
    ):
        super().__init__(daemon=True)
        self.procs, self.log, self.pattern, self.timeout = procs, log, re.compile(pattern), timeout
        self.offset = log.stat().st_size if log.exists() else 0
        self.killed: list[int] = []
        self.done = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout
        while not self.done.is_set() and time.monotonic() < deadline:
            with open(self.log, "rb") as f:
                f.seek(self.offset)
                text = f.read().decode(errors="replace")
            if self.pattern.search(text):
                pids = [p for proc in self.procs for p in (proc.pid, *descendants(proc.pid))]
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                for proc in self.procs:
                    proc.wait(timeout=10)
                self.killed = pids
                return
            time.sleep(0.01)


def write_sites(tmp_path: Path, rows: int = 3_000) -> list[Path]:
    """Three sites' CSVs: an iid split of ``rows`` asia samples."""
    pooled = load_network("asia").sample(rows, seed=11)
    data_dir = tmp_path / "sites"
    data_dir.mkdir()
    paths = []
    for k, site in enumerate(split_iid(pooled, 3, seed=0).clients):
        paths.append(data_dir / f"site{k}.csv")
        site.to_csv(paths[-1], index=False)
    return paths


def stage_app(tmp_path: Path) -> Path:
    app_dir = tmp_path / "fedcausal-app"
    app_dir.mkdir()
    shutil.copy(REPO_ROOT / "pyproject.toml", app_dir / "pyproject.toml")
    return app_dir


def assert_nothing_phones_out(deployment: LocalDeployment) -> int:
    """Every process the deployment started was given NO_PHONING_OUT (the environment passed to
    Popen), and every one still running, and everything it started (SuperExec, ServerApp,
    ClientApp processes, forked task children), has it in /proc/<pid>/environ; the number of
    live processes checked. Call it once the processes have run (not right after Popen, when
    /proc may still show the forking parent's environment)."""
    started = [proc.pid for proc in deployment.processes]
    assert set(started) <= set(deployment.environments)
    for pid in started:
        env = deployment.environments[pid]
        assert {k: env.get(k) for k in NO_PHONING_OUT} == NO_PHONING_OUT, pid
    live = [p for pid in started for p in (pid, *descendants(pid)) if alive(p)]
    for pid in live:
        env = process_environment(pid)
        if env:  # {}: it ended meanwhile
            assert {k: env.get(k) for k in NO_PHONING_OUT} == NO_PHONING_OUT, (pid, env)
    return len(live)


@pytest.mark.slow
def test_deployment_runs_fedpc_and_cleans_up(tmp_path):
    """The tuned set-up: FedPC equal to in-process, a refused key, a real dropout. (Method options
    through the run config's `options` key, taking effect: every module in
    tests/test_deploy_secure.py's BREADTH.)"""
    paths = write_sites(tmp_path)
    frames = [pd.read_csv(p) for p in paths]
    app_dir = stage_app(tmp_path)
    # plain FedPC (its tables per site, and a dropout the run survives): the sites allow it
    nodes = [{"partition-id": k, "data-path": str(p), "allow-plain-statistics": True}
             for k, p in enumerate(paths)]  # fmt: skip
    deployment = LocalDeployment(tmp_path / "deploy", nodes, tuned=True, tls=False, auth=False)
    try:
        deployment.start()
        result = deployment.run(
            app_dir,
            {"method": "fedpc", "options": "alpha=0.05", "num-clients": 3},
            timeout=170,
        )
        # nothing we started (nor anything it started) may phone out; 3 SuperNodes, 3 executors,
        # the SuperLink and what it runs are up
        assert assert_nothing_phones_out(deployment) >= 7
        # a key the app does not declare is refused by the SuperLink itself ...
        with pytest.raises(FederationError, match="Key 'ratio' is not present"):
            deployment.run(app_dir, {"method": "fedlcs", "ratio": 1.0}, timeout=60)
        # (method options travel in the declared `options` key instead)
        # a real dropout: site 1 (its SuperNode and its executor) dies when its SuperNode
        # receives round 2 (after hello)
        node1 = next(p for p in deployment.processes if str(deployment.workdir / "node1.toml")
                     in p.args)  # fmt: skip
        executor1 = next(p for p in deployment.processes if "--parent-pid" in p.args and
                         p.args[p.args.index("--parent-pid") + 1] == str(node1.pid))  # fmt: skip
        site1 = [node1, executor1]
        killer = KillWhenLogged(site1, deployment.workdir / "supernode1.log", r"ROUND 2\]")
        killer.start()
        started = time.perf_counter()
        try:
            dropout = deployment.run(
                app_dir,
                {"method": "fedpc", "options": "alpha=0.05", "num-clients": 3, "min-clients": 2,
                 "round-timeout": DROPOUT_ROUND_TIMEOUT},
                timeout=240,
            )  # fmt: skip
        finally:
            killer.done.set()
            killer.join()
        dropout_s = time.perf_counter() - started
    finally:
        deployment.stop()

    # each run's ServerApp ran in a child forked by the coordinator's warm executor (the refused
    # run never became a task), not in a fresh flwr-serverapp process
    served = (deployment.workdir / "executor-serverapp.log").read_text()
    assert len(re.findall(r"task \d+ \(pid \d+\) done in", served)) == 2, served
    # each site's SuperNode wakes its executor through their named pipe (test_wake_fifo.py)
    for k in range(3):
        pipe = deployment.workdir / f"node{k}.wake"
        said = (deployment.workdir / f"supernode{k}.log").read_text()
        assert f"wakes its executor through {pipe}" in said
        assert f"when woken through {pipe}" in (deployment.workdir / f"executor{k}.log").read_text()
    # each site read its own CSV: the answer is pooled PC on the union of the three files, and
    # the in-process run's on the same rows
    reference = pooled_pc(frames)
    local = fedcausal_flwr.run("fedpc", data=frames, alpha=0.05)
    assert result.method == "fedpc"
    assert result.graph == reference.graph == local.graph
    assert result.rounds == local.rounds <= result.extra["depths_searched"] + 2
    assert result.config["data"]["fingerprint"] == local.config["data"]["fingerprint"]
    assert result.dropped_clients == []
    assert result.config["options"]["alpha"] == 0.05 and result.config["run"]["num_clients"] == 3

    # the killed site is dropped in round 2 (its first tables request) and the run finishes on
    # the other two: pooled PC on their files, since site 1 sent nothing but its hello report
    print(f"\ndeployment dropout run: {dropout_s:.1f} s")
    assert killer.killed and node1.returncode == -signal.SIGKILL
    assert [(d["client"], d["round"], d["action"]) for d in dropout.dropped_clients] == [
        (1, 2, "tables")
    ], dropout.dropped_clients
    assert dropout.dropped_clients[0]["reason"] == f"no reply within {DROPOUT_ROUND_TIMEOUT} s"
    steps = [(e["action"], e["status"], e["n_clients"]) for e in dropout.log]
    assert steps[:3] == [("hello", "ok", 3), ("tables", "dropout", 3), ("tables", "ok", 2)]
    assert all(e["n_clients"] == 2 for e in dropout.log[2:])
    assert all(e["n_clients"] == 2 for e in dropout.ledger if e["round"] > 2)
    assert dropout.config["run"]["min_clients"] == 2
    assert dropout.graph == pooled_pc([frames[0], frames[2]]).graph
    # every process we started (and everything it spawned) is gone
    assert deployment.stopped_pids
    assert not [p for p in deployment.stopped_pids if alive(p)]
    assert not any(descendants(p) for p in deployment.stopped_pids if alive(p))


@pytest.mark.slow
def test_stock_deployment_runs_fedpc(tmp_path):
    """docs/deployment.md's commands (flower-supernode in its default subprocess isolation, which
    starts flower-superexec and a flwr-clientapp per message): the in-process result, and none of
    those processes phones out. (Depth 0 only: two rounds, each a fresh process per message and
    site; deeper rounds are the same messages, which the tuned set-up runs.)"""
    paths = write_sites(tmp_path, rows=1_500)
    frames = [pd.read_csv(p) for p in paths]
    app_dir = stage_app(tmp_path)
    # plain FedPC (a secure round is four messages, each a fresh process here): sites allow it
    nodes = [{"partition-id": k, "data-path": str(p), "allow-plain-statistics": True}
             for k, p in enumerate(paths)]  # fmt: skip
    deployment = LocalDeployment(tmp_path / "deploy", nodes, tls=False, auth=False)
    try:
        deployment.start()
        result = deployment.run(
            app_dir, {"method": "fedpc", "options": "max-depth=0", "num-clients": 3}, timeout=170
        )
        # SuperLink, 3 SuperNodes and the flower-superexec each of them started are up
        assert assert_nothing_phones_out(deployment) >= 7
    finally:
        deployment.stop()
    assert not [p for p in deployment.stopped_pids if alive(p)]
    local = fedcausal_flwr.run("fedpc", data=frames, max_depth=0)
    assert result.graph == local.graph and result.rounds == local.rounds == 2
    assert result.config["data"]["fingerprint"] == local.config["data"]["fingerprint"]


def test_the_tuned_supernode_refuses_a_flower_loop_it_was_not_written_for(monkeypatch, capsys):
    """fedcausal-supernode checks the SuperNode loop's source before it changes anything: on a
    loop whose idle sleep is not the 3 s it was written for, it exits with a message saying what
    differs, and neither patches the loop nor starts a SuperNode."""
    import inspect

    loop = __import__(flower_internals.SUPERNODE_LOOP_MODULE, fromlist=["_"])
    real_getsource = inspect.getsource

    def other_flower(obj):
        source = real_getsource(obj)
        return source.replace("time.sleep(3)", "time.sleep(idle)") if obj is loop else source

    started = []
    monkeypatch.setattr(inspect, "getsource", other_flower)
    monkeypatch.setattr(flower_internals, "run_flower_supernode", lambda: started.append(1))
    monkeypatch.setattr(loop, "time", loop.time)
    monkeypatch.setattr(loop, "pull_objects", loop.pull_objects)
    with pytest.raises(SystemExit) as stop:
        tuned_supernode.main(["--insecure", "--superlink", "127.0.0.1:1"])
    message = str(stop.value.code)
    assert message.startswith("fedcausal-supernode: flwr.supernode.start_client_internal")
    assert "is not the SuperNode loop this tuning was written for" in message
    assert "'time.sleep(3)' 0x (expected 1x)" in message
    assert started == [] and loop.time is time


def test_the_tuned_supernode_refuses_a_missing_or_invalid_key_before_flower_starts(
    tmp_path, monkeypatch
):
    """A wrong --auth-supernode-private-key / --root-certificates path is one line naming the
    option and the file, not Flower's traceback; Flower's SuperNode is never started."""
    started = []
    monkeypatch.setattr(flower_internals, "run_flower_supernode", lambda: started.append(1))
    junk = tmp_path / "junk"
    junk.write_text("not a key")
    cases = [
        (["--auth-supernode-private-key", str(tmp_path / "absent")], "does not exist"),
        ([f"--auth-supernode-private-key={junk}"], "is not an unencrypted OpenSSH private key"),
        (["--root-certificates", str(junk)], "is not a PEM certificate"),
    ]
    for arguments, problem in cases:
        with pytest.raises(SystemExit) as stop:
            tuned_supernode.main(["--superlink", "127.0.0.1:1", *arguments])
        message = str(stop.value.code)
        option = arguments[0].split("=")[0]
        assert message.startswith(f"fedcausal-supernode: {option}: ") and problem in message
    assert started == []


def test_the_tuned_supernode_changes_only_its_loops_waits(monkeypatch):
    """On Flower 1.42's loop: that module's 3 s and 0.5 s sleeps and its object-pull backoff are
    replaced; any other sleep there, and ``time`` everywhere else, is untouched."""
    loop = __import__(flower_internals.SUPERNODE_LOOP_MODULE, fromlist=["_"])
    monkeypatch.setattr(loop, "time", loop.time)
    monkeypatch.setattr(loop, "pull_objects", loop.pull_objects)
    started = []
    monkeypatch.setattr(flower_internals, "run_flower_supernode", lambda: started.append(1))
    tuned_supernode.main(["--insecure", "--idle-poll", "0.25", "--reply-wait", "0.03"])
    assert started == [1]
    assert loop.time is not time and loop.time.waits == {3.0: 0.25, 0.5: 0.03}
    assert loop.time.monotonic is time.monotonic
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)
    loop.time.sleep(3)
    loop.time.sleep(0.5)
    loop.time.sleep(1)
    assert slept == [0.25, 0.03, 1]
    assert loop.pull_objects.keywords == {"initial_backoff": 0.02, "backoff_cap": 0.5}


class ListedTasks:
    """A task source handing out ``tokens`` once each, then stopping the executor when every
    child has been collected."""

    def __init__(self, tokens: list[str]):
        self.tokens = list(tokens)
        self.executor: WarmExecutor | None = None
        self.closed = False

    def acquire(self):
        if self.tokens:
            return self.tokens.pop(0), 100 + len(self.tokens)
        if self.executor is not None and not self.executor.children:
            raise Stop("done")
        return None

    def close(self):
        self.closed = True


def test_the_warm_executor_runs_each_task_in_a_forked_child(tmp_path):
    """Each task runs in its own child (a copy of the warm parent: what a task changes stays in
    it), failures are logged with their exit code, and the parent keeps claiming."""
    marker = {"value": "parent"}
    out = tmp_path / "tasks"
    out.mkdir()

    def run_task(token: str) -> int:
        (out / token).write_text(f"{os.getpid()} {marker['value']}")
        marker["value"] = token  # in the child only
        return 3 if token == "bad" else 0

    lines: list[str] = []
    source = ListedTasks(["a", "bad", "c"])
    executor = WarmExecutor(source, run_task, poll_interval=0.01, log=lines.append)  # type: ignore[arg-type]
    source.executor = executor
    executor.serve()
    written = {p.name: p.read_text().split() for p in out.iterdir()}
    assert sorted(written) == ["a", "bad", "c"]
    pids = {int(pid) for pid, _ in written.values()}
    assert len(pids) == 3 and os.getpid() not in pids
    assert all(seen == "parent" for _, seen in written.values())
    assert marker["value"] == "parent" and executor.tasks == 3 and source.closed
    assert len(lines) == 1 and "exited with code 3" in lines[0], lines


def test_the_warm_executor_takes_its_app_and_refuses_what_does_not_apply(capsys):
    """``--app`` picks the tasks claimed (a SuperNode's ClientApp tasks or a SuperLink's
    ServerApp tasks); an option of the other app's is refused, not ignored."""
    from fedcausal_flwr.federation.deployment import warm_executor

    for argv, problem in [
        (["--app", "serverapp", "--pull-backoff", "0.1"], "--pull-backoff is a ClientApp task's"),
        (["--app", "superexec"], "invalid choice: 'superexec'"),
    ]:
        with pytest.raises(SystemExit):
            warm_executor.main(["--insecure", "--runtime-api-address", "127.0.0.1:1", *argv])
        assert problem in capsys.readouterr().err, argv
    with pytest.raises(ValueError, match="app must be one of"):
        flower_internals.AppTaskSource("127.0.0.1:1", insecure=True, app="model")
    assert set(flower_internals.APP_RUNTIMES) == {"clientapp", "serverapp"}
    flower_internals.preload_app_runtime("serverapp")  # Flower has what the executor runs


@pytest.mark.slow
def test_flwr_run_on_flowers_default_local_simulation_as_the_page_says(tmp_path):
    """docs/flwr-run.md's commands, as written there, as a Flower user first types them: the
    `local` connection starts a simulation SuperLink with 2 SuperNodes; the app runs with the
    nodes that are there (FedPC: the in-process result on the same sample), and a method's
    options reach it through the run config's `options` key (FedLCS on alarm)."""
    from tests.test_doc_blocks import commands, page_blocks

    page = REPO_ROOT / "docs" / "flwr-run.md"
    [block] = [text for _, kind, _, text in page_blocks(page) if kind.endswith(
        "::test_flwr_run_on_flowers_default_local_simulation_as_the_page_says")]  # fmt: skip
    app_dir = tmp_path / "fedcausal-app"
    app_dir.mkdir()
    shutil.copy(REPO_ROOT / "pyproject.toml", app_dir / "pyproject.toml")
    home, results = tmp_path / "flwr_home", tmp_path / "coordinator-results"
    env = {
        **os.environ,
        **NO_PHONING_OUT,
        "FLWR_HOME": str(home),  # a fresh home: Flower writes its default config.toml there
        "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(free_port()),
        "FLWR_LOCAL_CONTROL_API_PORT": str(free_port()),
        "FEDCAUSAL_RESULTS_DIR": str(results),
    }
    outputs = []
    try:
        for command in commands(block):
            done = subprocess.run(
                ["bash", "-c", command], cwd=app_dir, env=env, capture_output=True, text=True,
                timeout=200,
            )  # fmt: skip
            outputs.append(done.stdout + done.stderr)
            assert done.returncode == 0, outputs[-1][-3000:]
    finally:
        spawned = processes_with_env("FLWR_HOME", str(home))
        ended = end_processes(spawned)
    assert spawned, "flwr run started no local SuperLink"
    assert not [p for p in ended if alive(p)]
    assert len(outputs) == 2
    assert "2 SuperNode(s) connected; running with all of them" in outputs[0], outputs[0][-3000:]
    fedpc = Result.load(results / "fedpc-asia.json")
    assert fedpc.method == "fedpc" and fedpc.config["data"]["clients"] == 2
    assert fedpc.config["data"]["network"] == "asia"
    reference = fedcausal_flwr.run("fedpc", network="asia", samples=10_000, clients=2)
    assert fedpc.graph == reference.graph  # the simulated sites split the sample as run() does
    lcs = Result.load(results / "fedlcs-alarm.json")
    assert lcs.method == "fedlcs" and lcs.extra["target"] == "HR"
    assert lcs.config["options"]["ratio"] == 0.5 and "shd" in lcs.metrics


def test_a_deployment_serverapp_pulls_replies_with_a_short_backoff(monkeypatch):
    """Only Flower's deployment Grid module gets the shorter object-pull backoff, only once, and
    not at all when its source is not the one the tuning was written for."""
    import inspect

    grid_module = __import__(flower_internals.GRID_MODULE, fromlist=["_"])
    flower_pull = grid_module.pull_objects
    monkeypatch.setattr(grid_module, "pull_objects", flower_pull)

    class OtherGrid:
        pass

    class DeploymentGrid:
        pass

    DeploymentGrid.__module__ = flower_internals.GRID_MODULE
    assert flower_internals.tune_grid_reply_pulls(OtherGrid()) is None
    assert grid_module.pull_objects is flower_pull
    real_getsource = inspect.getsource
    monkeypatch.setattr(
        inspect,
        "getsource",
        lambda obj: real_getsource(obj).replace("pull_objects(", "pull_objects_with_retries("),
    )
    reason = flower_internals.tune_grid_reply_pulls(DeploymentGrid())
    assert reason is not None and "is not the Grid this tuning was written for" in reason
    assert grid_module.pull_objects is flower_pull
    monkeypatch.setattr(inspect, "getsource", real_getsource)
    assert flower_internals.tune_grid_reply_pulls(DeploymentGrid()) is None
    tuned = grid_module.pull_objects
    assert tuned.func is flower_pull
    assert tuned.keywords == {"initial_backoff": 0.02, "backoff_cap": 0.5}
    assert flower_internals.tune_grid_reply_pulls(DeploymentGrid()) is None
    assert grid_module.pull_objects is tuned  # not wrapped twice
