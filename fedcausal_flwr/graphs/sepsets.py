"""Separating sets as the orientation rules read them, and how they classify a triple.

Separating sets are a mapping from the normalised pair ``(min(x, y), max(x, y))`` to a *list* of the
separating sets recorded for that pair (one for plain PC-stable; several when an engine keeps every
set that made the pair independent, as the conservative and majority rules need).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence, Set

import numpy as np

# a pair's entry may also be one set, read as a list of that one set
Sepsets = Mapping[tuple[int, int], Sequence[Collection[int]] | Set[int]]

SEPSET_RULES = ("standard", "causallearn", "conservative", "majority")


def pair_key(x: int, y: int) -> tuple[int, int]:
    """The normalised key of an unordered pair."""
    x, y = int(x), int(y)
    return (x, y) if x < y else (y, x)


def recorded_sepsets(sepsets: Sepsets, x: int, y: int) -> list[frozenset[int]] | None:
    """All separating sets recorded for ``{x, y}``, or None when the pair has no entry."""
    key = pair_key(x, y)
    if key in sepsets:
        value = sepsets[key]
    elif (key[1], key[0]) in sepsets:
        value = sepsets[(key[1], key[0])]
    else:
        return None
    if isinstance(value, (set, frozenset)):
        return [frozenset(int(v) for v in value)]
    if not isinstance(value, (list, tuple)):
        raise TypeError(
            f"sepsets[{key}] must be a list of separating sets (or one set), got {value!r}"
        )
    out = []
    for s in value:
        if isinstance(s, (int, np.integer)) or not isinstance(s, Collection):
            raise TypeError(
                f"sepsets[{key}] must be a list of separating sets, e.g. [(2,), (2, 3)]; "
                f"got the element {s!r} in {value!r}"
            )
        out.append(frozenset(int(v) for v in s))
    return out


def triple_status(sets: Sequence[Collection[int]], y: int, rule: str = "standard") -> str:
    """Classify the unshielded triple x - y - z from the separating sets of {x, z}.

    Returns ``"collider"``, ``"noncollider"`` or ``"ambiguous"``:

    * ``standard``: collider iff y is not in the *first* recorded set (textbook PC);
    * ``causallearn``: collider iff y is in *none* of the recorded sets (causal-learn's
      ``uc_sepset``/``rule0``, which look at every recorded set or their union);
    * ``conservative`` (Ramsey et al. 2006): collider if y is in none, non-collider if in all,
      ambiguous otherwise;
    * ``majority`` (Colombo and Maathuis 2014, as in pcalg): collider if y is in fewer than half of
      the sets, non-collider if in more than half, ambiguous at exactly half.
    """
    if rule not in SEPSET_RULES:
        raise ValueError(f"unknown separating-set rule {rule!r}; expected one of {SEPSET_RULES}")
    if len(sets) == 0:
        raise ValueError(f"no separating set recorded for the triple around node {y}")
    if rule == "standard":
        return "noncollider" if y in sets[0] else "collider"
    n_with = sum(1 for s in sets if y in s)
    if rule == "causallearn":
        return "noncollider" if n_with else "collider"
    if rule == "conservative":
        if n_with == 0:
            return "collider"
        return "noncollider" if n_with == len(sets) else "ambiguous"
    if 2 * n_with < len(sets):
        return "collider"
    return "noncollider" if 2 * n_with > len(sets) else "ambiguous"


def sepsets_or_raise(sepsets: Sepsets | None, x: int, y: int) -> list[frozenset[int]]:
    """:func:`recorded_sepsets` for a pair a rule cannot decide without them."""
    if sepsets is None:
        raise ValueError(f"separating sets are needed to decide about the pair {pair_key(x, y)}")
    sets = recorded_sepsets(sepsets, x, y)
    if sets is None:
        raise KeyError(
            f"no separating set recorded for the non-adjacent pair {pair_key(x, y)}; every pair "
            "removed from the skeleton must have an entry"
        )
    return sets


COLLIDER, NONCOLLIDER, AMBIGUOUS = 0, 1, 2
STATUS_NAMES = ("collider", "noncollider", "ambiguous")


#: Variables up to whose square a :class:`SepsetIndex` keeps one byte per pair (64 MB).
_DENSE_INDEX_CELLS = 2**26


class SepsetIndex:
    """Separating sets for classifying many triples at once (:meth:`classify`).

    Most recorded pairs have only empty sets (removed at level 0), and every rule calls their
    triples colliders; those are held as sorted pair codes. The few others keep their sets and
    are read by :func:`triple_status`. Reading a pair raises what :func:`sepsets_or_raise` would.
    """

    def __init__(self, sepsets: Sepsets, n_vars: int):
        self._source, self._n = sepsets, n_vars
        chosen: dict[int, tuple[bool, object]] = {}  # code -> (key was normalised, value)
        bulk = np.zeros(0, dtype=np.int64)
        entries: Mapping = sepsets
        if getattr(sepsets, "n_vars", None) == n_vars:  # a PairRecord: its level-0 bulk as codes
            codes, values = sepsets.bulk_codes()  # type: ignore[attr-defined]
            if values is None and sepsets.shared_value() == [()]:  # type: ignore[attr-defined]
                bulk, entries = codes, sepsets.others()  # type: ignore[attr-defined]
        for key, value in entries.items():
            a, b = int(key[0]), int(key[1])
            normalised = a < b
            code = a * n_vars + b if normalised else b * n_vars + a
            if code in chosen and not normalised:
                continue  # recorded_sepsets reads the normalised key first
            chosen[code] = (normalised, value)
        self._sets: dict[int, list[frozenset[int]] | None] = {}  # None: reading it raises
        for code, (_, value) in chosen.items():
            if type(value) is list and value and all(s == () for s in value):
                continue  # only empty sets: a collider by every rule
            try:
                self._sets[code] = recorded_sepsets(sepsets, code // n_vars, code % n_vars)
            except (TypeError, ValueError):
                self._sets[code] = None
        self._codes = np.concatenate((bulk, np.fromiter(chosen, dtype=np.int64, count=len(chosen))))
        self._codes.sort()
        self._special = np.fromiter(self._sets, dtype=np.int64, count=len(self._sets))
        self._kind: np.ndarray | None = None  # per pair: 0 unrecorded, 1 empty sets, 2 others
        if n_vars * n_vars <= _DENSE_INDEX_CELLS:
            self._kind = np.zeros(n_vars * n_vars, dtype=np.int8)
            self._kind[self._codes] = 1
            self._kind[self._special] = 2

    def classify(self, xs: np.ndarray, zs: np.ndarray, y: int, rule: str) -> np.ndarray:
        """The :func:`triple_status` of each triple ``xs[i] - y - zs[i]`` as
        :data:`COLLIDER`, :data:`NONCOLLIDER` or :data:`AMBIGUOUS`; the first triple (in the
        given order) whose pair cannot be read raises."""
        if rule not in SEPSET_RULES:
            raise ValueError(
                f"unknown separating-set rule {rule!r}; expected one of {SEPSET_RULES}"
            )
        code_type = np.int32 if self._n * self._n <= np.iinfo(np.int32).max else np.int64
        lo, hi = np.minimum(xs, zs), np.maximum(xs, zs)
        codes = lo.astype(code_type) * code_type(self._n) + hi.astype(code_type, copy=False)
        status = np.zeros(codes.size, dtype=np.int8)  # COLLIDER
        if self._kind is not None:
            found = self._kind[codes]  # 0 unrecorded, 1 empty sets only, 2 others
            read = np.flatnonzero(found != 1)
        else:
            pos = np.searchsorted(self._codes, codes)
            found = pos < self._codes.size
            found[found] = self._codes[pos[found]] == codes[found]
            special = np.isin(codes, self._special) if self._special.size else found & False
            read = np.flatnonzero(~found | special)
        for i in read.tolist():
            sets = self._sets.get(int(codes[i])) if found[i] else None
            if sets is None:  # not recorded, or not readable: raise as the rules do
                sets = sepsets_or_raise(self._source, int(xs[i]), int(zs[i]))
            status[i] = STATUS_NAMES.index(triple_status(sets, y, rule))
        return status
