"""A real Flower deployment on 127.0.0.1: SuperLink + one SuperNode per site + ``flwr run``.

For smoke tests and demos of the deployment path (``flower-superlink --insecure``, one
``flower-supernode`` per site with its own ``--node-config`` TOML holding ``partition-id`` and
``data-path``, and ``flwr run <app> <federation>`` with ``FLWR_HOME`` inside the work dir). Every
process started here, and every process they spawn, is ended by PID when the deployment stops.
Expect about 6 s per protocol round: the SuperNode polls every 3 s and starts a fresh
``flwr-clientapp`` process per message.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import tomli_w

from fedcausal_flwr.environment import NO_PHONING_OUT  # set for every process started here
from fedcausal_flwr.federation.messages import FederationError
from fedcausal_flwr.result import Result

FEDERATION = "local-deployment"


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc; Linux)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # field 4 (ppid) follows the parenthesised command name
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def descendants(pid: int) -> list[int]:
    """All processes below ``pid``."""
    found, frontier = [], [pid]
    while frontier:
        kids = [c for p in frontier for c in _children(p)]
        found.extend(kids)
        frontier = kids
    return found


def process_environment(pid: int) -> dict[str, str]:
    """The environment a process was started with (from /proc; Linux), {} if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def processes_with_env(key: str, value: str) -> list[int]:
    """PIDs of live processes started with ``key=value`` in their environment (e.g. the detached
    local SuperLink that ``flwr run`` starts for Flower's default local simulation, found by the
    ``FLWR_HOME`` it inherited)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and process_environment(int(entry.name)).get(key) == value:
            found.append(int(entry.name))
    return sorted(found)


def end_processes(
    pids: Sequence[int], grace: float = 3.0, reap: Callable[[], object] | None = None
) -> list[int]:
    """SIGTERM ``pids`` and their descendants, SIGKILL what is left after ``grace`` seconds
    (descendants spawned meanwhile included); ``reap`` is called while waiting (e.g. to collect
    our own children's exit codes). Returns every PID signalled."""
    everything = [*pids, *(c for p in pids for c in descendants(p))]
    for pid in everything:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(p) for p in everything):
        if reap is not None:
            reap()
        time.sleep(0.1)
    # SuperExec children may have been spawned after the first sweep: look again.
    everything += [c for p in pids for c in descendants(p)]
    for pid in everything:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return sorted(set(everything))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[-1].startswith("Z"))


def write_toml(path: Path, values: Mapping[str, Any]) -> Path:
    path.write_text(tomli_w.dumps(dict(values)))
    return path


