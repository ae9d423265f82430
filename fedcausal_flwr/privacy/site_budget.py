"""A site's privacy budget: what it counts each private release as, and whether it can afford it.

A site with ``dp-epsilon`` in its policy answers only runs that add noise, and each statistic only
if the run's spending at the site, with it, stays within that epsilon (and, with
``dp-period-epsilon``, what every run spent within ``dp-period-days``). It counts each release
its own way (:meth:`SiteBudget.count`): ``rho`` from the request's tables and noise (never the
``rho`` the request states) and, for distributed noise, only the noise shares it trusts
(``dp-shares``); what it spent comes from its own audit log (:func:`counted_release`). The cap is
checked as a run states its ``epsilon`` (:func:`~.accounting.budget_epsilon`: zCDP where that is
within it, the releases' PLD otherwise). The guard of :mod:`fedcausal_flwr.federation.core.
site_guard` calls it for every message and turns a :class:`BudgetRefusal` into a logged refusal
naming the policy key.
"""

from __future__ import annotations

import calendar
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeGuard

from fedcausal_flwr.payload import MalformedPayload
from fedcausal_flwr.privacy.accounting import budget_epsilon, release_rho, release_sensitivity2
from fedcausal_flwr.privacy.charges import PrivacyCharge, PrivacyPlan

#: the policy keys of a site's budget (the policy table, :mod:`~fedcausal_flwr.federation.core.
#: site_policy`, declares them with their meaning)
DP_EPSILON = "dp-epsilon"
DP_DELTA = "dp-delta"
DP_PERIOD_EPSILON = "dp-period-epsilon"
DP_PERIOD_DAYS = "dp-period-days"
DP_SHARES = "dp-shares"
DP_ALLOW_CENTRAL = "dp-allow-central"


class BudgetRefusal(Exception):
    """The site does not send this reply: ``key`` is the policy key that refuses it (None: the
    request's charge is malformed, which no policy allows)."""

    def __init__(self, key: str | None, message: str):
        super().__init__(message)
        self.key = key
        self.message = message


class BudgetPolicy(Protocol):
    """The budget settings of a site's policy (a ``SitePolicy``), read only."""

    @property
    def dp_epsilon(self) -> float | None: ...
    @property
    def dp_delta(self) -> float: ...
    @property
    def dp_period_epsilon(self) -> float | None: ...
    @property
    def dp_period_days(self) -> float | None: ...
    @property
    def dp_shares(self) -> int | None: ...
    @property
    def dp_allow_central(self) -> bool: ...


