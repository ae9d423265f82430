"""A site decides what leaves it: declared disclosures, site policy, audit log, and a coordinator
that stays in its folders. Run through the deployment apps (``fedcausal_flwr.flwr_app``) on
the in-process grid, where each node's config is a site's own ``--node-config``."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fedcausal_flwr
from fedcausal_flwr import flwr_app
from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.specs import sample_partition
from fedcausal_flwr.federation.core.coordinator import CoordinatorError, CoordinatorFolders
from fedcausal_flwr.federation.core.disclosure import CLASSES
from fedcausal_flwr.federation.core.messages import Request, SitePolicyError
from fedcausal_flwr.federation.core.registry import builtin_methods, get_method
from fedcausal_flwr.federation.core.site_guard import (
    PolicyRefusal,
    SiteGuard,
)
from fedcausal_flwr.federation.core.site_policy import (
    PolicyConfigError,
    SitePolicy,
    default_audit_log,
)
from fedcausal_flwr.federation.runtime.localgrid import run_local
from fedcausal_flwr.federation.runtime.workflow import make_server_app
from fedcausal_flwr.protocols.fedpc import TABLES
from fedcausal_flwr.protocols.pooled import RAW_ROWS
from fedcausal_flwr.protocols.queries import encode_queries
from fedcausal_flwr.result import Result
from fedcausal_flwr.strategies.base import ProtocolStrategy

SITES = 3


@pytest.fixture(scope="module")
def asia_frames() -> list[pd.DataFrame]:
    part, _ = sample_partition("asia", 900, SITES, "iid", 0)
    return part.clients


def write_sites(tmp_path: Path, frames, *, signed: bool = True, **policy) -> list[dict]:
    """One CSV per site and its node config (data-path plus the given policy keys); with
    ``signed``, each site's signing key and the federation's roster (secure sums need them)."""
    from fedcausal_flwr.federation.core.site_identity import make_federation_keys

    names = [f"site-{k}" for k in range(len(frames))]
    keys = tmp_path / "keys"
    if not signed:
        identities: list[dict] = [{} for _ in frames]
    elif keys.exists():  # the same sites again (a second write of their files)
        identities = [{"site-key": str(keys / f"{name}.key"), "roster": str(keys / "roster.toml")}
                      for name in names]  # fmt: skip
    else:
        identities = make_federation_keys(keys, names)
    nodes = []
    for k, frame in enumerate(frames):
        path = tmp_path / f"site{k}.csv"
        frame.to_csv(path, index=False)
        nodes.append({"partition-id": k, "data-path": str(path), **identities[k], **policy})
    return nodes


def audit(node: dict) -> list[dict]:
    """A site's audit log (beside its data file unless its policy names one)."""
    path = Path(node.get("audit-log") or default_audit_log(node["data-path"]))
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_app(nodes, run_config: dict, server_app=None):
    return run_local(
        server_app or flwr_app.server_app,
        flwr_app.client_app,
        len(nodes),
        {"num-clients": len(nodes), **run_config},
        nodes,
    )


# ----------------------------------------------------------------------------- declarations
def test_every_builtin_action_is_declared_with_a_class():
    """Each built-in method declares every action its client answers that its strategy sends,
    with one of the four classes; methods sending rows say so."""
    for name in builtin_methods():
        spec = get_method(name)
        assert spec.disclosures, f"{name} declares no action"
        assert set(spec.disclosures.values()) <= set(CLASSES), name
        defaults = {option.name: option.default for option in spec.options}
        client = spec.make_client(0, pd.DataFrame({"a": [0, 1]}), spec.own_options(defaults))
        missing = set(spec.disclosures) - set(type(client).known_actions())
        assert not missing, f"{name} declares {missing}, which its client does not answer"
    raw = {n for n in builtin_methods() if "raw" in get_method(n).disclosures.values()}
    assert raw == {"pooled", "iod-pooled", "lcs-pooled"}


