"""The client side of fedCI's federated CI tests, owned by no method: local GLM blocks
(information, score, log-likelihood) at the server's coefficients, or local likelihood-ratio
p-values (Fisher's combination).

fedCI-PC / fedCI-FCI (:mod:`fedcausal_flwr.clients.fedci`) and fedCI-IOD
(:mod:`fedcausal_flwr.clients.fedci_iod`) build on :class:`GLMTestsClient`; the wire protocol is
in :mod:`fedcausal_flwr.protocols.fedci`. A model whose variables the client does not hold, or
whose site list excludes it, gets zeros; a model's blocks count only the rows observed on its
``rows`` and its own variables (test-wise deletion), and ``missing="listwise"`` drops incomplete
rows first. Encodings and private intercepts (``site_effect="private"``, never sent) are cached
per data frame for the life of the frame, because Flower rebuilds the client object for every
message.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fedcausal_flwr.clients.base import FrameCache, HandlerResult, ProtocolClient, action
from fedcausal_flwr.data.schema import DataError, Schema
from fedcausal_flwr.federation.core.messages import ProtocolError
from fedcausal_flwr.protocols.fedci import (
    GLM,
    LOCAL_LRT,
    GLMRequest,
    LocalLRTRequest,
    encode_fixed,
    model_from_row,
)
from fedcausal_flwr.stats.glm import (
    ClientTable,
    ci_test_inprocess,
    local_contribution,
    n_global_params,
)

_TABLES = FrameCache()


def cached_table(
    data: pd.DataFrame, schema: Schema, partition_id: int, missing: str = "error"
) -> ClientTable:
    """One :class:`ClientTable` per (frame, schema, missing mode), kept per frame; ``listwise``
    drops the rows missing any schema variable first."""

    def build() -> ClientTable:
        frame = data
        if missing == "listwise":
            names = [n for n in schema.names if n in data.columns]
            frame = data.dropna(subset=names).infer_objects()  # bools with gaps were objects
            if frame.empty:
                raise ProtocolError(
                    partition_id, "missing='listwise' left no row: every row misses a value"
                )
        return ClientTable(frame, schema, f"client {partition_id}")

    return _TABLES.get(data, (schema, missing), build)


class GLMTestsClient(ProtocolClient):
    """One site's data; see :mod:`fedcausal_flwr.protocols.fedci` for the ``glm`` action."""

    @action(GLM, GLMRequest)
    def glm(self, request: GLMRequest, arrays: list[np.ndarray]) -> HandlerResult:
        schema = Schema.from_json(request.schema)
        table = cached_table(self.data, schema, self.partition_id, request.missing)
        betas = np.asarray(arrays[0], dtype=np.float64)
        parts, offset = [], 0
        for row in request.models:
            model = model_from_row(row)
            size = n_global_params(model, schema)
            try:
                parts.append(
                    local_contribution(
                        table, self.partition_id, model, betas[offset : offset + size]
                    )
                )
            except DataError as err:
                raise ProtocolError(self.partition_id, str(err)) from err
            offset += size
        if offset != betas.size:
            raise ProtocolError(
                self.partition_id, f"got {betas.size} coefficients for models needing {offset}"
            )
        blocks = np.concatenate(parts + [np.zeros(0)])
        if request.fixed is None:
            return [blocks], {}
        fraction_bits, bits, limbs = (int(v) for v in request.fixed)
        try:
            return [encode_fixed(blocks, fraction_bits, bits, limbs)], {}
        except OverflowError as err:
            models = [row[0] for row in request.models]
            raise ProtocolError(
                self.partition_id, f"fixed-point encoding of the GLM blocks of {models}: {err}"
            ) from err

    @action(LOCAL_LRT, LocalLRTRequest)
    def local_lrt(self, request: LocalLRTRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """The symmetric LRT on this site's rows alone (Fisher baseline); nan where unobserved."""
        schema = Schema.from_json(request.schema)
        table = cached_table(self.data, schema, self.partition_id, request.missing)
        options = {"tol": float(request.tol), "max_iter": int(request.max_iter)}
        testwise = request.missing == "testwise"
        pvalues = np.full(len(request.tests), np.nan)
        sizes = np.zeros(len(request.tests), dtype=np.int64)
        for i, (x, y, given) in enumerate(request.tests):
            if not table.observes([x, y, *given]):
                continue
            try:
                res = ci_test_inprocess([table], x, y, given, "none", float(request.ridge),
                                        testwise, **options)  # fmt: skip
            except DataError as err:
                raise ProtocolError(self.partition_id, str(err)) from err
            pvalues[i], sizes[i] = res.p_value, res.n
        return [pvalues, sizes], {}
