"""``fedcausal-flwr federation up | down | credentials``: a federation on this machine to try the
deployment path with one CSV per site, secure by default (TLS and SuperNode authentication), and
the certificates and keys of a federation across machines.

``up`` starts a :class:`~fedcausal_flwr.federation.deployment.local_deployment.LocalDeployment`
(SuperLink, one SuperNode and one ``fedcausal-executor`` per ``--sites`` file, each site with a
signing key made for it and the sites' roster), writes the Flower app (its ``pyproject.toml``) and
the ``flwr`` CLI's connection into ``--workdir``, prints the ``flwr run`` command to use and the
PIDs, records them in ``<workdir>/federation.json`` and waits for Ctrl-C (or, with ``--detach``,
returns and leaves the federation running). ``down`` ends the recorded processes by PID, each only
if it still belongs to this federation (its ``FLWR_HOME`` lies in the work dir). ``keys`` and
``roster`` make a site's signing key pair and the federation's roster for a federation across
machines (docs/deploy.md, "A roster from scratch").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

FEDERATION_FILE = "federation.json"
APP_DIR = "fedcausal-app"  # `flwr run` takes the directory name as the app's name: a valid one
#: the run `up` prints: FedPC with SecAgg+, which a site's default policy answers
PRINTED_METHOD, PRINTED_OPTIONS = "fedpc", "alpha=0.05"
#: why `--tuned`, where a user chooses it: one secure run measured with and without it
#: (docs/deploy.md, under `federation up`)
TUNED_HINT = (
    "secure runs are much faster with --tuned (measured on one 2-core machine: the same secure "
    "run took 6.5 min with the stock SuperNodes, 49 s with --tuned)"
)


def add_federation_parser(sub: Any) -> None:
    """The ``federation`` command and its subcommands (``up``, ``down``, ``credentials``,
    ``keys``, ``roster``)."""
    fed = sub.add_parser(
        "federation",
        help="start (up) or stop (down) a federation on this machine: SuperLink + one SuperNode "
        "per CSV, TLS and SuperNode authentication unless --insecure; or make the credentials, "
        "a site's signing keys and the roster of a federation across machines",
    )
    actions = fed.add_subparsers(dest="federation_command", required=True)
    _add_up_parser(actions)
    down = actions.add_parser("down", help="end the processes of a federation started by `up`")
    down.add_argument("--workdir", required=True, help="the folder `federation up` printed")
    _add_credentials_parsers(actions)


def _add_up_parser(actions: Any) -> None:
    """``federation up``: the sites, their security, the tuned set-up and their policies."""
    from fedcausal_flwr.federation.core.site_policy import POLICY_KEYS

    up = actions.add_parser("up", help="start a localhost federation, one site per CSV")
    up.add_argument(
        "--sites",
        nargs="+",
        required=True,
        metavar="CSV",
        help="one CSV per site (site k gets partition-id k)",
    )
    up.add_argument("--tls", action="store_true", help="TLS (generated CA and certificate)")
    up.add_argument(
        "--auth",
        action="store_true",
        help="SuperNode authentication (generated keys, registered; implies TLS)",
    )
    up.add_argument(
        "--insecure", action="store_true", help="no TLS, no authentication (the default is both)"
    )
    up.add_argument(
        "--workdir",
        default=None,
        help="folder for logs and credentials (default: a new temp folder); the SuperLink keeps "
        "its state in memory",
    )
    up.add_argument(
        "--tuned",
        action="store_true",
        help="faster rounds: fedcausal-supernode + fedcausal-executor per site; recommended "
        "for secure runs (" + TUNED_HINT.split("(", 1)[1],
    )
    up.add_argument(
        "--site-policy",
        nargs="+",
        default=None,
        metavar="TOML",
        help="each site's policy file (one for every site, or one per --sites file) with any "
        f"of the keys {', '.join(POLICY_KEYS)} (docs/deploy.md, 'What a site controls'); "
        "default: the default policy",
    )
    up.add_argument(
        "--detach", action="store_true", help="return once it is up; stop it with `federation down`"
    )


def _add_credentials_parsers(actions: Any) -> None:
    """What a federation across machines needs made: ``credentials`` (TLS and SuperNode keys),
    a site's signing ``keys`` and the ``roster``."""
    creds = actions.add_parser(
        "credentials",
        help="a CA, the SuperLink's certificate and one key pair per site, for a federation "
        "across machines (docs/deploy.md)",
    )
    creds.add_argument("--out", required=True, help="folder to write them to (must not exist)")
    creds.add_argument(
        "--host",
        nargs="+",
        required=True,
        help="names and IP addresses the sites dial the SuperLink by (in its certificate)",
    )
    creds.add_argument("--sites", nargs="+", required=True, metavar="NAME", help="site names")
    keys = actions.add_parser(
        "keys",
        help="a site's signing key pair for SecAgg+ (NAME.key, mode 600, stays at the site; "
        "NAME.pub goes into the roster)",
    )
    keys.add_argument("--site", required=True, metavar="NAME", help="the site's roster name")
    keys.add_argument("--out", required=True, metavar="DIR", help="folder to write them to")
    roster = actions.add_parser(
        "roster",
        help="the federation's roster (TOML) from the sites' .pub files; every site gets it "
        "(policy key roster)",
    )
    roster.add_argument("pub", nargs="+", metavar="PUB", help="each site's NAME.pub")
    roster.add_argument("--out", required=True, metavar="TOML", help="the roster file to write")


