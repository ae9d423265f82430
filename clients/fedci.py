"""fedCI client (mirror of :mod:`fedcausal_flwr.strategies.fedci`): the GLM tests' client as it
is (:class:`~fedcausal_flwr.clients.glm_tests.GLMTestsClient`), answering ``glm`` and
``local_lrt``.
"""

from __future__ import annotations

from fedcausal_flwr.clients.glm_tests import GLMTestsClient


class FedCIClient(GLMTestsClient):
    """One site's data, for ``fedci-pc`` and ``fedci-fci``."""
