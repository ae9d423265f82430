"""FedLCS's actions, their payloads and what FedLCS and its baselines disclose (its pooled
reference uses :data:`fedcausal_flwr.protocols.voting.RAW_DATA` and its record).

The wire protocol is documented in :mod:`fedcausal_flwr.strategies.fedlcs`; the search that both
sides run lives in :mod:`fedcausal_flwr.discovery.lcs` (``LCSOptions`` travel as
:func:`~fedcausal_flwr.discovery.lcs.options_dict`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.protocols import voting
from fedcausal_flwr.protocols.discrete import DiscreteScope
from fedcausal_flwr.protocols.records import wire

LCS_PRUNE = "lcs_prune"  # one PCsimple layer of several candidate sets: keep flags
LCS_SEPSETS = "lcs_sepsets"  # p-values of one level of the separating-set search (NaN if dependent)
LCS_LOCAL = "lcs_local"  # the whole search on the client's rows (fedlcs-local baseline)
ACTIONS = (LCS_PRUNE, LCS_SEPSETS, LCS_LOCAL)

#: each client's keep flags of a layer's candidate sets, and its p-values of the separating-set
#: search
DISCLOSURES = {LCS_PRUNE: disclosure.PER_CLIENT, LCS_SEPSETS: disclosure.PER_CLIENT}
#: fedlcs-local: each client's own local structure; lcs-pooled: the clients' rows (NOT private)
LOCAL_DISCLOSURES = {LCS_LOCAL: disclosure.PER_CLIENT}
POOLED_DISCLOSURES = {voting.RAW_DATA: disclosure.RAW}


@dataclass(frozen=True)
class LCSScope(DiscreteScope):
    """Base of ``lcs_prune`` and ``lcs_sepsets``: the run's token (``session`` on the wire),
    which scopes the client's test cache to the run."""

    run_token: str = wire("session", kw_only=True)


@dataclass(frozen=True)
class LCSPruneRequest(LCSScope):
    """``lcs_prune``: ``jobs`` ``[[V, [CPC...], l], ...]``, one PCsimple layer each (``stable``:
    on the pool frozen at the layer's start)."""

    jobs: list[list] = field(kw_only=True)
    stable: bool = field(default=False, kw_only=True)


@dataclass(frozen=True)
class LCSSepsetsRequest(LCSScope):
    """``lcs_sepsets``: ``jobs`` ``[[a, b, [U...], l], ...]``, the p-value of each subset of
    size l of U (``reveal_all``: also those at or below alpha)."""

    jobs: list[list] = field(kw_only=True)
    reveal_all: bool = field(default=False, kw_only=True)


@dataclass(frozen=True)
class LCSLocalRequest(DiscreteScope):
    """``lcs_local`` (``fedlcs-local``): the whole search for ``targets`` (variable ids) with
    the search options ``lcs``."""

    targets: list[int] = field(kw_only=True)
    lcs: dict[str, Any] = field(kw_only=True)