def test_a_registration_with_an_unknown_class_is_refused():
    from fedcausal_flwr.federation.core.disclosure import declare

    with pytest.raises(ValueError, match="disclosure class 'secret'"):
        declare("method 'x'", {"tables": "secret"})
    with pytest.raises(ValueError, match="built in"):
        declare("method 'x'", {"hello": "metadata"})


def test_an_undeclared_action_is_refused_in_process(asia_frames):
    """A strategy asking fedpc-vote's clients for their rows (the voting client has the
    handler, inherited): refused, and the run stops naming the site."""

    class AskRows(ProtocolStrategy):
        def next_request(self):
            return Request(RAW_ROWS, {"variables": self.variables, "levels": {}})

    spec = get_method("fedpc-vote")
    from fedcausal_flwr.federation.runtime.runners import (
        BoundClientMaker,
        PartitionedClients,
        run_protocol,
    )

    maker = BoundClientMaker(spec.make_client, spec.own_options(spec.resolve({})), spec.guard(0))
    with pytest.raises(SitePolicyError, match="site 0 refuses action 'raw_rows': method "
                       "'fedpc-vote' does not declare it"):  # fmt: skip
        run_protocol(AskRows(), PartitionedClients(maker, asia_frames), SITES)


# ----------------------------------------------------------------------------- site policy
def test_raw_row_methods_are_refused_by_the_default_policy(tmp_path, asia_frames):
    nodes = write_sites(tmp_path, asia_frames)
    with pytest.raises(SitePolicyError) as caught:
        run_app(nodes, {"method": "pooled"})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "site 0 refuses action 'hello': its policy has allow-raw-rows = false"
    )
    for node in nodes:
        log = audit(node)
        assert log and all(entry["outcome"] == "refused" for entry in log)
        assert {e["policy"] for e in log} == {"allow-raw-rows"}
        assert "refuses method 'pooled': it sends the site's rows" in log[0]["reason"]
        assert not [e for e in log if e["class"] == "raw" and e["outcome"] == "sent"]


def test_allowing_raw_rows_runs_pooled_as_in_process(tmp_path, asia_frames):
    nodes = write_sites(tmp_path, asia_frames, **{"allow-raw-rows": True})
    run_app(nodes, {"method": "pooled", "result-path": "pooled.json"})
    deployed = Result.load(tmp_path / "results" / "pooled.json")
    local = fedcausal_flwr.run("pooled", data=asia_frames)
    assert deployed.graph == local.graph
    sent = [e for e in audit(nodes[1]) if e["class"] == "raw"]
    assert len(sent) == 1 and sent[0]["outcome"] == "sent"
    assert sent[0]["arrays"][0]["shape"] == [len(asia_frames[1]), asia_frames[1].shape[1]]


def test_a_modified_serverapp_asking_rows_of_fedpc_vote_is_refused(tmp_path, asia_frames):
    """The run config says fedpc-vote; the ServerApp sends raw_rows anyway."""

    class AskRows(ProtocolStrategy):
        def next_request(self):
            return Request(RAW_ROWS, {"variables": self.variables, "levels": {}})

    nodes = write_sites(tmp_path, asia_frames, **{"allow-raw-rows": True})
    with pytest.raises(SitePolicyError, match="^site 0 refuses action 'raw_rows'.*; site 1"):
        run_app(nodes, {"method": "fedpc-vote"}, make_server_app(AskRows()))
    for k, node in enumerate(nodes):
        log = audit(node)
        assert [e["outcome"] for e in log] == ["sent", "refused"]  # hello, then the rows
        assert log[1]["action"] == "raw_rows" and log[1]["policy"] == "declared disclosures"
        assert log[1]["site"] == k and log[1]["method"] == "fedpc-vote"


