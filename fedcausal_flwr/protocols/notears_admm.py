"""NOTEARS-ADMM's actions, their payloads, what each discloses, and the discrete modes.

Wire protocol (after the built-in ``hello``): with ``discrete="frequency"`` and some discrete
column, one ``level_counts`` round first (summed: through SecAgg+ in a secure run, by the server
otherwise); then one ``admm_step`` round per ADMM iteration, re-issued to the survivors when a
client drops out. Payload keys in wire order; every reply's meta is empty:

================  ======================================  ============================  ======
action            payload (record: keys) + arrays         reply (per client)            summed
================  ======================================  ============================  ======
``level_counts``  ``LevelCountsRequest``: ``variables,    int64 count of every level    yes
                  levels``: the discrete columns mapped   (columns in order, levels in
                  by frequency, their level sets          the broadcast order)
``admm_step``     ``AdmmStepRequest``: ``variables,       float64 ``d x d`` local       no
                  iteration, rho, dual_rho, rows,         matrix ``W_k``
                  zero_diagonal, encoding`` + float64
                  ``d x d`` consensus ``Z`` of iteration
                  t - 1
================  ======================================  ============================  ======

``admm_step``'s keys: ``iteration`` t (from 1), ``rho`` (rho2 now), ``dual_rho`` (rho2 of the
last dual update; null at iteration 1), ``rows`` (the pooled N of the clients taking part),
``zero_diagonal``, ``encoding`` (``levels`` and ``values``, level -> number, of the columns
mapped by frequency).

State: the server holds ``Z``, ``alpha``, ``rho1``, ``rho2`` and a copy of every client's dual
``B_k``; each client holds its own ``B_k`` and last ``W_k`` in Flower's node state and applies
the dual update ``B_k += rho2 (W_k - Z)`` itself when the next ``Z`` arrives (the same expression
as the server, so both copies hold the same bits). Nothing but ``Z`` and the schedule is
broadcast: no client sees another's dual.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.payload import Payload
from fedcausal_flwr.protocols.discrete import LevelSets

LEVEL_COUNTS = "level_counts"  # summed counts of every level of the discrete columns
ADMM_STEP = "admm_step"  # one ADMM iteration: the client's local subproblem on its own rows
ACTIONS = (LEVEL_COUNTS, ADMM_STEP)
#: how discrete (integer, text, true/false) columns become numbers
DISCRETE_MODES = ("frequency", "as_numbers", "refuse")

#: what each action discloses: the level counts are sums (through SecAgg+ in a secure run); each
#: ADMM step returns the client's own local solution
DISCLOSURES = {LEVEL_COUNTS: disclosure.SUM, ADMM_STEP: disclosure.PER_CLIENT}


@dataclass(frozen=True)
class LevelCountsRequest(LevelSets):
    """``level_counts``: count each of the ``levels`` of the discrete columns ``variables``."""


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
