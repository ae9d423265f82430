"""One PC-stable level on a given skeleton: the client step of layer-wise voting methods.

Layer-wise federated PC (FedPC of Huang et al.; FedLCS's FLSke) broadcasts the *global* skeleton at
every conditioning-set size ``l``; each client prunes it once at that size with its own tests and
reports what it kept. That is exactly one iteration of :func:`~.skeleton.skeleton_steps`'s loop
started from the broadcast graph, so this module reuses its query order and its bookkeeping
(every separating set of the level is recorded, from both sides) instead of a second PC loop.
"""

from __future__ import annotations

import numpy as np

from fedcausal_flwr.discovery.driver import drive
from fedcausal_flwr.discovery.skeleton import Skeleton, apply_level, level_queries
from fedcausal_flwr.stats.batch_oracle import CIOracle


def level_steps(adjacency: np.ndarray, level: int, alpha: float):
    """Generator: one batch (all tests of ``level`` on ``adjacency``), returns a :class:`Skeleton`.

    Adjacency sets are frozen for the whole level (PC-stable); an edge is removed if any of its
    tests says independent (``p > alpha``); the result's ``sepsets`` hold every separating set of
    the removed pairs. No batch is yielded when no node has more than ``level`` neighbours.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if level < 0:
        raise ValueError(f"level must be >= 0, got {level}")
    adjacency = np.array(adjacency, dtype=bool)
    p = adjacency.shape[0]
    if adjacency.shape != (p, p) or np.any(adjacency != adjacency.T) or adjacency.diagonal().any():
        raise ValueError("adjacency must be a symmetric boolean matrix with an empty diagonal")
    result = Skeleton(adjacency=adjacency)
    queries = level_queries(adjacency, level)
    if queries:
        pvalues = yield queries
        removed = apply_level(result, queries, np.asarray(pvalues, dtype=float), alpha, level)
        for x, y in removed:
            adjacency[x, y] = adjacency[y, x] = False
        result.levels.append({"level": level, "tests": len(queries), "removed": len(removed)})
    return result


def prune_level(oracle: CIOracle, adjacency: np.ndarray, level: int, alpha: float) -> Skeleton:
    """:func:`level_steps` answered by a local oracle."""
    return drive(level_steps(adjacency, level, alpha), oracle)