def test_require_secure_refuses_a_plain_run_and_plain_tables(tmp_path, asia_frames):
    nodes = write_sites(tmp_path, asia_frames, **{"require-secure": True})
    with pytest.raises(SitePolicyError, match="refuses action 'hello': its policy has "
                       "require-secure = true"):  # fmt: skip
        run_app(nodes, {"method": "fedpc"})
    assert "refuses a plain run of 'fedpc'" in audit(nodes[0])[0]["reason"]

    class PlainTables(ProtocolStrategy):
        """Claims nothing: sends a tables query in a plain round of a run configured secure."""

        def next_request(self):
            return Request(TABLES, {"variables": self.variables}, [encode_queries([(0, 1, ())])])

    (tmp_path / "b").mkdir()
    nodes = write_sites(tmp_path / "b", asia_frames, **{"require-secure": True})
    with pytest.raises(SitePolicyError, match="refuses action 'tables': its policy has "
                       "require-secure = true"):  # fmt: skip
        run_app(nodes, {"method": "fedpc", "secure": True}, make_server_app(PlainTables()))
    log = audit(nodes[2])
    assert "its sum would reach the server outside SecAgg+" in log[1]["reason"]
    assert [(e["action"], e["outcome"], e.get("policy")) for e in log] == [
        ("hello", "sent", None),
        ("tables", "refused", "require-secure"),
    ]


def test_require_secure_answers_fedpc_through_secagg(tmp_path, asia_frames):
    """The worked example: a site allowing only secure sums runs fedpc with secure=true; its
    log shows metadata and SecAgg+ sums only, and the graph is the pooled one."""
    nodes = write_sites(tmp_path, asia_frames, **{"require-secure": True})
    run_app(nodes, {"method": "fedpc", "secure": True, "result-path": "fedpc.json"})
    result = Result.load(tmp_path / "results" / "fedpc.json")
    assert result.graph == fedcausal_flwr.run("pooled", data=asia_frames).graph
    for node in nodes:
        log = audit(node)
        assert {(e["class"], e["secure"]) for e in log} == {("metadata", False), ("summed", True)}
        # each sum names the sites it was with, as the site verified them against its roster
        sums = [e for e in log if e["class"] == "summed"]
        assert sums and all(e["participants"] == ["site-0", "site-1", "site-2"] for e in sums)


def test_require_secure_answers_fedci_pc_through_secagg(tmp_path):
    """The worked example's second method: fedCI's GLM blocks leave only as SecAgg+ sums."""
    from fedcausal_flwr.data.partition import split_site_effects
    from fedcausal_flwr.data.synthetic import random_dag

    types = {"X1": "continuous", "X2": "binary", "X3": "continuous", "X4": "continuous"}
    dag = random_dag(4, expected_degree=1.5, seed=1)
    frames = split_site_effects(dag, 600, SITES, seed=1, types=types, affected=[]).clients
    nodes = write_sites(tmp_path, frames, **{"require-secure": True})
    options = "site-effect=fixed"
    run_app(nodes, {"method": "fedci-pc", "secure": True, "options": options, "result-path": "c"})
    result = Result.load(tmp_path / "results" / "c")
    local = fedcausal_flwr.run("fedci-pc", data=frames, site_effect="fixed")
    assert result.graph == local.graph
    for node in nodes:
        assert {(e["class"], e["secure"]) for e in audit(node)} == {
            ("metadata", False),
            ("summed", True),
        }
    with pytest.raises(SitePolicyError, match="refuses action 'hello': its policy has "
                       "require-secure = true"):  # fmt: skip
        run_app(nodes, {"method": "fedci-pc", "options": options})
    assert "refuses a plain run of 'fedci-pc'" in audit(nodes[0])[-1]["reason"]


