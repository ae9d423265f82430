"""FedLCS client: PCsimple layers and separating-set p-values on its own rows.

Mirror of :mod:`fedcausal_flwr.strategies.fedlcs` (wire protocol:
:mod:`fedcausal_flwr.protocols.fedlcs`). Flower builds a new client object per message, so the local
oracle (and its test cache) is remembered per data frame,
like the table codes (:func:`~fedcausal_flwr.clients.base.cached_codes`), and scoped to the run (the
server's ``session`` token): a test asked in two rounds of one run (e.g. by two targets' searches)
is computed once. The reply meta (:class:`~fedcausal_flwr.protocols.discrete.ComputedTests`) is the
number of tests computed for this message. The baselines' client (:class:`LCSBaselineClient`) adds
``lcs_local`` (``fedlcs-local``: the whole search on the site's rows); ``raw_rows``
(``lcs-pooled``) it inherits. Requests are the records of :mod:`fedcausal_flwr.protocols.fedlcs`.
"""

from __future__ import annotations

import json

import numpy as np

from fedcausal_flwr.clients.base import FrameCache, HandlerResult, action
from fedcausal_flwr.clients.discrete import DiscreteClient
from fedcausal_flwr.discovery.lcs import local_structure
from fedcausal_flwr.discovery.lcs_payload import full_graph
from fedcausal_flwr.discovery.lcs_sepsets import answer_sepsets
from fedcausal_flwr.discovery.lcs_skeleton import answer_prune
from fedcausal_flwr.discovery.lcs_state import LCSOptions, PruneJob
from fedcausal_flwr.discovery.sepset_choice import SepsetJob
from fedcausal_flwr.federation.core.messages import ProtocolError
from fedcausal_flwr.protocols.discrete import ComputedTests
from fedcausal_flwr.protocols.fedlcs import (
    LCS_LOCAL,
    LCS_PRUNE,
    LCS_SEPSETS,
    LCSLocalRequest,
    LCSPruneRequest,
    LCSScope,
    LCSSepsetsRequest,
)
from fedcausal_flwr.stats.batch_oracle import CIOracle

_ORACLES = FrameCache()


class FedLCSClient(DiscreteClient):
    """One site's data; answers ``lcs_prune`` and ``lcs_sepsets`` with local G2/chi2 tests."""

    def lcs_oracle(self, request: LCSScope) -> CIOracle:
        """The site's CI oracle for this request, kept for the life of the data frame."""
        names = request.variables
        levels = [request.levels[v] for v in names]
        scope = [names, levels, request.test, request.reliability, request.run_token]
        key = json.dumps(scope, default=str)
        return _ORACLES.get(self.data, key, lambda: self._oracle(request))

    def _flag(self, value: object, name: str) -> bool:
        """The request's flag ``name`` (``value``), checked to be a boolean."""
        if not isinstance(value, bool):
            raise ProtocolError(self.partition_id, f"{name} must be true or false, got {value!r}")
        return value

    def _jobs(self, request: LCSPruneRequest | LCSSepsetsRequest, width: int) -> list:
        jobs = request.jobs
        p = len(request.variables)
        if not isinstance(jobs, list):
            raise ProtocolError(self.partition_id, "the request carries no list of jobs")
        out: list[PruneJob | SepsetJob] = []
        for job in jobs:
            if len(job) != width:
                raise ProtocolError(self.partition_id, f"malformed job {job!r}")
            ids = [*job[:-2], *job[-2]] if width == 3 else [job[0], job[1], *job[2]]
            if any(not 0 <= int(v) < p for v in ids):
                raise ProtocolError(
                    self.partition_id, f"job {job!r} names a variable outside 0..{p - 1}"
                )
            pool = tuple(int(v) for v in job[-2])
            out.append((*(int(v) for v in job[:-2]), pool, int(job[-1])))  # type: ignore[arg-type]
        return out

    @action(LCS_PRUNE, LCSPruneRequest)
    def lcs_prune(self, request: LCSPruneRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """PCsimple layer ``l`` of every job's candidate set: one keep flag per candidate."""
        oracle = self.lcs_oracle(request)
        before = oracle.n_computed
        jobs = self._jobs(request, 3)
        stable = self._flag(request.stable, "stable")
        kept = answer_prune(oracle, jobs, float(request.alpha), stable)
        flags = [int(v in k) for (_, cpc, _), k in zip(jobs, kept, strict=True) for v in cpc]
        return [np.array(flags, dtype=np.uint8)], ComputedTests(oracle.n_computed - before)

    @action(LCS_SEPSETS, LCSSepsetsRequest)
    def lcs_sepsets(self, request: LCSSepsetsRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """p-values of every subset of size ``l`` of the pool; NaN unless independent (all of
        them if ``reveal_all``, the ``fisher`` rule)."""
        oracle = self.lcs_oracle(request)
        before = oracle.n_computed
        reveal = self._flag(request.reveal_all, "reveal_all")
        values = answer_sepsets(oracle, self._jobs(request, 4), float(request.alpha), reveal)
        return [values.astype(np.float64)], ComputedTests(oracle.n_computed - before)


class LCSBaselineClient(FedLCSClient):
    """A FedLCS site that can also run the search alone or hand over its rows."""

    @action(LCS_LOCAL, LCSLocalRequest)
    def lcs_local(self, request: LCSLocalRequest, arrays: list[np.ndarray]) -> HandlerResult:
        """``fedlcs-local``: the whole search on this site's rows; one p x p graph per target."""
        names = request.variables
        targets = request.targets
        if not isinstance(targets, list) or not targets:
            raise ProtocolError(self.partition_id, "the request carries no list of targets")
        if any(not 0 <= int(t) < len(names) for t in targets):
            raise ProtocolError(
                self.partition_id, f"targets {targets} name a variable outside 0..{len(names) - 1}"
            )
        try:
            options = LCSOptions(**request.lcs)
        except (TypeError, ValueError) as err:
            raise ProtocolError(self.partition_id, f"bad LCS options: {err}") from None
        oracle = self._oracle(request)
        found, _ = local_structure(oracle, [int(t) for t in targets], options)
        stack = np.stack(
            [full_graph(found[int(t)].graph(names), names).marks for t in targets]
        ).astype(np.int8)
        return [stack], ComputedTests(oracle.n_computed)
