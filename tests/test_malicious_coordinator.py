"""A malicious coordinator writes its own ServerApp and speaks Flower's Message API to the sites
directly (:mod:`rogue_server`): it skips hello, guesses levels, forges fields. Each test states
what a site does under its policy, what its audit log shows, and that no error text leaving it
carries a data value, a count, a row or a file's content."""

from __future__ import annotations

import builtins
import io
import itertools
import json
import os
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from flwr.app import ConfigRecord, RecordDict
from rogue_server import Outcome, RogueCoordinator
from test_site_policy import write_sites

import fedcausal_flwr
from fedcausal_flwr import flwr_app
from fedcausal_flwr.data.specs import sample_partition
from fedcausal_flwr.federation.core.messages import SitePolicyError
from fedcausal_flwr.federation.core.site_policy import default_audit_log
from fedcausal_flwr.federation.runtime.envelope import RECORD, TENSOR_TYPE, TENSORS
from fedcausal_flwr.federation.runtime.localgrid import run_local
from fedcausal_flwr.privacy.accounting import rho_for
from fedcausal_flwr.privacy.charges import PrivacyCharge, PrivacyPlan
from fedcausal_flwr.protocols.fedpc import SPARSE_TABLES, TABLES, TableRequest
from fedcausal_flwr.protocols.queries import encode_queries
from fedcausal_flwr.result import Result

SITES = 3
ROWS = 500
SECRET = "patient P00042 HIV+"
#: what no error text leaving a site may hold: identifiers, a lab value, a level, the secret
LEAKS = ("P0", "13.3", "'yes'", "'no'", SECRET)
ROW_COUNT = re.compile(r"\b\d+ rows\b")


@pytest.fixture(scope="module")
def asia_frames() -> list[pd.DataFrame]:
    part, _ = sample_partition("asia", SITES * ROWS, SITES, "iid", 0)
    return [frame.reset_index(drop=True) for frame in part.clients]


@pytest.fixture(scope="module")
def asia_columns(asia_frames) -> list[str]:
    return [str(c) for c in asia_frames[0].columns]


@pytest.fixture(scope="module")
def hospital_frames(asia_frames) -> list[pd.DataFrame]:
    """Asia plus a patient identifier and a decimal lab value (13.3 in every site)."""
    rng = np.random.default_rng(7)
    frames = []
    for k, frame in enumerate(asia_frames):
        lab = np.round(rng.normal(13.0, 1.5, len(frame)), 1)
        lab[0] = 13.3
        ids = [f"P{k * ROWS + i:05d}" for i in range(len(frame))]
        frames.append(frame.assign(lab=lab).assign(patient_id=ids))
    return frames


@pytest.fixture
def sites(tmp_path, hospital_frames):
    """A writer of the sites' CSV files and node configs (with the given policy keys)."""

    def write(**policy) -> list[dict]:
        folder = tmp_path / f"sites{len(list(tmp_path.glob('sites*')))}"
        folder.mkdir()
        return write_sites(folder, hospital_frames, **policy)

    return write


@pytest.fixture
def shared(asia_columns) -> dict:
    """The policy keys sharing asia's columns only (the identifier and the lab value stay)."""
    return {"share-columns": ",".join(asia_columns)}


def audit(node: dict, run: int | None = None) -> list[dict]:
    """A site's audit log (of one run, if given)."""
    path = Path(default_audit_log(node["data-path"]))
    if not path.exists():
        return []
    log = [json.loads(line) for line in path.read_text().splitlines()]
    return [e for e in log if run is None or e["run"] == str(run)]


def assert_no_data(text: str) -> None:
    """No data value, count, row or file content in an error text that left a site."""
    for word in LEAKS:
        assert word not in text, f"{word!r} left a site: {text}"
    assert not ROW_COUNT.search(text), f"a row count left a site: {text}"