def security_of(args: argparse.Namespace) -> tuple[bool, bool]:
    """``(tls, auth)`` from the flags: both unless ``--insecure``; ``--tls`` alone: TLS only."""
    if args.insecure and (args.tls or args.auth):
        raise ValueError("--insecure cannot be combined with --tls or --auth")
    if args.insecure:
        return False, False
    if not (args.tls or args.auth):
        return True, True
    return True, bool(args.auth)


def write_app(directory: str | os.PathLike, run_config: Mapping[str, Any]) -> Path:
    """A Flower app directory for ``flwr run``: the manifest only (``pyproject.toml``, with
    ``run_config`` as the app's run settings, i.e.
    ``fedcausal_flwr.flwr_app.DEFAULT_RUN_CONFIG``); the code is the installed package, at
    the SuperLink and at every site."""
    import tomli_w

    from fedcausal_flwr.environment import VERSION

    app = Path(directory)
    app.mkdir(parents=True, exist_ok=True)
    manifest = {
        "project": {
            "name": "fedcausal-flwr",
            "version": VERSION,
            "description": "fedcausal-flwr's Flower app (the code is the installed package)",
            "license": "MIT",
            "dependencies": [],
        },
        "tool": {
            "flwr": {
                "app": {
                    "publisher": "fedcausal",
                    "fab-include": ["pyproject.toml"],
                    "components": {
                        "serverapp": "fedcausal_flwr.flwr_app:server_app",
                        "clientapp": "fedcausal_flwr.flwr_app:client_app",
                    },
                    "config": dict(run_config),
                }
            }
        },
    }
    (app / "pyproject.toml").write_text(tomli_w.dumps(manifest))
    return app


def run_command(
    deployment: Any, app: Path, method: str = "fedpc", options: str = "", secure: bool = True
) -> str:
    """The ``flwr run`` command line for ``deployment`` (shell-quoted); ``secure`` by default,
    since a site's default policy lets its statistics leave only as SecAgg+ sums
    (:func:`policy_refusal` checks a run config against the sites' policies)."""
    from fedcausal_flwr.federation.deployment.local_deployment import FEDERATION

    config = f"method='{method}' num-clients={len(deployment.node_configs)} " + (
        f"options='{options}' " if options else ""
    )
    config += "secure=true " if secure else ""
    config += "result-path='result.json'"
    # double quotes read best around the single-quoted values, where the shell allows them
    quoted = f'"{config}"' if not set(config) & set('"$`\\!') else shlex.quote(config)
    return (
        f"FLWR_HOME={shlex.quote(str(deployment.flwr_home))} flwr run {shlex.quote(str(app))} "
        f"{FEDERATION} --stream --run-config {quoted}"
    )


