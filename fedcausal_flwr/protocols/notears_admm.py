"""NOTEARS-ADMM's actions, their payloads, what each discloses, and the discrete modes.

The wire protocol is documented in :mod:`fedcausal_flwr.strategies.notears_admm`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.protocols.records import Payload

LEVEL_COUNTS = "level_counts"  # summed counts of every level of the discrete columns
ADMM_STEP = "admm_step"  # one ADMM iteration: the client's local subproblem on its own rows
ACTIONS = (LEVEL_COUNTS, ADMM_STEP)
#: how discrete (integer, text, true/false) columns become numbers
DISCRETE_MODES = ("frequency", "as_numbers", "refuse")

#: what each action discloses: the level counts are sums (through SecAgg+ in a secure run); each
#: ADMM step returns the client's own local solution
DISCLOSURES = {LEVEL_COUNTS: disclosure.SUM, ADMM_STEP: disclosure.PER_CLIENT}


@dataclass(frozen=True)
class LevelCountsRequest(Payload):
    """``level_counts``: count each of the ``levels`` of the discrete columns ``variables``."""

    variables: list[str]
    levels: dict[str, list]


@dataclass(frozen=True)
class AdmmStepRequest(Payload):
    """``admm_step``: iteration ``iteration``'s local subproblem (``rows``: the pooled N)."""

    variables: list[str]
    iteration: int
    rho: float  # rho2 now
    dual_rho: float | None = field(default=None, kw_only=True)  # rho2 of the last dual update
    rows: int = field(kw_only=True)
    zero_diagonal: bool = field(default=False, kw_only=True)
    #: ``levels`` and ``values`` (level -> number) of the columns mapped by frequency
    encoding: dict[str, Any] = field(default_factory=dict, kw_only=True)
