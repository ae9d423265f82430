"""SecAgg+ against an active server: sites that sign their SecAgg+ keys against a roster refuse the
attacks a coordinator running its own SecAgg+ server side can make (tests/rogue_secagg.py), and
each attack is shown to work on nodes without a policy (simulated nodes), so the test proves the
attack is real. The honest signed run gives the in-process result. Everything runs in process."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from flwr.client import NumPyClient
from flwr.clientapp import ClientApp
from rogue_secagg import RogueSecAgg

import fedcausal_flwr
from fedcausal_flwr import flwr_app
from fedcausal_flwr.cli import main as cli_main
from fedcausal_flwr.data.specs import sample_partition
from fedcausal_flwr.federation.core.messages import REFUSAL_CODE, SitePolicyError
from fedcausal_flwr.federation.core.site_identity import (
    SiteIdentity,
    SiteIdentityError,
    keys_statement,
    load_private_key,
    make_federation_keys,
    read_roster,
    submitted_statement,
    verify,
    write_roster,
    write_site_key,
)
from fedcausal_flwr.federation.runtime.clientside import CLIENT_MODS
from fedcausal_flwr.federation.runtime.localgrid import LocalGrid, run_local
from fedcausal_flwr.federation.runtime.signed_secagg import secagg_roster_names, signed_secagg_mod
from fedcausal_flwr.result import Result

REPO_ROOT = Path(__file__).resolve().parents[1]
NAMES = ("a", "b", "c")
#: each site's private vector (integers within the rogue's clipping range)
SECRETS = {
    0: [3.0, -7.0, 11.0, 0.0, 5.0],
    1: [1.0, 2.0, -3.0, 4.0, 6.0],
    2: [-9.0, 8.0, 0.0, 2.0, 1.0],
}


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict:
    """Keys of sites a, b, c and their roster; an outsider d (its own roster: a, b, d)."""
    folder = tmp_path_factory.mktemp("keys")
    configs = make_federation_keys(folder, NAMES)
    outsider = write_site_key(folder / "d", "d")
    other = write_roster(folder / "d" / "roster.toml",
                         [folder / "a.pub", folder / "b.pub", outsider.public_key])  # fmt: skip
    return {**dict(zip(NAMES, configs, strict=True)),
            "d": {"site-key": str(outsider.private_key), "roster": str(other)}}  # fmt: skip


def signed_nodes(tmp_path: Path, keys: dict, names=NAMES, **policy) -> list[dict]:
    """Node configs of signing sites (partition ids 0..), each with its audit log in tmp_path."""
    return [{"partition-id": k, **keys[name], "audit-log": str(tmp_path / f"{name}.audit.jsonl"),
             **policy} for k, name in enumerate(names)]  # fmt: skip


def simulated_nodes(n: int = 3) -> list[dict]:
    return [{"partition-id": k, "num-partitions": n} for k in range(n)]


def audit(node: dict) -> list[dict]:
    path = Path(node["audit-log"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def refusals(node: dict) -> list[tuple[str, str, str]]:
    """(action, policy key, reason) of each refusal in a site's audit log."""
    return [
        (e["action"], e["policy"], e["reason"]) for e in audit(node) if e["outcome"] == "refused"
    ]


def secret_app(seen: list | None = None) -> ClientApp:
    """A ClientApp with the project's mods whose client sends its site's secret vector (and
    notes who SecAgg+ says the sum is with)."""

    def client_fn(context):
        site = int(context.node_config["partition-id"])

        class Secret(NumPyClient):
            def fit(self, parameters, config):
                if seen is not None:
                    seen.append((site, secagg_roster_names()))
                return [np.array(SECRETS[site])], 1, {}

        return Secret().to_client()

    return ClientApp(client_fn=client_fn, mods=list(CLIENT_MODS))


def rogue(nodes: list[dict], app: ClientApp | None = None, run_id: int = 7) -> RogueSecAgg:
    grid = LocalGrid(app or secret_app(), len(nodes), {"method": "toy"}, nodes, run_id=run_id)
    return RogueSecAgg(grid)


def refused(reply) -> bool:
    return reply.has_error() and reply.error.code == REFUSAL_CODE


# ----------------------------------------------------------------------------- honest runs
@pytest.fixture(scope="module")
def asia_frames() -> list[pd.DataFrame]:
    part, _ = sample_partition("asia", 900, 3, "iid", 0)
    return part.clients


