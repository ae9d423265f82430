"""FedC2SL client: answers the server's batches with local sufficient statistics.

Mirror of :mod:`fedcausal_flwr.strategies.fedpc` (wire protocol:
:mod:`fedcausal_flwr.protocols.fedpc`). The client never decides anything: it encodes its columns
over the global level sets the server sends, counts one
contingency table per query (one ``np.bincount`` per equal-|S| chunk), and returns the tables, their
stratum margins, their projected residuals, or its data moments.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from fedcausal_flwr.clients.base import (
    HandlerResult,
    ProtocolClient,
    action,
    cached_codes,
    complete_rows,
    site_noise,
)
from fedcausal_flwr.federation.core.messages import ProtocolError
from fedcausal_flwr.privacy.charges import PrivacyCharge
from fedcausal_flwr.privacy.sampler import discrete_gaussian
from fedcausal_flwr.protocols.fedpc import (
    MARGINS,
    MOMENTS,
    QUERY_MOMENTS,
    SKETCH,
    SKETCH_SCALE,
    SPARSE_TABLES,
    TABLES,
    MomentsRequest,
    SketchRequest,
    TableRequest,
)
from fedcausal_flwr.protocols.queries import decode_queries
from fedcausal_flwr.stats.contingency import (
    TableLayout,
    TableTooLargeError,
    count_type,
    local_tables,
    make_layout,
    sparse_local_tables,
    table_marginals,
)
from fedcausal_flwr.stats.gaussian import local_moments, query_moments
from fedcausal_flwr.stats.sketch import client_sketch

T = TypeVar("T")


#: The last batch's table layout, by its queries' bytes, cards and budget: the clients simulated in
#: one process (1,000 in-process) share the server's batch, so it is decoded and laid out once.
_LAYOUTS: dict[tuple, TableLayout] = {}


class FedPCClient(ProtocolClient):
    """One site's data; see :mod:`fedcausal_flwr.protocols.fedpc` for the actions."""

    def _tables(
        self, request: TableRequest, arrays: list[np.ndarray]
    ) -> tuple[np.ndarray, TableLayout]:
        """The batch's dense tables, in the smallest type that holds this site's counts."""
        return self._count(
            local_tables, request, arrays, sparse=False, dtype=count_type(len(self.data))
        )

    def _count(
        self,
        count: Callable[..., T],
        request: TableRequest,
        arrays: list[np.ndarray],
        *,
        sparse: bool,
        **options: Any,
    ) -> T:
        """The batch's tables counted by ``count`` (dense or sparse) over this client's codes."""
        codes, cards, layout = self._layout(request, arrays, sparse=sparse)
        return self._refusing(
            count,
            codes,
            cards,
            layout,
            variables=request.variables,
            client=self.label,
            allow_missing=request.missing == "testwise",
            **options,
        )

    def _layout(
        self, request: TableRequest, arrays: list[np.ndarray], *, sparse: bool
    ) -> tuple[np.ndarray, list[int], TableLayout]:
        variables, levels = request.variables, request.levels
        codes = cached_codes(self.data, variables, levels, self.partition_id, request.missing)
        cards = [len(levels[v]) for v in variables]
        max_cells = None if sparse else int(request.max_cells)
        batch = np.ascontiguousarray(arrays[0])
        queries_hash = hashlib.sha1(batch.tobytes()).hexdigest()
        key = (queries_hash, batch.shape, batch.dtype.str, *cards, max_cells)
        layout = _LAYOUTS.get(key)
        if layout is None:  # decoded and laid out once per batch in this process
            layout = self._refusing(make_layout, batch, cards, max_cells, normalised=True)
            _LAYOUTS.clear()
            _LAYOUTS[key] = layout
        width = int((batch >= 0).sum(axis=1).max()) if batch.ndim == 2 and batch.size else None
        if sparse:  # at most one entry per row and query, two numbers each (as the server plans)
            sizes = np.minimum(np.diff(layout.offsets), len(codes))
            self.allocating(SPARSE_TABLES, 2 * int(sizes.sum()), width)
        else:
            self.allocating(TABLES, layout.total, width)
        return codes, cards, layout

    @property
    def label(self) -> str:
        return f"client {self.partition_id}"

    def _refusing(self, count: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a counting step; a table it cannot count is a refusal with its cause (the run
        stops with it), never a dropout."""
        try:
            return count(*args, **kwargs)
        except (TableTooLargeError, ValueError, MemoryError) as err:
            raise ProtocolError(
                self.partition_id,
                f"cannot count the tables: {err}",
                kind="the tables cannot be counted (too large, or a malformed batch)",
            ) from None

    @action(TABLES, TableRequest, compact=True)
    def tables(self, request: TableRequest, arrays: list[np.ndarray]) -> HandlerResult:
        charge = None if request.privacy is None else PrivacyCharge.decode(request.privacy)
        if charge is not None and charge.tables != len(arrays[0]):
            # the charge the site logged must count these tables
            raise ProtocolError(
                self.partition_id,
                f"the request's privacy charge counts {charge.tables} tables, it asks "
                f"{len(arrays[0])}",
            )
        if charge is not None and (charge.clip is not None or charge.resolution is not None):
            # a row moves a count by one: a clip bound the site counted would understate it
            raise ProtocolError(
                self.partition_id,
                "the request's privacy charge names a clip bound or a resolution, but counts "
                "are not clipped",
            )
        vector, _ = self._tables(request, arrays)
        if charge is not None and charge.shares is not None:
            if charge.cells != vector.size:
                raise ProtocolError(
                    self.partition_id,
                    f"the request's privacy charge counts {charge.cells} cells, its tables have "
                    f"{vector.size}",
                )
            # this site's share of the noise, from its own randomness, before SecAgg+ masks it
            share = charge.variance / charge.shares
            vector = vector + discrete_gaussian(share, vector.size, site_noise())
        return [vector], {}

    @action(SPARSE_TABLES, TableRequest, compact=True)
    def sparse_tables(self, request: TableRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """The nonzero cells of the batch's tables (flat index, count): for batches whose dense
        tables would be larger than the data (the server merges them)."""
        indices, counts = self._count(sparse_local_tables, request, arrays, sparse=True)
        return [indices, counts], {}

    @action(MARGINS, TableRequest)
    def margins(self, request: TableRequest, arrays: list[np.ndarray]) -> HandlerResult:
        vector, layout = self._tables(request, arrays)
        return [table_marginals(vector, layout).astype(np.int64)], {}

    @action(SKETCH, SketchRequest)
    def sketch(self, request: SketchRequest, arrays: list[np.ndarray]) -> HandlerResult:
        vector, layout = self._tables(request, arrays)
        expected = arrays[1]
        share = client_sketch(
            vector,
            expected,
            layout,
            int(request.clients),
            int(request.seed),
            int(request.sketch_length),
        )
        return [np.rint(share * SKETCH_SCALE).astype(np.int64)], {}

    @action(MOMENTS, MomentsRequest)
    def moments(self, request: MomentsRequest, arrays: list[np.ndarray]) -> HandlerResult:
        variables = request.variables
        frame = self.data
        if request.missing == "listwise":
            frame = complete_rows(frame, variables, self.partition_id)
        data = frame[variables].to_numpy(dtype=np.float64)
        m = local_moments(data, variables=variables, client=f"client {self.partition_id}")
        return [m.to_vector()], {}

    @action(QUERY_MOMENTS, MomentsRequest)
    def moments_per_test(self, request: MomentsRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """Each test's moments over this client's rows complete on its variables (Fisher-z with
        test-wise deletion)."""
        variables = request.variables
        data = self.data[variables].to_numpy(dtype=np.float64)
        try:
            blocks = query_moments(data, decode_queries(arrays[0]), variables)
        except ValueError as err:  # a refusal with its cause (the run stops), not a dropout
            problem = f"cannot compute the tests' moments: {err}"
            raise ProtocolError(self.partition_id, problem) from None
        return [blocks], {}
