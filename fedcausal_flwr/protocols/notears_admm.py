"""NOTEARS-ADMM's actions and discrete modes.

The wire protocol is documented in :mod:`fedcausal_flwr.strategies.notears_admm`.
"""

from __future__ import annotations

LEVEL_COUNTS = "level_counts"  # summed counts of every level of the discrete columns
ADMM_STEP = "admm_step"  # one ADMM iteration: the client's local subproblem on its own rows
ACTIONS = (LEVEL_COUNTS, ADMM_STEP)
#: how discrete (integer, text, true/false) columns become numbers
DISCRETE_MODES = ("frequency", "as_numbers", "refuse")
