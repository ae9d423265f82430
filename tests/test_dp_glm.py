"""Differentially private fedCI: each row's GLM contribution is clipped at its site (the bound the
noise is calibrated to), and the LR test reads noisy log-likelihoods knowing their noise."""

import numpy as np
import pandas as pd
import pytest
from helpers import mixed_site_frames

from fedcausal_flwr.data.schema import Schema, VariableSpec
from fedcausal_flwr.stats.glm import ClientTable, GLMModel, local_contribution, n_global_params


@pytest.fixture(scope="module")
def mixed():
    rng = np.random.default_rng(3)
    n = 60
    frame = pd.DataFrame({
        "c": rng.normal(0, 2, n),
        "b": rng.integers(0, 2, n).astype(bool),
        "k": rng.choice(["u", "v", "w"], n),
        "o": rng.choice(["lo", "mid", "hi", "top"], n),
    })  # fmt: skip
    schema = Schema((
        VariableSpec("c", "continuous"), VariableSpec("b", "binary", (False, True)),
        VariableSpec("k", "categorical", ("u", "v", "w")),
        VariableSpec("o", "ordinal", ("lo", "mid", "hi", "top")),
    ))  # fmt: skip
    return frame, schema


@pytest.mark.parametrize("response", ["c", "b", "k", "o"])
def test_a_clipped_contribution_is_the_sum_of_each_rows_contribution_clipped(mixed, response):
    """Against the contributions of one-row tables, clipped one by one (an independent route:
    no closed form, no weights)."""
    frame, schema = mixed
    predictors = tuple(v for v in ("c", "b", "k", "o") if v != response)
    model = GLMModel(response, predictors, "none", (), ())
    rng = np.random.default_rng(7)
    beta = rng.normal(0, 0.3, n_global_params(model, schema))
    rows = [local_contribution(ClientTable(frame.iloc[[i]], schema), 0, model, beta)
            for i in range(len(frame))]  # fmt: skip
    norms = np.array([np.linalg.norm(r) for r in rows])
    clip = float(np.median(norms))
    assert (norms > clip).any() and (norms < clip).any()  # the test clips some rows, not all
    expected = sum(r * min(1.0, clip / nrm) for r, nrm in zip(rows, norms, strict=True))
    got = local_contribution(ClientTable(frame, schema), 0, model, beta, clip=clip)
    assert np.allclose(got, expected, rtol=1e-10, atol=1e-10)
    unclipped = local_contribution(ClientTable(frame, schema), 0, model, beta)
    assert np.allclose(unclipped, sum(rows), rtol=1e-10, atol=1e-10)


def test_a_noisy_statistics_p_value_is_the_tail_of_chi2_plus_its_noise():
    from scipy import stats

    from fedcausal_flwr.stats.glm import noisy_chi2_sf

    rng = np.random.default_rng(0)
    for df, variance, t in ((1, 25.0, 4.0), (3, 400.0, 30.0), (2, 1.0, 6.0), (4, 100.0, -5.0)):
        draws = rng.chisquare(df, 400_000) + rng.normal(0, np.sqrt(variance), 400_000)
        assert noisy_chi2_sf(t, df, variance) == pytest.approx(np.mean(draws >= t), abs=4e-3)
    assert noisy_chi2_sf(3.84, 1, 0.0) == pytest.approx(stats.chi2.sf(3.84, 1))


@pytest.fixture(scope="module")
def federation():
    clients = mixed_site_frames(3000)
    return clients, Schema.infer(clients).dumps()


def fedci(sites, schema, secure=False, **options):
    from fedcausal_flwr.federation.runtime.runners import run_method

    return run_method("fedci-pc", sites, {"schema": schema, **options}, secure=secure)


@pytest.mark.parametrize("mode", ["central", "distributed"])
def test_epsilon_inf_without_clipping_is_the_exact_run(federation, mode):
    sites, schema = federation
    exact = fedci(sites, schema, max_depth=1)
    free = fedci(sites, schema, secure=mode == "distributed", dp=mode, dp_epsilon="inf",
                 dp_clip=1e5, dp_rounds=25)  # fmt: skip
    assert free.graph == exact.graph
    assert free.extra["privacy"]["epsilon"] == float("inf")


