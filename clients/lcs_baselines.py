"""Client side of FedLCS's baselines (mirror of :mod:`fedcausal_flwr.strategies.lcs_baselines`).

``lcs_local`` (``fedlcs-local``) runs the whole FedLCS search on the site's rows; ``raw_data``
(``lcs-pooled``) is inherited and sends them.
"""

from __future__ import annotations

import numpy as np

from fedcausal_flwr.clients.base import action
from fedcausal_flwr.clients.fedlcs import FedLCSClient
from fedcausal_flwr.discovery.lcs import LCSOptions, full_graph, local_structure
from fedcausal_flwr.federation.messages import ProtocolError
from fedcausal_flwr.protocols.fedlcs import LCS_LOCAL


class LCSBaselineClient(FedLCSClient):
    """A FedLCS site that can also run the search alone or hand over its rows."""

    @action(LCS_LOCAL)
    def lcs_local(self, payload: dict, arrays: list[np.ndarray]):
        """``fedlcs-local``: the whole search on this site's rows; one p x p graph per target."""
        names = payload["variables"]
        targets = payload.get("targets")
        if not isinstance(targets, list) or not targets:
            raise ProtocolError(self.partition_id, "the request carries no list of targets")
        if any(not 0 <= int(t) < len(names) for t in targets):
            raise ProtocolError(
                self.partition_id, f"targets {targets} name a variable outside 0..{len(names) - 1}"
            )
        try:
            options = LCSOptions(**payload["lcs"])
        except (TypeError, ValueError) as err:
            raise ProtocolError(self.partition_id, f"bad LCS options: {err}") from None
        oracle = self._oracle(payload)
        found, _ = local_structure(oracle, [int(t) for t in targets], options)
        stack = np.stack(
            [full_graph(found[int(t)].graph(names), names).marks for t in targets]
        ).astype(np.int8)
        return [stack], {"tests": oracle.n_computed}
