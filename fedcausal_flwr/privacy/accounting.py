"""Differential privacy for summed counts: the discrete Gaussian mechanism and a zCDP accountant.

Neighbouring data sets differ by one row at one site (added or removed). A batch of ``T``
contingency tables then changes by one count in each table: its L2 sensitivity is ``sqrt(T)``.
Adding discrete Gaussian noise ``N_Z(0, sigma^2)`` to every cell makes the batch
``rho``-zCDP with ``rho = T / (2 sigma^2)`` (Canonne, Kamath and Steinke, "The Discrete Gaussian
for Differential Privacy", NeurIPS 2020, Theorem 14 for independent coordinates), exactly as the
continuous Gaussian does, and the noisy counts stay integers. zCDP composes by adding the batches'
``rho`` (Bun and Steinke, "Concentrated Differential Privacy", TCC 2016, Lemma 2.3); ``rho`` is
stated as ``(epsilon, delta)`` by Canonne, Kamath and Steinke's conversion (:func:`epsilon_of`),
and a target ``(epsilon, delta)`` gives the largest ``rho`` that meets it (:func:`rho_for`).
That statement is still loose; a run of count releases states the tight ``epsilon`` of their
privacy loss distributions instead (:mod:`.pld`, ``dp_accounting``), plans its ``rho`` against
the composed Gaussian's exact curve, checks each batch by the PLD before releasing it, and keeps
``rho`` as the cheap first check (a zCDP ``epsilon`` within a budget is a PLD ``epsilon`` within
it too). What a CI test does with the noisy counts is post-processing: it costs nothing.

Distributed noise (``dp=distributed``): each of ``n`` sites adds its own share
``N_Z(0, sigma^2 / n)`` to its tables inside secure aggregation, so the server only ever sees the
noisy sum. A sum of discrete Gaussians is not a discrete Gaussian; Kairouz, Liu and Steinke ("The
Distributed Discrete Gaussian Mechanism for Federated Learning with Secure Aggregation", ICML
2021) bound the sum of ``n`` shares of parameter ``s^2`` over ``d`` cells by
``D_alpha <= alpha T / (2 n s^2) + tau d`` with ``tau = 10 sum_{k=1}^{n-1}
exp(-2 pi^2 s^2 k / (k + 1))`` (:func:`sum_tau`); for ``alpha >= 1`` that is ``rho``-zCDP with
``rho = T / (2 n s^2) + tau d`` (:func:`distributed_rho`), which the accountant counts. The
``tau d`` term is negligible once a share's variance is a few units (``s^2 = 4``:
``tau < 10^-15`` per cell for 10 sites); the server never plans a share below variance 1/4
(:data:`MIN_SHARE_VARIANCE`), and a site counts whatever share it is sent by this bound (a
tiny share's ``tau d`` makes it dear).

Flower-free (standard library only). The noise itself is drawn by :mod:`.sampler`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def epsilon_of(rho: float, delta: float) -> float:
    """The ``epsilon`` of ``rho``-zCDP at ``delta``: Canonne, Kamath and Steinke's conversion
    ("The Discrete Gaussian for Differential Privacy", Corollary 13; OpenDP's too), the smallest
    over Renyi orders ``alpha > 1`` of ``alpha rho + (ln(1/delta) + (alpha - 1) ln(1 - 1/alpha)
    - ln(alpha)) / (alpha - 1)``, by golden-section search to one part in 10^12 of ``alpha``. It
    never exceeds Bun and Steinke's ``rho + 2 sqrt(rho ln(1/delta))``."""
    if rho < 0 or not 0 < delta < 1:
        raise ValueError(f"need rho >= 0 and 0 < delta < 1, got {rho}, {delta}")
    if rho == 0:
        return 0.0
    if math.isinf(rho):
        return math.inf
    log_term = math.log(1 / delta)

    def bound(alpha: float) -> float:
        return alpha * rho + (log_term + (alpha - 1) * math.log1p(-1 / alpha) - math.log(alpha)) / (
            alpha - 1
        )

    # unimodal in alpha, its minimum near 1 + sqrt(ln(1/delta) / rho)
    low, high = 1.0 + 1e-9, 2.0 + 4 * math.sqrt(log_term / rho)
    ratio = (math.sqrt(5) - 1) / 2
    left, right = high - ratio * (high - low), low + ratio * (high - low)
    at_left, at_right = bound(left), bound(right)
    while high - low > 1e-12 * high:
        if at_left <= at_right:
            high, right, at_right = right, left, at_left
            left = high - ratio * (high - low)
            at_left = bound(left)
        else:
            low, left, at_left = left, right, at_right
            right = low + ratio * (high - low)
            at_right = bound(right)
    return max(0.0, min(at_left, at_right, rho + 2 * math.sqrt(rho * log_term)))


def rho_for(epsilon: float, delta: float) -> float:
    """The largest zCDP ``rho`` whose :func:`epsilon_of` is within the target, less one part in
    10^9 so that a sum of releases, rounded, never states more than the target."""
    if not epsilon > 0 or not 0 < delta < 1:
        raise ValueError(f"need epsilon > 0 and 0 < delta < 1, got {epsilon}, {delta}")
    if math.isinf(epsilon):
        return math.inf
    low, _ = turning_point(lambda rho: epsilon_of(rho, delta) <= epsilon)
    return low * (1 - 1e-9)


def turning_point(
    holds: Callable[[float], bool], low: float = 0.0, high: float = 1.0, tolerance: float = 1e-12
) -> tuple[float, float]:
    """``(low, high)`` around where ``holds`` (true from ``low`` up to some point, false beyond
    it) turns false, to ``tolerance`` of ``high``: ``holds(low)`` and not ``holds(high)``, by
    doubling ``high`` and then bisection."""
    while holds(high):
        low, high = high, 2 * high
    while high - low > tolerance * high:
        middle = (low + high) / 2
        low, high = (middle, high) if holds(middle) else (low, middle)
    return low, high


def _log_normal_tail(x: float) -> float:
    """``log P(N(0, 1) > x)``, finite far into the tail (an asymptotic series where erfc
    underflows)."""
    if x < 25:
        return math.log(0.5 * math.erfc(x / math.sqrt(2)))
    inverse = 1 / (x * x)
    series = 1 - inverse + 3 * inverse**2 - 15 * inverse**3 + 105 * inverse**4
    return -0.5 * x * x - math.log(x * math.sqrt(2 * math.pi)) + math.log(series)


def gaussian_delta(rho: float, epsilon: float) -> float:
    """``delta`` at ``epsilon`` of a Gaussian mechanism with ``mu^2 = 2 rho`` (sensitivity over
    noise; composed Gaussians add their ``mu^2``): ``Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 -
    eps/mu)`` (Balle and Wang, Theorem 8)."""
    if rho <= 0:
        return 0.0
    mu = math.sqrt(2 * rho)
    first = math.exp(_log_normal_tail(epsilon / mu - mu / 2))
    second = math.exp(epsilon + _log_normal_tail(epsilon / mu + mu / 2))
    return max(first - second, 0.0)


def gaussian_epsilon(rho: float, delta: float) -> float:
    """The smallest ``epsilon`` at which a Gaussian of ``mu^2 = 2 rho`` has ``delta``
    (bisection to one part in 10^12; 0 if it has at most ``delta`` at 0)."""
    if not 0 < delta < 1 or rho < 0:
        raise ValueError(f"need rho >= 0 and 0 < delta < 1, got {rho}, {delta}")
    if math.isinf(rho):
        return math.inf
    if gaussian_delta(rho, 0.0) <= delta:
        return 0.0
    return turning_point(lambda epsilon: gaussian_delta(rho, epsilon) > delta)[1]


def gaussian_rho_for(epsilon: float, delta: float) -> float:
    """The largest ``rho`` (``mu^2 / 2``) whose Gaussian has ``delta`` at ``epsilon``: a run's
    budget in the currency it plans its noise in (bisection to one part in 10^12, from below)."""
    if not epsilon > 0 or not 0 < delta < 1:
        raise ValueError(f"need epsilon > 0 and 0 < delta < 1, got {epsilon}, {delta}")
    if math.isinf(epsilon):
        return math.inf
    return turning_point(lambda rho: gaussian_delta(rho, epsilon) <= delta)[0]


def noise_variance(rho: float, sensitivity_squared: float) -> float:
    """``sigma^2`` that makes a release of squared L2 sensitivity ``sensitivity_squared``
    ``rho``-zCDP: ``sensitivity_squared / (2 rho)`` (0 when ``rho`` is infinite: no noise)."""
    if not rho > 0:
        raise ValueError(f"rho must be > 0, got {rho}")
    return 0.0 if math.isinf(rho) else sensitivity_squared / (2 * rho)


#: the smallest per-site share of noise the distributed bound is used for (sigma >= 1/2)
MIN_SHARE_VARIANCE = 0.25


def sum_tau(share_variance: float, shares: int) -> float:
    """Kairouz-Liu-Steinke's ``tau`` for a sum of ``shares`` independent ``N_Z(0,
    share_variance)``: what the sum's privacy loss exceeds the Gaussian's by, per cell."""
    if shares <= 1:
        return 0.0  # one discrete Gaussian: Canonne et al.'s bound holds as it is
    if share_variance < MIN_SHARE_VARIANCE:
        raise ValueError(
            f"a noise share of variance {share_variance:.3g} is below {MIN_SHARE_VARIANCE}: the "
            "distributed bound does not cover it"
        )
    two_pi2_s2 = 2 * math.pi**2 * share_variance
    return 10 * math.fsum(math.exp(-two_pi2_s2 * k / (k + 1)) for k in range(1, shares))


def release_sensitivity2(
    tables: int, cells: int = 0, clip: float | None = None, resolution: float | None = None
) -> float:
    """The squared L2 sensitivity of a release, in units of its lattice: ``tables`` counts (one
    row changes each by one: ``T``), or ``tables`` clipped blocks of a real-valued sum (a row
    changes each by at most ``clip`` in L2) rounded to multiples of ``resolution`` before the
    noise (rounding moves each of the ``cells`` entries by less than one unit more):
    ``(clip sqrt(T) / resolution + sqrt(cells))^2``."""
    if resolution is None:
        return float(tables) * (1.0 if clip is None else clip * clip)
    return (
        math.sqrt(tables) * (1.0 if clip is None else clip) / resolution + math.sqrt(cells)
    ) ** 2


def distributed_rho(sensitivity2: float, share_variance: float, shares: int, cells: int) -> float:
    """zCDP ``rho`` of a release of squared sensitivity ``sensitivity2`` (``cells`` cells; for
    counts, the number of tables) summed with ``shares`` noise shares of variance
    ``share_variance`` each (inf: no noise)."""
    if share_variance <= 0:
        return math.inf
    return sensitivity2 / (2 * shares * share_variance) + cells * sum_tau(share_variance, shares)


def release_rho(
    sensitivity2: float, variance: float, shares: int | None = None, cells: int = 0
) -> float:
    """zCDP ``rho`` of a release of squared sensitivity ``sensitivity2`` with noise of total
    ``variance`` per cell: the server's one discrete Gaussian (``shares`` None), or the sum of
    ``shares`` equal shares over ``cells`` cells (:func:`distributed_rho`); inf without noise."""
    if variance <= 0:
        return math.inf
    if shares is None:
        return sensitivity2 / (2 * variance)
    return distributed_rho(sensitivity2, variance / shares, shares, cells)


def distributed_variance(rho: float, tables: float, shares: int, cells: int) -> float:
    """The total noise variance ``sigma^2`` (each of ``shares`` sites adds ``sigma^2 / shares``)
    that makes ``tables`` tables of ``cells`` cells ``rho``-zCDP, the ``tau`` term included: the
    smallest ``sigma^2`` (to one part in 10^6) with ``T / (2 sigma^2) + cells tau(sigma^2 /
    shares) <= rho``. ``tau`` falls fast as a share's variance grows, so where the plain Gaussian's
    variance leaves shares too small for the bound (a few tables over many cells) the noise grows
    until it holds."""
    plain = noise_variance(rho, float(tables))
    if plain == 0:
        return 0.0

    def spent(variance: float) -> float:
        return tables / (2 * variance) + cells * sum_tau(variance / shares, shares)

    low = max(plain, MIN_SHARE_VARIANCE * shares)
    if spent(low) <= rho:
        return low
    # spent falls toward T / (2 sigma^2) < rho as sigma^2 grows: the search ends
    return turning_point(lambda variance: spent(variance) > rho, low, 2 * low, 1e-6)[1]


@dataclass
class PrivacyAccountant:
    """What a run's releases spend, batch by batch, against its target.

    ``tight`` (count releases): the run states the ``epsilon`` of its releases' composed privacy
    loss distributions (:func:`~fedcausal_flwr.privacy.pld.pld_epsilon`), its ``target_rho`` is
    the composed Gaussian's at the target (:func:`~fedcausal_flwr.privacy.pld.gaussian_rho_for`),
    and each batch's noise is checked by the PLD with the releases before it (and grown until
    the target holds) before it is released. Otherwise (fedCI's lattice releases, which have no
    PLD here) the run states zCDP and plans with :func:`rho_for`.

    ``target_rho`` is split evenly over ``planned``
    batches, or (``planned`` None) each batch spends half of what the batches before it left:
    a search then goes as deep as it would without privacy, a depth with no test left costs
    nothing, and the deeper depths, with fewer tables, need less ``rho`` for the same noise per
    cell. Each batch's releases (one per round that carries part of it) get
    ``sigma^2 = T / (2 rho_batch)`` for its ``T`` tables, so a batch spends ``rho_batch`` however
    it travels. A batch beyond an even plan would exceed the target: :meth:`can_spend` says no,
    and the run stops there with the graph so far.
    """

    epsilon: float
    delta: float
    planned: int | None
    mechanism: str = "discrete Gaussian on summed tables"
    tight: bool = True
    releases: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.planned is not None and self.planned < 1:
            raise ValueError(f"planned batches must be >= 1, got {self.planned}")
        if self.tight and math.isfinite(self.epsilon):
            self.target_rho = gaussian_rho_for(self.epsilon, self.delta)
        else:
            self.target_rho = rho_for(self.epsilon, self.delta)
        self.batches = 0
        #: why the run stopped before its planned batches (a site's budget), None: it did not
        self.stopped: str | None = None

    @property
    def noisy(self) -> bool:
        return not math.isinf(self.target_rho)

    def can_spend(self) -> bool:
        """Whether one more batch stays within the target."""
        return not self.noisy or self.planned is None or self.batches < self.planned

    @property
    def batch_rho(self) -> float:
        """The ``rho`` the next batch may spend: its even share, or half of what is left."""
        if self.planned is not None:
            return self.target_rho / self.planned
        return max(self.target_rho - self.spent_rho, 0.0) / 2

    def batch_variance(self, tables: float, shares: int | None = None, cells: int = 0) -> float:
        """``sigma^2`` of every cell of a batch of ``tables`` tables (``cells`` cells; or of any
        release whose squared sensitivity is ``tables``): added by the server, or (``shares``) by
        that many sites, ``sigma^2 / shares`` each. Asked once per batch, before its releases."""
        if not self.noisy:
            return 0.0
        if shares is None:
            variance = noise_variance(self.batch_rho, float(tables))
        else:
            variance = distributed_variance(self.batch_rho, tables, shares, cells)
        if not self.tight:
            return variance
        return self._within_target(int(tables), variance, shares, cells)

    def _within_target(self, tables: int, variance: float, shares: int | None, cells: int) -> float:
        """``variance``, grown until the batch composed with the releases before it stays within
        the target by the PLD (a discrete Gaussian of a few units' variance loses up to about
        1e-3 of ``epsilon`` more than the Gaussian it is planned as: a run that plans to its
        target, not a halving one, may need a step). Where zCDP's bound, which lies well above
        the PLD's (by 0.15 of ``epsilon`` at 8), keeps the batch within the target with a
        margin, the PLD is not built."""
        from fedcausal_flwr.privacy.pld import pld_epsilon

        step = 1e-4
        while True:
            batch = {"tables": tables, "variance": variance}
            if shares is not None:
                batch.update(shares=shares, share_variance=variance / shares, cells=cells)
            if epsilon_of(self.spent_rho + _entry_rho(batch), self.delta) <= self.epsilon * (
                1 - 1e-3
            ):
                return variance
            composed = pld_epsilon([*self.releases, batch], self.delta)
            if composed is None or composed <= self.epsilon:
                return variance
            variance *= 1 + step
            step *= 2

    def record(
        self,
        round_: int,
        tables: int,
        variance: float,
        *,
        shares: int | None = None,
        share_variance: float = 0.0,
        cells: int = 0,
        planned_shares: int | None = None,
        sensitivity2: float | None = None,
        resolution: float | None = None,
    ) -> float:
        """One release: ``tables`` tables with noise ``variance`` per cell (the server's), or the
        sum of ``shares`` sites' shares of ``share_variance`` over ``cells`` cells (fewer than
        ``planned_shares``: a site dropped out inside the round, and the release says so);
        ``sensitivity2``: the release's squared sensitivity when it is not ``tables`` (clipped
        real-valued blocks, :func:`release_sensitivity2`; ``resolution``: their lattice, the unit
        of ``variance``); returns its ``rho``."""
        entry: dict[str, Any] = {
            "round": int(round_), "batch": self.batches, "tables": int(tables)
        }  # fmt: skip
        squared = float(tables) if sensitivity2 is None else float(sensitivity2)
        if sensitivity2 is not None:
            entry["sensitivity2"] = squared
        if resolution is not None:
            entry["resolution"] = float(resolution)
        if shares is None:
            entry["variance"] = float(variance)
        else:
            entry.update(variance=shares * share_variance, shares=int(shares))
            entry.update(share_variance=float(share_variance), cells=int(cells))
            if planned_shares is not None and shares < planned_shares:
                entry["planned_shares"] = int(planned_shares)  # the shortfall, stated
        noiseless = entry["variance"] == 0  # epsilon = inf: nothing is protected
        rho = 0.0 if noiseless else _entry_rho(entry)
        entry["rho"] = rho
        self.releases.append(entry)
        return rho

    def close_batch(self) -> None:
        self.batches += 1

    @property
    def spent_rho(self) -> float:
        return math.fsum(r["rho"] for r in self.releases)

    def stated_epsilon(self, releases: list[dict[str, Any]]) -> float:
        """The ``epsilon`` at the run's ``delta`` of ``releases``, as the run states it."""
        if not self.noisy:
            return math.inf
        return release_epsilon(releases, self.delta, tight=self.tight)

    def report(self) -> dict[str, Any]:
        """What the result states: the target, what was spent (``epsilon`` at ``delta`` by the
        run's accounting, and zCDP's ``rho``; per batch its ``rho``), and every release (round,
        batch, tables, noise variance, its ``rho``)."""
        spent = self.spent_rho
        by_batch: dict[int, list[dict[str, Any]]] = {}
        for release in self.releases:
            by_batch.setdefault(release["batch"], []).append(release)
        per_batch = [
            {"batch": b, "rho": math.fsum(r["rho"] for r in releases)}
            for b, releases in sorted(by_batch.items())
        ]
        return {
            "mechanism": self.mechanism,
            "accounting": PLD_ACCOUNTING if self.tight else ZCDP_ACCOUNTING,
            "target_epsilon": self.epsilon,
            "delta": self.delta,
            "target_rho": self.target_rho,
            "planned_batches": self.planned,
            "allocation": "half of the budget left per batch"
            if self.planned is None
            else f"an even share per batch, {self.planned} batches",
            "batches": self.batches,
            "rho": spent,
            "epsilon": self.stated_epsilon(self.releases),
            "zcdp_epsilon": epsilon_of(spent, self.delta) if self.noisy else math.inf,
            "per_batch": per_batch,
            "releases": list(self.releases),
            **({"stopped": self.stopped} if self.stopped else {}),
        }


PLD_ACCOUNTING = "privacy loss distributions composed by dp_accounting"
ZCDP_ACCOUNTING = "zCDP (Canonne, Kamath and Steinke's conversion)"


def release_epsilon(releases: list[dict[str, Any]], delta: float, *, tight: bool = True) -> float:
    """The ``epsilon`` at ``delta`` of ``releases``: by their composed privacy loss
    distributions where each has one (``tight``; count releases), else by their zCDP ``rho``."""
    if tight:
        from fedcausal_flwr.privacy.pld import pld_epsilon

        composed = pld_epsilon(releases, delta)
        if composed is not None:
            return composed
    if any(not r["variance"] > 0 for r in releases):
        return math.inf
    return epsilon_of(math.fsum(_entry_rho(r) for r in releases), delta)


def budget_epsilon(
    releases: list[dict[str, Any]], delta: float, within: float, planned_rho: float = 0.0
) -> float:
    """The ``epsilon`` at ``delta`` of ``releases`` (each with its ``rho``), and of a planned
    Gaussian of ``planned_rho`` after them, as a budget counts it: their zCDP ``epsilon`` where
    that is within ``within`` (cheap, and never below the tight one), else the tight one (their
    PLDs where each has one, :func:`release_epsilon`). A site checks each message this way: the
    PLD (and ``dp_accounting``'s import) is paid only near its budget."""
    rho = math.fsum(r["rho"] for r in releases) + planned_rho
    loose = epsilon_of(rho, delta)
    if loose <= within:
        return loose
    from fedcausal_flwr.privacy.pld import pld_epsilon

    if not releases:  # a plan alone: the Gaussian's exact curve
        return gaussian_epsilon(planned_rho, delta)

    tight = pld_epsilon(releases, delta, planned_rho)
    return loose if tight is None else tight


def recompute(releases: list[dict[str, Any]], delta: float) -> tuple[float, float]:
    """``(rho, epsilon)`` of a list of releases from their tables and noise variances alone (the
    check a reader of a result can do): zCDP's ``rho``, and the ``epsilon`` a run states (by
    the releases' PLDs where each has one)."""
    rho = math.fsum(_entry_rho(r) for r in releases if r["variance"] > 0)
    return rho, release_epsilon(releases, delta)


def _entry_rho(release: dict[str, Any]) -> float:
    """The ``rho`` of one release as the accountant lists it."""
    return release_rho(
        release.get("sensitivity2", release["tables"]),
        release["variance"],
        release.get("shares"),
        release.get("cells", 0),
    )
