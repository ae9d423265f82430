"""Data fingerprints: a short digest that says whether two runs saw the same client data.

A client computes its own fingerprint and reports it in ``hello``; the server combines them in
partition order. A digest identifies the data (columns, dtypes, values, row order) and reveals
nothing else about it, so a result can record which data produced it and a re-run can check it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

import pandas as pd

DIGEST_CHARS = 16


def frame_fingerprint(frame: pd.DataFrame) -> str:
    """Digest of one client's frame: column names, dtypes and every value in row order."""
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