def policy_refusal(run_config: Mapping[str, Any], policies: Sequence[Any]) -> str | None:
    """The first refusal the sites' ``policies`` give a run config, in a site's own one-line
    words (None: every site answers it): its ``hello``, then each action its method declares, as
    the run sends it (a summed one through SecAgg+ in a secure run, else plainly; a ``per_client``
    statistic in a plain run only, since which of them a secure run still sends depends on its
    options). The same guard a site applies to each message, before anything is printed: no data
    read, nothing written to a site's audit log; a privacy budget's noise is not planned here."""
    from fedcausal_flwr.federation.core.disclosure import CLASSES, PER_CLIENT, SUM
    from fedcausal_flwr.federation.core.messages import HELLO
    from fedcausal_flwr.federation.core.registry import check_secure, get_method
    from fedcausal_flwr.federation.core.site_guard import PolicyRefusal, public_error
    from fedcausal_flwr.options import parse_assignments, parse_bool

    spec = get_method(str(run_config["method"]))
    raw = parse_assignments(str(run_config.get("options", "")), what="run config key options")
    options = spec.resolve(raw, "config")
    secure = parse_bool(run_config.get("secure", False))
    check_secure(spec, options, secure, "config")
    declared = sorted(spec.disclosures.items(), key=lambda item: CLASSES.index(item[1]))
    sent = [(a, k) for a, k in declared if not (secure and k == PER_CLIENT)]
    for site, policy in enumerate(policies):
        quiet = None if policy is None else dataclasses.replace(policy, audit_log=None)
        guard = spec.guard(site, quiet, secure_run=secure, options=options)
        for action, kind in [(HELLO, ""), *sent]:
            participants = len(policies) if secure and kind == SUM else None
            try:
                guard.check(action, {}, secagg_participants=participants)
            except PolicyRefusal as err:
                return public_error(err, site, action, quiet)
    return None


