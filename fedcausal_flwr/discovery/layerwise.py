"""One PC-stable depth on a given skeleton: the client step of layer-wise voting methods.

Layer-wise federated PC (FedPC of Huang et al.; FedLCS's FLSke) broadcasts the *global* skeleton at
every conditioning-set size ``l``; each client prunes it once at that size with its own tests and
reports what it kept. That is exactly one iteration of :func:`~.skeleton.skeleton_steps`'s loop
started from the broadcast graph, so this module reuses its query order and its bookkeeping
(every separating set of the depth is recorded, from both sides) instead of a second PC loop.
"""

from __future__ import annotations

import numpy as np

from fedcausal_flwr.discovery.driver import drive
from fedcausal_flwr.discovery.skeleton import Skeleton, apply_depth, depth_queries
from fedcausal_flwr.stats.batch_oracle import CIOracle


def depth_steps(adjacency: np.ndarray, depth: int, alpha: float):
    """Generator: one batch (all tests of ``depth`` on ``adjacency``), returns a :class:`Skeleton`.

    Adjacency sets are frozen for the whole depth (PC-stable); an edge is removed if any of its
    tests says independent (``p > alpha``); the result's ``sepsets`` hold every separating set of
    the removed pairs. No batch is yielded when no node has more than ``depth`` neighbours.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if depth < 0:
        raise ValueError(f"depth must be >= 0, got {depth}")
    adjacency = np.array(adjacency, dtype=bool)
    p = adjacency.shape[0]
    if adjacency.shape != (p, p) or np.any(adjacency != adjacency.T) or adjacency.diagonal().any():
        raise ValueError("adjacency must be a symmetric boolean matrix with an empty diagonal")
    result = Skeleton(adjacency=adjacency)
    queries = depth_queries(adjacency, depth)
    if queries:
        pvalues = yield queries
        removed = apply_depth(result, queries, np.asarray(pvalues, dtype=float), alpha, depth)
        for x, y in removed:
            adjacency[x, y] = adjacency[y, x] = False
        result.depths.append({"depth": depth, "tests": len(queries), "removed": len(removed)})
    return result


def prune_depth(oracle: CIOracle, adjacency: np.ndarray, depth: int, alpha: float) -> Skeleton:
    """:func:`depth_steps` answered by a local oracle."""
    return drive(depth_steps(adjacency, depth, alpha), oracle)
