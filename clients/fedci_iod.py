"""fedCI-IOD client: fedCI's client unchanged (:mod:`fedcausal_flwr.clients.fedci`).

A site holds only its own columns; the server asks it only for models over variables it observes
(the participants of each test), and it answers ``glm`` (federated IRLS blocks) or ``local_lrt``
(its own p-values for Fisher's method) exactly as for fedCI-PC / fedCI-FCI.
"""

from __future__ import annotations

from fedcausal_flwr.clients.fedci import FedCIClient


class FedCIIODClient(FedCIClient):
    """One site's data, answering fedCI's actions for IOD's tests."""


__all__ = ["FedCIIODClient"]
