"""A search's per-pair evidence as arrays, saved beside a result in a compact companion file.

A PC or FCI search removes most pairs it tests: on 2,000 columns depth 0 alone removes about two
million. For each it knows the p-value that removed it, the depth, and the separating sets. As JSON
keys by name that is most of a 200 MB result file, seconds to write and to read, and gigabytes of
Python objects while it is built. Held here as arrays (pairs as variable indices, separating sets
as offsets into one member array) it costs about 30 bytes a pair in memory and on disk, and the
result file keeps only what grows with the graph. The by-name forms older results stored
(:meth:`Evidence.removed`, :meth:`Evidence.sepsets`) are built on demand.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from fedcausal_flwr.outputs import write_with

#: A result ``r.json``'s evidence lives in ``r.evidence.npz`` beside it.
SUFFIX = ".evidence.npz"
#: The depth recorded for a pair FCI removed in its Possible-D-Sep phase.
POSSIBLE_DSEP = -1
_FIELDS = ("pairs", "pvalue", "depth", "sep_pairs", "set_starts", "member_starts", "members")


def companion_path(result_path: str | Path) -> Path:
    """Where the evidence of the result at ``result_path`` is written: ``r.json`` ->
    ``r.evidence.npz`` in the same folder."""
    path = Path(result_path)
    stem = path.name[: -len(path.suffix)] if path.suffix else path.name
    return path.with_name(stem + SUFFIX)


def is_evidence_file(path: str | Path) -> bool:
    """Whether ``path`` holds the arrays an evidence file has (read by name, not loaded)."""
    try:
        with np.load(path, allow_pickle=False) as held:
            return {"names", *_FIELDS} <= set(held.files)
    except (OSError, ValueError, EOFError):
        return False


@dataclass(eq=False)
class Evidence:
    """Per-pair evidence of a search, by variable index into ``names``.

    Parameters
    ----------
    names : tuple of str
        The variables the indices refer to (the result's ``variables``).
    pairs, pvalue, depth
        Every pair the search removed after testing it (``x < y``, sorted): the largest p-value of
        its tests (the one that removed it) and the depth that removed it
        (:data:`POSSIBLE_DSEP` for FCI's Possible-D-Sep phase).
    sep_pairs, set_starts, member_starts, members
        The separating sets: pair ``sep_pairs[i]`` has the sets ``set_starts[i]:set_starts[i+1]``,
        set ``s`` has the members ``members[member_starts[s]:member_starts[s+1]]``.
    """

    names: tuple[str, ...]
    pairs: np.ndarray
    pvalue: np.ndarray
    depth: np.ndarray
    sep_pairs: np.ndarray
    set_starts: np.ndarray
    member_starts: np.ndarray
    members: np.ndarray

    # ------------------------------------------------------------------ building
    @classmethod
    def build(
        cls,
        names: Sequence[str],
        removed: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        sepsets: tuple[np.ndarray, list[Any], np.ndarray] | None = None,
    ) -> Evidence:
        """From a search's records: ``removed`` as ``(pairs, pvalue, depth)`` arrays, and
        ``sepsets`` as ``(pairs, sets, shared)`` (``pair_record.sorted_entries``: one list of
        index tuples per pair; ``shared`` marks the entries that are one shared value)."""
        empty_pairs = np.zeros((0, 2), dtype=np.int32)
        pairs, pvalue, depth = removed or (empty_pairs, np.zeros(0), np.zeros(0))
        sep_pairs, set_starts, member_starts, members = _packed_sets(sepsets)
        return cls(
            names=tuple(str(n) for n in names),
            pairs=np.asarray(pairs, dtype=np.int32).reshape(-1, 2),
            pvalue=np.asarray(pvalue, dtype=np.float64),
            depth=np.asarray(depth, dtype=np.int16),
            sep_pairs=sep_pairs,
            set_starts=set_starts,
            member_starts=member_starts,
            members=members,
        )

    @classmethod
    def from_named(
        cls,
        names: Sequence[str],
        removed: Sequence[Sequence[Any]] = (),
        sepsets: Mapping[str, Sequence[Sequence[str]]] | None = None,
    ) -> Evidence:
        """From the by-name forms a result file of format 2 stored: ``removed`` entries
        ``[x, y, p, depth]`` and ``sepsets`` ``{"x|y": [[s, ...], ...]}``."""
        index = {str(n): i for i, n in enumerate(names)}
        pairs = np.array([[index[r[0]], index[r[1]]] for r in removed], dtype=np.int64)
        pvalue = np.array([float(r[2]) for r in removed], dtype=np.float64)
        depth = np.array(
            [POSSIBLE_DSEP if r[3] == "possible-dsep" else int(r[3]) for r in removed],
            dtype=np.int64,
        )
        keys = [_split_key(key, index) for key in (sepsets or {})]
        sets = [[tuple(index[m] for m in s) for s in v] for v in (sepsets or {}).values()]
        return cls.build(
            names,
            removed=_in_pair_order(pairs.reshape(-1, 2), pvalue, depth),
            sepsets=(
                np.array(keys, dtype=np.int64).reshape(-1, 2),
                sets,
                np.zeros(len(keys), dtype=bool),
            ),
        )

    # ------------------------------------------------------------------ reading
    @property
    def n_removed(self) -> int:
        return len(self.pairs)

    @property
    def n_sepsets(self) -> int:
        return len(self.sep_pairs)

    def removed(self) -> list[list[Any]]:
        """Every removed pair by name, ``[x, y, p, depth]`` (depth ``"possible-dsep"`` for FCI's
        Possible-D-Sep phase): the form ``extra["edge_pvalues"]["removed"]`` once had."""
        named = np.array(self.names, dtype=object)
        depth: list[Any] = self.depth.tolist()
        depth = ["possible-dsep" if d == POSSIBLE_DSEP else d for d in depth]
        return [
            [x, y, p, d]
            for x, y, p, d in zip(
                named[self.pairs[:, 0]].tolist(),
                named[self.pairs[:, 1]].tolist(),
                self.pvalue.tolist(),
                depth,
                strict=True,
            )
        ]

    def sepsets(self) -> dict[str, list[list[str]]]:
        """The separating sets by name, ``{"x|y": [[s, ...], ...]}`` in pair order: the form
        ``extra["sepsets"]`` once had."""
        names = self.names
        members = self.members.tolist()
        starts = self.member_starts.tolist()
        out: dict[str, list[list[str]]] = {}
        bounds = self.set_starts.tolist()
        for (x, y), lo, hi in zip(self.sep_pairs.tolist(), bounds[:-1], bounds[1:], strict=True):
            out[f"{names[x]}|{names[y]}"] = [
                [names[m] for m in members[starts[s] : starts[s + 1]]] for s in range(lo, hi)
            ]
        return out

    def sepset(self, x: str, y: str) -> list[list[str]] | None:
        """The separating sets of ``x`` and ``y`` by name (None when the pair has none)."""
        index = {n: i for i, n in enumerate(self.names)}
        a, b = sorted((index[x], index[y]))
        n = len(self.names)
        codes = self.sep_pairs[:, 0].astype(np.int64) * n + self.sep_pairs[:, 1]
        at = int(np.searchsorted(codes, a * n + b))
        if at == len(codes) or codes[at] != a * n + b:
            return None
        sets = range(int(self.set_starts[at]), int(self.set_starts[at + 1]))
        lo, hi = self.member_starts, self.members
        return [[self.names[m] for m in hi[lo[s] : lo[s + 1]].tolist()] for s in sets]

    def describe(self) -> dict[str, int]:
        """What a result file says of its evidence: the counts (the companion holds the rest)."""
        return {"removed": self.n_removed, "sepsets": self.n_sepsets}

    # ------------------------------------------------------------------ files
    def write(self, handle: BinaryIO) -> None:
        """The companion file's content to an open binary file (numpy's ``.npz``,
        uncompressed: written and read at disk speed)."""
        arrays = {name: getattr(self, name) for name in _FIELDS}
        np.savez(handle, names=np.array(self.names, dtype=str), **arrays)

    def checksum(self) -> str:
        """SHA-256 of the content (names and arrays, not the file's bytes): a result file
        records it, so a companion from another run is never read as this one's."""
        checksum = hashlib.sha256()
        checksum.update("\x00".join(self.names).encode("utf-8"))
        for name in _FIELDS:
            array = np.ascontiguousarray(getattr(self, name))
            checksum.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
            checksum.update(array.data)
        return checksum.hexdigest()

    def save(self, path: str | Path) -> str:
        """Write the companion at ``path`` in one step; returns its :meth:`checksum`."""
        write_with(path, self.write)
        return self.checksum()

    @classmethod
    def load(cls, path: str | Path, sha256: str | None = None) -> Evidence:
        """The evidence a companion file holds; a ValueError names the file when it is not one,
        or not the one the result recorded (``sha256``)."""
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as held:
                arrays = {name: held[name] for name in ("names", *_FIELDS)}
        except (KeyError, ValueError, EOFError) as err:
            raise ValueError(f"{path}: not a fedcausal-flwr evidence file ({err})") from None
        names = tuple(str(n) for n in arrays.pop("names").tolist())
        evidence = cls(names=names, **arrays)
        if sha256 is not None and evidence.checksum() != sha256:
            raise ValueError(f"{path} is not the evidence this result wrote (its SHA-256 differs)")
        return evidence

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Evidence):
            return NotImplemented
        return self.names == other.names and all(
            np.array_equal(getattr(self, f), getattr(other, f), equal_nan=f == "pvalue")
            for f in _FIELDS
        )


def _in_pair_order(
    pairs: np.ndarray, pvalue: np.ndarray, depth: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.lexsort((pairs[:, 1], pairs[:, 0])) if len(pairs) else np.zeros(0, dtype=np.int64)
    return pairs[order], pvalue[order], depth[order]


def _split_key(key: str, index: Mapping[str, int]) -> tuple[int, int]:
    """``"x|y"`` as two indices; names may hold ``|`` themselves, so every split is tried."""
    parts = key.split("|")
    for cut in range(1, len(parts)):
        x, y = "|".join(parts[:cut]), "|".join(parts[cut:])
        if x in index and y in index:
            a, b = index[x], index[y]
            return (a, b) if a < b else (b, a)
    raise ValueError(f"separating-set key {key!r} names no pair of the result's variables")


def _packed_sets(
    sepsets: tuple[np.ndarray, list[Any], np.ndarray] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Separating sets as ``(pairs, set_starts, member_starts, members)``. Entries that share
    one value (depth 0's ``[()]`` for millions of pairs) are laid out by array arithmetic; only
    the others are read one by one."""
    if sepsets is None or not len(sepsets[0]):
        return (np.zeros((0, 2), np.int32), np.zeros(1, np.int32), np.zeros(1, np.int32),
                np.zeros(0, np.int32))  # fmt: skip
    pairs, values, shared = sepsets
    k = len(pairs)
    n_sets = np.empty(k, dtype=np.int64)
    own = np.flatnonzero(~shared)
    template: list[tuple[int, ...]] = list(values[int(np.argmax(shared))]) if shared.any() else []
    n_sets[shared] = len(template)
    n_sets[own] = [len(values[i]) for i in own.tolist()]
    set_starts = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(n_sets, out=set_starts[1:])
    own_sets = [tuple(s) for i in own.tolist() for s in values[i]]
    if not any(template):  # the shared sets are empty (depth 0's [()]): members are the others'
        member_starts, members = _members_of_own_sets(set_starts, own, n_sets, own_sets)
        return _packed(pairs, set_starts, member_starts, members)
    # every set's owner and its place among its pair's sets
    owner = np.repeat(np.arange(k), n_sets)
    in_shared = shared[owner]
    sizes = np.empty(len(owner), dtype=np.int64)
    place = np.arange(len(owner)) - set_starts[owner]
    template_sizes = np.array([len(s) for s in template], dtype=np.int64)
    sizes[in_shared] = template_sizes[place[in_shared]] if template else 0
    sizes[~in_shared] = [len(s) for s in own_sets]
    member_starts = np.zeros(len(owner) + 1, dtype=np.int64)
    np.cumsum(sizes, out=member_starts[1:])
    members = np.empty(int(member_starts[-1]), dtype=np.int32)
    set_of_member = np.repeat(np.arange(len(owner)), sizes)
    member_shared = in_shared[set_of_member]
    if member_shared.any():
        template_flat = np.array([m for s in template for m in s], dtype=np.int32)
        template_starts = np.concatenate(([0], np.cumsum(template_sizes)))
        shared_sets = set_of_member[member_shared]
        offset = np.arange(len(members))[member_shared] - member_starts[shared_sets]
        members[member_shared] = template_flat[template_starts[place[shared_sets]] + offset]
    members[~member_shared] = [m for s in own_sets for m in s]
    return _packed(pairs, set_starts, member_starts, members)


def _members_of_own_sets(
    set_starts: np.ndarray, own: np.ndarray, n_sets: np.ndarray, own_sets: list[tuple[int, ...]]
) -> tuple[np.ndarray, np.ndarray]:
    """``(member_starts, members)`` when only the pairs ``own`` have sets with members: their
    sets' sizes placed at their positions, and their members in set order."""
    own_n = n_sets[own]
    first_of_own = np.cumsum(own_n) - own_n
    positions = np.repeat(set_starts[own] - first_of_own, own_n) + np.arange(int(own_n.sum()))
    sizes = np.zeros(int(set_starts[-1]), dtype=np.int64)
    sizes[positions] = [len(s) for s in own_sets]
    member_starts = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=member_starts[1:])
    members = np.fromiter(
        (m for s in own_sets for m in s), dtype=np.int32, count=int(member_starts[-1])
    )
    return member_starts, members


def _packed(
    pairs: np.ndarray, set_starts: np.ndarray, member_starts: np.ndarray, members: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    offsets = np.int32 if member_starts[-1] < 2**31 and set_starts[-1] < 2**31 else np.int64
    return (
        pairs.astype(np.int32).reshape(-1, 2),
        set_starts.astype(offsets),
        member_starts.astype(offsets),
        members,
    )
