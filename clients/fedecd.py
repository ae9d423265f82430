"""Client of FedECD: local layer pruning, bootstrap evidence, bootstrap BDeu searches.

Mirror of :mod:`fedcausal_flwr.strategies.fedecd` (wire protocol:
:mod:`fedcausal_flwr.protocols.fedecd`). The ``prune`` action is the shared discrete client's
(:class:`~fedcausal_flwr.clients.discrete.DiscreteClient`), with the request's reliability rule.
Resamples come from :func:`~fedcausal_flwr.discovery.bootstrap.bootstrap_rows` seeded by ``(seed,
partition id, replicate)``: the same replicate is the same resample in both phases and on every
backend.
"""

from __future__ import annotations

import time

import numpy as np

from fedcausal_flwr.clients.base import HandlerResult, action
from fedcausal_flwr.clients.discrete import DiscreteClient
from fedcausal_flwr.discovery.bootstrap import (
    bootstrap_rows,
    evidence_queries,
    independence_evidence,
    vote_directions,
)
from fedcausal_flwr.discovery.score import BDeuScorer, hill_climb
from fedcausal_flwr.federation.core.messages import ProtocolError
from fedcausal_flwr.protocols.discrete import ComputedTests, HillClimbReply
from fedcausal_flwr.protocols.fedecd import (
    BOOTSTRAP_WEIGHTS,
    ORIENT,
    BootstrapScope,
    BootstrapWeightsRequest,
    OrientRequest,
)


class FedECDClient(DiscreteClient):
    """One site's data; see :mod:`fedcausal_flwr.protocols.fedecd` for the actions."""

    def _replicate_rows(self, request: BootstrapScope, replicate: int) -> np.ndarray | None:
        if not request.resample:
            return None
        return bootstrap_rows(len(self.data), int(request.seed), self.partition_id, replicate)

    def _square(self, request: BootstrapScope, array: np.ndarray, what: str) -> np.ndarray:
        p = len(request.variables)
        matrix = np.asarray(array)
        if matrix.shape != (p, p):
            raise ProtocolError(
                self.partition_id, f"the broadcast {what} is {matrix.shape}, expected {p}x{p}"
            )
        return matrix.astype(bool)

    @action(BOOTSTRAP_WEIGHTS, BootstrapWeightsRequest)
    def bootstrap_weights(
        self, request: BootstrapWeightsRequest, arrays: list[np.ndarray]
    ) -> HandlerResult:
        """Eq. 5-6: per removed edge, the bootstrap mean of the weighted independence evidence."""
        skeleton = self._square(request, arrays[0], "skeleton")
        pairs = np.asarray(arrays[1], dtype=np.int64).reshape(-1, 2)
        alpha, rule = float(request.alpha), str(request.evidence)
        try:
            queries, owner, side = evidence_queries(skeleton, pairs, int(request.depth), rule)
        except ValueError as err:
            raise ProtocolError(self.partition_id, str(err)) from None
        n_boot = int(request.bootstraps)
        everything = np.arange(len(self.data))
        row_sets = [
            everything if rows is None else rows
            for rows in (self._replicate_rows(request, r) for r in range(n_boot))
        ]
        oracle = self._oracle(request)
        pvalues = oracle.test_resamples(queries, row_sets)  # B x Q, one batched test
        total = np.zeros(len(pairs))
        for replicate_pvalues in pvalues:
            total += independence_evidence(replicate_pvalues, owner, side, len(pairs), alpha, rule)
        return [total / n_boot], ComputedTests(oracle.n_computed)

    @action(ORIENT, OrientRequest)
    def orient(self, request: OrientRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """Eq. 8-9: one BDeu hill climbing per resample inside the skeleton, then the direction
        vote over the resamples; sends the voted 0/1 matrix (both entries = undirected tie)."""
        allowed = self._square(request, arrays[0], "skeleton")
        variables = request.variables
        cards = [len(request.levels[v]) for v in variables]
        codes = self._codes(request)
        votes = np.zeros(allowed.shape, dtype=np.int64)
        searched = 0.0
        evaluations = 0
        for replicate in range(int(request.bootstraps)):
            rows = self._replicate_rows(request, replicate)
            started = time.perf_counter()
            scorer = BDeuScorer(
                codes if rows is None else codes[rows],
                cards,
                ess=float(request.ess),
                structure_prior=bool(request.structure_prior),
            )
            found = hill_climb(
                scorer,
                allowed,
                tabu_length=int(request.tabu_length),
                max_barren=int(request.max_barren),
                lower_triangle_compat=bool(request.lower_triangle_compat),
            )
            searched += time.perf_counter() - started
            evaluations += found.local_evaluations
            votes += found.dag.astype(np.int64)
        voted = vote_directions(votes, str(request.tie_rule))
        return [voted], HillClimbReply(searched, evaluations)
