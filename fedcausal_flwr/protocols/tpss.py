"""FedCDnv's actions (two rounds after ``hello``).

The wire protocol is documented in :mod:`fedcausal_flwr.strategies.tpss`; separating sets travel
as :func:`fedcausal_flwr.protocols.queries.encode_queries` matrices in global variable ids.
"""

from __future__ import annotations

FCDNV_INIT = "fcdnv_init"  # round 1: local FCI on the client's variables (C-InitPag)
FCDNV_UPDATE = "fcdnv_update"  # round 2: C-Update with the broadcast G0, then the statistics
ACTIONS = (FCDNV_INIT, FCDNV_UPDATE)
