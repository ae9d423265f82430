"""A real Flower deployment on 127.0.0.1: SuperLink + one SuperNode per site + ``flwr run``.

For smoke tests and demos of the deployment path (``flower-superlink --insecure``, one
``flower-supernode`` per site with its own ``--node-config`` TOML holding ``partition-id`` and
``data-path``, and ``flwr run <app> <federation>`` with ``FLWR_HOME`` inside the work dir). Every
process started here, and every process they spawn, is ended by PID when the deployment stops.

Security (``tls``, ``auth``; :mod:`.credentials` makes the files): TLS with a generated CA and a
certificate for 127.0.0.1/localhost, and SuperNode authentication with one registered ECDSA key
per site (``flwr supernode register``). Keys and certificates are checked before any process
starts; a SuperNode refused by the SuperLink is explained by :func:`explain_supernode_failure`.
``fedcausal-flwr federation up`` (:mod:`.localhost`) starts this secure set-up for users.

Two set-ups (``tuned``):

* stock (default): the README's commands, ``flower-supernode`` in its default ``subprocess``
  isolation: the SuperNode sleeps 3 s after every empty pull from the SuperLink and Flower's
  SuperExec starts a fresh ``flwr-clientapp`` process for every message.
* tuned (``tuned=True``): each site is ``fedcausal-supernode --isolation process`` (Flower's
  SuperNode with its idle poll at 0.2 s, its reply wait at 0.02 s and its object-pull backoff at
  0.02 s, :mod:`~fedcausal_flwr.federation.deployment.tuned_supernode`) plus ``fedcausal-executor``
  (a warm ClientApp executor that forks a pre-imported child per message, :mod:`~.warm_executor`),
  watching the SuperNode's PID; the SuperLink runs in ``--isolation process`` beside
  ``fedcausal-executor --app serverapp``, which forks a pre-imported child per run (a fresh
  ``flwr-serverapp`` spends about 2 s importing the SuperLink first).

``experiments/bench_deployment.py`` measures both set-ups' seconds per round in one run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from fedcausal_flwr.environment import NO_PHONING_OUT  # set for every process started here
from fedcausal_flwr.federation.core.coordinator import RESULTS_ENV, TRUTH_ENV
from fedcausal_flwr.federation.core.messages import FederationError
from fedcausal_flwr.federation.deployment.credentials import (
    check_certificate,
    check_node_key,
    check_readable,
    write_node_key,
    write_tls_files,
)
from fedcausal_flwr.processes import end_processes
from fedcausal_flwr.result import Result

FEDERATION = "local-deployment"
#: seconds between a woken executor's own looks for tasks (a wake-up claims a task at once)
WOKEN_POLL_INTERVAL = 0.5


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_toml(path: Path, values: Mapping[str, Any]) -> Path:
    path.write_text(tomli_w.dumps(dict(values)))
    return path


@dataclass(frozen=True)
class SiteSecurity:
    """How one site of a TLS deployment is started (the defaults are the correct set-up; the
    others exist to show what a misconfigured site gets).

    ``register``: its public key is registered at the SuperLink (with ``auth``); ``key``: it is
    started with ``--auth-supernode-private-key`` (``private_key`` overrides the generated key's
    path); ``root_certificates``: it is started with ``--root-certificates`` (the CA).
    """

    register: bool = True
    key: bool = True
    root_certificates: bool = True
    private_key: str | None = None


#: Flower 1.42's SuperNode log lines for a refused connection, and what they mean for a site.
SUPERNODE_FAILURES = (
    (
        re.compile(r"\[code: 2004\]"),
        "the SuperLink refused this SuperNode's key (Flower error 2004, node activation "
        "failed): its public key is not registered. Register it at the coordinator with "
        "`flwr supernode register <key>.pub <federation>`, or start the SuperNode with the "
        "private key whose public key was registered",
    ),
    (
        re.compile(r"\[code: 2001\]"),
        "the SuperLink requires SuperNode authentication (Flower error 2001) but this "
        "SuperNode was started without a key: start it with --auth-supernode-private-key "
        "<key> (the private key whose .pub was registered)",
    ),
    (
        re.compile(r"CERTIFICATE_VERIFY_FAILED"),
        "this SuperNode could not verify the SuperLink's TLS certificate: start it with "
        "--root-certificates <ca.crt> (the CA that signed the SuperLink's certificate)",
    ),
    (
        re.compile(r"Exit Code: 303"),
        "SuperNode authentication needs TLS: start the SuperNode with --root-certificates "
        "<ca.crt> instead of --insecure",
    ),
)


def explain_supernode_failure(log_text: str) -> str | None:
    """What a SuperNode's log says went wrong when it could not join, in a site's words
    (None if the log shows none of the known refusals)."""
    for pattern, explanation in SUPERNODE_FAILURES:
        if pattern.search(log_text):
            return explanation
    return None


class LocalDeployment:
    """SuperLink + SuperNodes on loopback, each site with its own node config (see module doc).

    ``node_configs[k]`` is site k's ``--node-config`` (e.g. ``{"partition-id": k, "data-path":
    "/data/site-k.csv"}``). ``env`` adds environment variables for every process (e.g.
    ``PYTHONPATH`` so the apps can import plugin modules, or the coordinator's folders:
    ``FEDCAUSAL_RESULTS_DIR`` and ``FEDCAUSAL_TRUTH_DIR`` default to ``workdir/results`` and
    ``workdir/truth``). A site's policy keys (:mod:`.site_policy`) go in its node config, like
    its ``data-path``. ``tuned=True`` runs each site as
    ``fedcausal-supernode --isolation process`` plus a ``fedcausal-executor`` (see module doc);
    ``warm_executor=True`` with ``tuned=False`` runs Flower's own ``flower-supernode --isolation
    process`` beside a ``fedcausal-executor`` (no change to Flower at all); ``executor_args``
    are added to every executor's command line (e.g. ``["--preload", "plugin"]``).

    Secure by default: ``tls=True, auth=True``; ``tls=False, auth=False`` runs everything with
    ``--insecure`` (the tests and ``experiments/bench_deployment.py`` do, for speed). ``sign``
    (default): every site with a policy but no signing key of its own gets one, and a roster of
    those sites, so it sums through SecAgg+ only with them (:meth:`_prepare_signing_keys`).

    ``tls=True``: a CA and a SuperLink certificate for 127.0.0.1/localhost are generated in
    ``workdir/credentials`` (:mod:`.credentials`); the SuperLink serves HTTPS, every SuperNode
    and the CLI verify it with the CA. ``auth=True`` (needs TLS): SuperNode authentication; each
    site gets an ECDSA key pair, its public key registered with ``flwr supernode register``
    before the SuperNodes start. ``site_security[k]`` changes how site k is set up (tests use it
    to start misconfigured sites). A site that could not join is explained by
    :meth:`site_problem`.

    ``database``: the SuperLink's state. None (default, as in the README's command) keeps it in
    memory; a file path keeps runs and registered keys across SuperLink restarts, at a price: every
    pull from every SuperNode and from the ServerApp is then an SQLite transaction on disk
    (``experiments/bench_deployment.py --database`` measures it).
    """

    def __init__(
        self,
        workdir: str | os.PathLike,
        node_configs: Sequence[Mapping[str, Any]],
        *,
        env: Mapping[str, str] | None = None,
        startup_timeout: float = 60.0,
        tuned: bool = False,
        warm_executor: bool | None = None,
        executor_args: Sequence[str] = (),
        tls: bool = True,
        auth: bool = True,
        site_security: Sequence[SiteSecurity] | None = None,
        database: str | os.PathLike | None = None,
        sign: bool = True,
    ):
        if auth and not tls:
            raise ValueError("SuperNode authentication (auth=True) needs TLS (tls=True)")
        if site_security is not None and len(site_security) != len(node_configs):
            raise ValueError(
                f"site_security has {len(site_security)} entries for {len(node_configs)} sites"
            )
        self.tls, self.auth = bool(tls), bool(auth)
        self.site_security = list(site_security or [SiteSecurity()] * len(node_configs))
        self.credentials_dir = Path(workdir).resolve() / "credentials"
        #: SuperLink node id of each registered site (auth=True), filled by start()
        self.registered_node_ids: dict[int, int] = {}
        self.workdir = Path(workdir).resolve()
        self.node_configs = [dict(c) for c in node_configs]
        self.tuned = bool(tuned)
        self.warm_executor = self.tuned if warm_executor is None else bool(warm_executor)
        self.database = None if database is None else Path(database).resolve()
        self.executor_args = list(executor_args)
        self.sign = bool(sign)
        self.startup_timeout = float(startup_timeout)
        self.flwr_home = self.workdir / "flwr_home"
        self.port = 0
        self.processes: list[subprocess.Popen] = []
        #: the environment each process was started with, by PID (tests check NO_PHONING_OUT)
        self.environments: dict[int, dict[str, str]] = {}
        self._log_files: list = []
        self.env = dict(os.environ)
        self.env.update(
            {
                "FLWR_HOME": str(self.flwr_home),
                # Flower's SuperExec looks for tasks every 1 s by default; each look costs CPU
                # (at 0.1 s four idle SuperExecs used 0.9 CPU-s per s), so 0.5 s
                "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.5",
                **NO_PHONING_OUT,
            }
        )
        # the coordinator's folders (result-path and truth files stay inside them)
        self.env.setdefault(RESULTS_ENV, str(self.workdir / "results"))
        self.env.setdefault(TRUTH_ENV, str(self.workdir / "truth"))
        self.env.update(env or {})
        self.timings: dict[str, float] = {}

    @property
    def results_dir(self) -> Path:
        """The coordinator's results folder (``result-path`` is relative to it)."""
        return Path(self.env[RESULTS_ENV])

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
        log = open(self.workdir / log_name, "w")
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
        self.environments[proc.pid] = dict(env)
        return proc

    def start(self) -> None:
        """Start the SuperLink, wait for its health endpoint, then start the SuperNodes."""
        start = time.perf_counter()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.flwr_home.mkdir(parents=True, exist_ok=True)
        self._prepare_credentials()  # before any process: a missing file is refused here
        self._prepare_signing_keys()
        self.port = free_port()
        link = self._spawn(
            [
                "flower-superlink",
                *self._superlink_security_args(),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                *([] if self.database is None else ["--database", str(self.database)]),
                "--disable-runtime-dependency-installation",
                *(["--isolation", "process"] if self.warm_executor else []),
            ],
            "superlink.log",
            self.env,
        )
        self._wait_healthy(link)
        # each warm executor by its log's name
        executors: dict[str, subprocess.Popen] = {}
        if self.warm_executor:
            executors["executor-serverapp.log"] = self._start_serverapp_executor(link)
        write_toml(
            self.flwr_home / "config.toml",
            {
                "superlink": {
                    "default": FEDERATION,
                    FEDERATION: {"address": f"127.0.0.1:{self.port}", **self._cli_security()},
                }
            },
        )
        self._register_sites()
        for k in range(len(self.node_configs)):
            executor = self._start_site(k)
            if executor is not None:
                executors[f"executor{k}.log"] = executor
        if self.warm_executor:
            self._wait_executors_ready(executors)
        self.timings["start_s"] = time.perf_counter() - start

    def _start_site(self, k: int) -> subprocess.Popen | None:
        """Site k's SuperNode and, with warm executors, its executor (returned)."""
        home = self.workdir / f"node{k}_home"
        home.mkdir(exist_ok=True)
        config_file = write_toml(self.workdir / f"node{k}.toml", self.node_configs[k])
        runtime_port = free_port()
        site_env = {**self.env, "FLWR_HOME": str(home)}
        # the tuned SuperNode wakes its executor when a message arrives (wake_fifo): the
        # executor then only looks on its own twice a second, not 20 times
        woken = self.tuned and self.warm_executor
        wake = ["--wake-fifo", str(self.workdir / f"node{k}.wake")] if woken else []
        node = self._spawn(
            [
                "fedcausal-supernode" if self.tuned else "flower-supernode",
                *self._supernode_security_args(k),
                "--superlink",
                f"127.0.0.1:{self.port}",
                "--port",
                str(runtime_port),
                *(["--isolation", "process"] if self.warm_executor else []),
                *wake,
                "--node-config",
                str(config_file),
            ],
            f"supernode{k}.log",
            site_env,
        )
        if not self.warm_executor:
            return None
        return self._spawn(
            [
                "fedcausal-executor",
                "--insecure",
                "--runtime-api-address",
                f"127.0.0.1:{runtime_port}",
                "--parent-pid",
                str(node.pid),
                *([*wake, "--poll-interval", str(WOKEN_POLL_INTERVAL)] if wake else []),
                *self.executor_args,
            ],
            f"executor{k}.log",
            site_env,
        )

    def _start_serverapp_executor(self, link: subprocess.Popen) -> subprocess.Popen:
        """The coordinator's warm executor, running the SuperLink's ServerApp tasks (one per
        run) in forked children, watching the SuperLink's PID."""
        tls = ["--root-certificates", str(self.credentials_dir / "ca.crt")]
        return self._spawn(
            [
                "fedcausal-executor",
                "--app",
                "serverapp",
                *(tls if self.tls else ["--insecure"]),
                "--runtime-api-address",
                f"127.0.0.1:{self.port}",
                "--parent-pid",
                str(link.pid),
                "--verbose",  # a line per run (its task, child and seconds)
                # a run starts seconds after `flwr run` is typed: 0.2 s between looks keeps an
                # idle SuperLink's CPU low (nothing wakes this executor: the SuperLink is Flower's)
                "--poll-interval",
                "0.2",
            ],
            "executor-serverapp.log",
            self.env,
        )

    def _wait_executors_ready(self, executors: dict[str, subprocess.Popen]) -> None:
        """Wait until the coordinator's and every site's executor has imported what its tasks
        need (its log, named by ``executors``' key, says so; up to 3x ``startup_timeout``: it
        imports every method)."""
        from fedcausal_flwr.federation.deployment.warm_executor import READY

        ready = f"fedcausal-executor: {READY}"
        logs = [self.workdir / name for name in executors]
        deadline = time.monotonic() + 3 * self.startup_timeout
        while time.monotonic() < deadline:
            for name, proc in executors.items():
                if proc.poll() is not None:
                    raise FederationError(
                        f"fedcausal-executor exited with code {proc.returncode}:\n"
                        + self.log_tail(name)
                    )
            if all(log.exists() and ready in log.read_text(errors="replace") for log in logs):
                return
            time.sleep(0.1)
        raise FederationError(
            f"executors not ready after {3 * self.startup_timeout:g} s:\n"
            + "\n".join(self.log_tail(name, 5) for name in executors)
        )

    # ------------------------------------------------------------------ TLS and authentication
    def _prepare_credentials(self) -> None:
        """Generate the CA, the SuperLink's certificate and the sites' keys (tls/auth), then
        check every file a process will be given exists."""
        if not self.tls:
            return
        if not (self.credentials_dir / "ca.crt").exists():
            write_tls_files(self.credentials_dir)
        for name, option in (
            ("ca.crt", "--ssl-ca-certfile"),
            ("server.pem", "--ssl-certfile"),
        ):
            check_certificate(self.credentials_dir / name, f"TLS {name}", option)
        check_readable(self.credentials_dir / "server.key", "TLS server key", "--ssl-keyfile")
        if not self.auth:
            return
        for k, security in enumerate(self.site_security):
            if not (self.credentials_dir / f"site{k}").exists():
                write_node_key(self.credentials_dir, f"site{k}")
            if security.key:
                try:
                    check_node_key(self.node_key(k))
                except (OSError, ValueError) as error:
                    raise FederationError(f"site {k}: {error}") from None

    @property
    def signing_dir(self) -> Path:
        """Where the sites' generated signing keys and their roster are (``sign=True``)."""
        return self.credentials_dir / "signing"

    def _prepare_signing_keys(self) -> None:
        """With ``sign``: a signing key for every site with a policy that names no ``site-key``
        and no ``roster`` (in its node config or policy file), and one roster of those sites,
        in :attr:`signing_dir` (made once, reused by a restart); both go into the sites' node
        configs, so their secure sums are with each other only (:mod:`.signed_secagg`)."""
        from fedcausal_flwr.federation.core.site_identity import ROSTER, SITE_KEY
        from fedcausal_flwr.federation.core.site_policy import PolicyConfigError, SitePolicy

        if not self.sign:
            return
        sites = []
        for k, node in enumerate(self.node_configs):
            try:
                policy = SitePolicy.of_node(node)
            except PolicyConfigError:
                continue  # the site says so when a run asks it
            if policy is not None and policy.site_key is None and policy.roster is None:
                sites.append(k)
        if not sites:
            return
        from fedcausal_flwr.federation.core.site_identity import (
            SiteIdentityError,
            read_roster,
            write_roster,
            write_site_key,
        )

        folder, roster = self.signing_dir, self.signing_dir / "roster.toml"
        names = {f"site{k}" for k in sites}
        try:  # an earlier start's keys, if they are these sites'
            reuse = set(read_roster(roster).sites) == names and all(
                (folder / f"{name}.key").exists() for name in names
            )
        except SiteIdentityError:
            reuse = False
        if not reuse:
            shutil.rmtree(folder, ignore_errors=True)  # ours: made by an earlier start
            keys = [write_site_key(folder, f"site{k}") for k in sites]
            write_roster(roster, [key.public_key for key in keys])
        for k in sites:
            self.node_configs[k].update(
                {SITE_KEY: str(folder / f"site{k}.key"), ROSTER: str(roster)}
            )

    def node_key(self, k: int) -> Path:
        """Site k's private key (its public key is the same path + ``.pub``)."""
        override = self.site_security[k].private_key
        return Path(override) if override else self.credentials_dir / f"site{k}"

    def _superlink_security_args(self) -> list[str]:
        if not self.tls:
            return ["--insecure"]
        d = self.credentials_dir
        args = ["--ssl-ca-certfile", str(d / "ca.crt"), "--ssl-certfile", str(d / "server.pem")]
        args += ["--ssl-keyfile", str(d / "server.key")]
        return [*args, "--enable-supernode-auth"] if self.auth else args

    def _cli_security(self) -> dict[str, Any]:
        """The ``[superlink.<name>]`` keys of the ``flwr`` CLI's connection."""
        if not self.tls:
            return {"insecure": True}
        return {"root-certificates": str(self.credentials_dir / "ca.crt")}

    def _supernode_security_args(self, k: int) -> list[str]:
        if not self.tls:
            return ["--insecure"]
        security = self.site_security[k]
        args = []
        if security.root_certificates:
            args += ["--root-certificates", str(self.credentials_dir / "ca.crt")]
        if self.auth and security.key:
            args += ["--auth-supernode-private-key", str(self.node_key(k))]
        return args

    def _register_sites(self) -> None:
        """``flwr supernode register <site>.pub <federation>`` for every site to register (all
        at once: each is a CLI start of about a second)."""
        if not self.auth:
            return
        flwr = shutil.which("flwr", path=self.env.get("PATH")) or "flwr"
        pending = {
            k: subprocess.Popen(
                [
                    flwr,
                    "supernode",
                    "register",
                    f"{self.node_key(k)}.pub",
                    FEDERATION,
                    "--format",
                    "json",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=self.env,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
            )
            for k, security in enumerate(self.site_security)
            if security.register
        }
        problems = []
        for k, proc in pending.items():
            out, _ = proc.communicate(timeout=self.startup_timeout)
            try:
                reply = json.loads(out[out.index("{") :])
            except ValueError:
                reply = {}
            if proc.returncode != 0 or not reply.get("success"):
                problems.append(f"site {k}: `flwr supernode register` failed:\n{out.strip()}")
            else:
                self.registered_node_ids[k] = int(reply["node-id"])
        if problems:
            raise FederationError("\n".join(problems))

    def supernode_process(self, k: int) -> subprocess.Popen:
        """The SuperNode process of site k."""
        config = str(self.workdir / f"node{k}.toml")
        for proc in self.processes:
            args = [str(a) for a in proc.args] if isinstance(proc.args, list) else []
            if config in args and "--superlink" in args:
                return proc
        raise KeyError(f"site {k} has no SuperNode process")

    def site_problem(self, k: int) -> str | None:
        """Why site k's SuperNode could not join, in the site's words (None if its log shows
        no known refusal)."""
        log = self.workdir / f"supernode{k}.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        explanation = explain_supernode_failure(text)
        return None if explanation is None else f"site {k}: {explanation}"

    def _wait_healthy(self, link: subprocess.Popen) -> None:
        deadline = time.monotonic() + self.startup_timeout
        scheme = "https" if self.tls else "http"
        url = f"{scheme}://127.0.0.1:{self.port}/health"
        context = (
            ssl.create_default_context(cafile=str(self.credentials_dir / "ca.crt"))
            if self.tls
            else None
        )
        while time.monotonic() < deadline:
            if link.poll() is not None:
                raise FederationError(
                    f"flower-superlink exited with code {link.returncode}:\n"
                    + self.log_tail("superlink.log")
                )
            try:
                with urllib.request.urlopen(url, timeout=1, context=context) as response:
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
        self,
        app_dir: str | os.PathLike,
        run_config: Mapping[str, Any],
        timeout: float = 300.0,
        load: Callable[[Path], Any] = Result.load,
    ) -> Any:
        """``flwr run app_dir`` against this deployment; the Result the ServerApp wrote at the run
        config's ``result-path`` (``result.json`` in the coordinator's results folder, read with
        ``load``: another app may write another file)."""
        result_path = self.results_dir / "result.json"
        result_path.unlink(missing_ok=True)
        config = {**dict(run_config), "result-path": result_path.name}
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
            self.environments[cli.pid] = dict(self.env)
            try:
                code = cli.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                raise FederationError(
                    f"flwr run did not finish within {timeout:g} s:\n"
                    + self.log_tail("flwr_run.log")
                ) from None
        self.timings["run_s"] = time.perf_counter() - start
        if not result_path.exists():
            sites = [p for k in range(len(self.node_configs)) if (p := self.site_problem(k))]
            raise FederationError(
                f"flwr run exited with code {code} and wrote no result:\n"
                + "".join(f"{problem}\n" for problem in sites)
                + self.log_tail("flwr_run.log")
                + "\n--- superlink.log ---\n"
                + self.log_tail("superlink.log")
            )
        return load(result_path)
