"""The payloads of the built-in actions every client answers: ``hello`` and ``bootstrap``.

``hello`` is the first round of every run (:mod:`fedcausal_flwr.federation.core.protocol`); its
reply is the site's column report (:func:`fedcausal_flwr.data.inputs.frame_report`, read by
:class:`~fedcausal_flwr.federation.core.messages.ClientInfo`). ``bootstrap`` carries the pending
requests of several replicates of the federated bootstrap; its wire format is documented in
:mod:`fedcausal_flwr.federation.core.bootstrap`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fedcausal_flwr.payload import Payload, optional

#: the most levels a site lists for a column in its hello report, unless the server asks otherwise
HELLO_MAX_LEVELS = 1000


@dataclass(frozen=True)
class HelloRequest(Payload):
    """``hello``: list at most ``max_levels`` levels of a column (more: reported as many-valued),
    and, for a private run, what it plans to spend (``privacy``)."""

    max_levels: int = HELLO_MAX_LEVELS
    #: a private run's plan (:class:`~fedcausal_flwr.privacy.charges.PrivacyPlan`; absent for
    #: any other run)
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
