"""FedCDnv's first server step: the union ``O`` of the clients' variables and what it allows.

:func:`stitch_order` fixes the global variable order, :func:`embed` and :func:`observed_mask`
place a client's matrices in it, :func:`overlap_matrix` says which pairs some client observes
together, :func:`union_graph` builds G0, and :func:`status_matrix` reads from G0 and the overlap
which pairs are definite (Theorem 3.1, Lemmas 3.2 and 3.3). Apart because this is the theory of
non-identical variable sets, independent of any test's p-value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedcausal_flwr.discovery.tpss import (
    DEFINITE_CAUSAL,
    DEFINITE_NONCAUSAL,
    LEMMA_SCOPES,
    NONDEFINITE_CAUSAL,
    NONDEFINITE_NONCAUSAL,
)
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE


def stitch_order(column_lists: Sequence[Sequence[str]]) -> list[str]:
    """The union of the clients' columns in an order consistent with every client's order where
    possible (ties by first appearance); first-appearance order if the orders conflict."""
    first: dict[str, int] = {}
    for cols in column_lists:
        for c in cols:
            first.setdefault(str(c), len(first))
    after: dict[str, set[str]] = {c: set() for c in first}
    indegree = dict.fromkeys(first, 0)
    for cols in column_lists:
        for u, v in zip(cols, list(cols)[1:], strict=False):
            if str(v) not in after[str(u)]:
                after[str(u)].add(str(v))
                indegree[str(v)] += 1
    ready = sorted((c for c, k in indegree.items() if k == 0), key=first.__getitem__)
    order: list[str] = []
    while ready:
        c = ready.pop(0)
        order.append(c)
        for v in after[c]:
            indegree[v] -= 1
            if indegree[v] == 0:
                ready.append(v)
        ready.sort(key=first.__getitem__)
    return order if len(order) == len(first) else list(first)


def embed(local: np.ndarray, observed: Sequence[int], d: int, fill: float | int = 0) -> np.ndarray:
    """A client's ``d_k x d_k`` matrix placed in a ``d x d`` one at its global ids (``fill``
    elsewhere)."""
    local = np.asarray(local)
    ids = np.asarray(observed, dtype=np.int64)
    if local.shape != (len(ids), len(ids)):
        raise ValueError(f"a {len(ids)}-variable client matrix must be square, got {local.shape}")
    out = np.full((d, d), fill, dtype=np.result_type(local.dtype, np.asarray(fill).dtype))
    out[np.ix_(ids, ids)] = local
    return out


def observed_mask(observed: Sequence[Sequence[int] | np.ndarray], d: int) -> np.ndarray:
    """``(m, d)`` bool: client k observes variable v."""
    mask = np.zeros((len(observed), d), dtype=bool)
    for k, ids in enumerate(observed):
        mask[k, np.asarray(ids, dtype=np.int64)] = True
    return mask


def overlap_matrix(observed: np.ndarray) -> np.ndarray:
    """``(d, d)`` bool: some client observes both variables (the diagonal: observed at all)."""
    seen = np.asarray(observed, dtype=np.int64)
    return (seen.T @ seen) > 0


def union_graph(marks: np.ndarray) -> np.ndarray:
    """G0 from the clients' embedded PAGs ``(m, d, d)``: an adjacency if any client reports it,
    an arrowhead if any client has it there; every other mark (tails included) is a circle."""
    marks = np.asarray(marks)
    adjacent = (marks != NONE).any(axis=0)
    arrow = (marks == ARROW).any(axis=0)
    return np.where(adjacent, np.where(arrow, ARROW, CIRCLE), NONE).astype(np.int8)


def status_matrix(
    adjacency: np.ndarray, overlap: np.ndarray, lemma_scope: str = "all"
) -> np.ndarray:
    """The paper's ``stat`` (values -2, -1, 1, 2; 0 on the diagonal) from G's adjacency.

    * Non-overlapping pairs (Category I) start at -1 and become -2 by Theorem 3.1 iff
      ``A_X & A_Y`` is empty, both are non-empty, every ``Y' in A_Y`` overlaps X and every
      ``X' in A_X`` overlaps Y.
    * Overlapping pairs (Category II) are definite (+-2) unless Lemma 3.2 (X or Y lies in a
      non-overlapping pair still at -1) or Lemma 3.3 (some non-overlapping pair {A, B} lies in
      ``(A_X | A_Y) - {X, Y}``) makes them non-definite. Leaving X and Y out (a separating set of
      X, Y never contains them) changes nothing: a non-overlapping {X, B} with B next to Y has
      the common neighbour Y, so X is already in Z_n. Lemma 3.3 uses every non-overlapping pair,
      including those Theorem 3.1 settled. ``lemma_scope="adjacent"`` applies the lemmas to
      adjacent pairs only.
    """
    if lemma_scope not in LEMMA_SCOPES:
        raise ValueError(f"unknown lemma_scope {lemma_scope!r}; expected one of {LEMMA_SCOPES}")
    adj = np.asarray(adjacency, dtype=bool).copy()
    d = adj.shape[0]
    if adj.shape != (d, d) or np.any(adj != adj.T):
        raise ValueError(f"adjacency must be a symmetric square matrix, got shape {adj.shape}")
    overlap = np.asarray(overlap, dtype=bool)
    if overlap.shape != (d, d):
        raise ValueError(f"overlap must be {d}x{d}, got {overlap.shape}")
    eye = np.eye(d, dtype=bool)
    np.fill_diagonal(adj, False)
    overlap = overlap | eye
    apart = ~overlap  # non-overlapping pairs (diagonal excluded)
    if np.any(adj & apart):
        bad = np.argwhere(adj & apart)[0]
        raise ValueError(f"variables {tuple(bad)} are adjacent but never observed together")
    nb = adj.astype(np.int64)
    common = (nb @ nb.T) > 0
    has_nb = np.asarray(adj.any(axis=1))  # asarray: numpy's stubs allow a scalar here
    # unseen[i, j]: some neighbour of j is never observed with i
    unseen = (apart.astype(np.int64) @ nb.T) > 0
    definite_apart = apart & ~common & has_nb[:, None] & has_nb[None, :] & ~unseen & ~unseen.T
    stat = np.zeros((d, d), dtype=np.int8)
    stat[apart] = NONDEFINITE_NONCAUSAL
    stat[definite_apart] = DEFINITE_NONCAUSAL
    unresolved = np.asarray((apart & ~definite_apart).any(axis=1))  # Z_n of Lemma 3.2

    rows, cols = np.triu_indices(d, k=1)
    together = overlap[rows, cols]
    rows, cols = rows[together], cols[together]
    span = adj[rows] | adj[cols]
    span[np.arange(len(rows)), rows] = False
    span[np.arange(len(rows)), cols] = False
    lemma33 = ((span.astype(np.int64) @ apart.astype(np.int64)) * span).sum(axis=1) > 0
    tainted = unresolved[rows] | unresolved[cols] | lemma33
    adjacent = adj[rows, cols]
    taint_non_edges = tainted if lemma_scope == "all" else np.zeros_like(tainted)
    values = np.where(
        adjacent,
        np.where(tainted, NONDEFINITE_CAUSAL, DEFINITE_CAUSAL),
        np.where(taint_non_edges, NONDEFINITE_NONCAUSAL, DEFINITE_NONCAUSAL),
    )
    stat[rows, cols] = values
    stat[cols, rows] = values
    return stat
