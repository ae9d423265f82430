"""One search strategy over a federated CI test: FedPC/FedFCI and fedCI-PC/-FCI (Flower-free).

The server runs the batched PC-stable or FCI engine of :mod:`fedcausal_flwr.discovery`; every
batch of CI tests it yields is answered by the strategy's federated CI test (a
:class:`~fedcausal_flwr.strategies.ci_tests.FederatedCITest`: summed tables, a sketch, summed
moments, fedCI's GLMs), in as many rounds as that test needs. A method of this kind is a
:class:`SearchMethod` (its name, options, search and test) registered once; no class per method.

With ``dp``, each skeleton depth is paid for once, as a whole (the test's releases within a depth
are its own); with ``dp_batches`` set, the search stops at depth ``dp_batches - 1`` and the budget
is split evenly over the depths.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.driver import StepRunner, with_cache
from fedcausal_flwr.discovery.fci import fci_steps
from fedcausal_flwr.discovery.pc import pc_steps
from fedcausal_flwr.discovery.search_report import search_evidence
from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.messages import ClientInfo, Reply, Request
from fedcausal_flwr.options import OptionSet
from fedcausal_flwr.stats.batch_oracle import Query
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import MethodStrategy, Options
from fedcausal_flwr.strategies.ci_tests import FederatedCITest
from fedcausal_flwr.strategies.search_stop import privacy_report, stop_search


@dataclass(frozen=True)
class SearchMethod:
    """A method that is a search over a federated CI test: its name, declared options, search
    (``pc`` or ``fci``) and how its test is made from the resolved options. The options declare
    ``alpha``, ``max_depth`` and the search engine's (:func:`~.shared_options.search_engine`);
    ``missing`` and the ``dp`` options where the test supports them."""

    name: str
    options: OptionSet
    algorithm: str
    tests: Callable[[Options], FederatedCITest]

    def strategy(self, options: Mapping[str, Any]) -> SearchStrategy:
        """The method's strategy for ``options`` (resolved, or raw keywords): the factory its
        registration names (with ``registered_by``, the declaring module)."""
        return SearchStrategy(options, method=self)


class SearchStrategy(MethodStrategy):
    """PC's or FCI's batched search with every CI test answered by :attr:`tests`, the method's
    federated CI test (see the module docstring)."""

    def __init__(
        self, options: Mapping[str, Any] | None = None, /, *, method: SearchMethod,
        **keywords: Any,
    ) -> None:  # fmt: skip
        super().__init__(options, method=(method.name, method.options), **keywords)
        #: the search: ``pc`` or ``fci``
        self.algorithm = method.algorithm
        #: the federated CI test answering every batch
        self.tests = method.tests(self.options)
        self.engine_options = shared.search_engine_options(self.algorithm, self.options)
        #: why the search ended before its last depth (None: it did not)
        self.stopped: str | None = None
        self.runner: StepRunner | None = None
        # a batch's p-values, handed to the search when the next round begins: the round's
        # messages and sums are gone by then (on wide data, hundreds of MB that would otherwise
        # stay alive through the search's next step)
        self._answers_due: np.ndarray | None = None

    # ------------------------------------------------------------------ set-up
    def input_needs(self) -> InputNeeds:
        return self.tests.input_needs()

    def validate_clients(self, info: dict[int, ClientInfo]) -> None:
        self.tests.validate(info, self.entry_point)

    def start_search(self, max_depth: int | None = None) -> StepRunner:
        """The search, capped at ``max_depth`` (default: the options' cap, and a private run's
        ``dp_batches - 1``); its batches answered before come from the cache."""
        names = self.tests.begin(self)
        depth = self.options.max_depth if max_depth is None else max_depth
        batches = self.options.get("dp_batches")
        if self.tests.privacy is not None and batches is not None:  # one budget share per depth
            depth = int(batches) - 1 if depth is None else min(depth, int(batches) - 1)
        engine = pc_steps if self.algorithm == "pc" else fci_steps
        steps = engine(
            names, self.options.alpha, depth, depth_batch=self.tests.depth_batch(),
            **self.engine_options,
        )  # fmt: skip
        self.runner = StepRunner(with_cache(steps, self.tests.cache))
        return self.runner

    # ------------------------------------------------------------------ protocol
    def next_request(self) -> Request | None:
        self._advance_search()
        if self.runner is None:
            first = self.tests.before_search(self)
            if first is not None:
                return first
            self.start_search()
        assert self.runner is not None  # started above
        queries = self.runner.pending
        if queries is None:  # the search has finished
            return None
        return self.tests.request(self, queries)

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        queries: Sequence[Query] | None = None if self.runner is None else self.runner.pending
        answers = self.tests.answer(self, request, replies, queries)
        if answers is not None:
            self._answers_due = answers
        if self.tests.answers_on_server:  # every batch from what the server holds: now
            runner = self.runner if self.runner is not None else self.start_search()
            while runner.pending is not None:
                runner.answer(self.tests.answer_on_server(self, runner.pending))

    def _advance_search(self) -> None:
        """Give the search the p-values of the batch last answered (see ``_answers_due``)."""
        if self._answers_due is not None:
            assert self.runner is not None  # the batch came from it
            answers, self._answers_due = self._answers_due, None
            self.runner.answer(answers)

    def forget_pending_batch(self) -> None:
        self.tests.forget()

    def privacy_plan(self) -> dict[str, Any] | None:
        return self.tests.privacy_plan(self)

    def stop_search(self, refusal: str) -> bool:
        self._advance_search()
        return stop_search(self, refusal)

    def on_clients_dropped(self, dropped: list[int]) -> None:
        self._advance_search()
        if self.runner is not None and not self.runner.done:
            self.tests.on_clients_dropped(self, dropped)

    # ------------------------------------------------------------------ result
    def result_payload(self) -> dict:
        self._advance_search()
        assert self.runner is not None  # the search has run
        result = self.runner.result
        return {
            "graph": result.graph,
            "variables": list(result.graph.names),
            **search_evidence(result),
            **(self.missing_report(self.options.missing) if "missing" in self.options else {}),
            **self.tests.report(result),
            **privacy_report(self.tests.privacy, self.stopped),
        }
