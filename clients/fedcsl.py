"""Client of FedCSL: HITON-PC neighbour sets with a weight, then a BDeu hill climbing.

Mirror of :mod:`fedcausal_flwr.strategies.fedcsl` (see its wire-protocol table). Tests run on a
local :class:`~fedcausal_flwr.stats.oracles.DiscreteOracle` over the global level sets (the
voting client's, with the payload's reliability rule: an unreliable test is NaN).
"""

from __future__ import annotations

import time

import numpy as np

from fedcausal_flwr.clients.base import HandlerResult, action
from fedcausal_flwr.clients.discrete import DiscreteClient
from fedcausal_flwr.discovery.fedcsl import client_weight, hiton_pc_all, marginal_strength
from fedcausal_flwr.discovery.score import BDeuScorer, hill_climb
from fedcausal_flwr.federation.core.messages import ProtocolError
from fedcausal_flwr.protocols.fedcsl import LOCAL_DAG, NEIGHBOURS


class FedCSLClient(DiscreteClient):
    """One site's data; see the strategy module for the actions."""

    @action(NEIGHBOURS)
    def neighbours(self, payload: dict, arrays: list[np.ndarray]) -> HandlerResult:
        """Step 1: every variable's HITON-PC set and the weight from the unconditional p-values."""
        oracle = self._oracle(payload)
        alpha = float(payload["alpha"])
        strength = marginal_strength(oracle)  # candidates enter by G2 statistic, as the code
        found = hiton_pc_all(oracle, alpha, payload.get("max_depth"), strength)
        weight = client_weight(found.pair_pvalues, alpha)
        meta = {"tests": found.tests, "unreliable_pairs": int(np.isnan(found.pair_pvalues).sum())}
        return [found.members.astype(np.uint8), np.array([weight])], meta

    @action(LOCAL_DAG)
    def local_dag(self, payload: dict, arrays: list[np.ndarray]) -> HandlerResult:
        """Step 3: one BDeu tabu hill climbing on all local rows, inside the skeleton."""
        variables = payload["variables"]
        p = len(variables)
        allowed = np.asarray(arrays[0]) if arrays else np.zeros(0)
        if allowed.shape != (p, p):
            raise ProtocolError(
                self.partition_id, f"the broadcast skeleton is {allowed.shape}, expected {p}x{p}"
            )
        cards = [len(payload["levels"][v]) for v in variables]
        started = time.perf_counter()
        scorer = BDeuScorer(
            self._codes(payload),
            cards,
            ess=float(payload["ess"]),
            structure_prior=bool(payload["structure_prior"]),
        )
        found = hill_climb(
            scorer,
            allowed.astype(bool),
            tabu_length=int(payload["tabu_length"]),
            max_barren=int(payload["max_barren"]),
            lower_triangle_compat=bool(payload["lower_triangle_compat"]),
        )
        meta = {
            "score_seconds": time.perf_counter() - started,
            "local_evaluations": found.local_evaluations,
        }
        return [found.dag.astype(np.uint8)], meta
