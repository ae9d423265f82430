"""Differentially private sums: the server side of ``dp=central`` and ``dp=distributed``.

A strategy that sums statistics round by round inherits :class:`PrivateSumsStrategy`: one zCDP
accountant per run (:mod:`fedcausal_flwr.stats.privacy`), the run's plan for ``hello``, each
release's noise variance, the charge each request carries to the sites
(:class:`~fedcausal_flwr.federation.core.records.PrivacyCharge`), and each release, noised by the
server (central) or already noised by the sites inside SecAgg+ (distributed: the server never holds
a noiseless sum). Counts (FedPC/FedFCI's contingency tables) are integers as they are; real-valued
blocks (fedCI's GLMs) are clipped row by row at the sites and rounded to a lattice of
``resolution`` before the noise, which is a discrete Gaussian on that lattice. Shared by the
methods that sum statistics; no method owns it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.driver import StepRunner
from fedcausal_flwr.federation.core.records import PrivacyCharge, PrivacyPlan
from fedcausal_flwr.notes import InputNote
from fedcausal_flwr.options import OptionError, say, spell
from fedcausal_flwr.stats.privacy import (
    PrivacyAccountant,
    discrete_gaussian,
    release_rho,
    release_sensitivity2,
)
from fedcausal_flwr.strategies.base import MethodStrategy

CENTRAL, DISTRIBUTED = "discrete Gaussian", "distributed discrete Gaussian"


class SearchStoppedNote(InputNote):
    """A site ended a search early (its graph is the one so far): it would not take part in a
    secure sum without every site of its roster, after one dropped out."""


class PrivacyBudgetNote(SearchStoppedNote):
    """A site's privacy budget ended a private search early (its graph is the one so far)."""


