"""FedLCS's actions (its pooled reference uses :data:`fedcausal_flwr.protocols.voting.RAW_DATA`).

The wire protocol is documented in :mod:`fedcausal_flwr.strategies.fedlcs`; the search that both
sides run lives in :mod:`fedcausal_flwr.discovery.lcs` (``LCSOptions`` travel as
:func:`~fedcausal_flwr.discovery.lcs.options_dict`).
"""

from __future__ import annotations

LCS_PRUNE = "lcs_prune"  # one PCsimple layer of several candidate sets: keep flags
LCS_SEPSETS = "lcs_sepsets"  # p-values of one level of the separating-set search (NaN if dependent)
LCS_LOCAL = "lcs_local"  # the whole search on the client's rows (fedlcs-local baseline)
ACTIONS = (LCS_PRUNE, LCS_SEPSETS, LCS_LOCAL)
