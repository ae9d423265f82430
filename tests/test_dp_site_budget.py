"""A site's privacy budget (policy keys dp-epsilon, dp-delta, dp-period-epsilon,
dp-period-days): a run it cannot afford is refused at hello, before any statistic leaves it; a
run without noise is refused by a site that sets a budget; the period's spending is read from the
site's own audit log."""

import pytest
from test_site_policy import audit, run_app, write_sites

from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.federation.core.messages import SitePolicyError
from fedcausal_flwr.federation.core.site_policy import (
    PolicyConfigError,
    SitePolicy,
    default_audit_log,
)


def private(epsilon: float) -> dict:
    return {"method": "fedpc", "options": f"dp=central dp-epsilon={epsilon} dp-noise-seed=1"}


#: what a site must allow for the server's own noise on its plain tables (dp=central, not secure)
CENTRAL = {"dp-allow-central": True, "allow-plain-statistics": True}


def test_a_run_within_the_sites_budget_runs(tmp_path, asia_sites):
    nodes = write_sites(tmp_path, asia_sites, **{"dp-epsilon": 4}, **CENTRAL)
    run_app(nodes, private(4))
    assert any(line["action"] == "tables" for line in audit(nodes[0]))


def test_a_run_over_the_sites_budget_is_refused_at_hello(tmp_path, asia_sites):
    nodes = write_sites(tmp_path, asia_sites, **{"dp-epsilon": 2}, **CENTRAL)
    with pytest.raises(SitePolicyError, match="dp-epsilon"):
        run_app(nodes, private(4))
    for node in nodes:
        lines = audit(node)
        assert all(line["action"] == "hello" for line in lines)  # nothing else was asked
        assert lines and lines[-1]["outcome"] == "refused" and lines[-1]["policy"] == "dp-epsilon"


def test_a_run_without_noise_is_refused_by_a_site_with_a_budget(tmp_path, asia_sites):
    nodes = write_sites(tmp_path, asia_sites, **{"dp-epsilon": 8}, **CENTRAL)
    with pytest.raises(SitePolicyError, match="its policy has dp-epsilon = 8"):
        run_app(nodes, {"method": "fedpc"})
    with pytest.raises(SitePolicyError, match="its policy has dp-epsilon = 8"):
        run_app(nodes, {"method": "fedpc", "options": "dp=central dp-epsilon=inf"})
    reasons = [line["reason"] for line in audit(nodes[0])]
    assert len(reasons) == 2 and all("without differential privacy" in r for r in reasons)


def test_the_period_budget_counts_earlier_runs_from_the_audit_log(tmp_path, asia_sites):
    budget = {"dp-epsilon": 4, "dp-period-epsilon": 5, "dp-period-days": 30}
    nodes = write_sites(tmp_path, asia_sites, **budget, **CENTRAL)
    run_app(nodes, private(4))  # in rho: 0.254 of the period's 0.385 (epsilon 5 at 1e-6)
    with pytest.raises(SitePolicyError, match="dp-period-epsilon"):
        run_app(nodes, private(4))
    run_app(nodes, private(0.5))  # still within what is left


def test_budget_keys_are_checked():
    with pytest.raises(PolicyConfigError, match="dp-epsilon"):
        SitePolicy.from_values({"dp-epsilon": "-1"}, "node config")
    with pytest.raises(PolicyConfigError, match="dp-period-days"):
        SitePolicy.from_values({"dp-epsilon": 1, "dp-period-epsilon": 2}, "node config")
    with pytest.raises(PolicyConfigError, match="dp-delta"):
        SitePolicy.from_values({"dp-epsilon": 1, "dp-delta": 2}, "node config")
    policy = SitePolicy.from_values({"dp-epsilon": "3", "dp-delta": "1e-7"}, "node config")
    assert policy.dp_epsilon == 3.0 and policy.dp_delta == 1e-7


def test_the_audit_command_states_what_a_run_cost_the_site(tmp_path, asia_sites, capsys):
    from fedcausal_flwr.cli import main as cli_main
    from fedcausal_flwr.federation.core.site_policy import default_audit_log
    from fedcausal_flwr.privacy.accounting import epsilon_of, recompute

    nodes = write_sites(tmp_path, asia_sites, **{"dp-epsilon": 4}, **CENTRAL)
    run_app(nodes, private(4))
    capsys.readouterr()
    assert cli_main(["audit", default_audit_log(nodes[0]["data-path"])]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.strip().startswith("privacy:")]
    charges = [line["privacy"] for line in audit(nodes[0]) if "privacy" in line]
    rho = sum(charge["rho"] for charge in charges)
    spent = recompute(charges, 1e-6)[1]  # the releases' PLD: central charges are releases
    assert spent <= 4 < epsilon_of(rho, 1e-6) * 1.2
    stated = f"epsilon {spent:.4g} at delta 1e-06 (zCDP rho {rho:.4g})"
    assert len(lines) == 1 and stated in lines[0]


