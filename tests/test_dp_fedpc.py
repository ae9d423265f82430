"""Differentially private FedPC (``dp=central``): the noise is paid for batch by batch, the
accountant's epsilon is what its releases add up to, epsilon = inf is the exact run."""

import json
import math

import pytest

import fedcausal_flwr
from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.options import OptionError
from fedcausal_flwr.privacy.accounting import epsilon_of, gaussian_rho_for, recompute


@pytest.fixture(scope="module")
def sites():
    return split_iid(load_network("asia").sample(6000, seed=11), 3, seed=2).clients


def test_epsilon_inf_is_the_exact_run(sites):
    exact = fedcausal_flwr.run("fedpc", data=sites, max_depth=3)
    free = fedcausal_flwr.run("fedpc", data=sites, dp="central", dp_epsilon="inf", dp_batches=4)
    assert free.graph == exact.graph
    privacy = free.extra["privacy"]
    assert privacy["epsilon"] == math.inf and privacy["rho"] == 0
    assert all(r["variance"] == 0 for r in privacy["releases"])
    assert "privacy" not in exact.extra


def test_the_accountant_adds_up_its_releases_and_stays_within_the_target(sites):
    result = fedcausal_flwr.run(
        "fedpc", data=sites, dp="central", dp_epsilon=4, dp_delta=1e-6, dp_batches=3,
        dp_noise_seed=5,
    )  # fmt: skip
    privacy = result.extra["privacy"]
    releases = privacy["releases"]
    assert 1 <= privacy["batches"] <= 3 and len(releases) >= privacy["batches"]
    # each batch's noise: sigma^2 = T / (2 rho_batch), rho_batch = the composed Gaussian's rho
    # at (4, 1e-6) over 3 (grown by a part in a thousand at most, where the PLD asks)
    batch_rho = gaussian_rho_for(4.0, 1e-6) / 3
    for release in releases:
        planned = release["tables"] / (2 * batch_rho)
        assert planned <= release["variance"] <= planned * 1.001
    rho, epsilon = recompute(releases, 1e-6)
    assert rho == pytest.approx(privacy["rho"]) and epsilon == privacy["epsilon"]
    assert rho == pytest.approx(privacy["batches"] * batch_rho, rel=1e-3)
    assert epsilon <= 4.0 and privacy["zcdp_epsilon"] == pytest.approx(epsilon_of(rho, 1e-6))
    # per batch: each spends its share
    assert [b["batch"] for b in privacy["per_batch"]] == list(range(privacy["batches"]))
    for batch in privacy["per_batch"]:
        assert batch["rho"] == pytest.approx(batch_rho, rel=1e-3)
    # the skeleton search stopped at depth dp_batches - 1
    assert max(result.extra["depths"]) <= 2
    again = fedcausal_flwr.run(
        "fedpc", data=sites, dp="central", dp_epsilon=4, dp_batches=3, dp_noise_seed=5
    )
    assert again.graph == result.graph  # a fixed noise seed repeats the run (simulation only)


def test_by_default_each_depth_spends_half_of_what_is_left(sites):
    """No dp_batches: the search is not capped, batch k spends rho / 2^(k+1), and the run stays
    under its target; fedCI keeps an even split (a depth is several releases there)."""
    result = fedcausal_flwr.run(
        "fedpc", data=sites, dp="central", dp_epsilon=4, dp_delta=1e-6, dp_noise_seed=1
    )
    privacy = result.extra["privacy"]
    target = gaussian_rho_for(4.0, 1e-6)
    spent = [batch["rho"] for batch in privacy["per_batch"]]
    assert len(spent) >= 3 and max(result.extra["depths"]) >= 2  # past the old cap of depth 1
    assert spent == pytest.approx([target / 2 ** (k + 1) for k in range(len(spent))])
    assert privacy["planned_batches"] is None and privacy["epsilon"] < 4.0
    with pytest.raises(OptionError, match="dp_batches"):
        fedcausal_flwr.run("fedci-pc", data=sites, dp="central", dp_batches=None)


def test_private_options_are_checked_with_their_reasons(sites):
    with pytest.raises(OptionError, match="ci='exact'"):
        fedcausal_flwr.run("fedpc", data=sites, dp="central", ci="sketch")
    with pytest.raises(OptionError, match="test='chi2'"):
        fedcausal_flwr.run("fedpc", data=sites, dp="central", test="g2")
    with pytest.raises(OptionError, match="conservative"):
        fedcausal_flwr.run("fedpc", data=sites, dp="central", collider_rule="conservative")
    with pytest.raises(OptionError, match="possible_dsep"):
        fedcausal_flwr.run("fedfci", data=sites, dp="central")
    with pytest.raises(OptionError, match="dp_epsilon"):
        fedcausal_flwr.run("fedpc", data=sites, dp_epsilon=2)  # without dp=central
    with pytest.raises(OptionError, match="dp_epsilon"):
        fedcausal_flwr.run("fedpc", data=sites, dp="central", dp_epsilon=0)


def test_a_private_run_takes_no_bootstrap(sites):
    with pytest.raises(OptionError, match="once per replicate"):
        fedcausal_flwr.run("fedpc", data=sites, dp="central", bootstrap=2)


def test_the_ledger_says_which_sums_were_published_with_noise(sites):
    result = fedcausal_flwr.run(
        "fedpc", data=sites, dp="central", dp_epsilon=8, dp_batches=2, dp_noise_seed=1
    )
    noted = [entry for entry in result.ledger if "noise" in entry]
    releases = result.extra["privacy"]["releases"]
    assert [e["round"] for e in noted] == [r["round"] for r in releases]
    for entry, release in zip(noted, releases, strict=True):
        assert entry["kind"] == "tables" and entry["summed"]
        assert entry["noise"]["variance"] == release["variance"] > 0
        assert entry["noise"]["rho"] == pytest.approx(release["rho"])