def assert_refused(
    outcomes: dict[int, Outcome], key: str, nodes: list[dict], run: int, action: str
) -> None:
    """Every site refused ``action`` under policy ``key``, said nothing of its data, and
    logged the refusal."""
    assert sorted(outcomes) == list(range(len(nodes)))
    for site, outcome in outcomes.items():
        assert outcome.refused, f"site {site} did not refuse {action!r}: {outcome}"
        assert outcome.policy == key, f"site {site}: {outcome.message}"
        assert_no_data(outcome.reason)
        lines = [e for e in audit(nodes[site], run) if e["action"] == action]
        assert lines, f"site {site} logged no {action!r}"
        assert (lines[-1]["outcome"], lines[-1].get("policy")) == ("refused", key)
        assert lines[-1]["reason"]


def table_request(columns: list[str], levels: dict, queries, **fields) -> tuple[dict, list]:
    """A ``tables`` payload over ``columns`` and its query matrix."""
    return TableRequest(columns, levels, **fields).encode(), [encode_queries(queries)]


def binary_levels(columns: list[str]) -> dict[str, list[str]]:
    return {c: ["no", "yes"] for c in columns}


# ----------------------------------------------------------------------------- hello first
@pytest.mark.parametrize("enveloped", [False, True], ids=["legacy", "envelope"])
def test_attack1_rows_with_identifiers_without_hello(
    sites, asia_columns, hospital_frames, enveloped
):
    """Tables over the identifier and every column, hello skipped: refused ("hello"), whether
    the request comes in Flower's records or in the project's envelope."""
    nodes = sites()
    rogue = RogueCoordinator(nodes, enveloped=enveloped)
    variables = ["patient_id", *asia_columns, "lab"]
    levels = {
        **binary_levels(asia_columns),
        "patient_id": [f"P{i:05d}" for i in range(SITES * ROWS)],
        "lab": sorted(set(np.concatenate([f["lab"].to_numpy() for f in hospital_frames]))),
    }
    queries = [(0, j, ()) for j in range(1, len(variables))]
    payload, arrays = table_request(variables, levels, queries)
    for action in (SPARSE_TABLES, TABLES):
        assert_refused(rogue.send(action, payload, arrays), "hello", nodes, rogue.run_id, action)


def test_attack1_a_refused_hello_binds_the_run(sites, asia_columns):
    """The default policy refuses hello (an identifier column); later requests: "hello"."""
    nodes = sites()
    rogue = RogueCoordinator(nodes)
    assert_refused(rogue.hello(), "max-levels", nodes, rogue.run_id, "hello")
    levels = {
        **binary_levels(asia_columns),
        "patient_id": [f"P{i:05d}" for i in range(SITES * ROWS)],
    }
    payload, arrays = table_request(["patient_id", "asia"], levels, [(0, 1, ())])
    for action in (SPARSE_TABLES, TABLES):
        assert_refused(rogue.send(action, payload, arrays), "hello", nodes, rogue.run_id, action)


@pytest.mark.parametrize("enveloped", [False, True], ids=["legacy", "envelope"])
def test_attack1_unshared_columns_stay_home(sites, shared, asia_columns, enveloped):
    """share-columns leaves the identifier and the lab value out of hello; a request naming
    either (the lab value with guessed levels) is refused ("hello"), in either form."""
    nodes = sites(**shared, **{"allow-plain-statistics": True})
    rogue = RogueCoordinator(nodes, enveloped=enveloped)
    for site, outcome in rogue.hello().items():
        assert outcome.answered, f"site {site}: {outcome.message}"
        meta = outcome.meta
        assert meta["columns"] == asia_columns
        assert not {"patient_id", "lab"} & (set(meta["levels"]) | set(meta["dtypes"]))
        assert "P0" not in json.dumps(meta) and "13.3" not in json.dumps(meta)
    ids = {**binary_levels(asia_columns), "patient_id": [f"P{i:05d}" for i in range(SITES * ROWS)]}
    payload, arrays = table_request(["asia", "patient_id"], ids, [(0, 1, ())])
    assert_refused(rogue.send(TABLES, payload, arrays), "hello", nodes, rogue.run_id, TABLES)
    guessed = {**binary_levels(asia_columns), "lab": [round(10 + v / 10, 1) for v in range(60)]}
    payload, arrays = table_request(["lab", "either"], guessed, [(0, 1, ())])
    assert_refused(rogue.send(TABLES, payload, arrays), "hello", nodes, rogue.run_id, TABLES)


