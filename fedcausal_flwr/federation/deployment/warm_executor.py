"""``fedcausal-executor``: a warm app executor for a SuperNode (or a SuperLink) in process
isolation.

``flower-supernode --isolation process`` runs no ClientApp itself: a separately started executor
claims each task (one per message) from the SuperNode's Runtime API and runs it. Flower's own
(``flower-superexec``, which a SuperNode in the default ``subprocess`` isolation starts for itself)
starts a fresh ``flwr-clientapp`` process per task: a Python start, Flower's import and the app's
imports, about 1.5-2.5 s of CPU for every message. This executor imports Flower's ClientApp
runtime, numpy, pandas and this project's ClientApp, method and client modules once, then forks a
child per task. The child runs the task with Flower's own ``run_clientapp`` (what
``flwr-clientapp --token ...`` runs; :func:`~.flower_internals.run_clientapp_task`) and exits.
Each child is a copy of the warm parent, so nothing one task does reaches the next (as with a
fresh process); only the imports are shared.

``--app serverapp`` does the same for the coordinator: beside ``flower-superlink --isolation
process`` it claims the SuperLink's ServerApp tasks (one per run) and runs each with Flower's own
``run_serverapp`` (what ``flwr-serverapp --token ...`` runs; :func:`~.flower_internals.
run_serverapp_task`) in a forked child, the run's output mirrored to its log stream. A fresh
``flwr-serverapp`` imports the whole SuperLink (about 2 s) before it loads the app; the
coordinator's bundle is installed and its ServerApp loaded as Flower does (the coordinator's
own), only with runtime dependency installation off.

The site runs only its installed package: every task runs the installed
``fedcausal_flwr.flwr_app:client_app``, and a bundle that carries anything but
this project's manifest (or names other components) is refused with a typed refusal, logged in
the site's audit log (:func:`~fedcausal_flwr.federation.runtime.clientside.installed_client_app`).
The bundle is never installed or imported: with Flower's own executor a bundle carrying a
``fedcausal_flwr`` folder would shadow the installed package.

Built from Flower's pieces: tasks are claimed with Flower's Runtime API client and its
``AcquireTask`` request, with the interceptors ``flower-superexec`` uses, and run by Flower's
``run_clientapp``. Flower's own SuperExec loop cannot be reused as it is: it builds its executor
from a fixed list (a subprocess or a Kubernetes pod per task; its warm pools serve other task types
on Kubernetes only). Every Flower name outside its public API used here is in
:mod:`~.flower_internals`, checked against the installed Flower when the executor starts.

One executor per SuperNode, on its machine, pointed at the SuperNode's Runtime API (its
``--port``; 9094 by default)::

    flower-supernode --insecure --superlink <coordinator>:9092 --isolation process --port 9094 \\
        --node-config "partition-id=0 data-path='/data/site0.csv'"
    fedcausal-executor --insecure --runtime-api-address 127.0.0.1:9094

and, on the coordinator's machine, one beside the SuperLink (its Runtime API is its ``--port``;
``--root-certificates`` its CA when it serves TLS)::

    flower-superlink --isolation process --disable-runtime-dependency-installation ...
    fedcausal-executor --app serverapp --root-certificates ca.crt --runtime-api-address \
        127.0.0.1:8000

``--root-certificates`` (a Runtime API served with TLS) and ``--superexec-auth-secret-file`` work
as for ``flower-superexec``. ``--parent-pid`` ends the executor when that process (e.g. the
SuperNode) ends. Runtime dependency installation is always off. Linux/macOS only (``fork``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence

import fedcausal_flwr.environment  # noqa: F401 - NO_PHONING_OUT is set before Flower is imported
from fedcausal_flwr.federation.core import registry
from fedcausal_flwr.federation.deployment.wake_fifo import WakeFifo
from fedcausal_flwr.federation.runtime import flower_internals

#: the line (after "fedcausal-executor: ") saying the imports are done and tasks are claimed
READY = "ready:"
DEFAULT_POLL_INTERVAL = 0.05  # seconds between claims while idle
DEFAULT_PULL_BACKOFF = 0.02  # seconds before re-pulling message objects not yet there
REAP_INTERVAL = 0.05  # seconds between looks while a child runs


def builtin_method_modules() -> list[str]:
    """Full names of every built-in method module (from the package's metadata) and every
    client module, listed without importing any of them: what :func:`preload` imports once, in
    advance, where a run imports only its method's (``registry.get_method``)."""
    import pkgutil

    from fedcausal_flwr import clients

    methods = sorted(set(registry.builtin_method_map().values()))
    return methods + [
        f"{clients.__name__}.{info.name}" for info in pkgutil.iter_modules(clients.__path__)
    ]


class Stop(Exception):
    """SIGTERM / SIGINT (or the watched parent ended): stop claiming, end the children."""


def preload(extra: Sequence[str] = (), app: str = "clientapp") -> list[str]:
    """Import, once, what a task of this project's ``app`` (``clientapp`` or ``serverapp``)
    needs; the modules imported.

    Flower's runtime of that app, numpy, pandas and scipy.stats, the app module
    ``pyproject.toml`` names (``fedcausal_flwr.flwr_app``), every built-in method module and
    client module (:func:`builtin_method_modules`: a task of any method then imports nothing),
    then the ``extra`` modules (e.g. plugins registering more methods)."""
    flower_internals.preload_app_runtime(app)
    names = [
        "numpy",
        "pandas",
        "scipy.stats",  # imported where p-values are computed (e.g. a client's local test)
        "fedcausal_flwr.flwr_app",
        "fedcausal_flwr.data.csv_input",  # a message whose site cache has no entry reads the CSV
        "fedcausal_flwr.data.specs",
        *builtin_method_modules(),
        *extra,
    ]
    for name in names:
        importlib.import_module(name)
    return names


class WarmExecutor:
    """Claims app tasks from ``source`` and runs each in a forked child.

    ``source.acquire()`` returns ``(token, task id)`` or None; ``run_task(token)`` runs one task
    in the calling process and returns its exit code (the child's)."""

    def __init__(
        self,
        source: flower_internals.AppTaskSource,
        run_task: Callable[[str], int],
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        log: Callable[[str], None] | None = None,
        verbose: bool = False,
        wake_fifo: WakeFifo | None = None,
    ):
        self.source = source
        self.run_task = run_task
        self.poll_interval = float(poll_interval)
        self.wake_fifo = wake_fifo
        self.children: dict[int, tuple[int, float]] = {}  # pid -> (task id, start time)
        self.tasks = 0
        self.verbose = bool(verbose)
        self.log = log or (lambda line: print(f"fedcausal-executor: {line}", flush=True))

    def serve(self) -> None:
        """Claim and launch until :class:`Stop`; then end the children still running."""
        try:
            while True:
                self.reap()
                claimed = self.source.acquire()
                if claimed is None:
                    # while a child runs, look often enough to collect it when it ends (a
                    # woken executor's own looks are otherwise seconds apart)
                    running = min(self.poll_interval, REAP_INTERVAL)
                    self.idle(running if self.children else self.poll_interval)
                    continue
                self.launch(*claimed)
        except Stop:
            pass
        finally:
            self.end_children()
            self.source.close()
            if self.wake_fifo is not None:
                self.wake_fifo.close()

    def idle(self, seconds: float) -> None:
        """Wait ``seconds`` before the next claim, or less if the SuperNode wakes us."""
        if self.wake_fifo is None:
            time.sleep(seconds)
        else:
            self.wake_fifo.wait(seconds)

    def launch(self, token: str, task_id: int) -> int:
        """Fork a child running the task; its PID."""
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: run the task, never return into the parent's loop
            code = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                code = self.run_task(token)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        self.children[pid] = (task_id, time.perf_counter())
        self.tasks += 1
        return pid

    def reap(self) -> None:
        """Collect finished children (their failures are logged; Flower reports the task)."""
        for pid in list(self.children):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 0
            if done:
                task_id, started = self.children.pop(pid)
                code = os.waitstatus_to_exitcode(status)
                took = time.perf_counter() - started
                if code != 0:
                    self.log(
                        f"task {task_id} (pid {pid}) exited with code {code} after {took:.2f} s"
                    )
                elif self.verbose:
                    self.log(f"task {task_id} (pid {pid}) done in {took:.2f} s")

    def end_children(self, grace: float = 3.0) -> None:
        """SIGTERM the running children (Flower's task runner then reports them), SIGKILL what
        is left after ``grace`` seconds."""
        for pid in self.children:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while self.children and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.05)
        for pid in self.children:
            _signal(pid, signal.SIGKILL)
        for pid in list(self.children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self.children.clear()


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _raise_stop(signum: int, frame: object) -> None:
    raise Stop(signal.Signals(signum).name)


def watch_parent(pid: int, interval: float = 0.2) -> threading.Thread:
    """SIGTERM this process once process ``pid`` is gone (``--parent-pid``). The thread only
    sleeps and probes, so it holds no lock a forked child could inherit."""

    def watch() -> None:
        while True:
            time.sleep(interval)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os.kill(os.getpid(), signal.SIGTERM)
                return
            except PermissionError:
                pass

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fedcausal-executor",
        description="A warm app executor for a Flower SuperNode (or, --app serverapp, a "
        "SuperLink) started with --isolation process: imports once, forks a child per task.",
    )
    p.add_argument(
        "--app",
        choices=sorted(flower_internals.APP_RUNTIMES),
        default="clientapp",
        help="the tasks to run: a SuperNode's ClientApp tasks (default) or a SuperLink's "
        "ServerApp tasks",
    )
    p.add_argument(
        "--runtime-api-address",
        required=True,
        help="the SuperNode's Runtime API, host:port (its --port; 9094 by default); with "
        "--app serverapp the SuperLink's (its --port; 8000 by default)",
    )
    p.add_argument("--insecure", action="store_true", help="the Runtime API is served without TLS")
    p.add_argument(
        "--root-certificates",
        metavar="ROOT_CERT",
        help="PEM file of the CA that signed the Runtime API's TLS certificate",
    )
    flower_internals.add_superexec_auth_args(p)
    p.add_argument(
        "--parent-pid",
        type=int,
        default=None,
        help="exit when this process (e.g. the SuperNode) ends",
    )
    p.add_argument(
        "--poll-interval",
        type=float,
        default=DEFAULT_POLL_INTERVAL,
        help=f"seconds between task claims while idle (default {DEFAULT_POLL_INTERVAL})",
    )
    p.add_argument(
        "--pull-backoff",
        type=float,
        default=None,
        help="seconds before a ClientApp task re-pulls message objects the SuperNode does not "
        f"have yet (Flower: 1 s; default {DEFAULT_PULL_BACKOFF})",
    )
    p.add_argument(
        "--wake-fifo",
        metavar="PATH",
        default=None,
        help="named pipe (created if absent, removed at exit) that the SuperNode, started as "
        "fedcausal-supernode with the same --wake-fifo, writes to when a message arrives: the "
        "task is claimed at once, and --poll-interval only bounds a missed wake-up",
    )
    p.add_argument("--verbose", action="store_true", help="log every task and how long it took")
    p.add_argument(
        "--preload",
        default="",
        help="comma-separated modules to import once more (e.g. the plugins of your runs)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.insecure and args.root_certificates:
        parser().error("--insecure and --root-certificates exclude each other")
    if args.app == "serverapp" and args.pull_backoff is not None:
        parser().error("--pull-backoff is a ClientApp task's: it does not apply to --app serverapp")
    if args.app == "serverapp" and args.wake_fifo is not None:
        parser().error("--wake-fifo is a SuperNode's: it does not apply to --app serverapp")
    pull_backoff = DEFAULT_PULL_BACKOFF if args.pull_backoff is None else args.pull_backoff
    started = time.perf_counter()
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    try:
        modules = preload([m.strip() for m in args.preload.split(",") if m.strip()], args.app)
        source = flower_internals.AppTaskSource(
            args.runtime_api_address,
            insecure=args.insecure,
            root_certificates_path=args.root_certificates,
            superexec_auth_secret=flower_internals.load_superexec_secret(
                args.superexec_auth_secret_file
            ),
            app=args.app,
        )
    except Stop:
        return
    executor_pid = os.getpid()

    from fedcausal_flwr.federation.runtime.clientside import installed_client_app

    def run_task(token: str) -> int:
        task = {
            "insecure": args.insecure,
            "root_certificates_path": args.root_certificates,
            "parent_pid": executor_pid,
        }
        if args.app == "serverapp":
            return flower_internals.run_serverapp_task(args.runtime_api_address, token, **task)
        return flower_internals.run_clientapp_task(
            args.runtime_api_address,
            token,
            **task,
            pull_backoff=pull_backoff,
            pinned_app=installed_client_app,
        )

    try:
        wake_fifo = None if args.wake_fifo is None else WakeFifo(args.wake_fifo)
    except (OSError, ValueError) as error:
        source.close()
        sys.exit(f"fedcausal-executor: --wake-fifo {args.wake_fifo}: {error}")
    executor = WarmExecutor(
        source, run_task, args.poll_interval, verbose=args.verbose, wake_fifo=wake_fifo
    )
    woken = "" if wake_fifo is None else f" and when woken through {args.wake_fifo}"
    executor.log(
        f"{READY} {len(modules)} modules imported in {time.perf_counter() - started:.1f} s; "
        f"claiming {args.app} tasks from {args.runtime_api_address} every {args.poll_interval:g} s"
        f"{woken}"
    )
    if args.parent_pid is not None:
        watch_parent(args.parent_pid)
    executor.serve()
    executor.log(f"stopped after {executor.tasks} tasks")


if __name__ == "__main__":  # pragma: no cover
    main()
