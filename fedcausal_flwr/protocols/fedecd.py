"""FedECD's own actions (its skeleton layers use :data:`fedcausal_flwr.protocols.voting.PRUNE`).

The wire protocol is documented in :mod:`fedcausal_flwr.strategies.fedecd`.
"""

from __future__ import annotations

BOOTSTRAP_WEIGHTS = "bootstrap_weights"  # bootstrap mean independence evidence per removed edge
ORIENT = "orient"  # the directions voted over the client's bootstrap BDeu searches
ACTIONS = (BOOTSTRAP_WEIGHTS, ORIENT)
