"""FedCDnv's actions (two rounds after ``hello``), their payloads and what each discloses.

The wire protocol is documented in :mod:`fedcausal_flwr.strategies.tpss`; separating sets travel
as :func:`fedcausal_flwr.protocols.queries.encode_queries` matrices in global variable ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.protocols.records import ComputedTests, Payload

FCDNV_INIT = "fcdnv_init"  # round 1: local FCI on the client's variables (C-InitPag)
FCDNV_UPDATE = "fcdnv_update"  # round 2: C-Update with the broadcast G0, then the statistics
ACTIONS = (FCDNV_INIT, FCDNV_UPDATE)

#: each client's local PAG, and its updated PAG with the statistics of the two-level selection
DISCLOSURES = {FCDNV_INIT: disclosure.PER_CLIENT, FCDNV_UPDATE: disclosure.PER_CLIENT}


@dataclass(frozen=True)
class LocalFciRequest(Payload):
    """``fcdnv_init``: FCI over the global ``variables`` and ``levels`` (``fci``: its options)."""

    variables: list[str]
    levels: dict[str, list]
    test: str
    alpha: float
    fci: dict[str, Any]


@dataclass(frozen=True)
class UpdateRequest(LocalFciRequest):
    """``fcdnv_update``: round 1's FCI request plus C-Update's options and the Eq. (2) band."""

    update_depth: int | None = field(kw_only=True)
    update_rules: bool = field(kw_only=True)
    theta1: float = field(kw_only=True)
    theta2: float = field(kw_only=True)
    send_statistics: bool = field(kw_only=True)


@dataclass(frozen=True)
class LocalFciReply(Payload):
    """Reply meta of ``fcdnv_init``: the client's row count and the CI tests its FCI computed."""

    n_rows: int = -1
    tests: int = 0


@dataclass(frozen=True)
class UpdateReply(ComputedTests):
    """Reply meta of ``fcdnv_update``: C-Update's tests and its imported/propagated/conflicts."""

    imported: int = 0
    propagated: int = 0
    conflicts: int = 0