class LocalDeployment:
    """SuperLink + SuperNodes on loopback, each site with its own node config (see module doc).

    ``node_configs[k]`` is site k's ``--node-config`` (e.g. ``{"partition-id": k, "data-path":
    "/data/site-k.csv"}``). ``env`` adds environment variables for every process (e.g.
    ``PYTHONPATH`` so the apps can import plugin modules).
    """

    def __init__(
        self,
        workdir: str | os.PathLike,
        node_configs: Sequence[Mapping[str, Any]],
        *,
        env: Mapping[str, str] | None = None,
        startup_timeout: float = 60.0,
    ):
        self.workdir = Path(workdir).resolve()
        self.node_configs = [dict(c) for c in node_configs]
        self.startup_timeout = float(startup_timeout)
        self.flwr_home = self.workdir / "flwr_home"
        self.port = 0
        self.processes: list[subprocess.Popen] = []
        self._log_files: list = []
        self.env = dict(os.environ)
        self.env.update(
            {
                "FLWR_HOME": str(self.flwr_home),
                "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.1",
                **NO_PHONING_OUT,
            }
        )
        self.env.update(env or {})
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> LocalDeployment:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, args: list[str], log_name: str, env: Mapping[str, str]) -> subprocess.Popen:
        exe = shutil.which(args[0], path=env.get("PATH"))
        if exe is None:
            raise FileNotFoundError(f"{args[0]!r} not found on PATH; is flwr installed?")
        log = open(self.workdir / log_name, "w")  # noqa: SIM115 - closed in stop()
        self._log_files.append(log)
        proc = subprocess.Popen(
            [exe, *args[1:]],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
        )
        self.processes.append(proc)
        return proc

    def start(self) -> None:
        """Start the SuperLink, wait for its health endpoint, then start the SuperNodes."""
        start = time.perf_counter()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.flwr_home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        link = self._spawn(
            [
                "flower-superlink",
                "--insecure",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--database",
                str(self.workdir / "state.db"),
                "--disable-runtime-dependency-installation",
            ],
            "superlink.log",
            self.env,
        )
        self._wait_healthy(link)
        write_toml(
            self.flwr_home / "config.toml",
            {
                "superlink": {
                    "default": FEDERATION,
                    FEDERATION: {"address": f"127.0.0.1:{self.port}", "insecure": True},
                }
            },
        )
        for k, node_config in enumerate(self.node_configs):
            home = self.workdir / f"node{k}_home"
            home.mkdir(exist_ok=True)
            config_file = write_toml(self.workdir / f"node{k}.toml", node_config)
            self._spawn(
                [
                    "flower-supernode",
                    "--insecure",
                    "--superlink",
                    f"127.0.0.1:{self.port}",
                    "--port",
                    str(free_port()),
                    "--node-config",
                    str(config_file),
                ],
                f"supernode{k}.log",
                {**self.env, "FLWR_HOME": str(home)},
            )
        self.timings["start_s"] = time.perf_counter() - start

    def _wait_healthy(self, link: subprocess.Popen) -> None:
        deadline = time.monotonic() + self.startup_timeout
        url = f"http://127.0.0.1:{self.port}/health"
        while time.monotonic() < deadline:
            if link.poll() is not None:
                raise FederationError(
                    f"flower-superlink exited with code {link.returncode}:\n"
                    + self.log_tail("superlink.log")
                )
            try:
                with urllib.request.urlopen(url, timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise FederationError(
            f"SuperLink not healthy after {self.startup_timeout:g} s:\n"
            + self.log_tail("superlink.log")
        )

    def stop(self, grace: float = 3.0) -> None:
        """End every process started here and all their descendants, by PID."""
        pids = end_processes(
            [proc.pid for proc in self.processes],
            grace,
            reap=lambda: [proc.poll() for proc in self.processes],
        )
        for proc in self.processes:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.stopped_pids = pids
        for log in self._log_files:
            log.close()
        self.processes, self._log_files = [], []

    # ------------------------------------------------------------------ running
    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.workdir / name
        if not path.exists():
            return f"({name} missing)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def run(
        self, app_dir: str | os.PathLike, run_config: Mapping[str, Any], timeout: float = 300.0
    ) -> Result:
        """``flwr run app_dir`` against this deployment; the Result the ServerApp wrote."""
        result_path = self.workdir / "result.json"
        result_path.unlink(missing_ok=True)
        config = {**dict(run_config), "result-path": str(result_path)}
        config.setdefault("num-clients", len(self.node_configs))
        config_file = write_toml(self.workdir / "run_config.toml", config)
        start = time.perf_counter()
        with open(self.workdir / "flwr_run.log", "w") as log:
            cli = subprocess.Popen(
                [
                    shutil.which("flwr", path=self.env.get("PATH")) or "flwr",
                    "run",
                    str(Path(app_dir).resolve()),
                    FEDERATION,
                    "--stream",
                    "--run-config",
                    str(config_file),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
            )
            self.processes.append(cli)
            try:
                code = cli.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                raise FederationError(
                    f"flwr run did not finish within {timeout:g} s:\n"
                    + self.log_tail("flwr_run.log")
                ) from None
        self.timings["run_s"] = time.perf_counter() - start
        if not result_path.exists():
            raise FederationError(
                f"flwr run exited with code {code} and wrote no result:\n"
                + self.log_tail("flwr_run.log")
                + "\n--- superlink.log ---\n"
                + self.log_tail("superlink.log")
            )
        return Result.load(result_path)
