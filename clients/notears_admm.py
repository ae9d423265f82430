"""Client of NOTEARS-ADMM: level counts of its discrete columns, then one local ADMM subproblem per
round.

Mirror of :mod:`fedcausal_flwr.strategies.notears_admm` (wire protocol:
:mod:`fedcausal_flwr.protocols.notears_admm`). The client turns its columns into numbers as the
server says (decimal columns as they are; discrete columns
by the pooled frequency map, or as their integer values), centres them on its own means and keeps
``X_k'X_k`` per frame (:class:`~fedcausal_flwr.clients.base.FrameCache`). Its ADMM dual ``B_k``
and its last local matrix ``W_k`` live in the node's ``context.state`` (Flower persists it
between messages, in a simulation and a deployment alike): at iteration ``t`` the client first
applies the previous dual update ``B_k += rho (W_k - Z)`` with the broadcast ``Z`` (the server
does the same on its copy), then solves its subproblem. A repeated iteration (the request
re-issued after another client dropped out) starts again from the same dual. A client that has
lost its state (a restarted site) cannot continue: it fails, i.e. drops out.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from flwr.app import Array, ArrayRecord, ConfigRecord

from fedcausal_flwr.clients.base import (
    FrameCache,
    HandlerResult,
    ProtocolClient,
    action,
    encode_columns,
)
from fedcausal_flwr.discovery.notears import centred_gram, dual_step, local_step
from fedcausal_flwr.federation.core.messages import ProtocolError
from fedcausal_flwr.protocols.notears_admm import (
    ADMM_STEP,
    LEVEL_COUNTS,
    AdmmStepRequest,
    LevelCountsRequest,
)

#: the key of this client's ADMM state (its dual and last local matrix) in Flower's node state
STATE_KEY = "notears-admm"

STEP_ID = STATE_KEY + "-step"  # the config record naming the iteration the arrays belong to

_GRAMS = FrameCache()


class AdmmStateLost(RuntimeError):
    """The site no longer holds the ADMM state the next iteration needs (a dropout)."""


def numeric_columns(
    data: pd.DataFrame, variables: list[str], encoding: dict, client: int
) -> np.ndarray:
    """The ``n x d`` numbers the client fits: decimal columns as they are, the discrete columns of
    ``encoding["values"]`` by their level's number, the others (``as_numbers``) as floats."""
    missing = [v for v in variables if v not in data.columns]
    if missing:
        raise ProtocolError(client, f"columns {missing} are missing (the server asked for them)")
    values = np.empty((len(data), len(variables)))
    mapped = encoding.get("values", {})
    if mapped:
        names = [v for v in variables if v in mapped]
        codes = encode_columns(data, names, encoding["levels"], client)
        for j, name in enumerate(names):
            values[:, variables.index(name)] = np.asarray(mapped[name])[codes[:, j]]
    for j, name in enumerate(variables):
        if name in mapped:
            continue
        column = data[name]
        if not (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)):
            raise ProtocolError(client, f"column {name!r} holds {column.dtype} values, not numbers")
        values[:, j] = column.to_numpy(dtype=np.float64)
    return values


class NotearsAdmmClient(ProtocolClient):
    """One site's data; see :mod:`fedcausal_flwr.protocols.notears_admm` for the actions."""

    def _gram(self, request: AdmmStepRequest) -> np.ndarray:
        variables = list(request.variables)
        encoding = request.encoding
        key = json.dumps([variables, encoding], sort_keys=True, default=str)
        return _GRAMS.get(
            self.data,
            key,
            lambda: centred_gram(
                numeric_columns(self.data, variables, encoding, self.partition_id)
            ),
        )

    @action(LEVEL_COUNTS, LevelCountsRequest)
    def level_counts(self, request: LevelCountsRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """How often each level of each asked column occurs here (one ``np.bincount``), in the
        order of the broadcast level lists; summed by the server."""
        variables = list(request.variables)
        levels = request.levels
        codes = encode_columns(self.data, variables, levels, self.partition_id)
        sizes = np.array([len(levels[v]) for v in variables], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        counts = np.bincount((codes + offsets).ravel(), minlength=int(sizes.sum()))
        return [counts.astype(np.int64)], {}

    @action(ADMM_STEP, AdmmStepRequest)
    def admm_step(self, request: AdmmStepRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """The local subproblem of iteration ``t`` with the broadcast consensus ``Z``: reply
        ``W_k``."""
        d = len(request.variables)
        consensus = np.asarray(arrays[0], dtype=np.float64) if arrays else np.zeros(0)
        if consensus.shape != (d, d):
            raise ProtocolError(
                self.partition_id, f"the broadcast consensus is {consensus.shape}, expected {d}x{d}"
            )
        rows, rho = int(request.rows), float(request.rho)
        if rows < len(self.data) or not rho > 0:
            raise ProtocolError(
                self.partition_id,
                f"bad request: {rows} pooled rows (this site has {len(self.data)}), rho {rho}",
            )
        iteration = int(request.iteration)
        dual = self._dual(iteration, consensus, request.dual_rho)
        zero_diagonal = bool(request.zero_diagonal)
        local = local_step(self._gram(request) / rows, consensus, dual, rho, zero_diagonal)
        self._keep(iteration, dual, local)
        return [local], {}

    # ------------------------------------------------------------------ state
    def _dual(self, iteration: int, consensus: np.ndarray, dual_rho: float | None) -> np.ndarray:
        """``B_k`` before iteration ``iteration``: zero at the first, the kept one when the
        iteration is asked again, else the kept one updated with the broadcast ``Z``."""
        if iteration == 1:
            return np.zeros_like(consensus)
        state = None if self.context is None else self.context.state
        kept = -1
        if state is not None and STEP_ID in state.config_records:
            kept = int(str(state.config_records[STEP_ID]["iteration"]))
        if kept not in (iteration, iteration - 1) or state is None:
            raise AdmmStateLost(
                f"client {self.partition_id} holds no ADMM state for iteration {iteration - 1} "
                f"(it has {'none' if kept < 0 else f'iteration {kept}'}); it cannot continue"
            )
        record = state.array_records[STATE_KEY]
        dual = record["dual"].numpy()
        if kept == iteration:  # the same iteration again (re-issued after a dropout)
            return dual
        if dual_rho is None:
            raise ProtocolError(self.partition_id, "the request has no dual_rho after iteration 1")
        return dual_step(dual, float(dual_rho), record["local"].numpy(), consensus)

    def _keep(self, iteration: int, dual: np.ndarray, local: np.ndarray) -> None:
        if self.context is None:
            return
        state = self.context.state
        state.array_records[STATE_KEY] = ArrayRecord({"dual": Array(dual), "local": Array(local)})
        state.config_records[STEP_ID] = ConfigRecord({"iteration": iteration})