def test_hello_refuses_a_column_over_max_levels(tmp_path, asia_frames):
    frames = [f.assign(record=[f"patient-{k}-{i}" for i in range(len(f))]) for k, f in
              enumerate(asia_frames)]  # fmt: skip
    nodes = write_sites(tmp_path, frames)
    with pytest.raises(SitePolicyError, match="site 0 refuses action 'hello': its policy "
                       "has max-levels = 100") as caught:  # fmt: skip
        run_app(nodes, {"method": "fedpc"})
    assert "300" not in str(caught.value) and "record" not in str(caught.value)
    log = audit(nodes[0])
    assert [(e["action"], e["outcome"], e["policy"]) for e in log] == [
        ("hello", "refused", "max-levels")
    ]
    assert "column 'record' has 300 distinct values" in log[0]["reason"]
    assert "patient" not in json.dumps(log)


def test_a_5000_level_text_column_is_refused_at_the_site():
    frame = pd.DataFrame({"id": [f"r{i}" for i in range(5000)], "a": np.arange(5000) % 2})
    spec = get_method("fedpc")
    guard = spec.guard(0, SitePolicy())
    client = spec.client(0, frame, spec.resolve({}), guard)
    with pytest.raises(PolicyRefusal, match="column 'id' has 5000 distinct"):
        client.fit([], {"action": "hello", "payload": json.dumps({"max_levels": 1000})})


def test_allow_methods_and_policy_files(tmp_path, asia_frames):
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text('allow-methods = ["fedpc", "fedci-pc"]\nmax-levels = 20\n')
    nodes = write_sites(tmp_path, asia_frames, **{"policy-file": str(policy_file)})
    with pytest.raises(SitePolicyError, match="refuses action 'hello': its policy has "
                       "allow-methods = fedci-pc, fedpc"):  # fmt: skip
        run_app(nodes, {"method": "pc-vote"})
    run_app(nodes, {"method": "fedpc", "secure": True})
    both = write_sites(tmp_path, asia_frames[:1], **{"policy-file": str(policy_file),
                                                     "max-levels": 5})  # fmt: skip
    with pytest.raises(PolicyConfigError, match="'max-levels' is set both"):
        SitePolicy.of_node(both[0])
    with pytest.raises(PolicyConfigError, match="node config key 'allow-raw-row' is unknown"):
        SitePolicy.of_node({"data-path": "x.csv", "allow-raw-row": True})
    with pytest.raises(PolicyConfigError, match="allow-raw-rows must be true or false"):
        SitePolicy.of_node({"data-path": "x.csv", "allow-raw-rows": "maybe"})
    assert SitePolicy.of_node({"partition-id": 0, "num-partitions": 2}) is None  # simulated


