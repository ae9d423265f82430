"""fedCI-IOD client: the GLM tests' client plus ``raw_rows`` (mirror of
:mod:`fedcausal_flwr.strategies.fedci_iod`).

A site holds only its own columns; the server asks it only for models over variables it observes
(the participants of each test), and it answers ``glm`` (federated IRLS blocks) or ``local_lrt``
(its own p-values for Fisher's method) exactly as for fedCI-PC / fedCI-FCI. For ``iod-pooled``
(the upper bound, not private) it sends its rows with ``raw_rows``.
"""

from __future__ import annotations

import numpy as np

from fedcausal_flwr.clients.base import HandlerResult, action
from fedcausal_flwr.clients.glm_tests import GLMTestsClient, cached_table
from fedcausal_flwr.data.schema import Schema
from fedcausal_flwr.protocols.pooled import RAW_ROWS, RawRowsRequest


class FedCIIODClient(GLMTestsClient):
    """One site's data, answering fedCI's actions for IOD's tests."""

    @action(RAW_ROWS, RawRowsRequest)
    def raw_rows(self, request: RawRowsRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """Every row over this site's columns in the schema's order: level codes or values."""
        schema = Schema.from_json(request.schema)
        table = cached_table(self.data, schema, self.partition_id)
        own = [v for v in schema.names if v in table.columns]
        rows = np.column_stack([table.values(v).astype(np.float64) for v in own])
        return [rows], {}


__all__ = ["FedCIIODClient"]
