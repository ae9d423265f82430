"""The client side of the methods on discrete data, owned by none of them.

A site's rows as codes over the global level sets the server sends, tested with a local G2/chi2
:class:`~fedcausal_flwr.stats.oracles.DiscreteOracle`, and the actions several methods ask
(:mod:`fedcausal_flwr.protocols.voting`): ``prune`` (one layer of the layer-wise vote: fedpc-vote,
FedECD), ``pvalues`` (local p-values of the server's tests), ``local_graph`` (a whole PC/FCI search
on the site's rows) and ``raw_rows`` (the rows themselves, for the pooled references). Each reads
its request as a record of :mod:`fedcausal_flwr.protocols.voting` (built on
:mod:`fedcausal_flwr.protocols.discrete`'s). Unlike a FedPC client, such a client *decides* things
on its own data.
"""

from __future__ import annotations

import numpy as np

from fedcausal_flwr.clients.base import HandlerResult, ProtocolClient, action, cached_codes
from fedcausal_flwr.discovery.fci import FCIResult, fci
from fedcausal_flwr.discovery.layerwise import prune_depth
from fedcausal_flwr.discovery.pc import PCResult, pc
from fedcausal_flwr.federation.core.messages import ProtocolError
from fedcausal_flwr.graphs.knowledge import Knowledge
from fedcausal_flwr.protocols.discrete import ComputedTests, DiscreteScope, LevelSets
from fedcausal_flwr.protocols.pooled import RAW_ROWS, EncodedRowsRequest
from fedcausal_flwr.protocols.queries import decode_queries, encode_queries
from fedcausal_flwr.protocols.voting import (
    LOCAL_GRAPH,
    PRUNE,
    PVALUES,
    LocalGraphRequest,
    PruneRequest,
    PValuesRequest,
)
from fedcausal_flwr.stats.oracles import DiscreteOracle


class DiscreteClient(ProtocolClient):
    """One site's data, answering the shared actions; each method's client (a subclass) adds
    its own, and its declared disclosures decide which of these it answers."""

    def _codes(self, request: LevelSets, missing: str = "error") -> np.ndarray:
        """The site's rows as codes over the request's level sets (``missing``: the mode)."""
        return cached_codes(
            self.data, request.variables, request.levels, self.partition_id, missing
        )

    def _oracle(
        self, request: DiscreteScope | PValuesRequest, rows: np.ndarray | None = None
    ) -> DiscreteOracle:
        """A local oracle over the global levels (on ``rows`` of the data if given).

        ``request.reliability`` (None: off): tests with fewer than that many rows per cell are
        unreliable, p = NaN, which every rule here reads as dependent.
        """
        variables = request.variables
        cards = [len(request.levels[v]) for v in variables]
        codes = self._codes(request)
        reliability = request.reliability
        return DiscreteOracle(
            codes if rows is None else codes[rows],
            cards,
            variables,
            test=request.test,
            reliability=None if reliability is None else float(reliability),
            client=f"client {self.partition_id}",
        )

    @action(PRUNE, PruneRequest)
    def prune(self, request: PruneRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """Prune the broadcast global skeleton at one conditioning-set size with local tests."""
        adjacency = np.asarray(arrays[0]).astype(bool)
        p = len(request.variables)
        if adjacency.shape != (p, p):
            raise ProtocolError(
                self.partition_id,
                f"the broadcast skeleton is {adjacency.shape}, expected {p}x{p} for the "
                f"variables {request.variables}",
            )
        oracle = self._oracle(request)
        depth = int(request.depth)
        skeleton = prune_depth(oracle, adjacency, depth, float(request.alpha))
        rows = [(x, y, s) for (x, y), sets in sorted(skeleton.sepsets.items()) for s in sets]
        kept = skeleton.adjacency.astype(np.uint8)
        return [kept, encode_queries(rows)], ComputedTests(oracle.n_computed)

    @action(PVALUES, PValuesRequest)
    def pvalues(self, request: PValuesRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """Local p-values of a batch of CI queries (the server combines them)."""
        oracle = self._oracle(request)
        return [oracle.test_batch(decode_queries(arrays[0])).astype(np.float64)], {}

    @action(LOCAL_GRAPH, LocalGraphRequest)
    def local_graph(self, request: LocalGraphRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """Run PC or FCI on the local data alone; send the endpoint-mark matrix."""
        oracle = self._oracle(request)
        depth = request.max_depth
        text = request.knowledge
        known = None if text is None else Knowledge.parse(text).matrix(request.variables)
        result: PCResult | FCIResult
        if request.algorithm == "pc":
            result = pc(oracle, float(request.alpha), max_depth=depth, knowledge=known)
        elif request.algorithm == "fci":
            result = fci(oracle, float(request.alpha), max_depth=depth, knowledge=known)
        else:
            raise ProtocolError(
                self.partition_id, f"unknown algorithm {request.algorithm!r}; expected pc|fci"
            )
        return [result.graph.marks.astype(np.int8)], ComputedTests(oracle.n_computed)

    @action(RAW_ROWS, EncodedRowsRequest)
    def raw_rows(self, request: EncodedRowsRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """The whole local data set, encoded over the global levels (pooled reference only)."""
        missing = "error" if request.missing is None else request.missing
        return [self._codes(request, missing).astype(np.int64)], {}