def test_the_accountant_adds_up_the_rounds_and_stays_within_the_target(federation):
    from fedcausal_flwr.privacy.accounting import epsilon_of, recompute

    sites, schema = federation
    result = fedci(sites, schema, dp="central", dp_epsilon=16, dp_noise_seed=3, dp_rounds=3)
    privacy = result.extra["privacy"]
    releases = privacy["releases"]
    assert privacy["planned_batches"] == 2 * 3 and 1 <= len(releases) <= 6
    assert all(r["tables"] > 0 and r["sensitivity2"] > r["tables"] for r in releases)
    rho, epsilon = recompute(releases, 1e-6)
    assert rho == pytest.approx(privacy["rho"]) and epsilon <= 16
    assert epsilon == pytest.approx(epsilon_of(privacy["rho"], 1e-6))
    # every batch ran at most dp_rounds IRLS rounds, every model's status says how it ended
    assert all(b["rounds"] <= 3 for b in result.extra["batches"])
    again = fedci(sites, schema, dp="central", dp_epsilon=16, dp_noise_seed=3, dp_rounds=3)
    assert again.graph == result.graph  # a fixed noise seed repeats the run (simulation only)


def test_the_server_decodes_only_noisy_glm_sums(federation, monkeypatch):
    """Distributed: the first round of a batch evaluates every model at beta = 0, so the sums a
    run without noise decodes there are the noiseless clipped sums; a noisy run's differ from
    them by noise of the planned variance (the sites' shares, in units of 2**-30)."""
    from fedcausal_flwr.federation.core import protocol
    from fedcausal_flwr.privacy.charges import PrivacyCharge
    from fedcausal_flwr.protocols.fedci import GLM, GLMRequest, decode_fixed

    sites, schema = federation
    seen: dict[str, list] = {"inf": [], "noisy": []}
    decode = protocol.decode_secure_mean
    key = ["inf"]

    def spy(mean, n_clients, action, server_round):
        total = decode(mean, n_clients, action, server_round)
        if action == GLM:
            request = spy.run.pending
            fixed = GLMRequest.decode(request.payload).fixed
            charge = PrivacyCharge.decode(GLMRequest.decode(request.payload).privacy)
            seen[key[0]].append((decode_fixed(total, *fixed), charge.variance))
        return total

    from fedcausal_flwr.strategies.search import SearchStrategy

    start = SearchStrategy.start_search

    def remember_run(self, max_depth=None):
        spy.run = self.protocol_run
        return start(self, max_depth)

    monkeypatch.setattr(protocol, "decode_secure_mean", spy)
    monkeypatch.setattr(SearchStrategy, "start_search", remember_run)
    fedci(sites, schema, secure=True, dp="distributed", dp_epsilon="inf", dp_rounds=2)
    key[0] = "noisy"
    fedci(sites, schema, secure=True, dp="distributed", dp_epsilon=4, dp_rounds=2)
    (exact, _), (noisy, variance) = seen["inf"][0], seen["noisy"][0]
    noise = (noisy - exact) * 2.0**30  # in units of the lattice
    assert noise.size > 100 and np.count_nonzero(noise) == noise.size
    assert 0.7 * variance < noise.var() < 1.4 * variance


def test_private_fedci_options_are_checked_with_their_reasons(federation):
    from fedcausal_flwr.options import OptionError

    sites, schema = federation
    with pytest.raises(OptionError, match="ci='fedci'"):
        fedci(sites, schema, dp="central", ci="fisher")
    with pytest.raises(OptionError, match="site_effect='private'"):
        fedci(sites, schema, dp="central", site_effect="private")
    with pytest.raises(OptionError, match="secure"):
        fedci(sites, schema, dp="distributed")
    with pytest.raises(OptionError, match="dp_clip"):
        fedci(sites, schema, dp_clip=3.0)  # dp off: the clip bound would be ignored
    with pytest.raises(OptionError, match="lattice"):
        fedci(sites, schema, dp="central", dp_clip=1e9)  # sums past 63 bits at 2**-30