#: envelopes a coordinator forges, each carrying the secret where a value could go, and the key
#: the site's refusal names: an unknown envelope key, tensors that are not bytes, a list where a
#: config entry is a scalar
FORGED_ENVELOPES = {
    "unknown-key": ({TENSORS: [], TENSOR_TYPE: "x", "fedcausal.rows": SECRET}, "fedcausal.rows"),
    "tensors-not-bytes": ({TENSORS: [SECRET], TENSOR_TYPE: "x"}, TENSORS),
    "list-entry": ({TENSORS: [], TENSOR_TYPE: "x", "payload": [SECRET]}, "payload"),
}


@pytest.mark.parametrize("forged", FORGED_ENVELOPES)
def test_attack_a_forged_envelope_is_refused_without_its_values(sites, forged):
    """An envelope that is not what the project's ServerApp sends is refused before any client
    code reads it: the reply names the key, never the value; the site's audit log has it."""
    nodes = sites(**{"allow-plain-statistics": True})
    rogue = RogueCoordinator(nodes)
    forged_entries, key = FORGED_ENVELOPES[forged]
    entries = {"action": "hello", "payload": "{}", "round": 1, **forged_entries}
    outcomes = rogue.send_content(lambda: RecordDict({RECORD: ConfigRecord(entries)}))
    assert sorted(outcomes) == list(range(SITES))
    for site, outcome in outcomes.items():
        assert outcome.refused, f"site {site}: {outcome}"
        assert "not a well-formed envelope" in outcome.message
        assert_no_data(outcome.reason)
        [line] = [e for e in audit(nodes[site], rogue.run_id) if e["outcome"] == "error"]
        assert line["error"] == "ProtocolError" and repr(key) in line["reason"]
        assert SECRET not in line["reason"]


# ----------------------------------------------------------------------------- levels
def test_attack2_levels_leaving_out_a_value_are_refused_without_values(sites, shared, asia_columns):
    """Levels that leave out a value the site reported in hello: refused ("hello"), with no
    value or count in the reason; the site's log keeps the refusal."""
    nodes = sites(**shared, **{"allow-plain-statistics": True})
    rogue = RogueCoordinator(nodes)
    assert all(o.answered for o in rogue.hello().values())
    either, asia = asia_columns.index("either"), asia_columns.index("asia")
    for column, kept in (("either", ["yes"]), ("asia", ["no"])):
        levels = {**binary_levels(asia_columns), column: kept}
        payload, arrays = table_request(asia_columns, levels, [(asia, either, ())])
        assert_refused(rogue.send(TABLES, payload, arrays), "hello", nodes, rogue.run_id, TABLES)
        for node in nodes:
            assert column in audit(node, rogue.run_id)[-1]["reason"]


def test_attack2_require_secure_refuses_plain_tables_without_values(sites, shared, asia_columns):
    """The same request sent plainly to require-secure sites: refused (require-secure)."""
    nodes = sites(**shared, **{"require-secure": True})
    rogue = RogueCoordinator(nodes, {"secure": True})
    assert all(o.answered for o in rogue.hello().values())
    levels = {**binary_levels(asia_columns), "either": ["yes"]}
    payload, arrays = table_request(asia_columns, levels, [(0, asia_columns.index("either"), ())])
    outcomes = rogue.send(TABLES, payload, arrays)
    assert_refused(outcomes, "require-secure", nodes, rogue.run_id, TABLES)


