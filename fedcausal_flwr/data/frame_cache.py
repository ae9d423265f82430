"""One value derived from a data frame, kept with the frame and released with it (Flower-free).

A client's encoded columns, CI oracle or hello report can be recomputed from its frame; a
:class:`FrameCache` keeps the last one per frame so that work on the same frame object (an
in-process simulation's later rounds, the API's input check and the client's ``hello``) is paid
once. No result may depend on a hit: a deployment starts a process per message and recomputes.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import pandas as pd

T = TypeVar("T")


class FrameCache:
    """One value derived from a client's data frame, per frame and key, released with the frame
    (see the module docstring for what may be cached)."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, Hashable, Any]] = {}

    def get(self, frame: pd.DataFrame, key: Hashable, compute: Callable[[], T]) -> T:
        """The value cached for ``frame`` under ``key``, else ``compute()`` (which replaces it)."""
        hit = self._entries.get(id(frame))
        if hit is not None and hit[0]() is frame and hit[1] == key:
            return hit[2]
        value = compute()
        frame_id = id(frame)
        forget = self._entries.pop  # bound now: module globals may be gone when the frame dies
        self._entries[frame_id] = (weakref.ref(frame, lambda _: forget(frame_id, None)), key, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)
