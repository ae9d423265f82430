"""The site side of the marginal-skeleton example, and the one message both sides share.

A built-in method keeps its records in ``fedcausal_flwr/protocols/<method>.py`` so that a site
never imports server code; this plugin keeps its one record here, with the site that answers it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedcausal_flwr.clients.base import HandlerResult, ProtocolClient, action, cached_codes
from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.payload import Payload
from fedcausal_flwr.protocols.queries import decode_queries
from fedcausal_flwr.stats.contingency import local_tables, make_layout

PAIR_TABLES = "pair_tables"
#: what the site's reply discloses: tables the server only needs summed (SecAgg+ in a secure run)
DISCLOSURES = {PAIR_TABLES: disclosure.SUM}


@dataclass(frozen=True)
class PairTablesRequest(Payload):
    """``pair_tables``: count each pair's table over the global level sets; the pairs travel as
    a query matrix (the request's one array)."""

    variables: list[str]
    levels: dict[str, list]


class MarginalClient(ProtocolClient):
    """Counts, over its own rows, the table of every pair the server asks about."""

    @action(PAIR_TABLES, PairTablesRequest)
    def pair_tables(self, request: PairTablesRequest, arrays: list[np.ndarray]) -> HandlerResult:
        names, levels = request.variables, request.levels
        codes = cached_codes(self.data, names, levels, self.partition_id)
        cards = [len(levels[v]) for v in names]
        layout = make_layout(decode_queries(arrays[0]), cards)
        tables, _ = local_tables(codes, cards, layout, variables=names)
        return [tables], {}