def test_require_secure_sites_refuse_every_attack_without_values(sites, shared, asia_columns):
    """The attacks against sites with require-secure: a voting run's local results (p-values
    over any columns, before or after hello) and its hello are refused, as is a secure fedpc
    run's plain or oversized tables request; no reason carries data and every refusal is
    logged."""
    nodes = sites(**shared, **{"require-secure": True})
    levels = binary_levels(asia_columns)
    pair = [encode_queries([(0, 1, ())])]
    everything = ["patient_id", *asia_columns, "lab"]
    vote = RogueCoordinator(nodes, {"method": "fedpc-vote"})
    payload = {"variables": everything, "levels": levels, "test": "chi2", "alpha": 0.05,
               "reliability": None}  # fmt: skip
    for outcomes in (vote.send("pvalues", payload, pair), vote.hello(),
                     vote.send("pvalues", payload, pair)):  # fmt: skip
        assert all(o.refused and o.policy == "require-secure" for o in outcomes.values())
        assert all(not o.reason or assert_no_data(o.reason) is None for o in outcomes.values())
    secure = RogueCoordinator(nodes, {"method": "fedpc", "secure": True})
    assert all(o.answered for o in secure.hello().values())
    for queries in ([(0, 1, ())], [(0, 1, tuple(range(2, 8)))] * 2**16):
        outcomes = secure.send(TABLES, *table_request(asia_columns, levels, queries))
        assert_refused(outcomes, "require-secure", nodes, secure.run_id, TABLES)
    for node in nodes:
        log = audit(node, vote.run_id) + audit(node, secure.run_id)
        assert all(e["outcome"] == "refused" for e in log if e["action"] != "hello" or
                   e["run"] == str(vote.run_id))  # fmt: skip


# ----------------------------------------------------------------------------- privacy
def central_plan() -> dict:
    return PrivacyPlan(1.0, 1e-6, rho_for(1.0, 1e-6) / 2).encode()


def central_charge() -> dict:
    return PrivacyCharge("discrete Gaussian", 1, 1e12, 1 / 2e12, 1.0, 1e-6).encode()


def test_attack5_forged_central_noise_is_refused(sites, shared, asia_columns):
    """A dp-epsilon site refuses a central plan ("dp-allow-central") and a central charge,
    whether or not a hello came first."""
    nodes = sites(**shared, **{"dp-epsilon": 1})
    rogue = RogueCoordinator(nodes)
    assert_refused(
        rogue.hello(privacy=central_plan()), "dp-allow-central", nodes, rogue.run_id, "hello"
    )
    payload, arrays = table_request(
        asia_columns, binary_levels(asia_columns), [(0, 1, ())], privacy=central_charge()
    )
    for coordinator in (rogue, RogueCoordinator(nodes)):  # after the refused hello; without one
        outcomes = coordinator.send(TABLES, payload, arrays)
        keys = {o.policy for o in outcomes.values()}
        assert keys <= {"hello", "dp-allow-central"}, keys
        assert_refused(outcomes, keys.pop(), nodes, coordinator.run_id, TABLES)


def test_attack9_a_refused_plain_hello_binds_the_run(sites, shared, asia_columns):
    """A dp-epsilon site refuses a hello without a privacy plan ("dp-epsilon"); a tables
    request in the same run is refused ("hello")."""
    nodes = sites(**shared, **{"dp-epsilon": 1})
    rogue = RogueCoordinator(nodes)
    assert_refused(rogue.hello(), "dp-epsilon", nodes, rogue.run_id, "hello")
    payload, arrays = table_request(asia_columns, binary_levels(asia_columns), [(0, 1, ())])
    assert_refused(rogue.send(TABLES, payload, arrays), "hello", nodes, rogue.run_id, TABLES)


# ----------------------------------------------------------------------------- memory
def test_attack10_a_request_too_large_is_refused_before_allocating(sites, shared, asia_columns):
    """Dense tables of 4 x 2**22 cells (128 MiB), max_cells set huge: refused
    ("max-request-cells") with far less memory than the tables."""
    nodes = sites(**shared, **{"allow-plain-statistics": True})
    rogue = RogueCoordinator(nodes)
    assert all(o.answered for o in rogue.hello().values())
    # every pair given the six other columns: 2**8 cells a table, 2**16 tables
    pairs = list(itertools.combinations(range(8), 2))
    each = [(x, y, tuple(v for v in range(8) if v not in (x, y))) for x, y in pairs]
    queries = list(itertools.islice(itertools.cycle(each), 2**16))
    payload, arrays = table_request(
        asia_columns, binary_levels(asia_columns), queries, max_cells=2**40
    )
    tracemalloc.start()
    try:
        outcomes = rogue.send(TABLES, payload, arrays, sites=[0])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert_refused(outcomes, "max-request-cells", nodes[:1], rogue.run_id, TABLES)
    assert peak < 32 * 2**20, f"peak {peak / 2**20:.0f} MiB for a refused request"