class PrivateSumsStrategy(MethodStrategy):
    """A method whose sums may carry differential privacy (options ``dp``, ``dp_epsilon``,
    ``dp_delta``, ``dp_batches``, ``dp_noise_seed``:
    :func:`~fedcausal_flwr.strategies.shared_options.dp_options`; a method that does not declare
    them runs without)."""

    #: what the method sums, for the privacy report
    summed_statistics = "summed tables"
    #: its releases are counts, each with a privacy loss distribution: the run states their
    #: composed PLD's epsilon (False: lattice releases, stated in zCDP)
    tight_accounting = True
    #: the search (set when it starts) and its answered batches, one per depth under dp
    runner: StepRunner | None
    batches: list[dict]

    def __init__(self, options: Mapping[str, Any] | None = None, /, **keywords: Any):
        super().__init__(options, **keywords)
        options = self.options
        #: why the search ended before its last depth (None: it did not)
        self.stopped: str | None = None
        #: the zCDP accountant of a differentially private run (None: dp off)
        self.privacy = (
            PrivacyAccountant(
                options.dp_epsilon,
                options.dp_delta,
                self.planned_releases(),
                "discrete Gaussian shares of the sites, summed by SecAgg+"
                if self.distributed
                else f"discrete Gaussian on {self.summed_statistics}",
                tight=self.tight_accounting,
            )
            if self.dp != "off"
            else None
        )
        #: the server's noise (central): fresh randomness from the operating system unless a
        #: simulation study fixes it
        self._noise = np.random.default_rng(options.get("dp_noise_seed"))

    @property
    def dp(self) -> str:
        """The run's ``dp`` option (``off`` for a method that does not declare it)."""
        return str(self.options.get("dp", "off"))

    @property
    def distributed(self) -> bool:
        """The sites add the noise (``dp=distributed``), not the server."""
        return self.dp == "distributed"

    def planned_releases(self) -> int | None:
        """How many releases the run's budget is split over evenly (one per batch of tables);
        None: each batch spends half of what is left."""
        batches = self.options.dp_batches
        return None if batches is None else int(batches)

    def privacy_plan(self) -> dict[str, Any] | None:
        if self.privacy is None:
            return None
        shares = None
        if self.distributed:
            if not self.secure_mode:
                raise OptionError(
                    f"{self.name}: {say('dp', 'distributed', self.entry_point)} adds each site's "
                    "share of the noise inside SecAgg+, and this run is not secure: run it with "
                    f"{spell('secure', self.entry_point)} (or use "
                    f"{say('dp', 'central', self.entry_point)}, which trusts the server)"
                )
            shares = self.protocol_run.members.num_clients
        noisy = self.privacy.noisy
        return PrivacyPlan(
            self.options.dp_epsilon if noisy else None,
            self.options.dp_delta,
            self.privacy.target_rho if noisy else None,
            shares,
        ).encode()

    def batch_noise(self, sensitivity2: float, cells: int) -> tuple[float, int | None]:
        """A new release of squared sensitivity ``sensitivity2`` (a count of tables, or
        :func:`~fedcausal_flwr.stats.privacy.release_sensitivity2`) over ``cells`` cells: the
        noise variance of every summed cell (its share of the run's budget, in the release's
        units) and, distributed, how many sites share it (each site alive adds its part). A
        release beyond the planned ones is refused, never paid for."""
        assert self.privacy is not None
        if not self.privacy.can_spend():
            raise ValueError(
                f"{self.name}: the privacy budget is split over {self.privacy.planned} releases "
                "and this run needs another (a depth streamed in several batches): raise "
                "dp_batches or max_server_cells"
            )
        shares = len(self.alive_clients) if self.distributed else None
        # (too small a share for the distributed bound is not refused: the noise grows to it)
        return self.privacy.batch_variance(sensitivity2, shares, cells), shares

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
        assert self.privacy is not None
        rho = release_rho(
            release_sensitivity2(tables, cells, clip, resolution), variance, shares, cells
        )
        return PrivacyCharge(
            CENTRAL if shares is None else DISTRIBUTED,
            tables,
            variance,
            None if math.isinf(rho) else rho,
            self.options.dp_epsilon if self.privacy.noisy else None,
            self.options.dp_delta,
            shares,
            None if shares is None and resolution is None else cells,
            clip,
            resolution,
        )

    def released(
        self,
        summed: np.ndarray,
        contributors: int,
        tables: int,
        variance: float,
        shares: int | None,
        action: str,
        sensitivity2: float | None = None,
        resolution: float | None = None,
    ) -> tuple[np.ndarray, float]:
        """The noisy integer sums of one round (counts, or lattice points) and their noise
        variance per cell, recorded by the accountant: the server adds the noise (central), or
        the ``contributors`` sites SecAgg+ summed did (distributed; fewer than planned is
        stated)."""
        assert self.privacy is not None
        counts = np.asarray(summed)
        if counts.dtype.kind == "f":  # lattice points of real-valued sums
            counts = np.rint(counts)
        counts = counts.astype(np.int64, copy=False)
        if shares is None:
            counts = counts + discrete_gaussian(variance, counts.size, self._noise)
            rho = self.privacy.record(
                self.current_round, tables, variance, sensitivity2=sensitivity2,
                resolution=resolution,
            )  # fmt: skip
        else:
            share = variance / shares
            variance = contributors * share
            rho = self.privacy.record(
                self.current_round, tables, variance, shares=contributors,
                share_variance=share, cells=counts.size, planned_shares=shares,
                sensitivity2=sensitivity2, resolution=resolution,
            )  # fmt: skip
        noted = {
            "mechanism": CENTRAL if shares is None else DISTRIBUTED,
            "variance": variance,
            "rho": rho,
        }
        self.recorder.note_noise(self.current_round, action, noted)
        return counts, variance

    def _start(self, max_depth: int | None = None) -> StepRunner:
        """The search, capped at ``max_depth``; batches answered before come from the cache."""
        raise NotImplementedError

    def forget_pending_batch(self) -> None:
        """Drop what the method holds of a batch it will not finish (a budget stop)."""

    def stop_search(self, refusal: str) -> bool:
        """A site refuses the next batch for a reason that ends the search, not the run (its
        privacy budget; a secure sum without every site of its roster, after a dropout): the
        search ends with the depths it has (its rules on them, replayed from the cache: no new
        test), and the result says why."""
        runner = self.runner
        if runner is None or not self.batches:
            return False  # nothing learned yet: the refusal stops the run
        if self.privacy is not None:
            depth = len(self.batches) - 1  # under dp a depth is one batch
            if not self._start(max_depth=depth).done:  # (only tests before the refused depth)
                self.runner = runner
                return False
        else:  # the deepest depth whose tests were all answered
            depth = -1
            while self._start(max_depth=depth + 1).done:
                depth += 1
            if depth < 0 or not self._start(max_depth=depth).done:
                self.runner = runner
                return False
        self.forget_pending_batch()
        if self.privacy is not None:
            self.privacy.stopped = f"stopped before depth {depth + 1}: {refusal}"
        self.stopped = f"the search stopped before depth {depth + 1}: {refusal}"
        self.annotate(stopped=self.stopped)
        note = PrivacyBudgetNote if self.privacy is not None else SearchStoppedNote
        warnings.warn(
            note(
                f"note: {self.name} ended its search after depth {depth} (the graph so far): "
                f"{refusal}"
            ),
            stacklevel=2,
        )
        return True

    def privacy_report(self) -> dict[str, Any]:
        """The result's ``privacy`` entry (empty: dp off), and why a search stopped early."""
        stopped = {} if self.stopped is None else {"stopped": self.stopped}
        return stopped if self.privacy is None else {"privacy": self.privacy.report(), **stopped}
