"""The discrete Gaussian mechanism and its accountant (Flower-free): zCDP (lattice releases) and
the tight accounting of count releases (their PLDs, planned in the composed Gaussian's rho)."""

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_module
from scipy import stats

from fedcausal_flwr.privacy.accounting import (
    PrivacyAccountant,
    distributed_rho,
    epsilon_of,
    gaussian_epsilon,
    gaussian_rho_for,
    noise_variance,
    recompute,
    rho_for,
)
from fedcausal_flwr.privacy.sampler import discrete_gaussian


def test_rho_and_epsilon_convert_both_ways_by_canonne_kamath_steinke():
    # their Corollary 13 at one order by hand: rho = 0.5, alpha = 6, delta = 1e-6:
    # 6 * 0.5 + (13.815510558 + 5 ln(5/6) - ln 6) / 5 = 3 + (13.815510558 - 0.911607784
    # - 1.791759469) / 5 = 3 + 2.222428661 = 5.222428661; the search finds a smaller one
    assert epsilon_of(0.5, 1e-6) <= 5.222428661
    # ... the smallest over a fine grid of orders, and never above Bun and Steinke's rho + 2
    # sqrt(rho ln(1/delta))
    orders = np.linspace(1.001, 200, 2_000_000)
    for rho in (0.01, 0.5, 1.1, 9.0):
        grid = np.min(orders * rho + (np.log(1e6) + (orders - 1) * np.log1p(-1 / orders)
                                      - np.log(orders)) / (orders - 1))  # fmt: skip
        assert epsilon_of(rho, 1e-6) == pytest.approx(grid, rel=1e-6)
        assert epsilon_of(rho, 1e-6) < rho + 2 * math.sqrt(rho * math.log(1e6))
    for epsilon in (0.5, 2, 8, 16):
        assert epsilon_of(rho_for(epsilon, 1e-5), 1e-5) == pytest.approx(epsilon, rel=1e-8)
        assert epsilon_of(rho_for(epsilon, 1e-5), 1e-5) <= epsilon
    assert epsilon_of(0.0, 1e-6) == 0.0 and epsilon_of(1e-15, 1e-6) >= 0.0
    assert rho_for(math.inf, 1e-6) == math.inf and noise_variance(math.inf, 9.0) == 0.0
    # a batch of 9 tables (L2 sensitivity 3) at rho = 0.5: sigma^2 = 9 / (2 * 0.5) = 9
    assert noise_variance(0.5, 9.0) == 9.0
    with pytest.raises(ValueError, match="delta"):
        rho_for(1.0, 1.5)


def test_the_discrete_gaussian_has_its_law():
    rng = np.random.default_rng(7)
    draws = discrete_gaussian(4.0, 200_000, rng)
    assert draws.dtype == np.int64
    assert abs(draws.mean()) < 0.02 and draws.var() == pytest.approx(4.0, rel=0.02)
    # the pmf is proportional to exp(-x^2 / (2 sigma^2)) on the integers
    support = np.arange(-12, 13)
    pmf = np.exp(-(support**2) / 8.0)
    pmf /= pmf.sum()
    observed = np.array([(draws == x).sum() for x in support])
    keep = pmf * draws.size > 5
    expected = pmf[keep] / pmf[keep].sum() * observed[keep].sum()
    assert stats.chisquare(observed[keep], expected).pvalue > 1e-3
    assert not discrete_gaussian(0.0, 5, rng).any()


def test_the_zcdp_accountant_splits_the_target_and_recomputes_from_its_releases():
    accountant = PrivacyAccountant(epsilon=2.0, delta=1e-6, planned=2, tight=False)
    target = rho_for(2.0, 1e-6)
    assert accountant.batch_rho == pytest.approx(target / 2)
    # batch 1: 12 tables in one round; batch 2: 10 tables in two rounds (6 + 4)
    for tables, parts in ((12, [12]), (10, [6, 4])):
        assert accountant.can_spend()
        variance = accountant.batch_variance(tables)
        assert variance == pytest.approx(tables / (2 * target / 2))
        for round_, part in enumerate(parts):
            accountant.record(round_, part, variance)
        accountant.close_batch()
    assert not accountant.can_spend()  # a third batch would cross the target
    report = accountant.report()
    assert report["rho"] == pytest.approx(target) and report["epsilon"] == pytest.approx(2.0)
    assert report["accounting"].startswith("zCDP")
    off = PrivacyAccountant(epsilon=math.inf, delta=1e-6, planned=1)
    assert not off.noisy and off.batch_variance(5) == 0.0 and off.can_spend()


