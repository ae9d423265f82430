"""A dict keyed by variable pairs whose bulk is two arrays.

The skeleton search records, per tested pair, its largest p-value, the depth that removed it and
its separating sets. On wide data depth 0 alone tests millions of pairs; held as a dict that is
millions of tuples and objects, built and read one at a time. A :class:`PairRecord` keeps such a
depth as sorted pair codes with their values (or one shared value), and anything else in a dict:
it reads, writes, iterates and compares like a dict, while vectorised readers take the arrays
(:meth:`PairRecord.arrays`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

import numpy as np

Pair = tuple[int, int]


class PairRecord(MutableMapping[Pair, Any]):
    """Values by pair ``(x, y)``; a bulk of pairs may be held as arrays (:meth:`set_bulk`).

    Iteration runs over the bulk in pair order, then the other keys as inserted (the order a dict
    filled depth by depth has). A bulk value is made when read (``shared`` builds it, e.g. a fresh
    ``[()]``), so change a value by assigning it, not in place.
    """

    def __init__(self, n_vars: int):
        self._n = int(n_vars)
        self._codes = np.zeros(0, dtype=np.int64)  # sorted codes x * n + y of the bulk
        self._values: np.ndarray | None = None
        self._shared: Callable[[], Any] | None = None
        self._gone = np.zeros(0, dtype=bool)  # bulk entries deleted
        self._override: dict[Pair, Any] = {}  # bulk entries assigned since (they keep their place)
        self._extra: dict[Pair, Any] = {}

    # ------------------------------------------------------------------ bulk
    def set_bulk(
        self,
        pairs: np.ndarray,
        values: np.ndarray | None = None,
        shared: Callable[[], Any] | None = None,
    ) -> None:
        """Hold the (k, 2) ``pairs`` (x < y, sorted, distinct, none recorded yet) with ``values``
        (one per pair) or each with the value ``shared()``."""
        self.set_bulk_codes(pairs[:, 0].astype(np.int64) * self._n + pairs[:, 1], values, shared)

    def set_bulk_codes(
        self,
        codes: np.ndarray,
        values: np.ndarray | None = None,
        shared: Callable[[], Any] | None = None,
    ) -> None:
        """:meth:`set_bulk` with the pairs as codes ``x * n_vars + y`` (int64)."""
        if (values is None) == (shared is None):
            raise ValueError("give the bulk either values or a shared value")
        if len(self) or self._codes.size:
            raise ValueError("a bulk goes into an empty record")
        codes = np.asarray(codes, dtype=np.int64)
        if codes.size and (
            np.any(codes[1:] <= codes[:-1])
            or codes[0] < 0
            or codes[-1] >= self._n * self._n
            or np.any(codes // self._n >= codes % self._n)
        ):
            raise ValueError("bulk pairs must be distinct, sorted and have x < y")
        self._codes, self._values, self._shared = codes, values, shared
        self._gone = np.zeros(codes.size, dtype=bool)

    def arrays(self) -> tuple[np.ndarray, np.ndarray | None, dict[Pair, Any]]:
        """``(pairs, values, others)``: the bulk pairs (k, 2) never assigned since and their
        values (None when they share one value), and every other entry as a dict. The arrays
        are read-only."""
        codes, values = self.bulk_codes()
        pairs = np.empty((codes.size, 2), dtype=np.int64)
        np.floor_divide(codes, self._n, out=pairs[:, 0])
        np.remainder(codes, self._n, out=pairs[:, 1])
        pairs.setflags(write=False)
        return pairs, values, self.others()

    def others(self) -> dict[Pair, Any]:
        """The entries :meth:`bulk_codes` leaves out (assigned since, or never in the bulk)."""
        return {**self._override, **self._extra}

    def bulk_codes(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The bulk pairs of :meth:`arrays` as sorted codes ``x * n_vars + y``, and their
        values; read-only (the bulk itself when every pair of it is live)."""
        live = ~self._gone
        if self._override:
            moved = [self._position(key) for key in self._override]
            live[[pos for pos in moved if pos is not None]] = False
        whole = bool(live.all())
        codes = self._codes if whole else self._codes[live]
        values = self._values if whole or self._values is None else self._values[live]
        return _read_only(codes), None if values is None else _read_only(values)

    @property
    def n_vars(self) -> int:
        """The number of variables the pair codes are made with."""
        return self._n

    def shared_value(self) -> Any:
        """The value every bulk pair shares (None when they hold their own values)."""
        return None if self._shared is None else self._shared()

    def _position(self, key: Pair) -> int | None:
        if not self._codes.size:
            return None
        x, y = int(key[0]), int(key[1])
        if not (0 <= x < self._n and 0 <= y < self._n):
            return None
        code = x * self._n + y
        pos = int(np.searchsorted(self._codes, code))
        if pos < self._codes.size and self._codes[pos] == code and not self._gone[pos]:
            return pos
        return None

    def _bulk_value(self, pos: int) -> Any:
        if self._values is None:
            assert self._shared is not None  # set together with the codes
            return self._shared()
        return self._values[pos].item()

    # ------------------------------------------------------------------ mapping
    def __getitem__(self, key: Pair) -> Any:
        if key in self._extra:
            return self._extra[key]
        if key in self._override:
            return self._override[key]
        pos = self._position(key)
        if pos is None:
            raise KeyError(key)
        return self._bulk_value(pos)

    def __setitem__(self, key: Pair, value: Any) -> None:
        if key not in self._extra and self._position(key) is not None:
            self._override[_pair(key)] = value  # a bulk entry keeps its place, as in a dict
        else:
            self._extra[key] = value

    def __delitem__(self, key: Pair) -> None:
        if key in self._extra:
            del self._extra[key]
            return
        pos = self._position(key)
        if pos is None:
            raise KeyError(key)
        self._gone[pos] = True
        self._override.pop(_pair(key), None)

    def __contains__(self, key: object) -> bool:
        if key in self._extra:
            return True
        return isinstance(key, tuple) and len(key) == 2 and self._position(key) is not None

    def __iter__(self) -> Iterator[Pair]:
        n = self._n
        for code in self._codes[~self._gone].tolist():
            yield (code // n, code % n)
        yield from self._extra

    def __len__(self) -> int:
        return int(self._codes.size - self._gone.sum()) + len(self._extra)

    def items(self):
        """The entries, in iteration order (bulk values made in one pass)."""
        return list(self._items())

    def _items(self) -> Iterator[tuple[Pair, Any]]:
        live = ~self._gone
        codes = self._codes[live].tolist()
        n = self._n
        override = self._override
        if self._values is None:
            shared = self._shared
            assert shared is not None or not codes
            values: Iterator[Any] = (shared() for _ in codes)  # type: ignore[misc]
        else:
            values = iter(self._values[live].tolist())
        for code, value in zip(codes, values, strict=False):
            key = (code // n, code % n)
            yield key, override.get(key, value) if override else value
        yield from self._extra.items()

    def values(self):
        return [value for _, value in self._items()]

    def __repr__(self) -> str:
        return f"PairRecord({len(self)} pairs, {int((~self._gone).sum())} in arrays)"

    def copy(self, value: Callable[[Any], Any] = lambda v: v) -> PairRecord:
        """A record with the same entries; ``value`` copies each dict-held value (the bulk's
        arrays are shared: they are never written in place)."""
        out = PairRecord(self._n)
        out._codes, out._values, out._shared = self._codes, self._values, self._shared
        out._gone = self._gone.copy()
        out._override = {key: value(v) for key, v in self._override.items()}
        out._extra = {key: value(v) for key, v in self._extra.items()}
        return out


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.setflags(write=False)
    return view


def _pair(key: Pair) -> Pair:
    return (int(key[0]), int(key[1]))


def copy_sepsets(sepsets: MutableMapping[Pair, Any]) -> MutableMapping[Pair, Any]:
    """A copy whose lists of separating sets can be extended without touching ``sepsets``."""
    if isinstance(sepsets, PairRecord):
        return sepsets.copy(list)
    return {pair: list(sets) for pair, sets in sepsets.items()}


def sorted_entries(mapping: Mapping[Pair, Any]) -> tuple[np.ndarray, list[Any], np.ndarray]:
    """Every entry in pair order: the pairs (k, 2) int64, their values (a list), and whether
    each value is a record's shared bulk value (made once here: read it, do not change it)."""
    others: Mapping[Pair, Any]
    if isinstance(mapping, PairRecord):
        bulk, held, others = mapping.arrays()
        if held is None:
            bulk_values: list[Any] = [mapping.shared_value()] * len(bulk)
            shared = np.ones(len(bulk), dtype=bool)
        else:
            bulk_values = held.tolist()
            shared = np.zeros(len(bulk), dtype=bool)
    else:
        bulk, bulk_values, others = np.zeros((0, 2), dtype=np.int64), [], mapping
        shared = np.zeros(0, dtype=bool)
    pairs, order = _merged_pairs(bulk, others)
    values = bulk_values + list(others.values())
    shared = np.concatenate((shared, np.zeros(len(others), dtype=bool)))
    if order is not None:
        pairs, shared = pairs[order], shared[order]
        values = [values[i] for i in order.tolist()]
    return pairs, values, shared


def sorted_numbers(
    mapping: Mapping[Pair, Any], dtype: type = np.float64
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sorted_entries` of a mapping to numbers, the values as one array of ``dtype``: a
    record's bulk values stay an array (a wide search holds millions), never a list between."""
    if not isinstance(mapping, PairRecord):
        pairs, listed, _ = sorted_entries(mapping)
        return pairs, np.asarray(listed, dtype=dtype)
    bulk, held, others = mapping.arrays()
    bulk_values: np.ndarray
    if held is None:
        bulk_values = np.full(len(bulk), mapping.shared_value(), dtype=dtype)
    else:
        bulk_values = np.asarray(held, dtype=dtype)
    pairs, order = _merged_pairs(bulk, others)
    values = np.concatenate((bulk_values, np.fromiter(others.values(), dtype=dtype)))
    return (pairs, values) if order is None else (pairs[order], values[order])


def _merged_pairs(
    bulk: np.ndarray, others: Mapping[Pair, Any]
) -> tuple[np.ndarray, np.ndarray | None]:
    """A record's bulk pairs followed by the keys of its other entries, and the order that sorts
    them (None: sorted already; a bulk alone always is, ``set_bulk`` checks it)."""
    if not len(others):
        return bulk, None
    flat = np.fromiter(
        (int(v) for key in others for v in key[:2]), dtype=np.int64, count=2 * len(others)
    )
    pairs = np.concatenate((bulk, flat.reshape(-1, 2)))
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    return pairs, order if np.any(order[1:] < order[:-1]) else None


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while millions of small lists are built (a
    result's per-pair entries): each collection would walk them all again, several times
    slower than the building itself. Nothing built here forms a cycle."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
