"""The tight ``(epsilon, delta)`` of a run's count releases, from Google's ``dp_accounting``.

:mod:`.privacy` states a run's ``epsilon`` from its zCDP ``rho`` (Bun and Steinke's conversion,
which is loose: about a quarter of ``rho`` goes unspent at ``epsilon`` 8). A count release has an
exact privacy loss distribution (PLD), which ``dp_accounting`` composes numerically (Doroshenko,
Ghazi, Kamath, Kumar and Manurangsi, "Connect the Dots", PETS 2022), always erring on the
pessimistic side. One row added at one site (or removed) moves one cell of each of a release's
``T`` tables by one, and every cell carries its own noise, so a release's PLD is the ``T``-fold
composition of one cell's: a discrete Gaussian of parameter ``sigma^2`` (central noise: the
library's own mechanism), or the sum of ``n`` sites' discrete Gaussian shares (distributed
noise: the sum's exact probability mass function, convolved here, handed to the library).
Real-valued lattice releases (fedCI's clipped GLM blocks) move many cells by different amounts:
the library has no PLD for them, and :func:`pld_epsilon` says so (``None``).

Flower-free.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_module

#: the PLDs' discretisation interval: one for every release, so any two compose. At 1e-5 a
#: distributed release of 666 tables (10 shares of variance 73.2) states epsilon 0.1% above
#: its exact value; the central mechanism's connect-the-dots PLD is exact to 1e-5 at that size.
DISCRETISATION = 1e-5
#: a cell's noise mass left out of a PLD (the library's own bound for its discrete Gaussian)
TRUNCATION_SIGMAS = 11.6


def summed_shares_pmf(share_variance: float, shares: int) -> tuple[int, np.ndarray]:
    """The probability mass function of a sum of ``shares`` independent discrete Gaussians of
    parameter ``share_variance``, each truncated at 11.6 of its sigmas (mass under 1e-30): its
    smallest value and the masses from there on (positive, adding to one)."""
    reach = math.ceil(TRUNCATION_SIGMAS * math.sqrt(share_variance))
    values = np.arange(-reach, reach + 1, dtype=np.float64)
    one = np.exp(-0.5 * values * values / share_variance)
    one /= one.sum()
    mass = one
    for _ in range(shares - 1):  # direct sums of positive terms: no FFT noise in the tails
        mass = np.convolve(mass, one)
    kept = np.flatnonzero(mass > mass.max() * 1e-280)  # log-finite: the library takes logs
    mass = mass[kept[0] : kept[-1] + 1]
    return int(kept[0]) - reach * shares, mass / mass.sum()


@lru_cache(maxsize=256)
def _cell_pld(variance: float, shares: int | None, share_variance: float):
    """One cell's PLD: a count moved by one under its noise."""
    if shares is None:
        return pld_module.from_discrete_gaussian_mechanism(
            math.sqrt(variance), sensitivity=1, use_connect_dots=True,
            value_discretization_interval=DISCRETISATION,
        )  # fmt: skip
    first, mass = summed_shares_pmf(share_variance, shares)
    logs = np.log(mass).tolist()
    lower = {first + k: v for k, v in enumerate(logs)}
    upper = {first + k + 1: v for k, v in enumerate(logs)}
    return pld_module.from_two_probability_mass_functions(
        lower, upper, value_discretization_interval=DISCRETISATION
    )


def release_pld(release: Mapping[str, Any]):
    """The PLD of one release as the accountant lists it (``tables``, ``variance``; distributed:
    ``shares`` and ``share_variance``), or None: a lattice release (``sensitivity2`` or
    ``resolution``), which has none here, or a noiseless one (``variance`` 0: no guarantee)."""
    if "sensitivity2" in release or "resolution" in release or not release["variance"] > 0:
        return None
    shares = release.get("shares")
    cell = _cell_pld(
        float(release["variance"]),
        None if shares is None else int(shares),
        0.0 if shares is None else float(release["share_variance"]),
    )
    return cell.self_compose(int(release["tables"]))


def pld_epsilon(releases: Iterable[Mapping[str, Any]], delta: float) -> float | None:
    """The ``epsilon`` at ``delta`` of ``releases`` composed by their PLDs (identical releases
    composed as one, ``k`` times): inf if one is noiseless, 0 with none, None if one is a
    lattice release (no PLD: its zCDP statement is the run's)."""
    if not 0 < delta < 1:
        raise ValueError(f"need 0 < delta < 1, got {delta}")
    counted: Counter[tuple] = Counter()
    for release in releases:
        if "sensitivity2" in release or "resolution" in release:
            return None
        if not release["variance"] > 0:
            return math.inf
        shares = release.get("shares")
        key = (int(release["tables"]), float(release["variance"]), shares,
               release.get("share_variance"))  # fmt: skip
        counted[key] += 1
    if not counted:
        return 0.0
    names = ("tables", "variance", "shares", "share_variance")
    plds = [
        release_pld({**dict(zip(names, key, strict=True)), "tables": key[0] * times})
        for key, times in counted.items()
    ]
    composed = plds[0]
    for one in plds[1:]:
        composed = composed.compose(one)
    return float(composed.get_epsilon_for_delta(delta))
