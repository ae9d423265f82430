"""The site side of the fisher-pvalues example, and the one message both sides share.

Each site tests every CI query of a batch on its own rows (chi2 or G2 over the global level
sets) and sends its p-values: what the server learns is each site's own p-value per test.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedcausal_flwr.clients.base import HandlerResult, ProtocolClient, action, cached_codes
from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.payload import Payload
from fedcausal_flwr.protocols.queries import decode_queries
from fedcausal_flwr.stats.oracles import DiscreteOracle

LOCAL_PVALUES = "local_pvalues"
#: what the site's reply discloses: its own p-value of each test (not summable)
DISCLOSURES = {LOCAL_PVALUES: disclosure.PER_CLIENT}


@dataclass(frozen=True)
class LocalPValuesRequest(Payload):
    """``local_pvalues``: test each query (the request's one array) on this site's rows."""

    variables: list[str]
    levels: dict[str, list]
    test: str


class FisherClient(ProtocolClient):
    """Answers a batch of CI tests with its own p-values."""

    @action(LOCAL_PVALUES, LocalPValuesRequest)
    def local_pvalues(
        self, request: LocalPValuesRequest, arrays: list[np.ndarray]
    ) -> HandlerResult:
        names, levels = request.variables, request.levels
        codes = cached_codes(self.data, names, levels, self.partition_id)
        oracle = DiscreteOracle(codes, [len(levels[v]) for v in names], names, test=request.test)
        return [oracle.test_batch(decode_queries(arrays[0])).astype(np.float64)], {}