def test_plugins_need_the_operator_and_every_site(tmp_path, asia_frames, monkeypatch):
    """A plugin module the operator does not allow is refused before the first round, and not
    imported (it would leave a marker); one the operator allows is refused by a site whose
    policy does not name it."""
    marker = tmp_path / "imported"
    (tmp_path / "fedcausal_marker_plugin.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    nodes = write_sites(tmp_path, asia_frames)
    run = {"method": "fedpc", "plugins": "fedcausal_marker_plugin"}
    with pytest.raises(CoordinatorError, match="does not import module 'fedcausal_marker_plugin'"):
        run_app(nodes, run)
    assert not marker.exists() and not audit(nodes[0])
    monkeypatch.setenv("FEDCAUSAL_ALLOW_PLUGINS", "fedcausal_marker_plugin")
    with pytest.raises(SitePolicyError, match="site 0 refuses action 'hello': its policy "
                       "has allow-plugins = none"):  # fmt: skip
        run_app(nodes, run)
    assert "refuses to import plugin module" in audit(nodes[0])[0]["reason"]
    assert {e["policy"] for e in audit(nodes[0])} == {"allow-plugins"}


# ----------------------------------------------------------------------------- audit vs ledger
def test_the_site_logs_agree_with_the_servers_ledger(tmp_path, asia_frames):
    nodes = write_sites(tmp_path, asia_frames)
    run_app(nodes, {"method": "fedpc-vote", "result-path": "vote.json"})
    result = Result.load(tmp_path / "results" / "vote.json")
    logs = [audit(node) for node in nodes]
    for entry in result.ledger:
        lines = [e for log in logs for e in log if e["round"] == entry["round"]]
        if entry["kind"] == "hello":  # hello travels before the round numbers are shared
            lines = [e for log in logs for e in log if e["action"] == "hello"]
        assert len(lines) == entry["n_clients"]
        assert {e["action"] for e in lines} == {entry["kind"]}
        shapes = sorted({tuple(a["shape"]) for e in lines for a in e["arrays"][:1]})
        if entry["arrays"]:
            assert sorted(map(tuple, entry["arrays"][0]["shapes"])) == shapes
        assert all(e["meta_keys"] == entry["meta_keys"] for e in lines) or entry["kind"] == "hello"
    assert sum(len(log) for log in logs) == sum(e["n_clients"] for e in result.ledger)


def test_the_audit_command_summarises_a_sites_log(tmp_path, asia_frames, capsys):
    from fedcausal_flwr.cli import main as cli_main

    nodes = write_sites(tmp_path, asia_frames)
    run_app(nodes, {"method": "fedpc-vote"})
    with pytest.raises(SitePolicyError):
        run_app(nodes, {"method": "pooled"})
    log = default_audit_log(nodes[0]["data-path"])
    assert cli_main(["audit", log]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    # each run has its own id (as a SuperLink gives), so each is summarised on its own
    assert "method fedpc-vote, site 0" in out and "method pooled, site 0" in out
    assert any(line.startswith("  local_result") and "prune, pvalues" in line for line in lines)
    assert any(line.startswith("  metadata") for line in lines)
    assert "refused: hello [allow-raw-rows] site 0 refuses method 'pooled'" in out
    assert cli_main(["audit", log, "--run", "99"]) == 2
    assert "--run 99: no record of that run" in capsys.readouterr().err
    (tmp_path / "broken.jsonl").write_text('{"time": 1}\n')
    assert cli_main(["audit", str(tmp_path / "broken.jsonl")]) == 2
    assert "line 1 is not an audit record" in capsys.readouterr().err


# ----------------------------------------------------------------------------- coordinator
@pytest.mark.parametrize(
    "result_path, problem",
    [
        ("/etc/fedcausal-result.json", "must be a relative path"),
        ("../outside.json", "without '..'"),
        ("link/result.json", "leads out of the coordinator's folder"),
        ("existing.txt", "is not a fedcausal-flwr result"),
    ],
)
def test_result_path_stays_in_the_results_folder(tmp_path, asia_frames, result_path, problem):
    results = tmp_path / "results"
    results.mkdir()
    (results / "link").symlink_to(tmp_path)
    (results / "existing.txt").write_text("someone's notes\n")
    nodes = write_sites(tmp_path, asia_frames)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(CoordinatorError, match=problem):
        run_app(nodes, {"method": "fedpc", "result-path": result_path})
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written, no audit
    assert (results / "existing.txt").read_text() == "someone's notes\n"


@pytest.mark.parametrize("planted", ["link", "foreign"])
def test_the_evidence_beside_a_result_stays_in_the_results_folder(tmp_path, asia_frames, planted):
    """A coordinator plants r.evidence.npz (a symlink out of its folder, or a file not written
    by a result) and asks for result-path r.json: the companion is never written through it."""
    results = tmp_path / "results"
    results.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("someone's file\n")
    if planted == "link":
        (results / "r.evidence.npz").symlink_to(outside)
    else:
        (results / "r.evidence.npz").write_text("someone's notes\n")
    nodes = write_sites(tmp_path, asia_frames)
    with pytest.raises(CoordinatorError, match="r.evidence.npz beside it is a link or a file no"):
        run_app(nodes, {"method": "fedpc", "result-path": "r.json"})
    assert outside.read_text() == "someone's file\n"
    assert not (results / "r.json").exists()


def test_truth_stays_in_the_truth_folder_and_is_never_quoted(tmp_path, asia_frames):
    secret = tmp_path / "secret.txt"
    secret.write_text("secret_token=hunter2\n")
    secret.chmod(0o600)
    nodes = write_sites(tmp_path, asia_frames)
    for truth, problem in [(str(secret), "must be a relative path"),
                           ("../secret.txt", "without '..'"),
                           ("missing.csv", "no such file")]:  # fmt: skip
        with pytest.raises(CoordinatorError, match=problem) as caught:
            run_app(nodes, {"method": "fedpc", "truth": truth})
        assert "hunter2" not in str(caught.value)
        assert not audit(nodes[0])  # refused before the first round
    (tmp_path / "truth").mkdir()
    (tmp_path / "truth" / "bad.csv").write_text("secret_token=hunter2\n")
    with pytest.raises(ValueError) as caught:
        run_app(nodes, {"method": "fedpc", "secure": True, "truth": "bad.csv",
                        "result-path": "r.json"})  # fmt: skip
    assert "hunter2" not in str(caught.value) and "cause,effect" in str(caught.value)
    assert Result.load(tmp_path / "results" / "r.json").graph is not None  # saved before scoring


def test_a_truth_url_is_refused_without_a_request(tmp_path, asia_frames):
    requests = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            requests.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"cause,effect\nasia,tub\n")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/t.csv"
        with pytest.raises(CoordinatorError, match="is a URL; the coordinator fetches nothing"):
            run_app(write_sites(tmp_path, asia_frames), {"method": "fedpc", "truth": url})
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert requests == []


def test_coordinator_folders_default_under_the_data_home(tmp_path):
    folders = CoordinatorFolders.from_environment({"XDG_DATA_HOME": str(tmp_path)})
    assert folders.results == tmp_path / "fedcausal-flwr" / "results"
    assert folders.truth == tmp_path / "fedcausal-flwr" / "truth" and not folders.plugins


def test_guard_without_policy_enforces_the_declaration_only():
    guard = SiteGuard("m", {"a": "raw"}, site=3)
    assert guard.check("a") == "raw" and guard.check("hello") == "metadata"
    with pytest.raises(PolicyRefusal, match="site 3 refuses action 'b'"):
        guard.check("b")


def test_every_builtin_client_refuses_what_its_method_does_not_declare(monkeypatch):
    """A client class answers more actions than some of its methods declare (the shared
    discrete client's ``raw_rows``, ``local_graph``, ...). Built as every entry point builds it,
    each method's client refuses each of those before its handler runs."""
    from fedcausal_flwr.clients.base import ProtocolClient

    def handler_ran(self, name, payload, arrays):
        raise AssertionError(f"the handler of {name!r} ran")

    monkeypatch.setattr(ProtocolClient, "answer", handler_ran)
    frame = pd.DataFrame({"a": [0, 1, 0, 1], "b": [1, 0, 0, 1]})
    payload = json.dumps({"variables": ["a", "b"], "levels": {"a": [0, 1], "b": [0, 1]}})
    tried = 0
    for name in builtin_methods():
        spec = get_method(name)
        raw = {"target": "a"} if "target" in spec.options else {}
        client = spec.client(0, frame, spec.resolve(raw))
        for action in type(client).known_actions():
            if action in spec.disclosures or action in ("hello", "bootstrap"):
                continue
            tried += 1
            with pytest.raises(PolicyRefusal, match=f"refuses action '{action}'"):
                client.fit([], {"action": action, "payload": payload, "round": 1})
    assert tried >= 40  # the shared clients' extra actions, for most methods


def test_the_docs_policy_table_is_the_declared_one():
    """docs/deploy.md's table of policy keys is site_policy.policy_markdown(), so a key is
    stated once (its declaration) and the docs cannot drift from it."""
    from fedcausal_flwr.federation.core.site_policy import POLICY_KEYS, policy_markdown

    doc = (Path(__file__).resolve().parents[1] / "docs" / "deploy.md").read_text()
    assert policy_markdown() in doc
    listed = next(line for line in doc.splitlines() if line.startswith("| `policy-file`"))
    assert all(f"`{key}`" in listed for key in POLICY_KEYS)


def test_a_dropout_ends_a_secure_search_with_its_graph_so_far(tmp_path, asia_frames, monkeypatch):
    """A site drops out in a secure round at depth 1: the others will not unmask a sum with a
    dropped participant, nor sum without every roster site, so the search ends with the depth-0
    graph and says why (a note, and the result's extra["stopped"]), never two sums over
    different sets."""
    from fedcausal_flwr.clients.fedpc import FedPCClient
    from fedcausal_flwr.strategies.search_stop import SearchStoppedNote

    tables = FedPCClient.tables
    calls = {"site 2": 0}

    def drop_site_2_at_depth_1(self, request, arrays):
        if self.partition_id == 2:
            calls["site 2"] += 1
            if calls["site 2"] > 1:
                raise RuntimeError("the site's machine went away")
        return tables(self, request, arrays)

    monkeypatch.setattr(FedPCClient, "tables", drop_site_2_at_depth_1)
    monkeypatch.setattr(drop_site_2_at_depth_1, "_protocol_action", "tables", raising=False)
    nodes = write_sites(tmp_path, asia_frames)
    with pytest.warns(SearchStoppedNote, match="ended its search after depth 0"):
        run_app(nodes, {"method": "fedpc", "secure": True, "result-path": "r.json"})
    result = Result.load(tmp_path / "results" / "r.json")
    assert "stopped before depth 1" in result.extra["stopped"]
    monkeypatch.undo()
    capped = fedcausal_flwr.run("fedpc", data=asia_frames, max_depth=0)
    assert result.graph == capped.graph
    for node in nodes[:2]:  # every sum a site took part in was with all three
        sums = [e for e in audit(node) if e["class"] == "summed" and e["outcome"] == "sent"]
        assert sums and all(len(e["participants"]) == 3 for e in sums)


def test_sites_with_different_columns_run_fedcdnv_as_in_process(tmp_path, asia_frames):
    """A request names the union of the sites' columns: a column a site does not have at all is
    another site's (only one its policy keeps home is refused), so FedCDnv runs under the
    default policy as in process."""
    from fedcausal_flwr.data.partition import split_iid, split_variable_subsets

    pooled = load_network("asia").sample(900, seed=11)
    part = split_variable_subsets(split_iid(pooled, SITES, seed=0), fraction=0.85, seed=2)
    frames = part.clients
    assert len({tuple(f.columns) for f in frames}) == SITES
    nodes = write_sites(tmp_path, frames)
    run_app(nodes, {"method": "fedcdnv", "result-path": "v.json"})
    assert (
        Result.load(tmp_path / "results" / "v.json").graph
        == fedcausal_flwr.run("fedcdnv", data=frames).graph
    )


def test_the_audit_command_names_each_sums_sites_and_every_error(tmp_path, asia_frames, capsys):
    from fedcausal_flwr.cli import main as cli_main

    nodes = write_sites(tmp_path, asia_frames)
    run_app(nodes, {"method": "fedpc", "secure": True})
    from rogue_server import RogueCoordinator  # a run config the project's ServerApp refuses

    (outcome,) = (
        RogueCoordinator(nodes[:1], {"method": "fedpc-vote", "secure": True}).hello().values()
    )
    assert outcome.refused and "the run config is invalid" in outcome.message
    capsys.readouterr()
    assert cli_main(["audit", default_audit_log(nodes[0]["data-path"])]) == 0
    out = capsys.readouterr().out
    assert "  summed with: site-0, site-1, site-2" in out
    assert "  error: hello [ProtocolError] the run config: method 'fedpc-vote'" in out
