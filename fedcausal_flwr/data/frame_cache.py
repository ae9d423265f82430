"""One value derived from a data frame, kept with the frame and released with it (Flower-free).

A client's encoded columns, CI oracle or hello report can be recomputed from its frame; a
:class:`FrameCache` keeps the last one per frame so that work on the same frame object (an
in-process simulation's later rounds, the API's input check and the client's ``hello``) is paid
once. No result may depend on a hit: a deployment starts a process per message and recomputes.

A value lives for one run (:func:`run_scope`): a frame changed in place between two runs (a
column replaced, a value set) is read afresh by the second, never answered from the first.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Hashable, Iterator
from typing import Any, TypeVar

import pandas as pd

T = TypeVar("T")

#: which run the cached values belong to (bumped when an outermost run scope opens)
_generation = 0
_depth = 0


@contextlib.contextmanager
def run_scope() -> Iterator[None]:
    """One run: values cached before it are computed again (a run inside a run shares them)."""
    global _generation, _depth
    if _depth == 0:
        _generation += 1
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1


def one_run(function: Callable[..., T]) -> Callable[..., T]:
    """``function`` runs in a :func:`run_scope` (a decorator for the entry points that start a
    run)."""

    @functools.wraps(function)
    def scoped(*args: Any, **kwargs: Any) -> T:
        with run_scope():
            return function(*args, **kwargs)

    return scoped


class FrameCache:
    """One value derived from a client's data frame, per frame and key, released with the frame
    (see the module docstring for what may be cached)."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, Hashable, int, Any]] = {}

    def get(self, frame: pd.DataFrame, key: Hashable, compute: Callable[[], T]) -> T:
        """The value cached for ``frame`` under ``key`` in this run, else ``compute()`` (which
        replaces it)."""
        hit = self._entries.get(id(frame))
        if hit is not None and hit[0]() is frame and hit[1] == key and hit[2] == _generation:
            return hit[3]
        value = compute()
        frame_id = id(frame)
        forget = self._entries.pop  # bound now: module globals may be gone when the frame dies
        reference = weakref.ref(frame, lambda _: forget(frame_id, None))
        self._entries[frame_id] = (reference, key, _generation, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)