def test_a_table_wider_than_the_declared_depth_is_refused(sites, shared, asia_columns):
    """The run config declares max-depth 1 (tables over at most three variables); a request for
    a table over five is outside the run the site accepted ("hello"), before any counting."""
    nodes = sites(**shared, **{"allow-plain-statistics": True})
    rogue = RogueCoordinator(nodes, {"method": "fedpc", "options": "max-depth=1"})
    assert all(o.answered for o in rogue.hello().values())
    levels = binary_levels(asia_columns)
    narrow = rogue.send(TABLES, *table_request(asia_columns, levels, [(0, 1, (2,))]))
    assert all(o.answered for o in narrow.values())
    wide = rogue.send(TABLES, *table_request(asia_columns, levels, [(0, 1, (2, 3, 4))]))
    assert_refused(wide, "hello", nodes, rogue.run_id, TABLES)
    assert "wider than the run's declared depth" in audit(nodes[0], rogue.run_id)[-1]["reason"]


def test_a_second_different_hello_is_refused_and_binds_the_run(sites, shared, asia_columns):
    """A hello asking for more levels after the first was accepted: refused, and the site
    answers nothing more in the run."""
    nodes = sites(**shared, **{"allow-plain-statistics": True})
    rogue = RogueCoordinator(nodes)
    assert all(o.answered for o in rogue.hello().values())
    assert all(o.answered for o in rogue.hello().values())  # the same hello again: fine
    assert_refused(rogue.hello(max_levels=5000), "hello", nodes, rogue.run_id, "hello")
    levels = binary_levels(asia_columns)
    again = rogue.send(TABLES, *table_request(asia_columns, levels, [(0, 1, ())]))
    assert_refused(again, "hello", nodes, rogue.run_id, TABLES)


# ----------------------------------------------------------------------------- files
@pytest.fixture
def secret_file(tmp_path, monkeypatch):
    """A file holding a secret line, and the list of its opens inside a site's ClientApp."""
    path = tmp_path / "hiv-cases.txt"
    path.write_text(SECRET + "\n")
    path.chmod(0)  # as root this does not stop a read: opens are recorded instead
    opened: list[str] = []
    at_site = [False]
    wrapped = {"io": io.open, "builtins": builtins.open, "os": os.open}

    def recording(name):
        def open_(file, *args, **kwargs):
            if at_site[0] and isinstance(file, str | os.PathLike):
                if os.path.realpath(file) == os.path.realpath(path):
                    opened.append(str(file))
            return wrapped[name](file, *args, **kwargs)

        return open_

    monkeypatch.setattr(io, "open", recording("io"))
    monkeypatch.setattr(builtins, "open", recording("builtins"))
    monkeypatch.setattr(os, "open", recording("os"))

    def site_app(message, context):
        at_site[0] = True
        try:
            return flwr_app.client_app(message, context)
        finally:
            at_site[0] = False

    return path, opened, site_app


def assert_no_file(text: str, path: Path) -> None:
    assert SECRET not in text and "HIV" not in text, text
    assert str(path) not in text and path.name not in text, text


