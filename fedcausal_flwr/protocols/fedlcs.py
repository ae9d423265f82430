"""FedLCS's actions, their payloads and what FedLCS and its baselines disclose (its pooled
reference uses :data:`fedcausal_flwr.protocols.pooled.RAW_ROWS` and its record).

The search that both sides run lives in :mod:`fedcausal_flwr.discovery.lcs` (``LCSOptions``
travel as :func:`~fedcausal_flwr.discovery.lcs_payload.options_dict`).

Wire protocol (after the built-in ``hello``; ``levels`` are the global level sets; variables are
indices into ``variables``). ``fedlcs`` asks one ``lcs_prune`` round per PCsimple layer (all
pending variables together) and one ``lcs_sepsets`` round per level of the separating-set search
(all pending pairs together), as the search yields them; ``fedlcs-local`` one ``lcs_local`` round;
``lcs-pooled`` one ``raw_rows`` round (``EncodedRowsRequest`` of
:mod:`fedcausal_flwr.protocols.pooled`, ``variables, levels``: its ``missing`` left out; reply:
the client's rows as int64 codes). Payload keys in wire order; every reply reaches the server per
client:

===============  ============  ===================================  ========================  ======
action           methods       payload (record: keys)               reply (per client; meta)  summed
===============  ============  ===================================  ========================  ======
``lcs_prune``    fedlcs        ``LCSPruneRequest``: ``variables,    uint8 keep flag per       no
                               levels, test, alpha, reliability,    candidate, jobs
                               run_token, jobs, stable``;           concatenated; meta
                               ``jobs``: ``[[V, [CPC...], l],       ``tests``
                               ...]``
``lcs_sepsets``  fedlcs        ``LCSSepsetsRequest``: ``variables,  float64 p per subset of   no
                               levels, test, alpha, reliability,    size l of U (NaN where
                               run_token, jobs, reveal_all``;       p <= alpha unless
                               ``jobs``: ``[[a, b, [U...], l],      ``reveal_all``), jobs
                               ...]``                               concatenated; meta
                                                                    ``tests``
``lcs_local``    fedlcs-local  ``LCSLocalRequest``: ``variables,    int8 ``targets x p x p``  no
                               levels, test, alpha, reliability,    local graphs (each
                               targets, lcs``                       embedded in all
                                                                    variables); meta
                                                                    ``tests``
===============  ============  ===================================  ========================  ======

``run_token`` scopes the client's test cache to the run. The meta
``tests`` (:class:`~fedcausal_flwr.protocols.discrete.ComputedTests`) counts the CI tests the
client computed for the message. ``lcs_sepsets`` takes the subsets of U in
``itertools.combinations`` order; ``reveal_all`` is sent true with ``sep_rule="fisher"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.protocols import pooled
from fedcausal_flwr.protocols.discrete import DiscreteScope

LCS_PRUNE = "lcs_prune"  # one PCsimple layer of several candidate sets: keep flags
LCS_SEPSETS = "lcs_sepsets"  # p-values of one level of the separating-set search (NaN if dependent)
LCS_LOCAL = "lcs_local"  # the whole search on the client's rows (fedlcs-local baseline)
ACTIONS = (LCS_PRUNE, LCS_SEPSETS, LCS_LOCAL)

#: each client's keep flags of a layer's candidate sets, and its p-values of the separating-set
#: search
DISCLOSURES = {LCS_PRUNE: disclosure.LOCAL, LCS_SEPSETS: disclosure.LOCAL}
#: fedlcs-local: each client's own local structure; lcs-pooled: the clients' rows (NOT private)
LOCAL_DISCLOSURES = {LCS_LOCAL: disclosure.LOCAL}
POOLED_DISCLOSURES = pooled.DISCLOSURES


@dataclass(frozen=True)
class LCSScope(DiscreteScope):
    """Base of ``lcs_prune`` and ``lcs_sepsets``: the run's token,
    which scopes the client's test cache to the run."""

    run_token: str = field(kw_only=True)


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
