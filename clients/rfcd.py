"""Client of RFCD: its local BDeu score of every family the server's GES step asks.

Mirror of :mod:`fedcausal_flwr.strategies.rfcd` (wire protocol:
:mod:`fedcausal_flwr.protocols.rfcd`). The client encodes its columns over the global level sets,
then scores each family with
:class:`~fedcausal_flwr.discovery.ges.CausalLearnBDeu` (causal-learn's ``local_score_BDeu``) over
its own observed values per variable, or over the global level sets.
"""

from __future__ import annotations

import json

import numpy as np

from fedcausal_flwr.clients.base import (
    FrameCache,
    HandlerResult,
    ProtocolClient,
    action,
    cached_codes,
)
from fedcausal_flwr.discovery.ges import CausalLearnBDeu
from fedcausal_flwr.federation.core.messages import ProtocolError
from fedcausal_flwr.protocols.rfcd import (
    CARDINALITIES,
    FAMILY_SCORES,
    FamilyScoresRequest,
    ScoredFamilies,
    decode_families,
)

_SCORERS = FrameCache()


class RFCDClient(ProtocolClient):
    """One site's data; answers ``family_scores``."""

    def _scorer(self, request: FamilyScoresRequest) -> CausalLearnBDeu:
        variables, levels = list(request.variables), request.levels
        cardinalities = str(request.cardinalities)
        if cardinalities not in CARDINALITIES:
            raise ProtocolError(
                self.partition_id,
                f"unknown cardinalities {cardinalities!r}; expected one of {CARDINALITIES}",
            )
        codes = cached_codes(self.data, variables, levels, self.partition_id)
        cards = None if cardinalities == "observed" else [len(levels[v]) for v in variables]
        prior = request.structure_prior
        try:
            return CausalLearnBDeu(
                codes,
                cards,
                ess=float(request.ess),
                structure_prior=None if prior is None else float(prior),
            )
        except (TypeError, ValueError) as err:
            raise ProtocolError(self.partition_id, f"cannot score families: {err}") from None

    @action(FAMILY_SCORES, FamilyScoresRequest)
    def family_scores(
        self, request: FamilyScoresRequest, arrays: list[np.ndarray]
    ) -> HandlerResult:
        """The client's BDeu log score of each family of the batch, in order."""
        variables = list(request.variables)
        if len(arrays) != 1:
            raise ProtocolError(
                self.partition_id, f"expected one family matrix, got {len(arrays)} arrays"
            )
        try:
            families = decode_families(arrays[0], len(variables))
        except ValueError as err:
            raise ProtocolError(self.partition_id, str(err)) from None
        key = json.dumps(
            [
                variables,
                [request.levels[v] for v in variables],
                request.ess,
                request.structure_prior,
                request.cardinalities,
            ],
            default=str,
        )
        scorer = _SCORERS.get(self.data, key, lambda: self._scorer(request))
        return [scorer.batch(families)], ScoredFamilies(len(families))
