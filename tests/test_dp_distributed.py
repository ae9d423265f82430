"""Distributed differential privacy (``dp=distributed``): each site adds its share of the noise
to its tables before SecAgg+ sums them, so the server never decodes a noiseless sum; a site
counts each release against the noise shares it trusts; a dropout's shortfall is stated."""

import math

import numpy as np
import pytest
from test_site_policy import audit, run_app, write_sites

import fedcausal_flwr
from fedcausal_flwr.clients.fedpc import FedPCClient
from fedcausal_flwr.federation.core import protocol
from fedcausal_flwr.federation.core.messages import SitePolicyError
from fedcausal_flwr.federation.core.site_guard import PolicyRefusal, SiteGuard
from fedcausal_flwr.federation.core.site_policy import SitePolicy
from fedcausal_flwr.options import OptionError
from fedcausal_flwr.privacy.accounting import (
    PrivacyAccountant,
    budget_epsilon,
    distributed_rho,
    distributed_variance,
    gaussian_rho_for,
    recompute,
    sum_tau,
)
from fedcausal_flwr.privacy.charges import PrivacyCharge
from fedcausal_flwr.privacy.site_budget import counted_release
from fedcausal_flwr.protocols.fedpc import DISCLOSURES, TABLES, TableRequest
from fedcausal_flwr.strategies.table_tests import TableTests


def test_the_server_decodes_only_noisy_sums(asia_sites, monkeypatch):
    """What SecAgg+ hands the server, round by round, against the pooled exact tables of the
    same tests: never equal, and off by noise of the run's variance (the sites' shares; the
    server adds none of its own)."""
    decoded, asked = [], []
    decode = protocol.decode_secure_mean

    def spy(mean, n_clients, action, server_round):
        total = decode(mean, n_clients, action, server_round)
        decoded.append((action, total.copy()))
        return total

    answer = TableTests.answer

    def remember(self, strategy, request, replies, queries):
        asked.append((request, self._plan.noise_variance))
        return answer(self, strategy, request, replies, queries)

    monkeypatch.setattr(protocol, "decode_secure_mean", spy)
    monkeypatch.setattr(TableTests, "answer", remember)
    result = fedcausal_flwr.run(
        "fedpc", data=asia_sites, dp="distributed", dp_epsilon=2, dp_batches=2, secure=True
    )
    tables = [total for action, total in decoded if action == TABLES]
    assert len(tables) == len(asked) == 2
    pooled = FedPCClient(0, __import__("pandas").concat(asia_sites, ignore_index=True))
    for total, (request, variance) in zip(tables, asked, strict=True):
        exact_request = TableRequest.decode(request.payload)
        exact_request = TableRequest(
            exact_request.variables, exact_request.levels, exact_request.max_cells,
            exact_request.missing,
        )  # fmt: skip
        (exact,), _ = pooled.tables(exact_request, request.arrays)
        noise = total - exact
        assert noise.size >= 100 and np.count_nonzero(noise) > 0.9 * noise.size
        assert 0.6 * variance < noise.var() < 1.6 * variance  # the shares, once
        assert abs(noise.mean()) < 4 * math.sqrt(variance / noise.size)
    privacy = result.extra["privacy"]
    assert privacy["mechanism"].startswith("discrete Gaussian shares of the sites")
    assert [r["shares"] for r in privacy["releases"]] == [3, 3]
    rho, epsilon = recompute(privacy["releases"], 1e-6)
    # within the target up to the float sum's last bit (the releases are summed in another order)
    assert rho == pytest.approx(privacy["rho"]) and rho <= gaussian_rho_for(2, 1e-6) * (1 + 1e-12)
    assert epsilon == privacy["epsilon"] <= 2.0


def test_distributed_noise_needs_a_secure_run_and_draws_no_seed(asia_sites):
    with pytest.raises(OptionError, match="secure"):
        fedcausal_flwr.run("fedpc", data=asia_sites, dp="distributed", dp_epsilon=2)
    with pytest.raises(OptionError, match="dp_noise_seed"):
        fedcausal_flwr.run("fedpc", data=asia_sites, dp="distributed", dp_noise_seed=1, secure=True)