@dataclass
class SiteBudget:
    """One client's view of its site's budget in one run: ``policy`` (None: no site policy),
    the run's id and the audit log the site's earlier releases are read from."""

    site: int
    policy: BudgetPolicy | None
    run: str = ""
    audit_path: Path | None = None

    def trusted_shares(self, shares: int) -> int:
        """How many of a distributed run's ``shares`` noise shares this site counts on: its
        policy's ``dp-shares`` (default 1, its own, when it sets a budget; all without one)."""
        policy = self.policy
        if policy is None or policy.dp_epsilon is None:
            return shares
        return min(shares, policy.dp_shares or 1)

    def count(self, charge: PrivacyCharge, action: str) -> dict[str, Any]:
        """The charge as the site counts it (logged with its reply): ``rho`` from the request's
        tables and noise and the shares it trusts, never the ``rho`` the request states (a
        forged negative or small ``rho`` would otherwise lower what the site's log says it
        spent)."""
        refused = f"site {self.site} refuses action {action!r}"
        tables, variance = charge.tables, charge.variance
        if (
            not _whole(tables)
            or not isinstance(variance, int | float)
            or not 0 <= variance < math.inf
        ):
            raise BudgetRefusal(
                None,
                f"{refused}: its privacy charge names {tables!r} tables with noise variance "
                f"{variance!r}",
            )
        clip, resolution = charge.clip, charge.resolution
        if any(v is not None and not (isinstance(v, int | float) and 0 < v < math.inf)
               for v in (clip, resolution)):  # fmt: skip
            raise BudgetRefusal(
                None,
                f"{refused}: its privacy charge names a clip bound {clip!r} and a resolution "
                f"{resolution!r}",
            )
        if resolution is not None and not _whole(charge.cells):
            raise BudgetRefusal(None, f"{refused}: {charge.cells!r} cells")
        squared = release_sensitivity2(tables, charge.cells or 0, clip, resolution)
        shares, cells = charge.shares, charge.cells
        counted: dict[str, Any] = {}
        if shares is not None:
            if not _whole(shares) or not _whole(cells):
                raise BudgetRefusal(
                    None,
                    f"{refused}: its privacy charge names {shares!r} noise shares over "
                    f"{cells!r} cells",
                )
            # its own count: the noise of the shares it trusts, each as large as the run's
            trusted = counted["trusted"] = self.trusted_shares(shares)
            variance = variance / shares * trusted
            shares = trusted
        try:
            rho = release_rho(squared, variance, shares, cells or 0)
        except ValueError as err:  # shares too small for the distributed bound
            raise BudgetRefusal(None, f"{refused}: {err}") from None
        return {**charge.encode(), "rho": None if math.isinf(rho) else rho, **counted}

    def check_shares(
        self, charge: PrivacyCharge, action: str, secagg_participants: int | None
    ) -> None:
        """A reply carrying the site's noise share leaves only inside SecAgg+, with at least as
        many participants as the shares it counts on."""
        if charge.shares is None:
            return
        refused = f"site {self.site} refuses action {action!r}"
        if secagg_participants is None:
            raise BudgetRefusal(
                None,
                f"{refused}: its share of the noise would reach the server outside SecAgg+ (a "
                f"table with 1/{charge.shares} of the run's noise)",
            )
        trusted = self.trusted_shares(charge.shares)
        if secagg_participants < trusted:
            raise BudgetRefusal(
                DP_SHARES,
                f"{refused}: it counts on {trusted} sites' noise shares, and its SecAgg+ round "
                f"has {secagg_participants} participants",
            )

    def check(
        self, action: str, hello: bool, payload: Mapping[str, Any], counted: dict | None
    ) -> None:
        """A site with a budget answers only what it can afford: a run's plan at ``hello``
        (``payload`` carries it), and each statistic's charge (``counted``, as :meth:`count`
        made it), against the run's cap and the period's."""
        policy = self.policy
        if policy is None or policy.dp_epsilon is None:
            return
        delta = policy.dp_delta
        wording = f"(at delta {delta:g})"
        planned, release = 0.0, None
        if hello:
            cost, what, central = self._plan_cost(payload)
            planned = cost or 0.0
        else:
            cost = None if counted is None else counted.get("rho")
            what = "this reply with the run's earlier ones would spend"
            central = counted is None or counted.get("shares") is None
            release = None if counted is None else counted_release(counted)
        if cost is None:
            raise BudgetRefusal(
                DP_EPSILON,
                f"site {self.site} refuses a run without differential privacy: its policy "
                f"{DP_EPSILON} = {policy.dp_epsilon:g} answers only runs that add noise "
                "(e.g. fedpc with dp=central or dp=distributed and a finite dp_epsilon)",
            )
        if not policy.dp_allow_central and central:
            raise BudgetRefusal(
                DP_ALLOW_CENTRAL,
                f"site {self.site} refuses {action!r}: the run does not add its noise at the "
                f"sites (the server would hold the noiseless sum) and its policy has "
                f"{DP_ALLOW_CENTRAL} = false (run with dp=distributed and secure=true)",
            )
        by_run, in_period = self.spent()
        adding = [] if release is None else [release]
        cap = policy.dp_epsilon * (1 + 1e-9)  # the margin a float sum of charges may need
        this_run = [] if hello else [*by_run, *adding]
        spent = budget_epsilon(this_run, delta, cap, planned)
        if spent > cap:
            raise BudgetRefusal(
                DP_EPSILON,
                f"site {self.site} refuses {action!r}: {what} epsilon {spent:.4g} {wording}, "
                f"over its policy {DP_EPSILON} {policy.dp_epsilon:g}",
            )
        if policy.dp_period_epsilon is not None:
            period_cap = policy.dp_period_epsilon * (1 + 1e-9)
            after = budget_epsilon([*in_period, *adding], delta, period_cap, planned)
            if after > period_cap:
                before = budget_epsilon(in_period, delta, period_cap)  # (for the reason only)
                raise BudgetRefusal(
                    DP_PERIOD_EPSILON,
                    f"site {self.site} refuses {action!r}: the last {policy.dp_period_days:g} "
                    f"days spent epsilon {before:.4g} {wording} of its policy "
                    f"{DP_PERIOD_EPSILON} {policy.dp_period_epsilon:g}; {what} "
                    f"{after:.4g} with them",
                )

    def _plan_cost(self, payload: Mapping[str, Any]) -> tuple[float | None, str, bool]:
        """What the run's plan (sent with ``hello``) costs this site in ``rho``, counted over
        the noise shares it trusts; the words for a refusal; whether the server adds the
        noise."""
        refused = f"site {self.site} refuses hello"
        try:
            plan = PrivacyPlan.of(payload)
        except MalformedPayload as err:
            raise BudgetRefusal(None, f"{refused}: {err}") from None
        cost = None if plan is None else plan.rho
        if cost is not None and not 0 < cost < math.inf:
            raise BudgetRefusal(DP_EPSILON, f"{refused}: a planned rho of {cost!r}")
        what = "the run plans to spend"
        if plan is not None and plan.shares is not None and cost is not None:
            if not _whole(plan.shares):
                raise BudgetRefusal(None, f"{refused}: {plan.shares!r} shares")
            trusted = self.trusted_shares(plan.shares)
            cost *= plan.shares / trusted  # its own count: the shares it counts on
            if trusted < plan.shares:
                what = (
                    f"counting on {trusted} of the run's {plan.shares} noise shares (its "
                    f"policy {DP_SHARES}), the run plans to spend"
                )
        return cost, what, plan is None or plan.shares is None

    def spent(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The releases this site's audit log records as sent, as it counts them
        (:func:`counted_release`), read in one pass: by this run, and by every run within the
        policy's period."""
        if self.audit_path is None or not self.audit_path.exists():
            return [], []
        policy = self.policy
        days = policy.dp_period_days if policy is not None else None
        since = time.time() - (days or 0) * 86400
        by_run, in_period = [], []
        for line in self.audit_path.read_text(encoding="utf-8").splitlines():
            if '"privacy"' not in line:  # most lines: no charge to parse
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            charge = record.get("privacy") if isinstance(record, dict) else None
            if not isinstance(charge, dict) or record.get("outcome") != "sent":
                continue
            release = counted_release(charge)
            if release is None:
                continue
            if record.get("run") == self.run:
                by_run.append(release)
            if _seconds(record.get("time")) >= since:
                in_period.append(release)
        return by_run, in_period


def counted_release(charge: Mapping[str, Any]) -> dict[str, Any] | None:
    """A logged charge (:meth:`SiteBudget.count`) as the release the site counts, in the
    accountant's terms (:mod:`.pld`): the server's noise, or the shares it trusts (``trusted``,
    each of the run's share variance); clipped or lattice releases with their squared
    sensitivity (no PLD: counted in zCDP); None: unreadable or without noise."""
    try:
        tables, variance = int(charge["tables"]), float(charge["variance"])
        rho = float(charge["rho"])
        shares, trusted = charge.get("shares"), charge.get("trusted")
        clip, resolution, cells = charge.get("clip"), charge.get("resolution"), charge.get("cells")
        release: dict[str, Any] = {"tables": tables, "variance": variance, "rho": rho}
        if shares is not None:
            share = variance / int(shares)
            trusted = int(shares if trusted is None else trusted)
            release.update(variance=share * trusted, shares=trusted, share_variance=share)
            release["cells"] = int(cells or 0)
        if clip is not None or resolution is not None:
            release["cells"] = int(cells or 0)
            release["sensitivity2"] = release_sensitivity2(
                tables, release["cells"], clip, resolution
            )
    except (KeyError, TypeError, ValueError):
        return None
    return release if rho > 0 and variance > 0 else None


def _whole(value: Any) -> TypeGuard[int]:
    """A whole number >= 1 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _seconds(stamp: Any) -> float:
    """The epoch seconds of an audit line's ``time`` (0: unreadable)."""
    try:
        return calendar.timegm(time.strptime(str(stamp)[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return 0.0
