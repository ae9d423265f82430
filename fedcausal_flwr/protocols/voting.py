"""Actions answered by the voting client: local graphs, local p-values, layer pruning, raw data.

The wire protocols are documented in :mod:`fedcausal_flwr.strategies.voting` (``local_graph``,
``pvalues``, ``raw_data``), :mod:`fedcausal_flwr.strategies.fedpc_vote` (``prune``, ``pvalues``)
and :mod:`fedcausal_flwr.strategies.fedecd` (``prune``); ``raw_data`` is also the pooled reference
of :mod:`fedcausal_flwr.strategies.fedlcs`. Queries and separating sets travel as
:func:`fedcausal_flwr.protocols.queries.encode_queries` matrices.
"""

from __future__ import annotations

LOCAL_GRAPH = "local_graph"  # the client's own PC/FCI graph (endpoint marks)
PVALUES = "pvalues"  # the client's p-value of every query of a batch
PRUNE = "prune"  # one PC-stable level on the broadcast skeleton: kept edges + separating sets
RAW_DATA = "raw_data"  # the encoded rows themselves (centralised references only, not private)
ACTIONS = (LOCAL_GRAPH, PVALUES, PRUNE, RAW_DATA)