def csv_sites(tmp_path: Path, frames, keys: dict | None) -> list[dict]:
    nodes = []
    for k, frame in enumerate(frames):
        path = tmp_path / f"site{k}.csv"
        frame.to_csv(path, index=False)
        nodes.append({"partition-id": k, "data-path": str(path),
                      **(keys[NAMES[k]] if keys else {})})  # fmt: skip
    return nodes


def test_signed_sites_run_secure_fedpc_as_in_process(tmp_path, keys, asia_frames):
    """An honest coordinator (the project's ServerApp and its relay) and signing sites: the
    graph is the in-process one (plain and pooled); the signatures travel as SecAgg+ traffic,
    96 bytes (a 32-byte key or hash, a 64-byte signature) per signed item."""
    nodes = csv_sites(tmp_path, asia_frames, keys)
    config = {"num-clients": 3, "method": "fedpc", "secure": True}
    run_local(flwr_app.server_app, flwr_app.client_app, 3, {**config, "result-path": "s"}, nodes)
    signed = Result.load(tmp_path / "results" / "s")
    assert signed.graph == fedcausal_flwr.run("fedpc", data=asia_frames).graph
    assert signed.graph == fedcausal_flwr.run("pooled", data=asia_frames).graph
    for node in nodes:
        log = audit({"audit-log": str(Path(node["data-path"]).with_suffix(".audit.jsonl"))})
        assert {(e["class"], e["secure"], e["outcome"]) for e in log} == {
            ("metadata", False, "sent"), ("summed", True, "sent")}  # fmt: skip

    # the same sites and ClientApp without the signing mod: the same rounds, 96 B less per item
    unsigned_mods = [mod for mod in CLIENT_MODS if mod is not signed_secagg_mod]
    unsigned_app = ClientApp(client_fn=flwr_app._client_fn, mods=unsigned_mods)
    run_local(flwr_app.server_app, unsigned_app, 3, {**config, "result-path": "u"}, nodes)
    unsigned = Result.load(tmp_path / "results" / "u")
    assert unsigned.graph == signed.graph and len(unsigned.secagg) == len(signed.secagg)
    extra = {"setup": (0, 96), "share_keys": (3 * 96, 0), "collect_masked_vectors": (0, 96),
             "unmask": (3 * 96, 0)}  # fmt: skip
    for s, u in zip(signed.secagg, unsigned.secagg, strict=True):
        down, up = extra[s["stage"]]
        for k in range(3):
            assert s["per_client"][k]["down"] - u["per_client"][k]["down"] == down, s["stage"]
            assert s["per_client"][k]["up"] - u["per_client"][k]["up"] == up, s["stage"]


def test_a_site_without_a_roster_refuses_every_secure_sum(tmp_path, asia_frames):
    nodes = csv_sites(tmp_path, asia_frames, None)
    with pytest.raises(SitePolicyError, match="site 0"):
        run_local(flwr_app.server_app, flwr_app.client_app, 3,
                  {"num-clients": 3, "method": "fedpc", "secure": True}, nodes)  # fmt: skip
    log = audit({"audit-log": str(Path(nodes[0]["data-path"]).with_suffix(".audit.jsonl"))})
    assert [(e["action"], e["policy"]) for e in log if e["outcome"] == "refused"] == [
        ("secagg:setup", "roster")
    ]
    assert "its policy names no site-key and roster" in log[-1]["reason"]


def test_an_honest_signed_sum_is_exact_and_names_its_sites(tmp_path, keys):
    seen: list = []
    nodes = signed_nodes(tmp_path, keys)
    server = rogue(nodes, secret_app(seen))
    result = server.secure_sum(server.grid.node_ids)
    assert result.total is not None and not result.errors()
    assert result.total.tolist() == np.sum(list(SECRETS.values()), axis=0).tolist()
    assert sorted(seen) == [(k, NAMES) for k in range(3)]
    assert not any(refusals(node) for node in nodes)
    # nodes without a policy: the same sum, and no roster names
    seen.clear()
    plain = rogue(simulated_nodes(), secret_app(seen))
    assert plain.secure_sum(plain.grid.node_ids).total.tolist() == result.total.tolist()
    assert sorted(seen) == [(k, None) for k in range(3)]


