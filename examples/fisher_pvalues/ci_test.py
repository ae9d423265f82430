"""The server side of the fisher-pvalues example: a federated CI test for PC's search.

Each batch of PC's CI tests goes to every site in one ``local_pvalues`` request; the server
combines the sites' p-values of each test by Fisher's method (``-2 sum log p`` against chi2
with ``2K`` degrees of freedom). The search, its options, the cache, dropouts and the result are
the package's (:class:`~fedcausal_flwr.strategies.search.SearchStrategy`); this file only says how
a batch is answered. Run it::

    PYTHONPATH=examples python -m fisher_pvalues.ci_test
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import chi2

from fedcausal_flwr.federation.core.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.core.registry import register_method
from fedcausal_flwr.options import OptionSet
from fedcausal_flwr.protocols.queries import encode_queries
from fedcausal_flwr.stats.batch_oracle import Query
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import InputNeeds, Options, ProtocolStrategy
from fedcausal_flwr.strategies.ci_tests import FederatedCITest
from fedcausal_flwr.strategies.search import SearchMethod, SearchStrategy
from fisher_pvalues.client import DISCLOSURES, LOCAL_PVALUES, LocalPValuesRequest


class FisherTests(FederatedCITest):
    """Fisher's combination of the sites' own chi2 or G2 p-values."""

    ACTIONS = (LOCAL_PVALUES,)

    def __init__(self, options: Options) -> None:
        super().__init__()
        self.options = options
        self.levels: dict[str, list] = {}

    def input_needs(self) -> InputNeeds:
        return InputNeeds(values="discrete", test=self.options.test)

    def begin(self, strategy: ProtocolStrategy) -> list[str]:
        self.levels = {v: levels or [] for v, levels in strategy.global_levels().items()}
        return strategy.variables

    def request(self, strategy: ProtocolStrategy, queries: Sequence[Query]) -> Request:
        asked = LocalPValuesRequest(strategy.variables, self.levels, self.options.test)
        return Request(LOCAL_PVALUES, asked, arrays=[encode_queries(queries)])

    def answer(
        self, strategy: ProtocolStrategy, request: Request, replies: list[Reply],
        queries: Sequence[Query] | None,
    ) -> np.ndarray:  # fmt: skip
        assert queries is not None  # the batch asked
        for reply in replies:  # a site's reply is checked before it is used
            if reply.arrays[0].shape != (len(queries),):
                raise ClientProtocolError(f"client {reply.client} sent a reply of the wrong shape")
        local = np.vstack([reply.arrays[0] for reply in replies])  # sites x tests
        statistic = -2.0 * np.log(np.clip(local, 1e-300, 1.0)).sum(axis=0)
        self.batches.append({"round": strategy.current_round, "tests": len(queries)})
        return chi2.sf(statistic, df=2 * len(replies))

    def report(self, result: Any = None) -> dict:
        return {"tests": len(self.cache), "batches": self.batches}


OPTIONS = OptionSet(
    (shared.alpha(0.05), shared.test("chi2", ("chi2", "g2")), shared.max_depth(),
     *shared.search_engine("pc")),
    checks=(shared.search_engine_problem,),
)  # fmt: skip
METHOD = SearchMethod("fisher-pc", OPTIONS, "pc", FisherTests)
register_method(
    "fisher-pc",
    lambda options: SearchStrategy(options, method=METHOD),
    "fisher_pvalues.client:FisherClient",  # imported where a site answers
    options=OPTIONS,
    disclosures=DISCLOSURES,
    description="example: PC-stable with Fisher's combination of the sites' p-values "
    "(docs/adding-a-ci-test.md)",
)


if __name__ == "__main__":
    import fedcausal_flwr

    result = fedcausal_flwr.run(method="fisher-pc", network="asia", samples=4000, clients=3)
    print(result.graph)
    print(result.metrics)
