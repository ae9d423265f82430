"""Exact sums of the clients' integer vectors (Flower-free): plain, or decoded from SecAgg+.

SecAgg+ returns the mean of clipped, quantised values; with weight 1 per client and the recipe of
:func:`~fedcausal_flwr.federation.core.messages.secure_bound_for` the mean times the number of
clients is an exact integer vector. Both paths give the same int64 sum, so a method behaves the
same with and without SecAgg+.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from fedcausal_flwr.federation.core.messages import ClientProtocolError, FederationError
from fedcausal_flwr.stats.tables import counting_threads

#: Largest distance from an integer a decoded SecAgg+ sum may have (float64 rounding only).
INTEGRAL_TOLERANCE = 1e-3


def plain_sum(
    vectors: Sequence[np.ndarray], pids: Sequence[int], action: str, server_round: int
) -> np.ndarray:
    """The int64 sum of one flat vector per client (all of one length), added in place: the
    server holds the replies and one total, never a clients x cells stack (100 clients' dense
    tables on andes are gigabytes)."""
    arrays = [np.asarray(v) for v in vectors]
    lengths = {pid: v.shape[0] for pid, v in zip(pids, arrays, strict=True)}
    if len(set(lengths.values())) > 1:
        raise ClientProtocolError(
            f"secure action {action!r} in round {server_round}: clients returned "
            f"vectors of different lengths {lengths}"
        )
    total = np.zeros(arrays[0].shape[0] if arrays else 0, dtype=np.int64)

    def add_span(span: slice) -> None:
        # a block at a time, in place: no int64 copy of a client's (narrow) reply
        for start in range(span.start, span.stop, _SUM_BLOCK):
            block = slice(start, min(start + _SUM_BLOCK, span.stop))
            for vector in arrays:
                np.add(total[block], vector[block], out=total[block], casting="unsafe")

    spans = _spans(total.size, min(counting_threads(), max(1, total.size // _THREADED_SUM)))
    if len(spans) < 2:
        add_span(spans[0])
    else:  # numpy's additions release the GIL
        with ThreadPoolExecutor(len(spans)) as pool:
            list(pool.map(add_span, spans))
    return total


#: Cells added a block at a time (the total's block stays in cache across the clients).
_SUM_BLOCK = 2**16
#: Cells from which a sum runs in threads.
_THREADED_SUM = 2**22


def _spans(size: int, parts: int) -> list[slice]:
    """``parts`` contiguous slices covering ``0 .. size``."""
    edges = np.linspace(0, size, parts + 1).astype(int)
    return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def decode_secure_mean(
    mean: Sequence[np.ndarray], n_clients: int, action: str, server_round: int
) -> np.ndarray:
    """The exact int64 sum behind SecAgg+'s mean of ``n_clients`` vectors."""
    if len(mean) != 1:
        raise FederationError(f"SecAgg+ returned {len(mean)} arrays, expected 1")
    scaled = np.asarray(mean[0], dtype=np.float64) * n_clients
    total = np.rint(scaled).astype(np.int64)
    err = float(np.max(np.abs(scaled - total))) if total.size else 0.0
    if err > INTEGRAL_TOLERANCE:
        raise FederationError(
            f"SecAgg+ sum for {action!r} in round {server_round} is not integral "
            f"(max deviation {err:.3g}); the exact-sum recipe was violated"
        )
    return total
