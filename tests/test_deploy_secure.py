"""A secure federation on 127.0.0.1 as a user starts it: ``fedcausal-flwr federation up`` (TLS and
SuperNode authentication by default), ``flwr run``, ``fedcausal-flwr federation down``.

One federation serves the whole module (starting one costs 10-30 s): 3 registered sites, each with
its own CSV, plus two sites started by hand with ``flower-supernode`` as the deployment guide
(docs/deploy.md) shows, each missing one piece: an unregistered key (refused, Flower error 2004)
and a registered key without the CA (its TLS check fails). Then one method per strategy module
runs through the SuperLink, each with a different CSV per site (fedcdnv with different columns
per site), and each result equals the in-process run on the same rows. Between runs the test
rewrites the sites' files (a site's file is read when a run asks for it). Every process started
here is ended by PID. The dropout of a SuperNode ended by PID mid-run is covered by
tests/test_federation_deploy.py (``KillWhenLogged``).

Not slow: the credentials, the refusals made before any process starts, and the command's flags.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import ssl
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

import fedcausal_flwr
from fedcausal_flwr.cli import main as cli_main
from fedcausal_flwr.data import load_network
from fedcausal_flwr.data.csv_input import read_client_csv
from fedcausal_flwr.data.partition import split_iid, split_site_effects, split_variable_subsets
from fedcausal_flwr.data.synthetic import random_dag
from fedcausal_flwr.federation.core.messages import FederationError
from fedcausal_flwr.federation.core.registry import get_method
from fedcausal_flwr.federation.deployment.credentials import write_node_key, write_tls_files
from fedcausal_flwr.federation.deployment.local_deployment import (
    FEDERATION,
    NO_PHONING_OUT,
    LocalDeployment,
    SiteSecurity,
    explain_supernode_failure,
    free_port,
)
from fedcausal_flwr.federation.deployment.localhost import APP_DIR, FEDERATION_FILE, write_app
from fedcausal_flwr.federation.deployment.warm_executor import builtin_method_modules
from fedcausal_flwr.options import parse_assignments
from fedcausal_flwr.processes import alive, descendants, end_processes, process_environment
from fedcausal_flwr.result import Result
from tests.test_iod_federated import fig1_sites

SITES = 3
#: the tests that share the module's federation run in one pytest worker, so it starts once
#: (pyproject's `--dist loadgroup`)
FEDERATION_GROUP = pytest.mark.xdist_group("secure-federation")
#: One method per strategy module, with options that keep the run short, and the data its sites
#: hold (see site_frames).
BREADTH = [
    ("fedci-pc", "site-effect=fixed", "mixed"),
    ("fedcdnv", "", "columns"),
    ("fedecd", "bootstraps=2 max-depth=1", "asia"),
    ("fedpc-vote", "max-depth=1", "asia"),
    ("pc-vote", "", "asia"),
    ("fedlcs", "target=either max-depth=1 extension-depth=0", "asia"),
    ("fedlcs-local", "target=either max-depth=1 extension-depth=0", "asia"),
    ("iod-fisher", "", "overlap"),
    # fedCI-IOD on Fig. 1's split: sites with different columns (B and D never together)
    ("fedci-iod", "procedure=orderedtriplets", "fig1"),
    ("fedcsl", "max-depth=1", "asia"),
    ("rfcd", "", "asia"),
    # a few ADMM iterations; the binary column goes through the level_counts round
    ("notears-admm", "max-iter=8 rho1-growth=4 rho2-growth=2 rho-max=1e12", "mixed"),
]
TUNED = shutil.which("fedcausal-supernode") is not None and shutil.which("fedcausal-executor")
#: the sites' policy file as `federation up --site-policy` passes it: the defaults written out,
#: but for the sites' own statistics, which may leave plainly (every module runs plain here; a
#: test runs the default policy's secure runs on its own)
PLAIN_POLICY = "allow-raw-rows = false\nallow-plain-statistics = true\nmax-levels = 100\n"
#: the centralised references (their sites send rows), with short options and their data
RAW_METHODS = [
    ("pooled", "", "asia"),
    ("iod-pooled", "", "overlap"),
    ("lcs-pooled", "target=either max-depth=1 extension-depth=0", "asia"),
]


def site_frames(kind: str) -> list[pd.DataFrame]:
    """Three sites' data: ``asia`` (discrete, IID), ``columns`` (asia, each site lacking some
    variables), ``mixed`` (continuous and binary columns of a 4-node DAG with 2 edges),
    ``overlap`` (mixed, sites 0 and 1 each lacking one variable), ``fig1`` (fedCI-IOD's Fig. 1,
    sites alternating between {A, B, C, E} and {A, C, D, E})."""
    if kind == "fig1":
        return fig1_sites(1200, SITES, seed=3)
    if kind in ("mixed", "overlap"):
        types = {"X1": "continuous", "X2": "binary", "X3": "continuous", "X4": "continuous"}
        dag = random_dag(4, expected_degree=1.5, seed=1)
        frames = split_site_effects(dag, 600, SITES, seed=1, types=types, affected=[]).clients
        if kind == "overlap":
            frames = [frames[0].drop(columns=["X4"]), frames[1].drop(columns=["X1"]), frames[2]]
        return frames
    pooled = load_network("asia").sample(3000, seed=11)
    part = split_iid(pooled, SITES, seed=0)
    if kind == "columns":
        part = split_variable_subsets(part, fraction=0.85, seed=2)
    return part.clients


def typed_options(method: str, options: str) -> dict:
    """``options`` (the run config's assignments) as the Python API takes them."""
    raw = parse_assignments(options, what="options")
    return get_method(method).resolve(raw, "config")


def without_timings(extra: object) -> object:
    """``extra`` without its timings (keys ending in ``seconds``, at any depth)."""
    if isinstance(extra, dict):
        return {k: without_timings(v) for k, v in extra.items() if not k.endswith("seconds")}
    if isinstance(extra, list):
        return [without_timings(v) for v in extra]
    return extra


def env_is_offline(pid: int) -> bool:
    env = process_environment(pid)
    return not env or {k: env.get(k) for k in NO_PHONING_OUT} == NO_PHONING_OUT


class Federation:
    """What `federation up` printed and recorded, plus the sites' files and hand-made sites."""

    def __init__(self, workdir: Path, sites: list[Path], output: str):
        self.workdir, self.sites, self.output = workdir, sites, output
        self.state = json.loads((workdir / FEDERATION_FILE).read_text())
        self.flwr_home = Path(self.state["flwr_home"])
        self.app = workdir / APP_DIR
        self.extra: dict[str, subprocess.Popen] = {}
        self.env = {**os.environ, **NO_PHONING_OUT}

    def start_site_by_hand(self, name: str, args: list[str]) -> subprocess.Popen:
        """``flower-supernode`` as a site types it (its own FLWR_HOME and log)."""
        home = self.workdir / f"{name}_home"
        home.mkdir()
        log = open(self.workdir / f"{name}.log", "w")
        proc = subprocess.Popen(
            ["flower-supernode", *args, "--superlink", self.state["address"],
             "--port", str(free_port()), "--node-config", f"partition-id={len(self.extra) + 9}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**self.env, "FLWR_HOME": str(home)}, cwd=self.workdir,
        )  # fmt: skip
        log.close()
        self.extra[name] = proc
        return proc

    def run(self, config: dict, timeout: float = 240.0) -> tuple[Result, str]:
        """``flwr run <app> local-deployment --run-config <file>``; the result and the output."""
        # the coordinator's results folder (federation up: <workdir>/results)
        result_path = self.workdir / "results" / "result.json"
        result_path.unlink(missing_ok=True)
        cli, log_path = self.start_run({**config, "result-path": result_path.name})
        with cli:
            # the result is complete once it parses; the log stream may lag behind it by a
            # few seconds, so the CLI is ended (by PID) as soon as the result is in
            deadline = time.monotonic() + timeout
            result = None
            while result is None and cli.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
                result = load_when_complete(result_path)
            end_processes([cli.pid], grace=2.0, reap=cli.poll)
            cli.wait(timeout=10)
        output = log_path.read_text(errors="replace")
        result = result or load_when_complete(result_path)
        assert result is not None, output[-4000:]
        return result, output

    def start_run(self, config: dict, app: Path | None = None) -> tuple[subprocess.Popen, Path]:
        """``flwr run`` started with ``config`` (and ``app``, default the federation's); its
        process and log."""
        config = {"num-clients": SITES, **config}
        lines = [f"{k} = {json.dumps(v)}" for k, v in config.items()]
        config_file = self.workdir / "run_config.toml"
        config_file.write_text("\n".join(lines) + "\n")
        log_path = self.workdir / "flwr_run.log"
        with open(log_path, "w") as log:
            cli = subprocess.Popen(
                ["flwr", "run", str(app or self.app), FEDERATION, "--stream", "--run-config",
                 str(config_file)],
                env={**self.env, "FLWR_HOME": str(self.flwr_home)}, cwd=self.workdir,
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        return cli, log_path

    def refused(self, config: dict, app: Path | None = None, timeout: float = 120.0) -> str:
        """The output of a run the sites refuse (``flwr run`` ends by itself)."""
        cli, log_path = self.start_run(config, app)
        try:
            cli.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            end_processes([cli.pid], grace=2.0, reap=cli.poll)
            pytest.fail(f"flwr run still running after {timeout:g} s")
        return log_path.read_text(errors="replace")

    def audit(self) -> list[list[dict]]:
        """Each site's audit log (beside its data file)."""
        logs = []
        for path in self.sites:
            log = path.with_name(path.stem + ".audit.jsonl")
            lines = log.read_text().splitlines() if log.exists() else []
            logs.append([json.loads(line) for line in lines])
        return logs

    def write_sites(self, frames: list[pd.DataFrame]) -> list[pd.DataFrame]:
        """Each site's file replaced by its frame; the frames as a site reads them back."""
        for path, frame in zip(self.sites, frames, strict=True):
            frame.to_csv(path, index=False)
        return [read_client_csv(p, k) for k, p in enumerate(self.sites)]


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    root = tmp_path_factory.mktemp("secure")
    sites = [root / f"site{k}.csv" for k in range(SITES)]
    for path, frame in zip(sites, site_frames("asia"), strict=True):
        frame.to_csv(path, index=False)
    policy = root / "site-policy.toml"  # one file for every site; a test changes it mid-way
    policy.write_text(PLAIN_POLICY)
    workdir = root / "federation"
    started = time.perf_counter()
    up = subprocess.run(
        [sys.executable, "-m", "fedcausal_flwr.cli", "federation", "up", "--sites",
         *map(str, sites), "--workdir", str(workdir), "--detach", "--site-policy", str(policy),
         *(["--tuned"] if TUNED else [])],
        env={**os.environ, **NO_PHONING_OUT, "FEDCAUSAL_RESULTS_DIR": str(workdir / "results")},
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    setup = "tuned" if TUNED else "stock"
    print(f"\nfederation up ({setup}): {time.perf_counter() - started:.1f} s")
    state_file = workdir / FEDERATION_FILE
    recorded = json.loads(state_file.read_text())["pids"] if state_file.exists() else []
    fed = None
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        fed = Federation(workdir, sites, up.stdout)
        yield fed
    finally:
        # CPU the federation used (its processes and the children they reaped) and this
        # process's, for the record: a load-independent measure of the module's cost
        federation_cpu = cpu_seconds([*recorded, *(c for p in recorded for c in descendants(p))])
        own = os.times()
        own_cpu = own.user + own.system + own.children_user + own.children_system
        print(f"\nfederation CPU {federation_cpu:.1f} s, test process and children {own_cpu:.1f} s")
        hand_made = [] if fed is None else [p.pid for p in fed.extra.values()]
        down = subprocess.run(
            [sys.executable, "-m", "fedcausal_flwr.cli", "federation", "down", "--workdir",
             str(workdir)],
            capture_output=True, text=True, timeout=60, env={**os.environ, **NO_PHONING_OUT},
        )  # fmt: skip
        ended = end_processes(hand_made)
        if fed is not None:
            for proc in fed.extra.values():
                proc.wait(timeout=10)
        # every process the command recorded, their children and the hand-made sites are gone
        assert down.returncode == 0, down.stdout + down.stderr
        pids = [int(p) for p in re.findall(r"\d+", down.stdout.split("ended pids", 1)[-1])]
        assert set(recorded) <= set(pids), (recorded, down.stdout)
        gone = [*pids, *ended]
        assert not [p for p in gone if alive(p)]
        assert not state_file.exists()


def load_when_complete(path: Path) -> Result | None:
    """The result at ``path`` once it is there and whole (the ServerApp may be writing it)."""
    try:
        return Result.load(path)
    except (OSError, ValueError):
        return None


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of ``pids`` and of the children they have reaped (from /proc)."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def await_exit(proc: subprocess.Popen, timeout: float = 90.0) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{proc.args[0]} still running after {timeout:g} s")


@FEDERATION_GROUP
@pytest.mark.slow
def test_tls_and_authentication_fedpc_on_registered_sites_refuses_the_others(federation):
    fed = federation
    # what the command printed: address, CA, each site with its SuperNode's PID and node id,
    # the flwr run command (method options in `options`) and how to stop
    out = fed.output
    assert "TLS + SuperNode authentication" in out
    assert f"SuperLink  {fed.state['address']}" in out
    for k, path in enumerate(fed.sites):
        assert re.search(rf"site {k} +{re.escape(str(path))}  SuperNode pid \d+, registered", out)
    printed = next(line.strip() for line in out.splitlines() if " flwr run " in line)
    assert "options='alpha=0.05'" in printed and f"federation down --workdir {fed.workdir}" in out
    assert set(fed.state["pids"]) and (fed.state["tls"], fed.state["auth"]) == (True, True)

    # the SuperLink serves HTTPS with the generated certificate: it verifies against the CA
    # only, and plain HTTP gets no answer
    ca = fed.workdir / "credentials" / "ca.crt"
    health = f"https://{fed.state['address']}/health"
    trusted = ssl.create_default_context(cafile=str(ca))
    with urllib.request.urlopen(health, timeout=5, context=trusted) as response:
        assert response.status == 200
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(health, timeout=5, context=ssl.create_default_context())
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://{fed.state['address']}/health", timeout=5)

    # two sites started by hand, each missing one piece
    keys = fed.workdir / "hand_keys"
    rogue = write_node_key(keys, "unregistered")
    no_ca_key = write_node_key(keys, "no_ca")
    register = subprocess.run(
        ["flwr", "supernode", "register", str(no_ca_key.public_key), FEDERATION],
        env={**fed.env, "FLWR_HOME": str(fed.flwr_home)}, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert register.returncode == 0 and "registered successfully" in register.stdout, register
    unregistered = fed.start_site_by_hand(
        "unregistered",
        ["--root-certificates", str(ca), "--auth-supernode-private-key", str(rogue.private_key)],
    )
    no_ca = fed.start_site_by_hand(
        "no_ca", ["--auth-supernode-private-key", str(no_ca_key.private_key)]
    )
    for proc in fed.extra.values():
        assert env_is_offline(proc.pid)

    # FedPC runs over the registered sites (min-clients allows one dropout; none happens)
    started = time.perf_counter()
    result, output = fed.run(
        {"method": "fedpc", "options": "alpha=0.05", "min-clients": 2, "secure": True}
    )
    print(f"fedpc over TLS: {time.perf_counter() - started:.1f} s, {result.rounds} rounds")
    frames = [read_client_csv(p, k) for k, p in enumerate(fed.sites)]
    local = fedcausal_flwr.run("fedpc", data=frames, alpha=0.05)
    assert result.graph == local.graph and result.config["data"]["clients"] == SITES
    assert result.config["data"]["fingerprint"] == local.config["data"]["fingerprint"]
    assert result.dropped_clients == [] and result.config["run"]["min_clients"] == 2
    assert "Successfully started run" in output

    # ... and the two hand-made sites were refused, each with a message saying what to fix
    assert await_exit(unregistered) != 0 and await_exit(no_ca) != 0
    refused = explain_supernode_failure((fed.workdir / "unregistered.log").read_text())
    assert refused is not None and "error 2004" in refused and "flwr supernode register" in refused
    unverified = explain_supernode_failure((fed.workdir / "no_ca.log").read_text())
    assert unverified is not None and "--root-certificates <ca.crt>" in unverified

    # nothing the command started (nor what those processes started) phones out
    recorded = fed.state["pids"]
    running = [p for p in recorded if alive(p)]
    assert len(running) == len(recorded), "a process of the federation ended early"
    for pid in [*running, *(c for p in running for c in descendants(p))]:
        assert env_is_offline(pid), pid


@pytest.mark.slow
@FEDERATION_GROUP
@pytest.mark.parametrize(("method", "options", "data"), BREADTH, ids=[m for m, *_ in BREADTH])
def test_every_strategy_module_through_the_superlink_equals_in_process(
    federation, method, options, data
):
    frames = federation.write_sites(site_frames(data))
    if data in ("columns", "overlap"):  # (fig1: two column sets over three sites)
        assert len({tuple(f.columns) for f in frames}) == SITES  # each site its own columns
    started = time.perf_counter()
    result, _ = federation.run({"method": method, "options": options})
    took = time.perf_counter() - started
    print(
        f"\n{method} over TLS: {took:.1f} s, {result.rounds} rounds, {result.wall_s:.1f} s of them"
    )
    local = fedcausal_flwr.run(method, data=frames, **typed_options(method, options))
    assert result.method == method and result.rounds == local.rounds
    assert result.graph == local.graph
    assert result.config["data"]["fingerprint"] == local.config["data"]["fingerprint"]
    # everything the method reports (but how long things took), as the result file holds it
    expected = Result.from_json(json.loads(json.dumps(local.to_json())))
    if method == "fedlcs":
        # a FedLCS client caches its tests across rounds for the life of its process; a SuperNode
        # may start one per message, so it can only compute more tests, never different answers
        deployed, simulated = result.extra.pop("client_tests"), expected.extra.pop("client_tests")
        assert deployed.keys() == simulated.keys()
        assert all(deployed[c] >= simulated[c] for c in deployed)
        assert result.extra.pop("tests") >= expected.extra.pop("tests") > 0
    assert without_timings(result.extra) == without_timings(expected.extra)
    assert result.extra.keys() == expected.extra.keys()
    if method == "fedci-pc":  # the federated GLM tests: every p-value
        assert len(result.extra["ci_tests"]) == 6 and result.graph.n_edges() == 2
    assert site_ledger(result.ledger) == expected.ledger


def site_ledger(ledger: list[dict]) -> list[dict]:
    """A deployed run's ledger as an in-process run's reads: a site with a policy also reports
    its max-request-cells in hello (an in-process client has no policy)."""
    out = []
    for entry in ledger:
        if entry["kind"] == "hello":
            keys = [k for k in entry["meta_keys"] if k != "max_request_cells"]
            entry = {**entry, "meta_keys": keys}
        out.append(entry)
    return out


#: honest runs under the default policy (only local results and signed SecAgg+ sums leave): the
#: method, its run config settings and the sites' data
HONEST = [
    ("fedci-pc", {"secure": True, "options": "site-effect=fixed"}, "mixed"),
    # FedPC's tables through signed SecAgg+ with the sites' noise shares (dp=distributed), at
    # epsilon = inf: no noise, so the graph is the in-process run's (at every depth: a private
    # search is not capped by default); secure FedPC without dp: the TLS test above, and on Ray
    # (test_fedc2sl.py)
    ("fedpc", {"secure": True, "options": "dp=distributed dp-epsilon=inf"}, "asia"),
    # a local result (each site's own graph) under the default policy
    ("fedpc-vote", {"options": "max-depth=1"}, "asia"),
]


@FEDERATION_GROUP
@pytest.mark.slow
def test_honest_runs_under_the_default_policy_equal_in_process(federation):
    """With the sites' default policy (nothing written in the policy file), secure FedPC and
    fedCI, FedPC with the sites' own noise shares, and the voting methods (local results) run
    through `federation up`'s signed sites as in process; each sum's audit line names all three
    sites."""
    policy = federation.sites[0].parent / "site-policy.toml"
    before = [len(log) for log in federation.audit()]
    policy.write_text("")
    try:
        for method, config, data in HONEST:
            frames = federation.write_sites(site_frames(data))
            result, _ = federation.run({"method": method, **config})
            options = typed_options(method, str(config.get("options", "")))
            secure = {"secure": True} if config.get("secure") else {}
            local = fedcausal_flwr.run(method, data=frames, **options, **secure)
            assert result.graph == local.graph, (method, config)
    finally:
        policy.write_text(PLAIN_POLICY)
    logs = [log[start:] for log, start in zip(federation.audit(), before, strict=True)]
    assert all(e["outcome"] == "sent" for log in logs for e in log)
    sums = [e for log in logs for e in log if e["class"] == "summed"]
    assert sums and all(e["secure"] and len(e["participants"]) == SITES for e in sums)


@FEDERATION_GROUP
@pytest.mark.slow
def test_sites_refuse_raw_rows_by_default_and_send_them_when_allowed(federation):
    """With the default policy each raw-row reference fails with the sites' one-line refusal (the
    first error line `flwr run --stream` shows, no traceback; the run's status: failed) and no
    row leaves; once the sites' policy file allows raw rows, the same runs equal in-process."""
    policy = federation.sites[0].parent / "site-policy.toml"
    run_ids = []
    for method, options, data in RAW_METHODS:
        federation.write_sites(site_frames(data))
        output = federation.refused({"method": method, "options": options})
        expected = (  # the sites that refuse alike are one line
            r"error: sites? [\d, ]+: (each )?refuses action 'hello': its policy has "
            r"allow-raw-rows = false"
        )
        assert re.search(expected, output), output[-3000:]
        # what `flwr run --stream` shows: the one line first, no traceback
        said = [line for line in output.splitlines() if "error" in line.lower()]
        assert re.match(f"fedcausal-flwr: {expected}", said[0]), said
        assert "Traceback" not in output and "SitePolicyError" not in output
        run_ids.append(int(re.search(r"started run (\d+)", output).group(1)))
    # Flower 1.42's `flwr run` exits 0 once the logs are read: the run's status says it failed
    listed = subprocess.run(
        ["flwr", "ls", FEDERATION, "--format", "json"],
        env={**federation.env, "FLWR_HOME": str(federation.flwr_home)},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    status = {int(run["run-id"]): run["status"] for run in json.loads(listed.stdout)["runs"]}
    assert [status[r] for r in run_ids] == ["finished:failed"] * len(RAW_METHODS), status
    logs = federation.audit()
    assert all(logs), "every site logged its refusals"
    for log in logs:
        assert not [e for e in log if e["class"] == "raw" and e["outcome"] == "sent"]
        refused = [e for e in log if e["outcome"] == "refused"]
        assert {e["method"] for e in refused} == {m for m, *_ in RAW_METHODS}
        assert {e["policy"] for e in refused} == {"allow-raw-rows"}
    policy.write_text(PLAIN_POLICY.replace("false", "true"))  # read at the next message
    try:
        for method, options, data in RAW_METHODS:
            frames = federation.write_sites(site_frames(data))
            result, _ = federation.run({"method": method, "options": options})
            local = fedcausal_flwr.run(method, data=frames, **typed_options(method, options))
            assert result.graph == local.graph, method
            expected = Result.from_json(json.loads(json.dumps(local.to_json())))
            assert without_timings(result.extra) == without_timings(expected.extra), method
    finally:
        policy.write_text(PLAIN_POLICY)
    sent = [e for log in federation.audit() for e in log if e["class"] == "raw"]
    assert len([e for e in sent if e["outcome"] == "sent"]) == SITES * len(RAW_METHODS)


@FEDERATION_GROUP
@pytest.mark.slow
@pytest.mark.skipif(not TUNED, reason="the bundle check is fedcausal-executor's")
def test_a_bundle_carrying_code_is_refused_and_never_imported(federation, tmp_path):
    """A bundle that carries a module of its own and names it as the ClientApp: every site's
    fedcausal-executor refuses it (policy key `bundle`), and the module is never imported."""
    marker = tmp_path / "imported"
    app = tmp_path / "fedcausal-app"
    app.mkdir()
    manifest = (federation.app / "pyproject.toml").read_text()
    manifest = manifest.replace('"fedcausal_flwr.flwr_app:client_app"', '"evil:client_app"')
    listed = 'fab-include = [\n    "pyproject.toml",\n'
    manifest = manifest.replace(listed, listed + '    "evil.py",\n')
    assert '"evil.py"' in manifest and '"evil:client_app"' in manifest
    (app / "pyproject.toml").write_text(manifest)
    (app / "evil.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
        "from fedcausal_flwr.flwr_app import client_app as installed\n"
        "client_app = installed\n"
    )
    federation.write_sites(site_frames("asia"))
    output = federation.refused({"method": "fedpc"}, app=app)
    expected = (
        r"error: site \d refuses the run: the bundle carries 1 file\(s\) besides its manifest "
        r"\(first: 'evil.py'\)"
    )
    assert re.search(expected, output), output[-3000:]
    assert not marker.exists()
    for log in federation.audit():
        assert log[-1]["outcome"] == "refused" and log[-1]["policy"] == "bundle"


def test_breadth_covers_every_strategy_module():
    modules = {m for m in builtin_method_modules() if ".strategies." in m}
    covered = {get_method(m).registered_by for m, *_ in BREADTH}
    covered.add(get_method("fedpc").registered_by)  # the TLS test's method
    assert covered == modules


# --------------------------------------------------------------------------- not slow
def test_generated_credentials_are_what_flower_expects(tmp_path):
    tls = write_tls_files(tmp_path)
    ca = x509.load_pem_x509_certificate(tls.ca_certificate.read_bytes())
    server = x509.load_pem_x509_certificate(tls.server_certificate.read_bytes())
    server.verify_directly_issued_by(ca)
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    key = serialization.load_pem_private_key(tls.server_key.read_bytes(), None)
    assert key.public_key() == server.public_key()
    node = write_node_key(tmp_path / "keys", "site0")
    private = serialization.load_ssh_private_key(node.private_key.read_bytes(), None)
    assert isinstance(private, ec.EllipticCurvePrivateKey)  # what flower-supernode accepts
    public = node.public_key.read_text()
    assert public.startswith("ecdsa-sha2-nistp384 ") and public.strip().endswith(" site0")
    assert serialization.load_ssh_public_key(public.encode()) == private.public_key()
    for secret in (tls.server_key, node.private_key):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600


def test_a_missing_key_or_certificate_is_refused_before_any_process_starts(tmp_path):
    missing = tmp_path / "no-such-key"
    deployment = LocalDeployment(
        tmp_path / "a", [{"partition-id": 0}], tls=True, auth=True,
        site_security=[SiteSecurity(private_key=str(missing))],
    )  # fmt: skip
    with pytest.raises(FederationError, match=re.escape(
        f"site 0: --auth-supernode-private-key: the SuperNode private key file '{missing}' "
        "does not exist"
    )):  # fmt: skip
        deployment.start()
    assert deployment.processes == []
    not_a_key = tmp_path / "not-a-key"
    not_a_key.write_text("hello")
    deployment = LocalDeployment(
        tmp_path / "b", [{"partition-id": 0}], tls=True, auth=True,
        site_security=[SiteSecurity(private_key=str(not_a_key))],
    )  # fmt: skip
    with pytest.raises(FederationError, match="site 0: .* is not an unencrypted OpenSSH"):
        deployment.start()
    assert deployment.processes == []
    # a broken certificate in the credentials folder
    broken = LocalDeployment(tmp_path / "c", [{"partition-id": 0}], tls=True, auth=False)
    write_tls_files(broken.credentials_dir)
    (broken.credentials_dir / "server.pem").write_text("not a certificate")
    with pytest.raises(ValueError, match="--ssl-certfile: .*server.pem' is not a PEM"):
        broken.start()
    assert broken.processes == []
    with pytest.raises(ValueError, match=r"auth=True\) needs TLS"):
        LocalDeployment(tmp_path / "d", [{}], tls=False, auth=True)


def test_supernode_refusals_are_explained():
    # the lines Flower 1.42's SuperNode logs before it exits
    assert "not registered" in explain_supernode_failure(
        "ERROR :     Exit Code: 305\n[code: 2004] Failed to activate SuperNode."
    )
    assert "--auth-supernode-private-key" in explain_supernode_failure(
        "[code: 2001] SuperNode authentication is enabled. All SuperNodes must be registered"
    )
    assert "--root-certificates" in explain_supernode_failure(
        "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"
    )
    assert explain_supernode_failure("INFO : Starting Flower SuperNode") is None


def test_federation_command_checks_its_flags_and_files(tmp_path, capsys):
    site = tmp_path / "a.csv"
    site.write_text("x,y\n0,1\n")
    assert cli_main(["federation", "up", "--sites", str(site), "--insecure", "--tls"]) == 2
    assert "--insecure cannot be combined with --tls" in capsys.readouterr().err
    assert cli_main(["federation", "up", "--sites", str(site), "nope.csv"]) == 2
    assert "--sites: site 1's file 'nope.csv' does not exist" in capsys.readouterr().err
    assert cli_main(["federation", "down", "--workdir", str(tmp_path)]) == 2
    assert "no running federation recorded" in capsys.readouterr().err


def test_the_app_manifest_declares_the_app_settings(tmp_path):
    import tomllib

    from fedcausal_flwr.flwr_app import DEFAULT_RUN_CONFIG

    app = write_app(tmp_path / APP_DIR, DEFAULT_RUN_CONFIG)
    flwr = tomllib.loads((app / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    assert flwr["config"] == DEFAULT_RUN_CONFIG
    assert flwr["components"] == {
        "serverapp": "fedcausal_flwr.flwr_app:server_app",
        "clientapp": "fedcausal_flwr.flwr_app:client_app",
    }
    assert flwr["fab-include"] == ["pyproject.toml"]


def test_credentials_for_a_federation_across_machines(tmp_path, capsys):
    out = tmp_path / "creds"
    command = ["federation", "credentials", "--out", str(out), "--host", "link.example.org",
               "10.0.0.5", "--sites", "hospital-a", "lab-b"]  # fmt: skip
    assert cli_main(command) == 0
    printed = capsys.readouterr().out
    assert f"--ssl-certfile {out / 'server.pem'}" in printed
    server = x509.load_pem_x509_certificate((out / "server.pem").read_bytes())
    server.verify_directly_issued_by(x509.load_pem_x509_certificate((out / "ca.crt").read_bytes()))
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["link.example.org"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["10.0.0.5"]
    for site in ("hospital-a", "lab-b"):
        assert (out / "sites" / site).exists() and (out / "sites" / f"{site}.pub").exists()
        assert f"register {out / 'sites' / site}.pub" in printed
    assert cli_main(command) == 2  # never overwrites keys
    assert "--out:" in capsys.readouterr().err


def test_federation_up_prints_a_run_its_sites_accept(tmp_path):
    """The `flwr run` command `federation up` prints asks for secure sums: a site's default
    policy lets FedPC's tables leave only as SecAgg+ sums with its roster."""
    from types import SimpleNamespace

    from fedcausal_flwr.federation.deployment.localhost import run_command
    from fedcausal_flwr.flwr_app import resolve_run_config

    deployment = SimpleNamespace(node_configs=[{}, {}, {}], flwr_home=tmp_path)
    command = run_command(deployment, tmp_path / "app", "fedpc", "alpha=0.05")
    config = parse_assignments(shlex.split(command)[-1], what="run config")
    assert config["secure"] == "true" and config["method"] == "fedpc"
    spec, settings, _ = resolve_run_config({**config, "num-clients": 3})
    assert settings["secure"] and spec.name == "fedpc"
