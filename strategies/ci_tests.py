"""A federated CI test as a part of a search: one interface, four implementations (Flower-free).

A constraint-based search (PC or FCI, :class:`~fedcausal_flwr.strategies.search.SearchStrategy`)
yields batches of CI tests ``(x, y, S)`` and needs their p-values. How a federation answers
them is a :class:`FederatedCITest`, the part the search holds:

* what a site computes: the requests it builds (:meth:`~FederatedCITest.request`), one
  protocol action each, answered by the site's action of that name (``clients/``);
* how the sums become p-values (:meth:`~FederatedCITest.answer`), in one round or several;
* what it discloses: the actions it may send (:attr:`~FederatedCITest.ACTIONS`), each declared
  with what the server learns in the protocol module (``DISCLOSURES``);
* how differential privacy enters: the server's side of it (:attr:`~FederatedCITest.privacy`,
  None when ``dp`` is off), which charges each request and noises each summed release.

The implementations: :class:`~fedcausal_flwr.strategies.table_tests.TableTests` (contingency
tables summed: exactly the pooled chi2/G2 test), :class:`~.table_tests.SketchTests` (FedC2SL's
random-projection sketch), :class:`~fedcausal_flwr.strategies.moment_tests.MomentTests`
(Fisher-z on summed moments) and :class:`~fedcausal_flwr.strategies.glm_tests.GLMTests` (fedCI's
likelihood-ratio tests of GLMs fitted by federated IRLS, or Fisher's combination). A new test
is one more class (docs/adding-a-ci-test.md).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.messages import ClientInfo, Reply, Request
from fedcausal_flwr.federation.core.protocol import ProtocolStrategy
from fedcausal_flwr.privacy.server_noise import ServerNoise
from fedcausal_flwr.stats.batch_oracle import Query

if TYPE_CHECKING:
    from fedcausal_flwr.discovery.fci import FCIResult
    from fedcausal_flwr.discovery.pc import PCResult


class FederatedCITest(ABC):
    """How a federation answers a search's batches of CI tests (see the module docstring).

    The search strategy passed to each call supplies the run (its clients, round, recorder,
    ``secure_mode``); the test holds everything about its own batches: the p-values asked so
    far (:attr:`cache`, the search's cache), each batch answered (:attr:`batches`) and the
    server's side of differential privacy (:attr:`privacy`).
    """

    #: the protocol actions this test may send (their disclosures are declared with them)
    ACTIONS: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        #: every test's p-value: the search's cache (batches answered before are not asked again)
        self.cache: dict[Query, float] = {}
        #: each batch answered: the round that decided it and its tests (and rounds)
        self.batches: list[dict] = []
        #: the server's side of a private run (None: dp off)
        self.privacy: ServerNoise | None = None

    # ------------------------------------------------------------------ set-up
    @abstractmethod
    def input_needs(self) -> InputNeeds:
        """What the test needs of the sites' columns (checked after hello)."""

    def validate(self, info: dict[int, ClientInfo], entry_point: str) -> None:
        """Refuse hello reports the test cannot work with (default: none)."""
        return None

    @abstractmethod
    def begin(self, strategy: ProtocolStrategy) -> list[str]:
        """When the search starts: settle what the batches are asked over (level sets, the
        encoding) and return the variables in the order the queries index them."""

    def depth_batch(self) -> int | None:
        """How many of a level's tests the search asks at a time (None: a whole level)."""
        return None

    # ------------------------------------------------------------------ protocol
    def before_search(self, strategy: ProtocolStrategy) -> Request | None:
        """A request due before the search's first batch (Fisher-z's moments), else None."""
        return None

    @property
    def answers_on_server(self) -> bool:
        """Whether :meth:`answer_on_server` answers every batch now, with no round."""
        return False

    def answer_on_server(self, strategy: ProtocolStrategy, queries: Sequence[Query]) -> np.ndarray:
        """The p-values of ``queries`` from what the server holds already (see
        :attr:`answers_on_server`)."""
        raise NotImplementedError(f"{type(self).__name__} answers every batch in a round")

    @abstractmethod
    def request(self, strategy: ProtocolStrategy, queries: Sequence[Query]) -> Request:
        """The next request for the pending batch ``queries``."""

    @abstractmethod
    def answer(
        self, strategy: ProtocolStrategy, request: Request, replies: list[Reply],
        queries: Sequence[Query] | None,
    ) -> np.ndarray | None:  # fmt: skip
        """The replies to ``request``: the batch's p-values once they are decided, else None
        (another round is due). ``queries`` is None for a request before the search."""

    def forget(self) -> None:
        """Drop the open batch: its search will not finish it (default: nothing held)."""
        return None

    def on_clients_dropped(self, strategy: ProtocolStrategy, dropped: list[int]) -> None:
        """Clients left mid-batch; call ``strategy.retract_request()`` to ask the batch anew
        (default: the same request goes to the survivors)."""
        return None

    def privacy_plan(self, strategy: ProtocolStrategy) -> dict[str, Any] | None:
        """What a private run plans to spend at each site (None: dp off)."""
        if self.privacy is None:
            return None
        sites = strategy.protocol_run.members.num_clients
        return self.privacy.plan(strategy.name, strategy.entry_point, strategy.secure_mode, sites)

    # ------------------------------------------------------------------ result
    @abstractmethod
    def report(self, result: PCResult | FCIResult | None = None) -> dict[str, Any]:
        """The result's fields on the tests this run asked (``tests``, ``batches``, ...)."""
