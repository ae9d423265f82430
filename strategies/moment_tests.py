"""Fisher-z CI tests from summed Gaussian moments (FedPC/FedFCI with ``test="fisherz"``).

A :class:`~fedcausal_flwr.strategies.ci_tests.FederatedCITest`: one round of summed moments
``n, sum x, sum x x^T`` before the search, after which every Fisher-z test runs on the server;
with test-wise deletion (``missing="testwise"``) each batch asks every test's moments over the
rows complete on its variables instead. Exact mode only: SecAgg+ sums 32-bit integers, and the
moments are floats. The server learns each client's moments (wire protocol:
:mod:`fedcausal_flwr.protocols.fedpc`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from fedcausal_flwr.data.inputs import Fix, InputError
from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.core.protocol import ProtocolStrategy
from fedcausal_flwr.protocols.fedpc import MOMENTS, QUERY_MOMENTS, MomentsRequest
from fedcausal_flwr.protocols.queries import encode_queries
from fedcausal_flwr.stats.batch_oracle import Query
from fedcausal_flwr.stats.gaussian import (
    GaussianMoments,
    TooFewSamplesError,
    fisher_z_from_query_moments,
    query_block_sizes,
)
from fedcausal_flwr.stats.oracles import GaussianOracle
from fedcausal_flwr.strategies.base import Options
from fedcausal_flwr.strategies.table_tests import SummedTests

if TYPE_CHECKING:
    from fedcausal_flwr.discovery.fci import FCIResult
    from fedcausal_flwr.discovery.pc import PCResult


class MomentTests(SummedTests):
    """Fisher-z tests on the clients' summed moments (see the module docstring)."""

    ACTIONS = (MOMENTS, QUERY_MOMENTS)

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        #: the pooled moments, once they are in (not with test-wise deletion)
        self.moments: GaussianMoments | None = None
        self._oracle: GaussianOracle | None = None

    def input_needs(self) -> InputNeeds:
        return InputNeeds(
            values="numeric",
            test="Fisher-z",
            value_fix=Fix("for discrete data use {}", (("test", "chi2"),)),
            missing=self.options.missing,
        )

    def begin(self, strategy: ProtocolStrategy) -> list[str]:
        return strategy.variables

    def tests_asked(self, result: PCResult | FCIResult | None) -> int:
        assert result is not None  # the search has run
        return result.n_tests

    # ------------------------------------------------------------------ protocol
    def _request(self, strategy: ProtocolStrategy) -> MomentsRequest:
        return MomentsRequest(strategy.variables, self.options.missing)

    def before_search(self, strategy: ProtocolStrategy) -> Request | None:
        """The pooled moments, once, unless each test needs its own complete rows."""
        if self.options.missing == "testwise" or self.moments is not None:
            return None
        return Request(MOMENTS, self._request(strategy))

    @property
    def answers_on_server(self) -> bool:
        return self.moments is not None

    def answer_on_server(self, strategy: ProtocolStrategy, queries: Sequence[Query]) -> np.ndarray:
        assert self._oracle is not None  # the moments are in
        self.batches.append({"round": strategy.current_round, "tests": len(queries)})
        try:
            return self._oracle.test_batch(queries)
        except TooFewSamplesError as err:
            raise self._too_few_rows(strategy, err) from None

    def request(self, strategy: ProtocolStrategy, queries: Sequence[Query]) -> Request:
        """Test-wise deletion: each batch's moments, test by test."""
        return Request(QUERY_MOMENTS, self._request(strategy), arrays=[encode_queries(queries)])

    def answer(
        self, strategy: ProtocolStrategy, request: Request, replies: list[Reply],
        queries: Sequence[Query] | None,
    ) -> np.ndarray | None:  # fmt: skip
        if request.action == MOMENTS:
            p = len(strategy.variables)
            total: GaussianMoments | None = None
            for reply in replies:  # partition order: deterministic float sums
                m = GaussianMoments.from_vector(reply.arrays[0], p)
                total = m if total is None else total + m
            assert total is not None  # a round has at least one reply
            self.moments = total
            self._oracle = GaussianOracle.from_moments(total, strategy.variables)
            return None
        assert queries is not None  # the asked batch
        summed = np.zeros(int(query_block_sizes(queries).sum()))
        for reply in replies:  # partition order: deterministic float sums
            vector = np.asarray(reply.arrays[0], dtype=np.float64)
            if vector.shape != summed.shape:
                raise ClientProtocolError(
                    f"client {reply.client} sent query moments of shape {vector.shape}, "
                    f"expected {summed.shape}"
                )
            summed += vector
        try:
            pvalues, _ = fisher_z_from_query_moments(summed, queries, strategy.variables)
        except TooFewSamplesError as err:
            raise self._too_few_rows(strategy, err) from None
        self.batches.append({"round": strategy.current_round, "tests": len(queries)})
        return np.asarray(pvalues)

    def _too_few_rows(self, strategy: ProtocolStrategy, err: TooFewSamplesError) -> InputError:
        """The search reached a Fisher-z test the pooled rows cannot carry: say how many rows it
        needs and which depth cap would stop before it."""
        x, y, _ = err.query
        names = strategy.variables
        test = f"{names[x]} and {names[y]}" + (f" given {err.k} variables" if err.k else "")
        held = (
            "rows complete on its variables"
            if self.options.missing == "testwise"
            else "rows in all"
        )
        problem = (
            f"the clients hold {err.n} {held}, but {strategy.name}'s Fisher-z test of {test} "
            f"needs more than {err.k + 3}"
        )
        if err.n < 4:
            fix = Fix("give at least 4 rows, or discretise the columns for {}", (("test", "chi2"),))
            return InputError(problem, fix=fix, entry_point=strategy.entry_point)
        deepest = (("max_depth", err.n - 4),)
        fix = Fix("give more rows, or cap the conditioning sets with {}", deepest)
        return InputError(problem, fix=fix, entry_point=strategy.entry_point)
