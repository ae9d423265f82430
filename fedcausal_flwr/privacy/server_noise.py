"""The server's side of a differentially private run (``dp=central`` and ``dp=distributed``).

A strategy that sums statistics round by round holds one :class:`ServerNoise` when its run is
private (its ``dp`` option is not ``off``): the run's zCDP accountant (:mod:`.accounting`), its
plan for ``hello``, each release's noise variance, the charge each request carries to the sites
(:class:`~.charges.PrivacyCharge`), and each release, noised by the server (central) or already
noised by the sites inside SecAgg+ (distributed: the server never holds a noiseless sum). Counts
(FedPC/FedFCI's contingency tables) are integers as they are; real-valued blocks (fedCI's GLMs)
are clipped row by row at the sites and rounded to a lattice of ``resolution`` before the noise,
which is a discrete Gaussian on that lattice (:mod:`.sampler`). The options it reads are those
of :func:`fedcausal_flwr.strategies.shared_options.dp_options`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedcausal_flwr.options import OptionError, say, spell
from fedcausal_flwr.privacy.accounting import PrivacyAccountant, release_rho, release_sensitivity2
from fedcausal_flwr.privacy.charges import PrivacyCharge, PrivacyPlan
from fedcausal_flwr.privacy.sampler import discrete_gaussian

CENTRAL, DISTRIBUTED = "discrete Gaussian", "distributed discrete Gaussian"


class ServerNoise:
    """The server's noise and accounts in one private run of method ``owner``.

    Parameters
    ----------
    options
        The method's resolved options (``dp``, ``dp_epsilon``, ``dp_delta``, ``dp_noise_seed``).
    planned
        How many releases the budget is split over evenly (None: each batch spends half of
        what is left).
    summed
        What the method sums, in words, for the privacy report.
    tight
        Its releases are counts, each with a privacy loss distribution: the run states their
        composed PLD's epsilon (False: lattice releases, stated in zCDP).
    """

    def __init__(
        self, options: Mapping[str, Any], planned: int | None, summed: str, tight: bool
    ) -> None:
        self.epsilon = options["dp_epsilon"]
        self.delta = options["dp_delta"]
        self.distributed = options["dp"] == "distributed"
        self.accountant = PrivacyAccountant(
            self.epsilon,
            self.delta,
            planned,
            "discrete Gaussian shares of the sites, summed by SecAgg+"
            if self.distributed
            else f"discrete Gaussian on {summed}",
            tight=tight,
        )
        #: the server's noise (central): fresh randomness from the operating system unless a
        #: simulation study fixes it
        self._noise = np.random.default_rng(options.get("dp_noise_seed"))

    def plan(self, owner: str, entry_point: str, secure: bool, sites: int | None) -> dict[str, Any]:
        """The run's plan, sent with ``hello`` (encoded :class:`~.charges.PrivacyPlan`);
        distributed noise needs a secure run of ``sites`` sites."""
        shares = None
        if self.distributed:
            if not secure:
                raise OptionError(
                    f"{owner}: {say('dp', 'distributed', entry_point)} adds each site's share of "
                    "the noise inside SecAgg+, and this run is not secure: run it with "
                    f"{spell('secure', entry_point)} (or use {say('dp', 'central', entry_point)}, "
                    "which trusts the server)"
                )
            shares = sites
        noisy = self.accountant.noisy
        return PrivacyPlan(
            self.epsilon if noisy else None,
            self.delta,
            self.accountant.target_rho if noisy else None,
            shares,
        ).encode()

    def batch_noise(
        self, owner: str, sensitivity2: float, cells: int, alive: int
    ) -> tuple[float, int | None]:
        """A new release of squared sensitivity ``sensitivity2`` (a count of tables, or
        :func:`~.accounting.release_sensitivity2`) over ``cells`` cells: the noise variance of
        every summed cell (its share of the run's budget, in the release's units) and,
        distributed, how many sites share it (each of the ``alive`` sites adds its part). A
        release beyond the planned ones is refused, never paid for."""
        if not self.accountant.can_spend():
            raise ValueError(
                f"{owner}: the privacy budget is split over {self.accountant.planned} releases "
                "and this run needs another (a depth streamed in several batches): raise "
                "dp_batches or max_server_cells"
            )
        shares = alive if self.distributed else None
        # (too small a share for the distributed bound is not refused: the noise grows to it)
        return self.accountant.batch_variance(sensitivity2, shares, cells), shares

    def charge(
        self,
        tables: int,
        cells: int,
        variance: float,
        shares: int | None,
        clip: float | None = None,
        resolution: float | None = None,
    ) -> PrivacyCharge:
        """What a release of ``tables`` tables or blocks (``cells`` cells) costs each site (sent
        with its request); distributed noise names its shares and the cells each site adds them
        to, clipped real-valued blocks their clip bound and resolution."""
        rho = release_rho(
            release_sensitivity2(tables, cells, clip, resolution), variance, shares, cells
        )
        return PrivacyCharge(
            CENTRAL if shares is None else DISTRIBUTED,
            tables,
            variance,
            None if math.isinf(rho) else rho,
            self.epsilon if self.accountant.noisy else None,
            self.delta,
            shares,
            None if shares is None and resolution is None else cells,
            clip,
            resolution,
        )

    def release(
        self,
        summed: np.ndarray,
        contributors: int,
        round_: int,
        tables: int,
        variance: float,
        shares: int | None,
        sensitivity2: float | None = None,
        resolution: float | None = None,
    ) -> tuple[np.ndarray, float, dict[str, Any]]:
        """The noisy integer sums of round ``round_`` (counts, or lattice points), their noise
        variance per cell, and what the round log notes of it, recorded by the accountant: the
        server adds the noise (central), or the ``contributors`` sites SecAgg+ summed did
        (distributed; fewer than planned is stated)."""
        counts = np.asarray(summed)
        if counts.dtype.kind == "f":  # lattice points of real-valued sums
            counts = np.rint(counts)
        counts = counts.astype(np.int64, copy=False)
        if shares is None:
            counts = counts + discrete_gaussian(variance, counts.size, self._noise)
            rho = self.accountant.record(
                round_, tables, variance, sensitivity2=sensitivity2, resolution=resolution
            )
        else:
            share = variance / shares
            variance = contributors * share
            rho = self.accountant.record(
                round_, tables, variance, shares=contributors, share_variance=share,
                cells=counts.size, planned_shares=shares, sensitivity2=sensitivity2,
                resolution=resolution,
            )  # fmt: skip
        noted = {"mechanism": CENTRAL if shares is None else DISTRIBUTED, "variance": variance,
                 "rho": rho}  # fmt: skip
        return counts, variance, noted