def federation_up(args: argparse.Namespace, run_config: Mapping[str, Any]) -> int:
    from fedcausal_flwr.federation.core.site_policy import SitePolicy, describe_policy
    from fedcausal_flwr.federation.deployment.local_deployment import LocalDeployment

    tls, auth = security_of(args)
    sites = [Path(s).resolve() for s in args.sites]
    for k, path in enumerate(sites):
        if not path.is_file():
            raise FileNotFoundError(f"--sites: site {k}'s file {args.sites[k]!r} does not exist")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="fedcausal-federation-")).resolve()
    if (workdir / FEDERATION_FILE).exists():
        raise ValueError(
            f"--workdir {workdir} holds a federation already; stop it with "
            f"`fedcausal-flwr federation down --workdir {workdir}` or choose another folder"
        )
    nodes = [{"partition-id": k, "data-path": str(p)} for k, p in enumerate(sites)]
    _site_policies(args.site_policy, nodes)  # checked before anything starts
    # every site runs fedcausal-executor (the installed app only, whatever a bundle holds) and
    # signs its SecAgg+ keys with a key made for it here (its roster: the other sites)
    deployment = LocalDeployment(
        workdir, nodes, tls=tls, auth=auth, tuned=args.tuned, warm_executor=True
    )
    try:
        deployment.start()
        # every site has a data-path, hence a policy (with the signing keys made for it)
        policies = [SitePolicy.of_node(node) or SitePolicy() for node in deployment.node_configs]
        app = write_app(workdir / APP_DIR, run_config)
        pids = [proc.pid for proc in deployment.processes]
        state = {
            "pids": pids,
            "address": f"127.0.0.1:{deployment.port}",
            "flwr_home": str(deployment.flwr_home),
            "tls": tls,
            "auth": auth,
        }
        (workdir / FEDERATION_FILE).write_text(json.dumps(state, indent=1) + "\n")
        problems = _early_failures(deployment, len(sites))
    except BaseException:
        deployment.stop()
        raise
    mode = "TLS + SuperNode authentication" if auth else "TLS" if tls else "INSECURE (no TLS)"
    print(f"federation up: {len(sites)} site(s), {mode}; logs and state in {workdir}")
    print(f"  SuperLink  {state['address']}  pid {deployment.processes[0].pid}")
    if tls:
        print(f"  CA         {deployment.credentials_dir / 'ca.crt'}")
    if (deployment.signing_dir / "roster.toml").exists():
        print(f"  roster     {deployment.signing_dir / 'roster.toml'} (each site signs its "
              "SecAgg+ keys; it sums only with the sites listed)")  # fmt: skip
    for k, path in enumerate(sites):
        node = deployment.supernode_process(k)
        registered = deployment.registered_node_ids.get(k)
        extra = f", registered node {registered}" if registered is not None else ""
        print(f"  site {k}     {path}  SuperNode pid {node.pid}{extra}")
        print(f"             policy: {'; '.join(describe_policy(policies[k]))}")
    others = sorted(set(pids) - {deployment.processes[0].pid}
                    - {deployment.supernode_process(k).pid for k in range(len(sites))})  # fmt: skip
    if others:
        print(f"  executors  pids {' '.join(map(str, others))}")
    for problem in problems:
        print(f"  PROBLEM    {problem}")
    print("run a method (its options go in `options`, e.g. options='alpha=0.01 max-depth=3'):")
    command = run_command(deployment, app, PRINTED_METHOD, PRINTED_OPTIONS)
    print(f"  {command}")
    printed = {"method": PRINTED_METHOD, "options": PRINTED_OPTIONS, "secure": True}
    refusal = policy_refusal(printed, policies)
    if refusal:  # a --site-policy the printed run does not fit: say so, not a silent failure
        print(f"  NOTE       the sites' policies refuse this run: {refusal}; change its run "
              "config to one they allow (docs/deploy.md, 'What a site controls')")  # fmt: skip
    if not args.tuned:
        print(f"  TIP        {TUNED_HINT}")
    print(f"the result JSON is written to {deployment.results_dir / 'result.json'}")
    print(f"stop: `fedcausal-flwr federation down --workdir {workdir}`", end="")
    if args.detach:
        print()
        return 1 if problems else 0
    print(" or Ctrl-C here", flush=True)
    return _wait(deployment, workdir)


def _site_policies(files: list[str] | None, nodes: list[dict]) -> list[Any]:
    """Each site's policy, checked before anything starts; ``files`` (one for every site, or
    one per site) go into the node configs as ``policy-file``."""
    from fedcausal_flwr.federation.core.site_policy import (
        PolicyConfigError,
        SitePolicy,
    )

    if files is not None:
        if len(files) not in (1, len(nodes)):
            raise ValueError(
                f"--site-policy: give one file for every site or one per site ({len(nodes)}), "
                f"got {len(files)}"
            )
        for k, node in enumerate(nodes):
            node["policy-file"] = str(Path(files[0 if len(files) == 1 else k]).resolve())
    policies = []
    for k, node in enumerate(nodes):
        try:
            policies.append(SitePolicy.of_node(node))
        except PolicyConfigError as err:
            raise ValueError(f"--site-policy: site {k}: {err}") from None
    return policies


