"""The server side of the marginal-skeleton example: one round of summed pair tables.

After ``hello`` the server asks every site for the contingency table of each pair of columns
(one ``pair_tables`` request, summed: through SecAgg+ in a secure run), tests each summed table
with G2 or chi2, and keeps an edge wherever the pair is dependent. That is PC's skeleton at depth
0, the same graph as ``fedpc`` with ``max_depth=0``. Run it::

    PYTHONPATH=examples python -m marginal_skeleton.strategy
"""

from __future__ import annotations

import itertools

import numpy as np

from fedcausal_flwr.federation.core.messages import Reply, Request
from fedcausal_flwr.federation.core.registry import register_method
from fedcausal_flwr.graphs.graph import TAIL, Graph
from fedcausal_flwr.options import OptionSet
from fedcausal_flwr.protocols.queries import encode_queries
from fedcausal_flwr.stats.contingency import discrete_pvalues, make_layout
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import InputNeeds, MethodStrategy
from marginal_skeleton.client import DISCLOSURES, PAIR_TABLES, PairTablesRequest


class MarginalSkeletonStrategy(MethodStrategy):
    """Keeps an edge between two columns unless their summed table says independent."""

    name = "marginal-skeleton"
    OPTIONS = OptionSet((shared.alpha(0.05), shared.test("chi2", ("chi2", "g2"))))

    pvalues: np.ndarray | None = None  # each pair's p-value, once the sites have answered

    def input_needs(self) -> InputNeeds:
        return InputNeeds(values="discrete", test=self.options.test)

    def pairs(self) -> list[tuple[int, int, tuple]]:
        return [(x, y, ()) for x, y in itertools.combinations(range(len(self.variables)), 2)]

    def levels(self) -> dict[str, list]:
        return {v: levels or [] for v, levels in self.global_levels().items()}

    def next_request(self) -> Request | None:
        if self.pvalues is not None:
            return None  # one round: done
        asked = PairTablesRequest(self.variables, self.levels())
        return Request(PAIR_TABLES, asked, arrays=[encode_queries(self.pairs())], secure=True)

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        (summed,) = replies  # a secure request has one reply: the sum over the sites
        levels = self.levels()
        layout = make_layout(self.pairs(), [len(levels[v]) for v in self.variables])
        self.pvalues = discrete_pvalues(summed.arrays[0], layout, self.options.test)

    def result_payload(self) -> dict:
        assert self.pvalues is not None  # the one round has run
        graph = Graph.empty(self.variables)
        for (x, y, _), p in zip(self.pairs(), self.pvalues, strict=True):
            if p <= self.options.alpha:  # dependent: keep the edge, undirected
                graph.set_edge(x, y, TAIL, TAIL)
        return {"graph": graph, "variables": list(self.variables), "tests": len(self.pvalues)}


register_method(
    "marginal-skeleton",
    MarginalSkeletonStrategy,
    "marginal_skeleton.client:MarginalClient",  # imported where a site answers
    disclosures=DISCLOSURES,
    secure=lambda options: None,  # integer tables: SecAgg+ can sum them
    description="example: PC's depth-0 skeleton from summed pair tables (docs/adding-a-method.md)",
)


if __name__ == "__main__":
    import fedcausal_flwr

    result = fedcausal_flwr.run(method="marginal-skeleton", network="asia", samples=4000, clients=3)
    print(result.graph)
    print(result.metrics)