def test_the_tight_accountant_plans_in_the_gaussians_rho_and_states_the_pld_epsilon():
    accountant = PrivacyAccountant(epsilon=2.0, delta=1e-6, planned=2)
    target = gaussian_rho_for(2.0, 1e-6)
    assert accountant.target_rho == target and target > 1.1 * rho_for(2.0, 1e-6)
    for tables, parts in ((12, [12]), (10, [6, 4])):
        variance = accountant.batch_variance(tables)
        # the Gaussian's plan, grown (by the PLD check) by a part in a thousand at most
        assert tables / target <= variance <= tables / target * 1.001
        for round_, part in enumerate(parts):
            accountant.record(round_, part, variance)
        accountant.close_batch()
    report = accountant.report()
    assert report["accounting"].startswith("privacy loss distributions")
    # the stated epsilon: what dp_accounting composes from the releases, spent to the target
    assert 1.99 < report["epsilon"] <= 2.0 and report["zcdp_epsilon"] > 2.1
    assert report["epsilon"] == pytest.approx(library_epsilon(report["releases"], 1e-6), abs=1e-3)
    assert recompute(report["releases"], 1e-6)[1] == report["epsilon"]


def library_epsilon(releases, delta):
    """The releases' epsilon composed by dp_accounting, one release at a time, as the library's
    own documentation builds a discrete Gaussian's PLD (central noise only)."""
    composed = None
    for release in releases:
        one = pld_module.from_discrete_gaussian_mechanism(
            math.sqrt(release["variance"]), sensitivity=1, use_connect_dots=True
        ).self_compose(release["tables"])
        composed = one if composed is None else composed.compose(one)
    return composed.get_epsilon_for_delta(delta)


def test_the_analytic_gaussian_is_the_librarys():
    for epsilon in (0.3, 2.0, 8.0, 30.0):
        rho = gaussian_rho_for(epsilon, 1e-6)
        assert gaussian_epsilon(rho, 1e-6) == pytest.approx(epsilon, rel=1e-9)
        # the library's connect-the-dots PLD at a 1e-4 grid: within 1e-9 of the exact curve
        # here (1e-5 agreed as closely and took ten times as long)
        library = pld_module.from_gaussian_mechanism(
            1 / math.sqrt(2 * rho), value_discretization_interval=1e-4
        ).get_epsilon_for_delta(1e-6)
        assert library == pytest.approx(epsilon, abs=1e-6)
    assert gaussian_epsilon(0.0, 1e-6) == 0.0 and gaussian_rho_for(math.inf, 1e-6) == math.inf


def test_without_a_plan_each_batch_spends_half_of_what_is_left():
    accountant = PrivacyAccountant(epsilon=4.0, delta=1e-6, planned=None)
    target, spent = gaussian_rho_for(4.0, 1e-6), 0.0
    for batch, (tables, parts) in enumerate(((666, [666]), (2800, [1500, 1300]), (40, [40]))):
        assert accountant.can_spend()  # never refused: what is left is never spent whole
        assert accountant.batch_rho == pytest.approx((target - spent) / 2)
        variance = accountant.batch_variance(tables)
        assert variance == pytest.approx(tables / (target - spent))
        for round_, part in enumerate(parts):
            accountant.record(round_, part, variance)
        accountant.close_batch()
        spent += (target - spent) / 2
        assert accountant.spent_rho == pytest.approx(spent)
        assert accountant.spent_rho == pytest.approx(target * (1 - 0.5 ** (batch + 1)))
    report = accountant.report()
    assert report["planned_batches"] is None and "half" in report["allocation"]
    assert report["epsilon"] < 4.0 and [b["rho"] for b in report["per_batch"]] == pytest.approx(
        [target / 2, target / 4, target / 8]
    )
    # distributed: the batch's half, the shares' tau included
    shared = PrivacyAccountant(epsilon=4.0, delta=1e-6, planned=None)
    variance = shared.batch_variance(100, shares=10, cells=900)
    assert distributed_rho(100, variance / 10, 10, 900) <= target / 2 + 1e-12
    with pytest.raises(ValueError, match="planned"):
        PrivacyAccountant(epsilon=4.0, delta=1e-6, planned=0)