def test_a_site_counts_a_glm_charge_from_its_clip_and_resolution():
    from fedcausal_flwr.federation.core.site_guard import SiteGuard
    from fedcausal_flwr.privacy.accounting import release_sensitivity2
    from fedcausal_flwr.privacy.charges import PrivacyCharge
    from fedcausal_flwr.protocols.fedci import DISCLOSURES, GLM

    guard = SiteGuard("fedci-pc", DISCLOSURES, site=0)
    charge = PrivacyCharge("discrete Gaussian", 8, 1e20, -5.0, 4.0, 1e-6, None, 200, 5.0,
                           2.0**-30)  # fmt: skip
    guard.check(GLM, {"privacy": charge.encode()}, 2)
    expected = release_sensitivity2(8, 200, 5.0, 2.0**-30) / (2 * 1e20)
    assert guard.charge["rho"] == pytest.approx(expected)  # never the stated -5
    assert expected == pytest.approx((np.sqrt(8) * 5 * 2**30 + np.sqrt(200)) ** 2 / 2e20)


def test_a_client_refuses_a_glm_charge_that_does_not_count_what_it_asks(mixed):
    from fedcausal_flwr.clients.glm_tests import GLMTestsClient
    from fedcausal_flwr.federation.core.messages import ProtocolError
    from fedcausal_flwr.privacy.charges import PrivacyCharge
    from fedcausal_flwr.protocols.fedci import GLMRequest, model_row

    frame, schema = mixed
    model = GLMModel("b", ("c",), "none", (), ())
    beta = np.zeros(n_global_params(model, schema))
    client = GLMTestsClient(0, frame)

    def ask(charge):
        request = GLMRequest(schema.to_json(), "error", [model_row(model)], None, charge.encode())
        return client.glm(request, [beta])

    good = PrivacyCharge("discrete Gaussian", 1, 1e20, None, 4.0, 1e-6, None, 10, 5.0, 2.0**-30)
    (blocks,), _ = ask(good)
    assert np.allclose(blocks, local_contribution(ClientTable(frame, schema), 0, model, beta, 5.0))
    for wrong, words in (
        (PrivacyCharge("discrete Gaussian", 2, 1e20, None, 4.0, 1e-6, None, 10, 5.0, 1e-9),
         "counts 2 models"),
        (PrivacyCharge("discrete Gaussian", 1, 1e20, None, 4.0, 1e-6, None, 12, 5.0, 1e-9),
         "counts 12 entries"),
        (PrivacyCharge("discrete Gaussian", 1, 1e20, None, 4.0, 1e-6, 3, 10, 5.0, 1e-9),
         "fixed-point digits"),
    ):  # fmt: skip
        with pytest.raises(ProtocolError, match=words):
            ask(wrong)


def test_the_documented_fedci_command_runs(capsys, tmp_path):
    """docs/privacy.md's fedci-pc command, as written there."""
    import json
    import re
    import shlex
    from pathlib import Path

    from fedcausal_flwr.cli import main

    doc = (Path(__file__).resolve().parents[1] / "docs" / "privacy.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", doc, flags=re.S)
    (command,) = [b for b in blocks if "fedci-pc" in b]
    argv = shlex.split(command.replace("\\\n", " "))
    out = tmp_path / "result.json"
    assert main([*argv[1:], "--out", str(out)]) == 0, capsys.readouterr().err
    privacy = json.loads(out.read_text())["extra"]["privacy"]
    assert 0 < privacy["epsilon"] <= 64 and privacy["planned_batches"] == 8


