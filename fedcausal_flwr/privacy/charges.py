"""What a private run tells its sites it will spend: the plan sent with ``hello`` and the charge
every private request carries (typed payloads; a site counts each charge its own way:
:mod:`.site_budget`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedcausal_flwr.payload import Payload, optional

#: the payload key under which a request carries its privacy charge (any method's)
_privacy_key = "privacy"


@dataclass(frozen=True)
class PrivacyCharge(Payload):
    """What one release of a differentially private run costs each site whose rows it sums:
    ``tables`` tables with noise ``variance`` per cell (``mechanism``), so ``rho =
    tables / (2 variance)`` zCDP (None: no noise, epsilon = inf), toward ``target_epsilon`` at
    ``delta``. Sent with the request, so the site can log, and check, what its reply will cost.
    Distributed noise: ``shares`` sites each add ``variance / shares`` to their ``cells`` cells
    before secure aggregation (absent: the server adds ``variance`` to the sum). Real-valued
    blocks (fedCI's GLMs): each row's contribution to each of the ``tables`` blocks is clipped to
    L2 norm ``clip`` at the site, the sums are rounded to multiples of ``resolution`` and
    ``variance`` is in those units
    (:func:`~fedcausal_flwr.privacy.accounting.release_sensitivity2`).
    """

    mechanism: str
    tables: int
    variance: float
    rho: float | None
    target_epsilon: float | None
    delta: float
    shares: int | None = optional()
    cells: int | None = optional()
    clip: float | None = optional()
    resolution: float | None = optional()

    @classmethod
    def of(cls, payload: Mapping[str, Any]) -> PrivacyCharge | None:
        """The charge a request's payload carries (None: the request is not private)."""
        charge = payload.get(_privacy_key)
        return None if charge is None else cls.decode(charge)


@dataclass(frozen=True)
class PrivacyPlan(Payload):
    """What a differentially private run plans to spend at each site, sent with ``hello``: its
    target ``(target_epsilon, delta)`` and the ``rho`` it plans with (None: no noise; a run of
    count releases: the composed Gaussian's ``mu^2 / 2`` at the target, fedCI: its zCDP), so a
    site can refuse a run it cannot afford before anything but its metadata leaves it.
    ``shares``: the noise is distributed over that many sites (absent: the server adds it)."""

    target_epsilon: float | None
    delta: float
    rho: float | None
    shares: int | None = optional()

    @classmethod
    def of(cls, payload: Mapping[str, Any]) -> PrivacyPlan | None:
        """The plan a ``hello`` payload carries (None: the run is not private)."""
        plan = payload.get(_privacy_key)
        return None if plan is None else cls.decode(plan)