def test_a_forged_charge_is_counted_by_the_site_not_by_the_request(tmp_path):
    """As an attacker would: a modified ServerApp states a negative rho (to lower the site's
    logged spending), a charge of no tables, or fewer tables than it asks."""
    import numpy as np

    from fedcausal_flwr.clients.fedpc import FedPCClient
    from fedcausal_flwr.federation.core.messages import ProtocolError
    from fedcausal_flwr.federation.core.site_guard import (
        PolicyRefusal,
        SiteGuard,
    )

    policy = SitePolicy.from_values(
        {"dp-epsilon": 4, "dp-allow-central": True, "audit-log": str(tmp_path / "a.jsonl")}, "t"
    )
    guard = SiteGuard("fedpc", {"tables": "summed"}, policy=policy, site=0, run="r")
    charge = {"mechanism": "discrete Gaussian", "tables": 3, "variance": 50.0, "rho": -1e9,
              "target_epsilon": 4.0, "delta": 1e-6}  # fmt: skip
    guard.check("tables", {"variables": ["a"], "levels": {}, "privacy": charge}, 2, 3)
    assert guard.charge["rho"] == 3 / (2 * 50.0)  # the site's own count
    with pytest.raises(PolicyRefusal, match="names 0 tables"):
        guard.check("tables", {"privacy": {**charge, "tables": 0}}, 2, 3)
    frame = load_network("asia").sample(200, seed=1)
    client = FedPCClient(0, frame)
    names = list(frame.columns)
    levels = {v: sorted(frame[v].unique().tolist()) for v in names}
    asked = np.array([[0, 1], [0, 2]], dtype=np.int64)  # two tables, charged as three
    with pytest.raises(ProtocolError, match="counts 3 tables, it asks 2"):
        client.answer("tables", {"variables": names, "levels": levels, "privacy": charge}, [asked])


def test_a_site_budget_reached_mid_run_ends_the_search_with_its_graph_so_far(
    tmp_path, asia_sites, monkeypatch
):
    """Another run spends part of the period while this one runs (its charges land in the same
    audit log between two depths): the next depth would cross the period's cap, the site refuses
    it, and the run ends with the depth-0 graph and a note; the site never spends over its cap."""
    import json

    import fedcausal_flwr
    from fedcausal_flwr.privacy.accounting import recompute
    from fedcausal_flwr.result import Result
    from fedcausal_flwr.strategies.search_stop import PrivacyBudgetNote
    from fedcausal_flwr.strategies.table_tests import TableTests

    budget = {"dp-epsilon": 4, "dp-period-epsilon": 5, "dp-period-days": 30}
    nodes = write_sites(tmp_path, asia_sites, **budget, **CENTRAL)
    answer = TableTests.answer

    def another_run_spends(self, strategy, request, replies, queries):
        answers = answer(self, strategy, request, replies, queries)
        if len(self.batches) == 1 and not self._plan:  # depth 0 done: a concurrent run logs
            for node in nodes:
                line = next(ln for ln in audit(node) if "privacy" in ln)
                tables = line["privacy"]["tables"]  # a release of rho 0.3, as the site counts
                charge = {**line["privacy"], "variance": tables / 0.6, "rho": 0.3}
                spent = {**line, "run": "another", "privacy": charge}
                with open(default_audit_log(node["data-path"]), "a") as log:
                    log.write(json.dumps(spent) + "\n")
        return answers

    monkeypatch.setattr(TableTests, "answer", another_run_spends)
    options = "dp=central dp-epsilon=4 dp-batches=3 dp-noise-seed=1"
    with pytest.warns(PrivacyBudgetNote, match="after depth 0"):
        run_app(nodes, {"method": "fedpc", "options": options, "result-path": "r.json"})
    result = Result.load(tmp_path / "results" / "r.json")
    privacy = result.extra["privacy"]
    assert "dp-period-epsilon" in privacy["stopped"] and privacy["batches"] == 1
    from fedcausal_flwr.report import privacy_sentence

    assert "The search stopped before depth 1: site 0 refuses" in privacy_sentence(privacy)
    assert result.extra["depths_searched"] == 1
    monkeypatch.setattr(TableTests, "answer", answer)
    capped = fedcausal_flwr.run(
        "fedpc",
        data=asia_sites,
        dp="central",
        dp_epsilon=4,
        dp_batches=3,
        dp_noise_seed=1,
        max_depth=0,
    )
    assert result.graph == capped.graph  # the same noise at depth 0, and nothing after it
    for node in nodes:
        lines = audit(node)
        assert lines[-1]["outcome"] == "refused" and lines[-1]["policy"] == "dp-period-epsilon"
        sent = [ln["privacy"] for ln in lines if ln.get("outcome") == "sent" and "privacy" in ln]
        assert recompute(sent, 1e-6)[1] <= 5  # the period's releases, composed by their PLDs