def test_each_site_logs_each_glm_release_and_a_budget_ends_the_search(tmp_path, monkeypatch):
    """Deployed sites with a budget: each logs the charge of each GLM round it answers (together
    the run's rho, as the site counts it); when another run spends part of the period between
    two depths, the next depth is refused and the search ends with the depth-0 graph."""
    import json

    from test_site_policy import audit, run_app, write_sites

    from fedcausal_flwr.data.partition import split_site_effects
    from fedcausal_flwr.data.synthetic import random_dag
    from fedcausal_flwr.federation.core.site_policy import default_audit_log
    from fedcausal_flwr.result import Result
    from fedcausal_flwr.strategies.search import SearchStrategy
    from fedcausal_flwr.strategies.search_stop import PrivacyBudgetNote

    types = {"X1": "continuous", "X2": "binary", "X3": "continuous", "X4": "continuous"}
    dag = random_dag(4, expected_degree=1.5, seed=1)
    frames = split_site_effects(dag, 900, 3, seed=1, types=types, affected=[]).clients
    options = "dp=central dp-epsilon=16 dp-rounds=2 dp-clip=5 dp-noise-seed=4"
    central = {"dp-allow-central": True, "allow-plain-statistics": True}
    nodes = write_sites(tmp_path, frames, **{"dp-epsilon": 16}, **central)
    run_app(nodes, {"method": "fedci-pc", "options": options, "result-path": "a"})
    first = Result.load(tmp_path / "results" / "a").extra["privacy"]
    for node in nodes:
        logged = [ln["privacy"]["rho"] for ln in audit(node) if "privacy" in ln]
        assert len(logged) == len(first["releases"])
        assert sum(logged) == pytest.approx(first["rho"])

    periodic = {"dp-epsilon": 16, "dp-period-epsilon": 20, "dp-period-days": 1}
    (tmp_path / "b").mkdir()
    nodes = write_sites(tmp_path / "b", frames, **periodic, **central)
    handle = SearchStrategy.handle_replies

    def another_run_spends(self, request, replies):
        handle(self, request, replies)
        done = len(self.tests.batches) == 1 and not self.tests.fits  # depth 0 answered
        if done and not getattr(self, "_spent", False):
            self._spent = True  # depth 0 done: a concurrent run logs most of the period
            for node in nodes:
                line = next(ln for ln in audit(node) if "privacy" in ln)
                spent = {**line, "run": "another", "privacy": {**line["privacy"], "rho": 2.5}}
                with open(default_audit_log(node["data-path"]), "a") as log:
                    log.write(json.dumps(spent) + "\n")

    monkeypatch.setattr(SearchStrategy, "handle_replies", another_run_spends)
    with pytest.warns(PrivacyBudgetNote, match="after depth 0"):
        run_app(nodes, {"method": "fedci-pc", "options": options, "result-path": "b"})
    stopped = Result.load(tmp_path / "results" / "b")
    assert "dp-period-epsilon" in stopped.extra["privacy"]["stopped"]
    assert all(len(b["given"]) == 0 for b in stopped.extra["ci_tests"])  # depth 0 only


def test_the_report_states_glm_noise_in_the_blocks_units(federation):
    from fedcausal_flwr.report import privacy_sentence

    sites, schema = federation
    privacy = fedci(sites, schema, dp="central", dp_epsilon=16, dp_noise_seed=3).extra["privacy"]
    assert privacy["mechanism"] == "discrete Gaussian on clipped GLM blocks"
    assert privacy["accounting"].startswith("zCDP")  # lattice releases have no PLD here
    in_units = [r["variance"] * r["resolution"] ** 2 for r in privacy["releases"]]
    assert all(1 < v < 1e6 for v in in_units)  # not the lattice's 2**60 times more
    assert f"{min(in_units):.4g} to {max(in_units):.4g}" in privacy_sentence(privacy)


def test_fedci_fci_with_epsilon_inf_without_clipping_is_the_exact_run(federation):
    from fedcausal_flwr.federation.runtime.runners import run_method

    sites, schema = federation
    base = {"schema": schema, "possible_dsep": "off"}
    exact = run_method("fedci-fci", sites, {**base, "max_depth": 1})
    free = run_method("fedci-fci", sites, {**base, "dp": "central", "dp_epsilon": "inf",
                                           "dp_clip": 1e5, "dp_rounds": 25})  # fmt: skip
    assert free.graph == exact.graph