def _early_failures(deployment: Any, n_sites: int, wait: float = 3.0) -> list[str]:
    """Sites whose SuperNode exited within ``wait`` seconds, with the reason."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if any(deployment.supernode_process(k).poll() is not None for k in range(n_sites)):
            break
        time.sleep(0.2)
    problems = []
    for k in range(n_sites):
        code = deployment.supernode_process(k).poll()
        if code is not None:
            problems.append(
                deployment.site_problem(k)
                or f"site {k}: its SuperNode exited with code {code} "
                f"(see {deployment.workdir / f'supernode{k}.log'})"
            )
    return problems


def _wait(deployment: Any, workdir: Path) -> int:
    """Wait for Ctrl-C, SIGTERM or the SuperLink's end, then end everything."""

    def terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    # both set explicitly: a shell that starts a job in the background ignores its SIGINT
    previous = {sig: signal.signal(sig, terminate) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while deployment.processes[0].poll() is None:
            time.sleep(0.5)
        print("federation: the SuperLink ended", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        deployment.stop()
        (workdir / FEDERATION_FILE).unlink(missing_ok=True)
    print(f"federation down: ended pids {' '.join(map(str, deployment.stopped_pids))}")
    return 0


def federation_down(args: argparse.Namespace) -> int:
    from fedcausal_flwr.processes import alive, end_processes, process_environment

    workdir = Path(args.workdir).resolve()
    state_file = workdir / FEDERATION_FILE
    if not state_file.exists():
        raise FileNotFoundError(f"--workdir: no running federation recorded in {workdir}")
    state = json.loads(state_file.read_text())
    # a recorded PID is ended only while it is ours: its FLWR_HOME lies in the work dir (PIDs
    # of processes that ended long ago may belong to someone else by now)
    ours = [
        pid
        for pid in state["pids"]
        if process_environment(pid).get("FLWR_HOME", "").startswith(str(workdir))
    ]
    ended = end_processes(ours)
    # a foreground `up` whose processes just ended removes the file itself, maybe first
    state_file.unlink(missing_ok=True)
    deadline = time.monotonic() + 10.0  # SIGKILLed processes take a moment to go
    while (left := [p for p in ended if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    print(
        f"federation down: ended pids {' '.join(map(str, ended)) or '(none were running)'}"
        + (f"; still alive: {left}" if left else "")
    )
    return 1 if left else 0


def federation_credentials(args: argparse.Namespace) -> int:
    from fedcausal_flwr.federation.deployment.credentials import write_node_key, write_tls_files

    out = Path(args.out)
    if out.exists():
        raise ValueError(f"--out: {out} exists; choose a new folder (keys are never overwritten)")
    names = list(args.sites)
    bad = [n for n in names if not n or "/" in n or n.startswith(".")]
    if bad or len(set(names)) != len(names):
        raise ValueError(f"--sites: names must be distinct file names, got {names}")
    tls = write_tls_files(out, hosts=args.host)
    print(f"SuperLink (coordinator): --ssl-ca-certfile {tls.ca_certificate} "
          f"--ssl-certfile {tls.server_certificate} --ssl-keyfile {tls.server_key}")  # fmt: skip
    for name in names:
        key = write_node_key(out / "sites", name)
        print(f"site {name}: give it {tls.ca_certificate} and {key.private_key} (private); "
              f"register {key.public_key} with `flwr supernode register`")  # fmt: skip
    return 0


def federation_keys(args: argparse.Namespace) -> int:
    from fedcausal_flwr.federation.core.site_identity import write_site_key

    files = write_site_key(args.out, args.site)
    print(f"site {files.name}: keep {files.private_key} at the site (policy key site-key, mode "
          f"600); send {files.public_key} to whoever assembles the roster")  # fmt: skip
    return 0


def federation_roster(args: argparse.Namespace) -> int:
    from fedcausal_flwr.federation.core.site_identity import read_roster, write_roster

    out = Path(args.out)
    if out.exists():
        raise ValueError(f"--out: {out} exists; write the new roster to a new file")
    roster = read_roster(write_roster(out, args.pub))
    print(f"roster {out}: {', '.join(sorted(roster.sites))}; give it to every site (policy key "
          "roster)")  # fmt: skip
    return 0


def federation_command(args: argparse.Namespace, run_config: Mapping[str, Any]) -> int:
    """Run the ``federation`` subcommand; ``run_config``: the app's run settings with their
    defaults (``fedcausal_flwr.flwr_app.DEFAULT_RUN_CONFIG``, passed in by the command line,
    which sits above the app in the layering)."""
    if args.federation_command == "up":
        return federation_up(args, run_config)
    if args.federation_command == "credentials":
        return federation_credentials(args)
    if args.federation_command == "keys":
        return federation_keys(args)
    if args.federation_command == "roster":
        return federation_roster(args)
    return federation_down(args)