def test_epsilon_inf_is_the_exact_run(asia_sites):
    exact = fedcausal_flwr.run("fedpc", data=asia_sites)  # a private search is not capped
    free = fedcausal_flwr.run(
        "fedpc", data=asia_sites, dp="distributed", dp_epsilon="inf", secure=True
    )
    assert free.graph == exact.graph


def test_the_shares_bound_by_hand():
    # tau for 3 shares of variance 1: 10 (e^{-pi^2} + e^{-4 pi^2 / 3})
    expected = 10 * (math.exp(-(math.pi**2)) + math.exp(-4 * math.pi**2 / 3))
    assert sum_tau(1.0, 3) == pytest.approx(expected)
    assert sum_tau(5.0, 1) == 0.0
    assert distributed_rho(10, 1.0, 3, 40) == pytest.approx(10 / 6 + 40 * expected)
    with pytest.raises(ValueError, match="below"):
        sum_tau(0.1, 3)
    # the planned variance never spends more than the batch's rho, tau included
    variance = distributed_variance(0.01, 50, 10, 10_000)
    assert distributed_rho(50, variance / 10, 10, 10_000) <= 0.01
    # one table of 512 cells on a small share of the budget (a deep depth): the plain Gaussian's
    # variance (8.8) leaves shares of 0.88, whose tau over 512 cells alone costs 0.94; the noise
    # grows until the bound holds, and not further
    plain = 1 / (2 * 0.0569)
    variance = distributed_variance(0.0569, 1, 10, 512)
    assert variance > plain and distributed_rho(1, variance / 10, 10, 512) <= 0.0569
    assert distributed_rho(1, 0.999 * variance / 10, 10, 512) > 0.0569


def test_a_dropout_inside_a_round_is_a_stated_shortfall():
    accountant = PrivacyAccountant(4.0, 1e-6, 2)
    variance = accountant.batch_variance(20, 3, 80)
    full = accountant.record(2, 20, variance, shares=3, share_variance=variance / 3, cells=80,
                             planned_shares=3)  # fmt: skip
    short = accountant.record(3, 20, 2 * variance / 3, shares=2, share_variance=variance / 3,
                              cells=80, planned_shares=3)  # fmt: skip
    first, second = accountant.releases
    assert "planned_shares" not in first and second["planned_shares"] == 3
    assert short > full and full == pytest.approx(accountant.batch_rho)
    rho, _ = recompute(accountant.releases, 1e-6)
    assert rho == pytest.approx(full + short)


def charge(shares=3, cells=16, variance=30.0, tables=4) -> dict:
    record = PrivacyCharge(
        "distributed discrete Gaussian", tables, variance, None, 4.0, 1e-6, shares, cells
    )
    return {"privacy": record.encode()}


def test_a_site_adds_its_share_only_inside_secagg_and_counts_what_it_trusts(tmp_path):
    guard = SiteGuard("fedpc", DISCLOSURES, site=0)
    with pytest.raises(PolicyRefusal, match="outside SecAgg"):
        guard.check(TABLES, charge(), 2, secagg_participants=None)
    with pytest.raises(PolicyRefusal, match="2 participants"):
        guard.check(TABLES, charge(), 2, secagg_participants=2)
    guard.check(TABLES, charge(), 2, secagg_participants=3)
    assert guard.charge["rho"] == pytest.approx(distributed_rho(4, 10.0, 3, 16))
    budget = SitePolicy(dp_epsilon=8.0)  # its own share only, by default
    wary = SiteGuard("fedpc", DISCLOSURES, policy=budget, site=0)
    wary.check(TABLES, charge(), 2, secagg_participants=3)
    assert wary.charge["trusted"] == 1
    assert wary.charge["rho"] == pytest.approx(4 / (2 * 10.0))
    trusting = SiteGuard("fedpc", DISCLOSURES, policy=SitePolicy(dp_epsilon=8.0, dp_shares=3))
    trusting.check(TABLES, charge(), 2, secagg_participants=3)
    assert trusting.charge["rho"] == pytest.approx(distributed_rho(4, 10.0, 3, 16))
    with pytest.raises(PolicyRefusal, match="noise shares"):
        guard.check(TABLES, charge(shares=0), 2, secagg_participants=3)


