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

from fedcausal_flwr.clients.base import (
    FrameCache,
    HandlerResult,
    ProtocolClient,
    action,
    site_noise,
)
from fedcausal_flwr.data.schema import DataError, Schema
from fedcausal_flwr.federation.core.messages import ProtocolError
from fedcausal_flwr.privacy.charges import PrivacyCharge
from fedcausal_flwr.privacy.sampler import discrete_gaussian
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
        charge = None if request.privacy is None else PrivacyCharge.decode(request.privacy)
        clip = None if charge is None else self._private_clip(charge, request)
        models = [model_from_row(row) for row in request.models]
        sizes = [n_global_params(model, schema) for model in models]
        # each model's packed block: its information matrix, IRLS vector and four scalars
        self.allocating(GLM, sum(size * size + size + 4 for size in sizes))
        parts, offset = [], 0
        for model, size in zip(models, sizes, strict=True):
            try:
                parts.append(
                    local_contribution(
                        table, self.partition_id, model, betas[offset : offset + size], clip
                    )
                )
            except DataError as err:
                raise ProtocolError(
                    self.partition_id, str(err), kind="a model cannot be fitted on this site's rows"
                ) from err
            offset += size
        if offset != betas.size:
            raise ProtocolError(
                self.partition_id, f"got {betas.size} coefficients for models needing {offset}"
            )
        blocks = np.concatenate(parts + [np.zeros(0)])
        if charge is not None and charge.cells != blocks.size:
            raise ProtocolError(
                self.partition_id,
                f"the request's privacy charge counts {charge.cells} entries, its blocks have "
                f"{blocks.size}",
            )
        if request.fixed is None:
            return [blocks], {}
        fraction_bits, bits, limbs = (int(v) for v in request.fixed)
        if charge is not None and charge.shares is not None:
            # this site's share of the noise, on the fixed-point integers, before SecAgg+
            lattice = np.rint(np.ldexp(blocks, fraction_bits))
            share = discrete_gaussian(charge.variance / charge.shares, blocks.size, site_noise())
            blocks = np.ldexp(lattice + share, -fraction_bits)
        try:
            return [encode_fixed(blocks, fraction_bits, bits, limbs)], {}
        except OverflowError as err:
            models = [row[0] for row in request.models]
            raise ProtocolError(
                self.partition_id, f"fixed-point encoding of the GLM blocks of {models}: {err}"
            ) from err

    def _private_clip(self, charge: PrivacyCharge, request: GLMRequest) -> float:
        """The clip bound of a private ``glm`` request, once its charge is checked: it counts the
        models asked, names a bound, and (fixed point) the lattice the digits use; distributed
        noise needs the fixed-point digits it is added to."""
        problem = None
        if charge.tables != len(request.models):
            problem = f"counts {charge.tables} models, the request asks {len(request.models)}"
        elif charge.clip is None or charge.resolution is None:
            problem = "names no clip bound or resolution"
        elif request.fixed is not None and charge.resolution != 2.0 ** -int(request.fixed[0]):
            problem = f"names resolution {charge.resolution}, the digits 2**-{request.fixed[0]}"
        elif charge.shares is not None and request.fixed is None:
            problem = "adds noise shares to blocks that do not travel as fixed-point digits"
        if problem:
            raise ProtocolError(self.partition_id, f"the request's privacy charge {problem}")
        assert charge.clip is not None  # checked above
        return float(charge.clip)

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
                raise ProtocolError(
                    self.partition_id, str(err), kind="a model cannot be fitted on this site's rows"
                ) from err
            pvalues[i], sizes[i] = res.p_value, res.n
        return [pvalues, sizes], {}
