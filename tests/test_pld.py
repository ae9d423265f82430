"""A run's count releases composed by their privacy loss distributions (dp_accounting): the same
epsilon as an exact computation written here, tighter than the zCDP statement, and what a real
private FedPC run's releases add up to."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_module
from scipy.optimize import brentq

import fedcausal_flwr
from fedcausal_flwr.data import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.privacy.accounting import epsilon_of, recompute
from fedcausal_flwr.privacy.pld import pld_epsilon, summed_shares_pmf

DELTA = 1e-6


def exact_central_epsilon(tables: int, variance: float, delta: float) -> float:
    """``epsilon`` of ``tables`` counts, each moved by one under discrete Gaussian noise of
    parameter ``variance``, from the sufficient statistic: the privacy loss of the whole release
    is ``(T - 2 S) / (2 sigma^2)`` with ``S`` the sum of the ``T`` noises, whose mass function is
    the discrete Gaussian's to the ``T``-th convolution power (by FFT)."""
    reach = math.ceil(14 * math.sqrt(variance))
    values = np.arange(-reach, reach + 1)
    one = np.exp(-0.5 * values * values / variance)
    one /= one.sum()
    size = (one.size - 1) * tables + 1
    power = np.fft.irfft(np.fft.rfft(one, 1 << (size - 1).bit_length()) ** tables)[:size]
    mass = np.clip(power, 0, None)
    mass /= mass.sum()
    loss = (tables - 2 * (np.arange(size) - reach * tables)) / (2 * variance)

    def delta_at(epsilon: float) -> float:
        return float(np.sum(mass * -np.expm1(np.minimum(epsilon - loss, 0.0))))

    return brentq(lambda e: delta_at(e) - delta, 1e-3, 50)


def test_central_releases_compose_to_the_exact_epsilon_below_the_zcdp_statement():
    releases = [{"tables": 300, "variance": 400.0}, {"tables": 300, "variance": 400.0}]
    ours = pld_epsilon(releases, DELTA)
    exact = exact_central_epsilon(600, 400.0, DELTA)
    assert ours == pytest.approx(exact, abs=1e-4)
    assert ours >= exact - 1e-9  # the library errs on the pessimistic side only
    # the continuous Gaussian with the same noise is the same to 1e-3 at this size
    gaussian = pld_module.from_gaussian_mechanism(
        math.sqrt(400.0), sensitivity=math.sqrt(600), value_discretization_interval=1e-5
    )
    assert ours == pytest.approx(gaussian.get_epsilon_for_delta(DELTA), abs=1e-3)
    rho, stated = recompute(releases, DELTA)
    # the zCDP statement leaves a good part of the budget unspent
    assert stated == ours and ours < 0.95 * epsilon_of(rho, DELTA)
    # releases of different sizes and noise compose too (more noise, less epsilon)
    assert pld_epsilon([*releases, {"tables": 50, "variance": 5000.0}], DELTA) > ours


def test_distributed_shares_sum_to_their_exact_mass_and_cost_what_the_central_noise_does():
    first, mass = summed_shares_pmf(9.0, 4)
    values = np.arange(first, first + mass.size)
    assert mass.sum() == pytest.approx(1.0) and np.all(mass > 0)
    assert values @ mass == pytest.approx(0.0, abs=1e-12)
    one_first, one = summed_shares_pmf(9.0, 1)
    one_values = np.arange(one_first, one_first + one.size)
    assert values**2 @ mass == pytest.approx(4 * (one_values**2 @ one), rel=1e-9)
    central = pld_epsilon([{"tables": 200, "variance": 360.0}], DELTA)
    shared = pld_epsilon(
        [{"tables": 200, "variance": 360.0, "shares": 10, "share_variance": 36.0, "cells": 900}],
        DELTA,
    )
    # ten shares of 36 are all but a discrete Gaussian of 360; the library rounds pessimistically
    assert central <= shared <= central * 1.01
    one_share = pld_epsilon(
        [{"tables": 200, "variance": 360.0, "shares": 1, "share_variance": 360.0, "cells": 900}],
        DELTA,
    )
    assert one_share == pytest.approx(central, rel=2e-3)


def test_what_has_no_pld_says_so():
    assert pld_epsilon([], DELTA) == 0.0
    assert pld_epsilon([{"tables": 10, "variance": 0.0}], DELTA) == math.inf
    # shares so small that their sum is 0 in floating point protect nothing either (a forged
    # charge a site counts must not break its check)
    tiny = {"tables": 3, "variance": 1e-9, "shares": 1, "share_variance": 1e-9, "cells": 12}
    assert pld_epsilon([tiny], DELTA) == math.inf
    lattice = {"tables": 4, "variance": 90.0, "sensitivity2": 40.0, "resolution": 0.01}
    assert pld_epsilon([{"tables": 10, "variance": 50.0}, lattice], DELTA) is None
    with pytest.raises(ValueError, match="delta"):
        pld_epsilon([], 0.0)


def library_bounds(release: dict) -> tuple[float, float]:
    """One release's epsilon as dp_accounting builds it from the noise's two mass functions
    alone (privacy buckets at 1e-5, its own pessimistic and optimistic estimates): the true
    value lies between them."""
    if "shares" in release:
        first, mass = summed_shares_pmf(release["share_variance"], release["shares"])
    else:
        first, mass = summed_shares_pmf(release["variance"], 1)
    logs = np.log(mass).tolist()
    lower = {first + k: v for k, v in enumerate(logs)}
    upper = {first + k + 1: v for k, v in enumerate(logs)}
    return tuple(
        pld_module.from_two_probability_mass_functions(
            lower, upper, pessimistic_estimate=pessimistic, value_discretization_interval=1e-5
        )
        .self_compose(release["tables"])
        .get_epsilon_for_delta(DELTA)
        for pessimistic in (False, True)
    )


@pytest.mark.parametrize(
    "options",
    [
        {"dp": "central", "dp_noise_seed": 5},  # half of what is left per depth
        {"dp": "central", "dp_noise_seed": 5, "dp_batches": 2},  # an even split, to the target
        {"dp": "distributed", "secure": True},
    ],
    ids=["halving", "even", "distributed"],
)
def test_a_private_fedpc_run_states_the_librarys_epsilon_within_its_target(options):
    sites = split_iid(load_network("asia").sample(6000, seed=11), 3, seed=2).clients
    result = fedcausal_flwr.run("fedpc", data=sites, dp_epsilon=4, dp_delta=DELTA, **options)
    privacy = result.extra["privacy"]
    assert privacy["epsilon"] <= 4.0 and privacy["zcdp_epsilon"] > 1.05 * privacy["epsilon"]
    if "dp_batches" in options:
        assert privacy["epsilon"] > 3.999  # what an even plan leaves is its rounding
    # the same epsilon from the library, release by release, as a reader would compose them
    composed = None
    for release in privacy["releases"]:
        noise = math.sqrt(release["variance"])
        one = pld_module.from_discrete_gaussian_mechanism(noise, use_connect_dots=True)
        composed = (
            one.self_compose(release["tables"])
            if composed is None
            else composed.compose(one.self_compose(release["tables"]))
        )
    if "shares" not in privacy["releases"][0]:
        assert privacy["epsilon"] == pytest.approx(composed.get_epsilon_for_delta(DELTA), abs=1e-3)
    else:  # one release per depth: each within the library's own two estimates
        for release in privacy["releases"]:
            optimistic, pessimistic = library_bounds(release)
            assert optimistic - 1e-3 <= pld_epsilon([release], DELTA) <= pessimistic + 1e-3