def test_a_sites_budget_counts_the_shares_it_trusts_at_hello(tmp_path, asia_sites):
    options = {"method": "fedpc", "secure": True, "options": "dp=distributed dp-epsilon=4"}
    nodes = write_sites(tmp_path, asia_sites, **{"dp-epsilon": 4})
    with pytest.raises(SitePolicyError, match="its policy has dp-epsilon = 4"):
        run_app(nodes, options)
    assert "counting on 1 of the run's 3 noise shares" in audit(nodes[0])[0]["reason"]
    nodes = write_sites(tmp_path, asia_sites, **{"dp-epsilon": 4, "dp-shares": 3})
    run_app(nodes, options)
    for node in nodes:
        charges = [ln["privacy"] for ln in audit(node) if "privacy" in ln]
        spent = [charge["rho"] for charge in charges]
        # one charge per depth, each half the one before (how deep the noisy search goes
        # varies with the sites' own noise), within the site's budget as it counts it
        assert (
            len(spent) >= 2
            and budget_epsilon([counted_release(c) for c in charges], 1e-6, 4.0) <= 4
        )
        assert spent[1:] == pytest.approx([rho / 2 for rho in spent[:-1]], rel=1e-3)


def test_the_documented_distributed_command_runs(capsys, tmp_path):
    """docs/privacy.md's distributed command, as written there: the run's privacy is in its
    JSON, with the sites' shares."""
    import json
    import re
    import shlex
    from pathlib import Path

    from fedcausal_flwr.cli import main

    doc = (Path(__file__).resolve().parents[1] / "docs" / "privacy.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", doc, flags=re.S)
    (command,) = [b for b in blocks if "--dp distributed" in b]
    argv = shlex.split(command.replace("\\\n", " "))
    assert argv[0] == "fedcausal-flwr"
    out = tmp_path / "result.json"
    assert main([*argv[1:], "--out", str(out)]) == 0, capsys.readouterr().err
    privacy = json.loads(out.read_text())["extra"]["privacy"]
    assert 0 < privacy["epsilon"] <= 8 and {r["shares"] for r in privacy["releases"]} == {3}


def test_a_site_with_a_budget_refuses_the_servers_noise_unless_it_allows_it(tmp_path, asia_sites):
    """A site's budget means its own noise share: a run whose noise the server adds is refused
    at hello (its plan names no shares), and so is a central charge later (a server that
    switches modes); dp-allow-central opts into the server's noise by name."""
    policy = {"dp-epsilon": 8, "dp-shares": 3}
    nodes = write_sites(tmp_path, asia_sites, **policy)
    central = {"method": "fedpc", "secure": True, "options": "dp=central dp-epsilon=4"}
    with pytest.raises(SitePolicyError, match="its policy has dp-allow-central = false"):
        run_app(nodes, central)
    assert all(line["action"] == "hello" for node in nodes for line in audit(node))
    run_app(nodes, {**central, "options": "dp=distributed dp-epsilon=4"})
    guard = SiteGuard("fedpc", DISCLOSURES, policy=SitePolicy.from_values(policy, "t"), site=0)
    central_charge = PrivacyCharge("discrete Gaussian", 4, 30.0, None, 4.0, 1e-6).encode()
    with pytest.raises(PolicyRefusal, match="does not add its noise at the sites"):
        guard.check(TABLES, {"privacy": central_charge}, 2, secagg_participants=3)
    trusting = SitePolicy.from_values({**policy, "dp-allow-central": "true"}, "t")
    SiteGuard("fedpc", DISCLOSURES, policy=trusting, site=0).check(
        TABLES, {"privacy": central_charge}, 2, secagg_participants=3
    )
    with pytest.raises(Exception, match="dp-allow-central needs dp-epsilon"):
        SitePolicy.from_values({"dp-allow-central": "true"}, "t")