# ----------------------------------------------------------------------------- (i) Sybils
def test_sybils_unmask_a_site_without_a_policy():
    """The attack is real: one simulated node and two participants whose keys the coordinator
    made; their shares of the node's mask seed and their private keys unmask its vector."""
    server = rogue(simulated_nodes(1))
    result = server.sybil_attack(server.grid.node_ids[0])
    assert result.total is not None and result.total.tolist() == SECRETS[0]


@pytest.mark.parametrize("relay", ["none", "coordinator", "replay"])
def test_a_signing_site_refuses_sybils(tmp_path, keys, relay):
    """The same attack on a signing site: unsigned Sybils, Sybils signed by a key of the
    coordinator's, Sybils shown with the site's own signature: refused before any share leaves,
    and logged."""
    nodes = signed_nodes(tmp_path, keys, NAMES[:1])
    server = rogue(nodes)
    result = server.sybil_attack(server.grid.node_ids[0], relay=relay)
    assert result.total is None
    assert refused(result.replies["share_keys"][server.grid.node_ids[0]])
    expected = {
        "none": "the server relayed no signatures",
        "coordinator": "signs with a key not in its roster",
        "replay": "signature (as site 'a') over its SecAgg+ keys does not verify",
    }[relay]
    (action, key, reason), = refusals(nodes[0])  # fmt: skip
    assert (action, key) == ("secagg:share_keys", "roster") and expected in reason
    assert reason.startswith("site 0 refuses a secure sum: ")


# ----------------------------------------------------------------------------- (ii) differencing
def test_differencing_two_sums_reveals_a_site_without_a_policy():
    server = rogue(simulated_nodes())
    a, b, c = server.grid.node_ids
    everyone = server.secure_sum([a, b, c]).total
    two = server.secure_sum([a, b]).total
    assert (everyone - two).tolist() == SECRETS[2]


@pytest.mark.parametrize("participants", [None, 2])
def test_a_signing_site_refuses_a_second_sum_over_fewer_sites(tmp_path, keys, participants):
    """{a, b, c} then {a, b} in the same run: refused by the roster (default: every site) or,
    with secure-participants = 2, because the run's first sum was with a, b and c."""
    policy = {} if participants is None else {"secure-participants": participants}
    nodes = signed_nodes(tmp_path, keys, **policy)
    server = rogue(nodes)
    a, b, c = server.grid.node_ids
    assert server.secure_sum([a, b, c]).total is not None
    second = server.secure_sum([a, b])
    assert second.total is None and all(refused(r) for r in second.errors().values())
    if participants is None:
        stage, problem = "secagg:setup", "the round has 2 participants, its roster 3 sites"
    else:
        stage, problem = "secagg:share_keys", "this run's first secure sum was with a, b, c"
    for node in nodes[:2]:
        (action, key, reason), = refusals(node)  # fmt: skip
        assert (action, key) == (stage, "secure-participants") and problem in reason
    assert not refusals(nodes[2])


def test_a_new_run_starts_a_new_set_of_participants(tmp_path, keys):
    """Flower may carry a node's state into the next run of a series: the participants fixed by
    one run do not bind the next (the stored run id differs)."""
    nodes = signed_nodes(tmp_path, keys, **{"secure-participants": 2})
    first = rogue(nodes, run_id=7)
    assert first.secure_sum(first.grid.node_ids).total is not None
    second = rogue(nodes, run_id=8)
    for node, context in first.grid.contexts.items():
        second.grid.contexts[node].state = context.state
    a, b, _ = second.grid.node_ids
    assert second.secure_sum([a, b]).total.tolist() == np.add(SECRETS[0], SECRETS[1]).tolist()


# ----------------------------------------------------------------------------- (iii) the roster
def test_a_round_whose_participants_are_not_the_roster_is_refused(tmp_path, keys):
    """A site counting on its roster's sites (e.g. for their noise shares) gets a round of the
    right size with an outsider in it (a real site, signing, not in its roster): refused; and a
    round where it would not see every participant: refused at setup."""
    nodes = signed_nodes(tmp_path, keys, ("a", "b", "d"))
    server = rogue(nodes)
    result = server.secure_sum(server.grid.node_ids)
    assert result.total is None
    for node in nodes[:2]:
        (action, key, reason), = refusals(node)  # fmt: skip
        assert (action, key) == ("secagg:share_keys", "roster")
        assert "signs with a key not in its roster" in reason
    (tmp_path / "x").mkdir()
    replies = rogue(signed_nodes(tmp_path / "x", keys)).setup([1001, 1002, 1003], share=2)
    assert all(refused(r) for r in replies.values())


