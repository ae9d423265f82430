"""Client of FedCSL: HITON-PC neighbour sets with a weight, then a BDeu hill climbing.

Mirror of :mod:`fedcausal_flwr.strategies.fedcsl` (wire protocol:
:mod:`fedcausal_flwr.protocols.fedcsl`). Tests run on a local
:class:`~fedcausal_flwr.stats.oracles.DiscreteOracle` over the global level sets (the
voting client's, with the request's reliability rule: an unreliable test is NaN).
"""

from __future__ import annotations

import time

import numpy as np

from fedcausal_flwr.clients.base import HandlerResult, action
from fedcausal_flwr.clients.discrete import DiscreteClient
from fedcausal_flwr.discovery.fedcsl import client_weight, hiton_pc_all, marginal_strength
from fedcausal_flwr.discovery.score import BDeuScorer, hill_climb
from fedcausal_flwr.federation.core.messages import ProtocolError
from fedcausal_flwr.protocols.discrete import HillClimbReply
from fedcausal_flwr.protocols.fedcsl import (
    LOCAL_DAG,
    NEIGHBOURS,
    LocalDagRequest,
    NeighboursReply,
    NeighboursRequest,
)


class FedCSLClient(DiscreteClient):
    """One site's data; see :mod:`fedcausal_flwr.protocols.fedcsl` for the actions."""

    @action(NEIGHBOURS, NeighboursRequest)
    def neighbours(self, request: NeighboursRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """Step 1: every variable's HITON-PC set and the weight from the unconditional p-values."""
        oracle = self._oracle(request)
        alpha = float(request.alpha)
        strength = marginal_strength(oracle)  # candidates enter by G2 statistic, as the code
        found = hiton_pc_all(oracle, alpha, request.max_depth, strength)
        weight = client_weight(found.pair_pvalues, alpha)
        meta = NeighboursReply(found.tests, int(np.isnan(found.pair_pvalues).sum()))
        return [found.members.astype(np.uint8), np.array([weight])], meta

    @action(LOCAL_DAG, LocalDagRequest)
    def local_dag(self, request: LocalDagRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """Step 3: one BDeu tabu hill climbing on all local rows, inside the skeleton."""
        variables = request.variables
        p = len(variables)
        allowed = np.asarray(arrays[0]) if arrays else np.zeros(0)
        if allowed.shape != (p, p):
            raise ProtocolError(
                self.partition_id, f"the broadcast skeleton is {allowed.shape}, expected {p}x{p}"
            )
        cards = [len(request.levels[v]) for v in variables]
        started = time.perf_counter()
        scorer = BDeuScorer(
            self._codes(request),
            cards,
            ess=float(request.ess),
            structure_prior=bool(request.structure_prior),
        )
        found = hill_climb(
            scorer,
            allowed.astype(bool),
            tabu_length=int(request.tabu_length),
            max_barren=int(request.max_barren),
            lower_triangle_compat=bool(request.lower_triangle_compat),
        )
        meta = HillClimbReply(time.perf_counter() - started, found.local_evaluations)
        return [found.dag.astype(np.uint8)], meta
