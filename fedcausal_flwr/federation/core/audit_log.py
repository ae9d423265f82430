"""A site's audit log: one JSON line per reply the site sends and per refusal or error (time,
run, method, action, disclosure class, whether it went through SecAgg+ and with whom, arrays'
shapes and dtypes, bytes, metadata keys, the privacy charge of a differentially private release,
the policy key and full text of a refusal or error), appended to a file the site chooses.
``fedcausal-flwr audit LOG`` summarises it (:mod:`fedcausal_flwr.audit`)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


class AuditLog:
    """A site's append-only JSON-lines log of what left it (one line per reply or refusal).

    Each line is written with one ``write`` on a file opened for appending (mode 600 when
    created), so concurrent ClientApp processes of one site do not interleave lines."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def append(self, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def describe(arrays: Sequence[np.ndarray]) -> tuple[list[dict], int]:
    """``([{dtype, shape}, ...], bytes)`` of the arrays a reply carries."""
    shapes = [{"dtype": str(a.dtype), "shape": [int(s) for s in a.shape]} for a in arrays]
    return shapes, int(sum(int(a.nbytes) for a in arrays))
