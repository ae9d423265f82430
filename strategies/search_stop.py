"""A private or secure search that sites stop early, and the privacy it states.

Sites may refuse a search's next batch for a reason that ends the search, not the run: a site's
privacy budget, or a secure sum without every site of its roster after a dropout. The search then
ends with the depths it has (its rules on them, replayed from the cache: no new test), and the
result says why (:func:`stop_search`). A search that sums statistics holds the server's side of
differential privacy as a part (:func:`server_noise`: a
:class:`~fedcausal_flwr.privacy.server_noise.ServerNoise`, or None when ``dp`` is off) and states
it in its result (:func:`privacy_report`). Shared by FedPC/FedFCI and fedCI's GLM tests; no
method owns it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Protocol

from fedcausal_flwr.discovery.driver import StepRunner
from fedcausal_flwr.notes import InputNote
from fedcausal_flwr.privacy.server_noise import ServerNoise
from fedcausal_flwr.strategies.ci_tests import FederatedCITest


class SearchStoppedNote(InputNote):
    """A site ended a search early (its graph is the one so far): it would not take part in a
    secure sum without every site of its roster, after one dropped out."""


class PrivacyBudgetNote(SearchStoppedNote):
    """A site's privacy budget ended a private search early (its graph is the one so far)."""


class StoppableSearch(Protocol):
    """What :func:`stop_search` needs of a search strategy."""

    name: str
    runner: StepRunner | None
    stopped: str | None

    @property
    def tests(self) -> FederatedCITest:
        """The search's federated CI test: its batches answered so far and its privacy part."""
        ...

    def start_search(self, max_depth: int | None = None) -> StepRunner:
        """The search, capped at ``max_depth``; batches answered before come from the cache."""
        ...

    def forget_pending_batch(self) -> None:
        """Drop what the method holds of a batch it will not finish."""
        ...

    def annotate(self, **fields: Any) -> None: ...


def server_noise(
    options: Mapping[str, Any], planned: int | None, summed: str, tight: bool
) -> ServerNoise | None:
    """The server's side of a private run (None: ``dp`` is off, or the method does not declare
    it)."""
    if str(options.get("dp", "off")) == "off":
        return None
    return ServerNoise(options, planned, summed, tight)


def stop_search(search: StoppableSearch, refusal: str) -> bool:
    """End ``search`` with the depths it has, for a refusal that ends a search (see the module
    docstring); False if it has none whose tests were all answered (the refusal stops the
    run)."""
    runner, batches, privacy = search.runner, search.tests.batches, search.tests.privacy
    if runner is None or not batches:
        return False  # nothing learned yet: the refusal stops the run
    if privacy is not None:
        depth = len(batches) - 1  # under dp a depth is one batch
        if not search.start_search(max_depth=depth).done:  # (only tests before the refused depth)
            search.runner = runner
            return False
    else:  # the deepest depth whose tests were all answered
        depth = -1
        while search.start_search(max_depth=depth + 1).done:
            depth += 1
        if depth < 0 or not search.start_search(max_depth=depth).done:
            search.runner = runner
            return False
    search.forget_pending_batch()
    if privacy is not None:
        privacy.accountant.stopped = f"stopped before depth {depth + 1}: {refusal}"
    search.stopped = f"the search stopped before depth {depth + 1}: {refusal}"
    search.annotate(stopped=search.stopped)
    note = PrivacyBudgetNote if privacy is not None else SearchStoppedNote
    warnings.warn(
        note(
            f"note: {search.name} ended its search after depth {depth} (the graph so far): "
            f"{refusal}"
        ),
        stacklevel=3,
    )
    return True


def privacy_report(privacy: ServerNoise | None, stopped: str | None) -> dict[str, Any]:
    """A search result's ``privacy`` entry (none: dp off), and why it stopped early."""
    out: dict[str, Any] = {} if stopped is None else {"stopped": stopped}
    return out if privacy is None else {"privacy": privacy.accountant.report(), **out}
