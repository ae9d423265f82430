"""Data fingerprints: a short digest that says whether two runs saw the same client data.

A client computes its own fingerprint and reports it in ``hello``; the server combines them in
partition order. A digest identifies the data (columns, dtypes, values, row order) and reveals
nothing else about it, so a result can record which data produced it and a re-run can check it.

The digest is built from the columns as :func:`~fedcausal_flwr.data.columns.frame_columns`
reads them (each column's bytes hashed once: its codes and level list, or its numbers), and kept
per frame: of the values as read (surrounding blanks stripped, unused categories dropped), so
data that reads the same has one fingerprint, and the server tells one site given twice by two
equal ones. Results recorded before this scheme carry a digest of pandas' row hashes
(:func:`legacy_frame_fingerprint`), those recorded before values were read so one of the columns
as given (:func:`given_frame_fingerprint`); a re-run accepts any of them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fedcausal_flwr.data.columns import Column, frame_columns, given_columns
from fedcausal_flwr.data.frame_cache import FrameCache

DIGEST_CHARS = 16


def _plain(value: Any) -> Any:
    """A level as JSON writes it, its type kept (``1``, ``1.0``, ``"1"`` and ``true`` differ)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return [type(value).__name__, str(value)]


def column_digest(column: Column) -> bytes:
    """A digest of one column's values in row order (its name and dtype are not in it): equal
    digests, equal columns row for row."""
    digest = hashlib.blake2b(digest_size=16)
    if column.codes is None:
        assert column.values is not None
        values = np.where(np.isnan(column.values), np.nan, column.values)  # one NaN pattern
        digest.update(b"f" + values.tobytes())
    else:
        levels = json.dumps([_plain(v) for v in column.uniques.tolist()])
        digest.update(f"{column.codes.dtype.str}{levels}".encode())
        digest.update(column.codes.tobytes())
    return digest.digest()


def column_digests(frame: pd.DataFrame) -> list[bytes]:
    """:func:`column_digest` of each column by position, computed once per frame object."""
    return _DIGESTS.get(frame, "digests", lambda: [column_digest(c) for c in frame_columns(frame)])


#: each frame's column digests (released with the frame)
_DIGESTS = FrameCache()


def frame_fingerprint(frame: pd.DataFrame) -> str:
    """Digest of one client's frame: column names, dtypes and every value in row order."""
    return _fingerprint(frame_columns(frame), column_digests(frame), len(frame))


def given_frame_fingerprint(frame: pd.DataFrame) -> str:
    """:func:`frame_fingerprint` of the columns as given (blanks and unused categories kept),
    as results recorded before values were read as meant carry it."""
    columns = given_columns(frame)
    return _fingerprint(columns, [column_digest(c) for c in columns], len(frame))


def _fingerprint(columns: Sequence[Column], digests: Iterable[bytes], n_rows: int) -> str:
    digest = hashlib.sha256()
    # names and dtypes as read (str of each), without building pandas' dtypes Series
    digest.update(json.dumps([[c.name, c.dtype] for c in columns]).encode())
    digest.update(n_rows.to_bytes(8, "little"))
    for part in digests:
        digest.update(part)
    return digest.hexdigest()[:DIGEST_CHARS]


def legacy_frame_fingerprint(frame: pd.DataFrame) -> str:
    """The digest results recorded before the column scheme carry (pandas' row hashes)."""
    digest = hashlib.sha256()
    columns = [[str(c), str(t)] for c, t in zip(frame.columns, frame.dtypes, strict=True)]
    digest.update(json.dumps(columns).encode())
    digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return digest.hexdigest()[:DIGEST_CHARS]


def combine_fingerprints(fingerprints: Iterable[str]) -> str:
    """One digest of the clients' fingerprints in partition order."""
    digest = hashlib.sha256(json.dumps(list(fingerprints)).encode())
    return digest.hexdigest()[:DIGEST_CHARS]


def data_fingerprint(frames: Sequence[pd.DataFrame]) -> str:
    """The fingerprint a run over ``frames`` (client 0, 1, ...) records."""
    return combine_fingerprints(frame_fingerprint(f) for f in frames)


def matches_recorded(frames: Sequence[pd.DataFrame], recorded: str) -> bool:
    """``frames`` are the data a result recorded as ``recorded`` (any scheme)."""
    if data_fingerprint(frames) == recorded:
        return True
    if combine_fingerprints(given_frame_fingerprint(f) for f in frames) == recorded:
        return True
    return combine_fingerprints(legacy_frame_fingerprint(f) for f in frames) == recorded
