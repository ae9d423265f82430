"""The payloads of the built-in actions every client answers (``hello``, ``bootstrap``) and the
privacy records any private request or ``hello`` carries.

``hello`` is the first round of every run (:mod:`fedcausal_flwr.federation.core.protocol`); its
reply is the site's column report (:func:`fedcausal_flwr.data.inputs.frame_report`, read by
:class:`~fedcausal_flwr.federation.core.messages.ClientInfo`). ``bootstrap`` carries the pending
requests of several replicates of the federated bootstrap; its wire format is documented in
:mod:`fedcausal_flwr.federation.core.bootstrap`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedcausal_flwr.federation.core.payloads import Payload, optional

#: the most levels a site lists for a column in its hello report, unless the server asks otherwise
HELLO_MAX_LEVELS = 1000


@dataclass(frozen=True)
class HelloRequest(Payload):
    """``hello``: list at most ``max_levels`` levels of a column (more: reported as many-valued),
    and, for a private run, what it plans to spend (``privacy``)."""

    max_levels: int = HELLO_MAX_LEVELS
    #: a private run's plan (:class:`PrivacyPlan`; absent for any other run)
    privacy: dict[str, Any] | None = optional()


@dataclass(frozen=True)
class BootstrapPart(Payload):
    """One replicate's pending request inside a ``bootstrap`` request."""

    replicate: int
    action: str
    payload: dict[str, Any]
    n_arrays: int
    secure: bool
    secure_bound: int


@dataclass(frozen=True)
class BootstrapRequest(Payload):
    """``bootstrap``: the parts, each answered on its replicate's rows (``seed``, ``sample``)."""

    seed: int
    sample: str
    parts: list[dict[str, Any]]  # BootstrapPart payloads


@dataclass(frozen=True)
class BootstrapPartReply(Payload):
    """A part's share of a ``bootstrap`` reply: how many of the reply's arrays are its own."""

    n_arrays: int
    meta: dict[str, Any]


@dataclass(frozen=True)
class BootstrapReply(Payload):
    """The meta of a ``bootstrap`` reply: per part, a :class:`BootstrapPartReply` payload."""

    parts: list[dict[str, Any]]


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
    ``variance`` is in those units (:func:`~fedcausal_flwr.stats.privacy.release_sensitivity2`).
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