def test_attack7_a_knowledge_path_is_not_read_through_the_serverapp(
    sites, shared, secret_file, capfd
):
    """knowledge=<a file> with the project's ServerApp: the run fails asking for the statements
    inline; the file's line and path reach nobody and no site opens it."""
    path, opened, site_app = secret_file
    nodes = sites(**shared, **{"allow-plain-statistics": True})
    run = {"num-clients": SITES, "method": "fedpc", "options": f"knowledge={path}"}
    with pytest.raises(Exception) as caught:
        run_local(flwr_app.server_app, site_app, SITES, run, nodes)
    out, err = capfd.readouterr()
    text = f"{caught.value}\n{out}\n{err}"
    assert_no_file(text, path)
    assert re.search("inline", str(caught.value), re.I), str(caught.value)
    assert not re.search("permission|cannot read", text, re.I), text
    assert opened == []


def test_attack7_a_knowledge_path_sent_to_the_sites_is_not_read(sites, shared, secret_file):
    """The same run config sent by a rogue ServerApp straight to the sites: none answers or
    opens the file, no reason quotes its line or path, and each logs why (statements inline)."""
    path, opened, site_app = secret_file
    nodes = sites(**shared, **{"allow-plain-statistics": True})
    rogue = RogueCoordinator(nodes, {"options": f"knowledge={path}"}, client_app=site_app)
    outcomes = rogue.hello()
    assert sorted(outcomes) == list(range(SITES))
    for site, outcome in outcomes.items():
        assert not outcome.answered, f"site {site} answered hello"
        assert_no_file(outcome.reason, path)
        log = audit(nodes[site], rogue.run_id)
        assert log and log[-1]["outcome"] in ("refused", "error")
        assert re.search("inline", log[-1]["reason"], re.I), log[-1]
        assert not re.search("permission|cannot read", log[-1]["reason"], re.I), log[-1]
    assert opened == []


# ----------------------------------------------------------------------------- honest runs
def test_honest_plain_fedpc_runs_as_in_process(sites, shared, asia_frames, coordinator_folders):
    """The project's ServerApp, fedpc, secure=false, allow-plain-statistics: the in-process
    graph; every site's log shows replies only."""
    nodes = sites(**shared, **{"allow-plain-statistics": True})
    run = {"num-clients": SITES, "method": "fedpc", "secure": False, "result-path": "fedpc.json"}
    run_local(flwr_app.server_app, flwr_app.client_app, SITES, run, nodes)
    deployed = Result.load(coordinator_folders / "fedpc.json")
    assert deployed.graph == fedcausal_flwr.run("fedpc", data=asia_frames).graph
    for node in nodes:
        log = audit(node)
        assert log and {e["outcome"] for e in log} == {"sent"}
        assert {e["action"] for e in log} >= {"hello", TABLES}


def test_the_default_policy_refuses_a_plain_fedpc_run(sites, shared, capfd):
    """Without allow-plain-statistics a site's tables leave it only as secure sums."""
    nodes = sites(**shared)
    run = {"num-clients": SITES, "method": "fedpc", "secure": False}
    with pytest.raises(SitePolicyError, match="allow-plain-statistics") as caught:
        run_local(flwr_app.server_app, flwr_app.client_app, SITES, run, nodes)
    out, err = capfd.readouterr()
    assert_no_data(f"{caught.value}\n{out}\n{err}")
    for node in nodes:
        refused = [e for e in audit(node) if e["outcome"] == "refused"]
        assert refused and {e["policy"] for e in refused} == {"allow-plain-statistics"}
        assert not [e for e in audit(node) if e["outcome"] == "sent" and e["action"] != "hello"]


def test_the_threat_model_names_only_tests_that_exist():
    """docs/threat-model.md's worked examples each name the test that runs the attack: every
    named test exists, and every attack of the issue has one."""
    root = Path(__file__).resolve().parent
    page = (root.parent / "docs" / "threat-model.md").read_text()
    rows = [line for line in page.splitlines() if re.match(r"\| (\d+|inconsistent|forged)", line)]
    assert len(rows) == 12
    current = None  # a name without its file is in the last file named
    for row in rows:
        for file, name in re.findall(r"`(\w+\.py)?(?:::(\w+))?`", row.split("|")[-2]):
            current = file or current
            assert current, row
            source = (root / current).read_text()
            assert not name or f"def {name}(" in source, f"{current}::{name} does not exist"