# ----------------------------------------------------------------------------- (iv) unmask
@pytest.mark.parametrize("lie", ["dead", "missing", "no receipts"])
def test_an_inconsistent_unmask_is_refused(tmp_path, keys, lie):
    """Site a is told c dropped (while b is told c survived), or a's survivors leave c out, or
    the server relays no receipts: a reveals no share."""
    nodes = signed_nodes(tmp_path, keys)
    server = rogue(nodes)
    a, b, c = server.grid.node_ids

    def lists(node):
        if node == a and lie == "dead":
            return [a, b], [c]
        if node == a and lie == "missing":
            return [a, b], []
        return [a, b, c], []

    result = server.secure_sum([a, b, c], unmask_lists=lists, receipts=lie != "no receipts")
    assert result.total is None and refused(result.replies["unmask"][a])
    (action, key, reason), = refusals(nodes[0])  # fmt: skip
    assert action == "secagg:unmask"
    assert key == ("roster" if lie == "no receipts" else "secure-participants"), reason


def test_a_site_without_a_policy_reveals_a_dropped_nodes_key_share():
    """Without a policy the same lie is answered: a's reply holds its share of c's private key."""
    server = rogue(simulated_nodes())
    a, b, c = server.grid.node_ids
    result = server.secure_sum([a, b, c], unmask_lists=lambda n: ([a, b], [c]) if n == a else
                               ([a, b, c], []))  # fmt: skip
    reply = result.replies["unmask"][a]
    assert not reply.has_error()
    assert c in reply.content.config_records["secaggplus_configs"]["nids"]


# ----------------------------------------------------------------------------- (v) key files
def test_a_key_file_readable_by_others_is_refused(tmp_path, keys):
    folder = tmp_path / "k"
    files = write_site_key(folder, "a")
    assert files.private_key.stat().st_mode & 0o777 == 0o600
    os.chmod(files.private_key, 0o644)
    with pytest.raises(SiteIdentityError, match=r"site-key .* is readable by group or others "
                       r"\(mode 0644\).*chmod 600"):  # fmt: skip
        load_private_key(files.private_key)
    # a site with such a key refuses the secure sum, saying why in its log (never the key)
    nodes = signed_nodes(tmp_path, {**keys, "a": {**keys["a"], "site-key": str(files.private_key)}})
    server = rogue(nodes)
    replies = server.setup(server.grid.node_ids)
    assert refused(replies[1001])
    (action, key, reason), = refusals(nodes[0])  # fmt: skip
    assert (action, key) == ("secagg:setup", "site-key") and "chmod 600" in reason
    pem = files.private_key.read_text()
    assert (
        pem.splitlines()[1] not in reason and pem.splitlines()[1] not in replies[1001].error.reason
    )


def test_roster_and_key_file_errors_name_the_file_and_entry_not_the_content(tmp_path):
    a, b = write_site_key(tmp_path, "a"), write_site_key(tmp_path, "b")
    with pytest.raises(SiteIdentityError, match="exists; keys are never overwritten"):
        write_site_key(tmp_path, "a")
    roster = write_roster(tmp_path / "roster.toml", [a.public_key, b.public_key])
    assert sorted(read_roster(roster).sites) == ["a", "b"]
    assert SiteIdentity.from_files(b.private_key, roster).name == "b"
    secret = "c2VjcmV0LXZhbHVlLXRoYXQtbXVzdC1ub3QtbGVhaw=="
    cases = {
        f'[sites]\na = "ed25519:{secret}"\n': "entry 'a': its key has 31 bytes; an Ed25519",
        f'[sites]\na = "{secret}"\n': "entry 'a' is not an 'ed25519:<base64>' public key",
        f'[sites]\na = "ed25519:{secret[:-3]}!!"\n': "entry 'a': its key is not valid base64",
        f'sites = "{secret}"\n': "must hold one [sites] table",
        f"[sites\n{secret}": "is not TOML",
    }
    for k, (text, problem) in enumerate(cases.items()):
        bad = tmp_path / f"bad{k}.toml"
        bad.write_text(text)
        with pytest.raises(SiteIdentityError) as err:
            read_roster(bad)
        assert problem in str(err.value) and str(bad) in str(err.value), (text, err.value)
        assert secret[:12] not in str(err.value)
    twice = tmp_path / "twice.toml"
    line = a.public_key.read_text().split()[1]
    twice.write_text(f'[sites]\na = "{line}"\nz = "{line}"\n')
    with pytest.raises(SiteIdentityError, match="entries 'a' and 'z' have the same key"):
        read_roster(twice)
    other = write_site_key(tmp_path / "o", "o")
    with pytest.raises(SiteIdentityError, match="is not in roster") as err:
        SiteIdentity.from_files(other.private_key, roster)
    assert err.value.key == "roster"
    bad_pub = tmp_path / "x.pub"
    bad_pub.write_text(f"x ed25519:{secret} extra\n")
    with pytest.raises(SiteIdentityError, match="is not one line 'NAME ed25519:<base64>'"):
        write_roster(tmp_path / "r2.toml", [bad_pub])


