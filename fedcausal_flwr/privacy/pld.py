"""The tight ``(epsilon, delta)`` of a run's count releases, from Google's ``dp_accounting``.

A count release has an exact privacy loss distribution (PLD), which ``dp_accounting`` composes
numerically (Doroshenko, Ghazi, Kamath, Kumar and Manurangsi, "Connect the Dots", PETS 2022),
always erring on the pessimistic side. One row added at one site (or removed) moves one cell of
each of a release's ``T`` tables by one, and every cell carries its own noise, so a release's PLD
is the ``T``-fold composition of one cell's: a discrete Gaussian of parameter ``sigma^2``
(central noise: the library's own mechanism), or the sum of ``n`` sites' discrete Gaussian
shares (distributed noise: the sum's exact probability mass function, convolved here, handed to
the library). This is how a run states its ``epsilon`` and how a site counts its budget; the
zCDP statement of :mod:`.accounting` states about 7% more for the same releases at ``epsilon`` 8
(its ``rho`` at a target, 0.9 of the Gaussian's) and is kept as the cheap first check.

A run plans its noise in the Gaussian's currency, ``rho = sum T / (2 sigma^2)`` (half the
squared sensitivity-to-noise ratio, ``mu^2 / 2``): composed Gaussian releases are one Gaussian of
that ``mu``, whose ``(epsilon, delta)`` curve is exact and closed-form (Balle and Wang, "Improving
the Gaussian Mechanism for Differential Privacy", ICML 2018, Theorem 8:
:func:`~fedcausal_flwr.privacy.accounting.gaussian_rho_for`), and a discrete Gaussian's PLD agrees
with it to within about 1e-3 of ``epsilon`` at the noise a search uses; the PLD then checks each
batch before it is released.

Real-valued lattice releases (fedCI's clipped GLM blocks) move many cells by different amounts:
the library has no PLD for them, and :func:`pld_epsilon` says so (``None``): a run with one states
its zCDP ``epsilon``.

Flower-free. ``dp_accounting`` (and through it scipy.stats and scipy.signal, about a second) is
imported on first use: a site's guard needs it only where the zCDP check is not enough.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np

#: the PLDs' discretisation interval (the library's default): one for every release, so any
#: two compose. Against 1e-5, a release of 666 tables at variance 732 states epsilon 4e-6 more
#: (20,000 tables: 8e-5) and costs a tenth (0.05 s against 0.66 s to build).
DISCRETISATION = 1e-4
#: a cell's noise mass left out of a PLD (the library's own bound for its discrete Gaussian)
TRUNCATION_SIGMAS = 11.6


@lru_cache(maxsize=64)
def summed_shares_pmf(share_variance: float, shares: int) -> tuple[int, np.ndarray]:
    """The probability mass function of a sum of ``shares`` independent discrete Gaussians of
    parameter ``share_variance``, each truncated at 11.6 of its sigmas (mass under 1e-30): its
    smallest value and the masses from there on (positive, adding to one; read-only, as it is
    cached)."""
    reach = math.ceil(TRUNCATION_SIGMAS * math.sqrt(share_variance))
    values = np.arange(-reach, reach + 1, dtype=np.float64)
    one = np.exp(-0.5 * values * values / share_variance)
    one /= one.sum()
    mass = one
    for _ in range(shares - 1):  # direct sums of positive terms: no FFT noise in the tails
        mass = np.convolve(mass, one)
    kept = np.flatnonzero(mass > mass.max() * 1e-280)  # log-finite: the library takes logs
    mass = mass[kept[0] : kept[-1] + 1] / mass[kept[0] : kept[-1] + 1].sum()
    mass.setflags(write=False)
    return int(kept[0]) - reach * shares, mass


def _pld_module():
    from dp_accounting.pld import privacy_loss_distribution

    return privacy_loss_distribution


@lru_cache(maxsize=256)
def _cell_pld(noise: float, shares: int | None):
    """One cell's PLD: a count moved by one under its noise (the server's discrete Gaussian of
    parameter ``noise``, or the sum of ``shares`` sites' shares of parameter ``noise`` each)."""
    pld_module = _pld_module()
    if shares is None:
        return pld_module.from_discrete_gaussian_mechanism(
            math.sqrt(noise), sensitivity=1, use_connect_dots=True,
            value_discretization_interval=DISCRETISATION,
        )  # fmt: skip
    return _connect_dots(*summed_shares_pmf(noise, shares))