def test_the_documented_command_runs(capsys, tmp_path):
    """docs/privacy.md's command (on a smaller sample): the run's privacy is in its JSON."""
    from fedcausal_flwr.cli import main

    out = tmp_path / "result.json"
    code = main([
        "run", "--method", "fedpc", "--network", "asia", "--samples", "3000", "--clients", "3",
        "--dp", "central", "--dp-epsilon", "8", "--dp-delta", "1e-6", "--out", str(out),
    ])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    privacy = json.loads(out.read_text())["extra"]["privacy"]
    assert 0 < privacy["epsilon"] <= 8 and privacy["delta"] == 1e-6
    assert privacy["planned_batches"] is None  # each depth half of what is left
    # an even split, as typed: `--dp-batches 2` (and `none`, the default, spelled out)
    for batches, planned in (("2", 2), ("none", None)):
        code = main([
            "run", "--method", "fedpc", "--network", "asia", "--samples", "3000", "--clients",
            "3", "--dp", "central", "--dp-epsilon", "8", "--dp-batches", batches, "--out",
            str(out),
        ])  # fmt: skip
        assert code == 0, capsys.readouterr().err
        assert json.loads(out.read_text())["extra"]["privacy"]["planned_batches"] == planned


def test_each_site_logs_what_each_release_costs_it(tmp_path):
    """A deployment-shaped run (sites with data files, hence audit logs): every tables reply a
    site sends is logged with its privacy charge, and a site's charges add up to the run's."""
    from test_site_policy import audit, run_app, write_sites

    from fedcausal_flwr.result import Result

    frames = split_iid(load_network("asia").sample(3000, seed=4), 3, seed=1).clients
    nodes = write_sites(tmp_path, frames, **{"allow-plain-statistics": True})
    options = "dp=central dp-epsilon=8 dp-noise-seed=1"
    run_app(nodes, {"method": "fedpc", "options": options, "result-path": "dp.json"})
    privacy = Result.load(tmp_path / "results" / "dp.json").extra["privacy"]
    for node in nodes:
        sent = [line for line in audit(node) if line["action"] == "tables"]
        assert sent and all(line["privacy"]["mechanism"] == "discrete Gaussian" for line in sent)
        rho = math.fsum(line["privacy"]["rho"] for line in sent)
        assert rho == pytest.approx(privacy["rho"])
        spent = recompute([line["privacy"] for line in sent], sent[0]["privacy"]["delta"])[1]
        assert spent == pytest.approx(privacy["epsilon"], abs=1e-9) and spent <= 8
        assert all("privacy" not in line for line in audit(node) if line["action"] == "hello")


def test_the_report_states_a_private_runs_accountant(sites):
    from fedcausal_flwr.report import ledger_section

    result = fedcausal_flwr.run(
        "fedpc", data=sites, dp="central", dp_epsilon=2, dp_delta=1e-5, dp_noise_seed=3
    )
    saved = json.loads(json.dumps(result.to_json()))  # as a study's run file holds it
    record = {"status": "ok", "key": "k", "network": "asia", "n": 6000, "K": 3,
              "partition": "iid", "seed": 0, "method": "fedpc", "result": saved}  # fmt: skip
    html = ledger_section([record], "k")
    privacy = result.extra["privacy"]
    assert "target epsilon 2 at delta 1e-05" in html
    assert f"spent epsilon {privacy['epsilon']:.4g} (privacy loss distributions" in html
    assert f"{len(privacy['releases'])} noisy release(s)" in html


def test_fedfci_with_epsilon_inf_is_the_exact_fci_run(sites):
    """By default a private search is not capped (each depth spends half of what is left):
    epsilon = inf is the exact run; dp_batches=2 is the exact run capped at depth 1."""
    exact = fedcausal_flwr.run("fedfci", data=sites, possible_dsep="off")
    free = fedcausal_flwr.run(
        "fedfci", data=sites, dp="central", dp_epsilon="inf", possible_dsep="off"
    )
    assert free.graph == exact.graph and free.graph.kind == "PAG"
    assert exact.extra["depths_searched"] > 2  # deeper than the even split's cap below
    capped = fedcausal_flwr.run("fedfci", data=sites, max_depth=1, possible_dsep="off")
    free = fedcausal_flwr.run(
        "fedfci", data=sites, dp="central", dp_epsilon="inf", dp_batches=2, possible_dsep="off"
    )
    assert free.graph == capped.graph != exact.graph
    noisy = fedcausal_flwr.run(
        "fedfci", data=sites, dp="central", dp_epsilon=4, possible_dsep="off", dp_noise_seed=1
    )
    assert noisy.extra["privacy"]["epsilon"] <= 4 and noisy.graph.kind == "PAG"


def test_a_forged_clip_bound_on_counts_is_refused(sites, monkeypatch):
    """A modified server that names a tiny clip bound in a tables charge (a site would count
    tables x clip^2 and log far less than a count's sensitivity) is refused by the client."""
    from fedcausal_flwr.federation.core.messages import ClientProtocolError
    from fedcausal_flwr.privacy.server_noise import ServerNoise

    charge = ServerNoise.charge

    def forged(self, tables, cells, variance, shares, clip=None, resolution=None):
        return charge(self, tables, cells, variance, shares, clip=1e-3)

    monkeypatch.setattr(ServerNoise, "charge", forged)
    with pytest.raises(ClientProtocolError, match="counts are not clipped"):
        fedcausal_flwr.run("fedpc", data=sites, dp="central", dp_epsilon=4, dp_noise_seed=1)