def test_statements_are_bound_to_their_fields(tmp_path):
    key_files = make_federation_keys(tmp_path, ["s"])
    identity = SiteIdentity.from_files(key_files[0]["site-key"], key_files[0]["roster"])
    statement = keys_statement(1, "2", 3, b"pk1", b"pk2")
    signature = identity.sign(statement)
    assert verify(identity.public_key, signature, statement)
    for other in (keys_statement(1, "2", 4, b"pk1", b"pk2"), keys_statement(1, "3", 3, b"pk1",
                  b"pk2"), keys_statement(1, "2", 3, b"pk1p", b"k2"),
                  submitted_statement(1, "2", 3, b"pk1")):  # fmt: skip
        assert not verify(identity.public_key, signature, other)


# ----------------------------------------------------------------------------- commands, docs
def test_keys_and_roster_commands(tmp_path, capsys):
    out = tmp_path / "keys"
    for name in ("hospital-a", "lab-b"):
        assert cli_main(["federation", "keys", "--site", name, "--out", str(out)]) == 0
    assert (out / "hospital-a.key").stat().st_mode & 0o777 == 0o600
    roster = tmp_path / "roster.toml"
    pubs = [str(out / "hospital-a.pub"), str(out / "lab-b.pub")]
    assert cli_main(["federation", "roster", *pubs, "--out", str(roster)]) == 0
    assert sorted(read_roster(roster).sites) == ["hospital-a", "lab-b"]
    assert cli_main(["federation", "roster", *pubs, "--out", str(roster)]) == 2
    assert cli_main(["federation", "keys", "--site", "../x", "--out", str(out)]) == 2
    assert "site name '../x' must be" in capsys.readouterr().err


def roster_walkthrough() -> list[str]:
    """The commands of docs/deploy.md's "A roster from scratch" block."""
    text = (REPO_ROOT / "docs" / "deploy.md").read_text()
    section = text.split("## A roster from scratch", 1)[1]
    mark = (
        "<!-- doc-test: covered by "
        "tests/test_signed_secagg.py::test_the_docs_roster_walkthrough_runs -->"
    )
    block = re.search(re.escape(mark) + r"\n```bash\n(.*?)```", section, re.S)
    assert block, "docs/deploy.md's roster walkthrough has no tested bash block"
    joined = re.sub(r"\\\n\s*", " ", block.group(1))
    return [line.split("  #")[0].strip() for line in joined.splitlines()
            if line.strip() and not line.strip().startswith("#")]  # fmt: skip


def test_the_docs_roster_walkthrough_runs(tmp_path, monkeypatch, keys):
    """Each command of the walkthrough, as written, in a fresh folder; the sites it makes then
    sum securely with each other."""
    monkeypatch.chdir(tmp_path)
    commands = roster_walkthrough()
    assert any("federation keys" in c for c in commands)
    assert any("federation roster" in c for c in commands)
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "fedcausal-flwr", command
        assert cli_main(words[1:]) == 0, command
    roster = next(Path(w) for c in commands if "roster" in c.split()[2:3] for w in
                  shlex.split(c) if w.endswith(".toml"))  # fmt: skip
    names = sorted(read_roster(roster).sites)
    key_of = {n: next(tmp_path.rglob(f"{n}.key")) for n in names}
    walk = {n: {"site-key": str(key_of[n]), "roster": str(roster)} for n in names}
    nodes = signed_nodes(tmp_path, walk, names[:3])
    server = rogue(nodes)
    assert server.secure_sum(server.grid.node_ids).total is not None