def _connect_dots(first: int, mass: np.ndarray):
    """The PLD of a count moved by one under additive noise of mass ``mass`` on ``first,
    first + 1, ...`` (log-concave: its privacy loss falls as the outcome grows), by the
    library's pessimistic connect-the-dots construction from the noise's exact hockey-stick
    divergences, as ``dp_accounting`` builds its own discrete mechanisms (privacy buckets would
    round every composed cell up: at 1e-4, 200 cells state 0.01 more)."""
    from dp_accounting.pld import pld_pmf

    upper = np.append(mass, 0.0)  # outcome x of the noise at the count ...
    lower = np.insert(mass, 0, 0.0)  # ... and at the count + 1
    both = (upper > 0) & (lower > 0)
    infinite = float(upper[lower == 0].sum())  # outcomes only the first reaches
    loss = np.log(upper[both]) - np.log(lower[both])
    order = np.argsort(-loss, kind="stable")
    loss, upper_mass, lower_mass = loss[order], upper[both][order], lower[both][order]
    scaled = loss / DISCRETISATION
    rounded = np.unique(np.concatenate([np.floor(scaled), np.ceil(scaled)]).astype(np.int64))
    epsilons = rounded * DISCRETISATION
    # delta(eps) = infinite + sum over losses above eps of (upper - e^eps lower)
    above = np.searchsorted(-loss, -epsilons, side="left")
    upper_sum = np.concatenate([[0.0], np.cumsum(upper_mass)])[above]
    lower_sum = np.concatenate([[0.0], np.cumsum(lower_mass)])[above]
    deltas = np.clip(infinite + upper_sum - np.exp(epsilons) * lower_sum, 0.0, 1.0)
    with np.errstate(over="ignore"):  # the library's expm1 of far-apart losses: inf, as meant
        pmf = pld_pmf.create_pmf_pessimistic_connect_dots(DISCRETISATION, rounded, deltas)
    return _pld_module().PrivacyLossDistribution(pmf)


#: one cell's noise: (the server's variance, None) or (each share's variance, shares)
CellKey = tuple[float, int | None]


def cell_key(release: Mapping[str, Any]) -> CellKey | None:
    """What one cell of a release carries (its noise), or None: a lattice release (``sensitivity2``
    or ``resolution``), which has no PLD here. Releases with the same key compose by adding their
    tables."""
    if "sensitivity2" in release or "resolution" in release:
        return None
    shares = release.get("shares")
    if shares is None:
        return float(release["variance"]), None
    return float(release["share_variance"]), int(shares)


@lru_cache(maxsize=256)
def _group_pld(key: CellKey, tables: int):
    return _cell_pld(*key).self_compose(tables)


@lru_cache(maxsize=64)
def _composed(groups: tuple[tuple[CellKey, int], ...]):
    """The composition of ``groups`` (cell, tables) in their order: a run's checks share their
    prefix (the batches spent), so each check builds one group and composes once."""
    last = _group_pld(*groups[-1])
    return last if len(groups) == 1 else _composed(groups[:-1]).compose(last)


def grouped(releases: Iterable[Mapping[str, Any]]) -> tuple[tuple[CellKey, int], ...] | None:
    """``releases`` as (cell, tables) groups in order of first appearance (the tables of every
    release with the same noise added up), or None if one has no PLD. A noiseless release is
    the group ``((0.0, None), tables)``."""
    tables: dict[CellKey, int] = {}
    for release in releases:
        key = cell_key(release)
        if key is None:
            return None
        if not key[0] > 0:
            key = (0.0, None)
        tables[key] = tables.get(key, 0) + int(release["tables"])
    return tuple(tables.items())


def pld_epsilon(
    releases: Iterable[Mapping[str, Any]], delta: float, gaussian_rho: float = 0.0
) -> float | None:
    """The ``epsilon`` at ``delta`` of ``releases`` composed by their PLDs (and, with
    ``gaussian_rho``, a Gaussian of ``mu^2 = 2 gaussian_rho`` after them: a run's plan, not yet
    released): inf if one is noiseless, 0 with none, None if one is a lattice release (no PLD:
    its zCDP statement is the run's)."""
    if not 0 < delta < 1:
        raise ValueError(f"need 0 < delta < 1, got {delta}")
    groups = grouped(releases)
    if groups is None:
        return None
    if any(_noiseless(key) for key, _ in groups) or math.isinf(gaussian_rho):
        return math.inf
    if gaussian_rho > 0:  # sensitivity 1, sigma = 1 / mu
        planned = _pld_module().from_gaussian_mechanism(
            1 / math.sqrt(2 * gaussian_rho), value_discretization_interval=DISCRETISATION
        )
        composed = _composed(groups).compose(planned) if groups else planned
        return float(composed.get_epsilon_for_delta(delta))
    return _epsilon_of(groups, delta) if groups else 0.0


def _noiseless(key: CellKey) -> bool:
    """No noise on a cell, or shares so small that their sum is one value (all its mass at 0
    within floating point): a release that protects nothing (epsilon inf)."""
    noise, shares = key
    return not noise > 0 or (shares is not None and summed_shares_pmf(noise, shares)[1].size < 2)


@lru_cache(maxsize=256)
def _epsilon_of(groups: tuple[tuple[CellKey, int], ...], delta: float) -> float:
    return float(_composed(groups).get_epsilon_for_delta(delta))
