"""Batches of CI queries on the wire: one int64 matrix of rows ``[x, y, S..., -1 padding]``.

Used by the FedC2SL, voting, layer-wise FedPC and FedCDnv protocols (queries and separating sets);
see the wire-protocol tables of :mod:`fedcausal_flwr.protocols.fedpc`,
:mod:`fedcausal_flwr.protocols.voting` (the voting baselines and layer-wise FedPC) and
:mod:`fedcausal_flwr.protocols.tpss`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedcausal_flwr.stats.batch_oracle import Query
from fedcausal_flwr.stats.tables import query_rows, rows_to_queries


def encode_queries(queries: Sequence[Query]) -> np.ndarray:
    """A batch as one int64 matrix ``[x, y, S..., -1 padding]`` (cheap to send and to parse);
    a batch held as such rows (fresh queries) is sent as it is."""
    return query_rows(queries, normalised=True)


def decode_queries(matrix: np.ndarray) -> list[Query]:
    """The queries of a matrix built by :func:`encode_queries` (padding dropped)."""
    rows = np.asarray(matrix, dtype=np.int64)
    if rows.ndim != 2 or rows.shape[1] < 2:
        raise ValueError(f"a query matrix must be (n, >= 2), got shape {rows.shape}")
    return rows_to_queries(rows)