def test_a_local_deployment_gives_each_site_a_key_and_the_roster(tmp_path):
    """``federation up`` / ``LocalDeployment``: every site with a policy and no key of its own
    gets one and the roster of those sites (made once); other sites keep theirs; a simulated
    node gets none. Nothing is started."""
    from fedcausal_flwr.federation.deployment.local_deployment import LocalDeployment

    own = make_federation_keys(tmp_path / "own", ["x"])[0]
    nodes = [
        {"partition-id": 0, "data-path": str(tmp_path / "a.csv")},
        {"partition-id": 1, "data-path": str(tmp_path / "b.csv")},
        {"partition-id": 2, "data-path": str(tmp_path / "c.csv"), **own},
        {"partition-id": 3, "num-partitions": 4},
    ]
    deployment = LocalDeployment(tmp_path / "w", nodes, tls=False, auth=False)
    deployment._prepare_signing_keys()
    deployment._prepare_signing_keys()  # a restart reuses them
    configs = deployment.node_configs
    roster = read_roster(configs[0]["roster"])
    assert (
        sorted(roster.sites) == ["site0", "site1"] and configs[1]["roster"] == configs[0]["roster"]
    )
    for k in (0, 1):
        assert (
            SiteIdentity.from_files(configs[k]["site-key"], configs[k]["roster"]).name == f"site{k}"
        )
    assert configs[2] == nodes[2] and configs[3] == nodes[3]
    fewer = LocalDeployment(tmp_path / "w", nodes[:1], tls=False, auth=False)  # other sites
    fewer._prepare_signing_keys()
    assert sorted(read_roster(fewer.node_configs[0]["roster"]).sites) == ["site0"]
    unsigned = LocalDeployment(tmp_path / "u", nodes[:1], tls=False, auth=False, sign=False)
    unsigned._prepare_signing_keys()
    assert unsigned.node_configs == nodes[:1]


def test_federation_up_runs_the_warm_executor(tmp_path, monkeypatch):
    """Every `federation up` site runs fedcausal-executor (not only with --tuned)."""
    from fedcausal_flwr.federation.deployment import local_deployment

    seen = {}

    class Stop(ValueError):
        pass

    class Recorder(local_deployment.LocalDeployment):
        def __init__(self, *args, **kwargs):
            seen.update(kwargs)
            raise Stop("recorded")

    monkeypatch.setattr(local_deployment, "LocalDeployment", Recorder)
    site = tmp_path / "a.csv"
    site.write_text("x,y\n0,1\n")
    argv = [
        "federation",
        "up",
        "--sites",
        str(site),
        "--insecure",
        "--workdir",
        str(tmp_path / "w"),
    ]
    assert cli_main(argv) == 2
    assert seen["warm_executor"] is True and not seen["tuned"]


def test_a_sum_short_of_the_roster_needs_the_sites_own_noise_share(tmp_path, keys):
    """With secure-participants = 2 a site sums with 2 of its 3 roster sites only when the sum
    carries its own noise share (dp=distributed): against the other participant colluding with
    the coordinator, that share is all that bounds what the sum reveals."""
    from fedcausal_flwr.federation.core.site_guard import PolicyRefusal, SiteGuard
    from fedcausal_flwr.federation.core.site_policy import SitePolicy
    from fedcausal_flwr.privacy.charges import PrivacyCharge

    policy = SitePolicy.from_values(
        {**keys["a"], "secure-participants": 2, "audit-log": str(tmp_path / "a.jsonl")}, "t"
    )
    guard = SiteGuard("fedpc", {"tables": "summed"}, policy=policy, site=0, run="r")
    with pytest.raises(PolicyRefusal, match="its own noise share") as refused:
        guard.check("tables", {}, 2, 2, ("a", "b"))
    assert refused.value.key == "secure-participants"
    share = PrivacyCharge("discrete Gaussian", 1, 30.0, None, 4.0, 1e-6, shares=2, cells=4)
    assert guard.check("tables", {"privacy": share.encode()}, 2, 2, ("a", "b")) == "summed"
    assert guard.check("tables", {}, 2, 3, ("a", "b", "c")) == "summed"  # the whole roster
