"""FedCDnv client: FCI on its own variables, then C-Update and the Eq. (2) p-value transform.

Mirror of :mod:`fedcausal_flwr.strategies.tpss` (wire protocol:
:mod:`fedcausal_flwr.protocols.tpss`). The client works on the columns it holds, in the server's
global variable order, with G2/chi2 tests over the global
level sets. Round 2 needs round 1's PAG, p-values and separating sets: they are kept in the
node's ``context.state`` (Flower persists it between messages) under a key of the request's
options, and recomputed if absent (FCI is deterministic, so the result is the same).
"""

from __future__ import annotations

import json

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord

from fedcausal_flwr.clients.base import HandlerResult, ProtocolClient, action, cached_codes
from fedcausal_flwr.discovery.driver import drive
from fedcausal_flwr.discovery.tpss import transform_pvalues
from fedcausal_flwr.discovery.tpss_local import LocalFCI, local_fci
from fedcausal_flwr.discovery.tpss_update import c_update_steps
from fedcausal_flwr.federation.core.messages import ProtocolError
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.protocols.queries import encode_queries
from fedcausal_flwr.protocols.tpss import (
    FCDNV_INIT,
    FCDNV_UPDATE,
    LocalFciReply,
    LocalFciRequest,
    UpdateReply,
    UpdateRequest,
)
from fedcausal_flwr.stats.batch_oracle import CIOracle
from fedcausal_flwr.stats.oracles import DiscreteOracle

STATE_KEY = "fedcdnv-local-fci"  # the arrays
STATE_ID = "fedcdnv-local-fci-key"  # which request they answer (one RecordDict namespace)


class FedCDnvClient(ProtocolClient):
    """One site's data over its own variables; answers ``fcdnv_init`` and ``fcdnv_update``."""

    def own_variables(self, request: LocalFciRequest) -> list[str]:
        """The site's columns in the server's global order (every column must be known)."""
        variables = list(request.variables)
        known = set(variables)
        unknown = [c for c in self.data.columns if str(c) not in known]
        if unknown:
            raise ProtocolError(
                self.partition_id, f"columns {unknown} are missing from the server's variables"
            )
        columns = {str(c) for c in self.data.columns}
        return [v for v in variables if v in columns]

    def _oracle(self, request: LocalFciRequest, variables: list[str]) -> CIOracle:
        """The site's CI test over ``variables`` (tests replace this with an oracle)."""
        cards = [len(request.levels[v]) for v in variables]
        codes = cached_codes(self.data, variables, request.levels, self.partition_id)
        return DiscreteOracle(
            codes, cards, variables, test=request.test, client=f"client {self.partition_id}"
        )

    def _fci(self, request: LocalFciRequest, variables: list[str], oracle: CIOracle) -> LocalFCI:
        """Round 1's local FCI: from ``context.state`` when this run already computed it."""
        key = json.dumps(
            [
                variables,
                [request.levels[v] for v in variables],
                request.test,
                request.alpha,
                request.fci,
            ],
            default=str,
            sort_keys=True,
        )
        state = None if self.context is None else self.context.state
        if state is not None and STATE_ID in state.config_records:
            record = state.config_records[STATE_ID]
            if record.get("key") == key:
                arrays = state.array_records[STATE_KEY]
                rows = arrays["sepsets"].numpy()
                return LocalFCI(
                    graph=Graph(tuple(variables), arrays["pag"].numpy(), "PAG"),
                    max_pvalues=arrays["max_p"].numpy(),
                    sepsets={
                        (int(r[0]), int(r[1])): tuple(int(v) for v in r[2:] if v >= 0) for r in rows
                    },
                    n_tests=int(str(record.get("tests", 0))),  # what computing it cost, once
                )
        result = local_fci(oracle, float(request.alpha), **request.fci)
        if state is not None:
            rows = encode_queries([(x, y, s) for (x, y), s in sorted(result.sepsets.items())])
            state.array_records[STATE_KEY] = ArrayRecord(
                {
                    "pag": Array(result.graph.marks.astype(np.int8)),
                    "max_p": Array(result.max_pvalues.astype(np.float64)),
                    "sepsets": Array(rows),
                }
            )
            state.config_records[STATE_ID] = ConfigRecord({"key": key, "tests": result.n_tests})
        return result

    @action(FCDNV_INIT, LocalFciRequest)
    def init(self, request: LocalFciRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """C-InitPag: FCI on the site's variables; send their global ids and the PAG."""
        variables = self.own_variables(request)
        oracle = self._oracle(request, variables)
        result = self._fci(request, variables, oracle)
        ids = np.array([request.variables.index(v) for v in variables], dtype=np.int64)
        meta = LocalFciReply(int(len(self.data)), int(result.n_tests))
        return [ids, result.graph.marks.astype(np.int8)], meta

    @action(FCDNV_UPDATE, UpdateRequest)
    def update(self, request: UpdateRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """C-Update with the broadcast G0; send the updated PAG, and (``send_statistics``) the
        transformed p-values and the separating sets in global ids."""
        variables = self.own_variables(request)
        d = len(request.variables)
        g0 = np.asarray(arrays[0]) if arrays else np.zeros(0)
        if g0.shape != (d, d):
            raise ProtocolError(
                self.partition_id, f"the broadcast G0 is {g0.shape}, expected {d}x{d}"
            )
        oracle = self._oracle(request, variables)
        fci_result = self._fci(request, variables, oracle)
        ids = np.array([request.variables.index(v) for v in variables], dtype=np.int64)
        before = oracle.n_computed
        update = drive(
            c_update_steps(
                fci_result.graph,
                ids,
                g0,
                float(request.alpha),
                request.update_depth,
                bool(request.update_rules),
                fci_result.sepsets,
            ),
            oracle,
        )
        meta = UpdateReply(
            int(oracle.n_computed - before),
            imported=len(update.imported),
            propagated=len(update.propagated),
            conflicts=len(update.conflicts),
        )
        out: list[np.ndarray] = [ids, update.graph.marks.astype(np.int8)]
        if request.send_statistics:
            ptil = transform_pvalues(
                fci_result.max_pvalues,
                float(request.alpha),
                float(request.theta1),
                float(request.theta2),
            )
            rows = [
                (int(ids[x]), int(ids[y]), tuple(int(ids[v]) for v in s))
                for (x, y), s in sorted(fci_result.sepsets.items())
            ]
            out += [ptil.astype(np.float64), encode_queries(rows)]
        return out, meta
