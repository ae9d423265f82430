"""Run a step-wise search against a CI oracle.

Every engine in :mod:`fedcausal_flwr.discovery` is written once as a *generator*: it yields a batch
of CI queries, receives their p-values, and finally returns its result. A local run drives it with
:func:`drive`; a federated strategy drives the very same generator one Flower round per batch. So
the search logic exists once, whatever answers the tests.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from typing import Any, TypeVar

import numpy as np

from fedcausal_flwr.discovery.skeleton import FreshQueries
from fedcausal_flwr.stats.batch_oracle import CIOracle, Query, normalise_query

R = TypeVar("R")
Steps = Generator[list[Query], np.ndarray, R]


def drive(steps: Steps[R], oracle: CIOracle) -> R:
    """Answer every batch ``steps`` yields with ``oracle`` and return the engine's result. A
    :class:`~.skeleton.FreshQueries` batch (distinct, never asked) is computed without going
    into the oracle's cache: a big network's depths would hold every answer."""
    try:
        batch = next(steps)
        while True:
            if isinstance(batch, FreshQueries):
                batch = steps.send(oracle.fresh_batch(batch))
            else:
                batch = steps.send(oracle.test_batch(batch))
    except StopIteration as stop:
        return stop.value


def with_cache(steps: Steps[R], cache: dict[Query, float]) -> Steps[R]:
    """Wrap ``steps`` so only queries missing from ``cache`` are yielded (distinct, normalised).

    A batch answered entirely from the cache costs no round. ``cache`` is filled as answers arrive,
    except for a :class:`~.skeleton.FreshQueries` batch (a streamed depth), which passes through.
    """
    try:
        batch = next(steps)
        while True:
            if isinstance(batch, FreshQueries):  # distinct, never asked: nothing to look up
                answers = yield batch
                batch = steps.send(np.asarray(answers, dtype=float))
                continue
            keys = [normalise_query(*q) for q in batch]
            missing = list(dict.fromkeys(k for k in keys if k not in cache))
            if missing:
                answers = yield missing
                cache.update(zip(missing, np.asarray(answers, dtype=float).tolist(), strict=True))
            batch = steps.send(np.array([cache[k] for k in keys], dtype=float))
    except StopIteration as stop:
        return stop.value


class NeedTests(Exception):
    """Raised by a synchronous search step that needs p-values it has not got yet."""

    def __init__(self, queries: list[Query]):
        super().__init__(f"{len(queries)} CI tests needed")
        self.queries = queries


class PValues:
    """Read-only view of known p-values for synchronous search steps run under :func:`replay`.

    ``pv(x, y, S)`` returns a known p-value or raises :class:`NeedTests`; ``pv.ensure(queries)``
    asks for a whole batch at once so that one round answers all of them.
    """

    def __init__(self, cache: dict[Query, float]):
        self._cache = cache

    def __call__(self, x: int, y: int, s: Iterable[int] = ()) -> float:
        key = normalise_query(x, y, tuple(s))
        if key not in self._cache:
            raise NeedTests([key])
        return self._cache[key]

    def ensure(self, queries: Iterable[Query]) -> None:
        missing = list(
            dict.fromkeys(
                k for k in map(lambda q: normalise_query(*q), queries) if k not in self._cache
            )
        )
        if missing:
            raise NeedTests(missing)


def replay(step: Callable[[PValues], R], cache: dict[Query, float] | None = None) -> Steps[R]:
    """Turn a synchronous, deterministic search step into a batch generator.

    ``step(pv)`` is re-run from the start each time it raises :class:`NeedTests`, after the missing
    p-values have been fetched as one batch. Determinism makes every re-run retrace the same path
    up to the first unanswered question, so the outcome equals a sequential run with one oracle
    call per question, while a federated run pays one round per :class:`NeedTests`.
    """
    cache = {} if cache is None else cache
    while True:
        try:
            return step(PValues(cache))
        except NeedTests as need:
            answers = yield need.queries
            cache.update(zip(need.queries, np.asarray(answers, dtype=float).tolist(), strict=True))


class StepRunner:
    """Drive a step generator from outside, one request at a time (used by Flower strategies).

    ``pending`` is what the search waits for (a batch of CI queries, or an engine's own request
    type of the same length as its answer, e.g. FedLCS's), or ``None`` once ``result`` is available.
    """

    def __init__(self, steps: Generator[Any, Any, Any]):
        self._steps = steps
        self.result: Any = None  # the engine's return value once the search has finished
        self.pending: Any = None
        self.n_batches = 0
        self._advance(None)

    @property
    def done(self) -> bool:
        return self.pending is None

    def answer(self, answers: Any) -> None:
        """Send the pending request's answers: p-values for a query batch (one per query), else
        one answer per item of the request."""
        if self.pending is None:
            raise RuntimeError("the search has finished; there is no pending batch to answer")
        if isinstance(self.pending, list | FreshQueries):
            answers = np.asarray(answers, dtype=float)
            shape = answers.shape
        else:
            shape = (len(answers),)
        if shape != (len(self.pending),):
            raise ValueError(
                f"expected {len(self.pending)} answers for the pending batch, got shape {shape}"
            )
        self.n_batches += 1
        self._advance(answers)

    def _advance(self, answers: Any) -> None:
        try:
            batch = next(self._steps) if answers is None else self._steps.send(answers)
        except StopIteration as stop:
            self.pending = None
            self.result = stop.value
            return
        self.pending = list(batch) if isinstance(batch, list | tuple) else batch
