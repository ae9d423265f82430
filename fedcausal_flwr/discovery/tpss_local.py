"""FedCDnv's first client step, C-InitPag: FCI on the client's own variables.

Besides the PAG it keeps what the server's rules need later: per pair the largest p-value of
the tests FCI ran (:func:`record_max_pvalues`, which watches the search's batches pass) and one
separating set per removed pair (:func:`first_sepsets`). Apart because it is the only step that
runs a whole search; the server never sees these values before the client transforms them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.driver import Steps, drive
from fedcausal_flwr.discovery.fci import fci_steps
from fedcausal_flwr.discovery.tpss import Pair
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.stats.batch_oracle import CIOracle


@dataclass
class LocalFCI:
    """A client's round-1 outcome over its own variables (local ids)."""

    graph: Graph  # Pag0
    max_pvalues: np.ndarray  # (d_k, d_k): max p over the tests FCI ran per pair; NaN if none
    sepsets: dict[Pair, tuple[int, ...]]  # the separating set FCI found per removed pair
    n_tests: int = 0


def record_max_pvalues(steps: Steps, max_pvalues: np.ndarray) -> Steps:
    """Pass a search's batches through unchanged, keeping per pair the largest p-value answered.

    This is our reading of the paper's per-pair p-value (Algorithm 1 line 4; docs/choices.md,
    FedCDnv): the maximum over every test of ``(Xi, Xj | Z)`` the search ran. For a pair FCI
    keeps, every test had ``p <= alpha`` (Def. 3.4's statistic); for a removed pair the maximum
    exceeds ``alpha`` (Def. 3.5's "some Z with p > alpha + theta2" is "max p > alpha + theta2").
    NaN answers are ignored.
    """
    try:
        batch = next(steps)
        while True:
            answers = yield batch
            p = np.asarray(answers, dtype=float)
            if len(batch):
                xs = np.fromiter((q[0] for q in batch), dtype=np.int64, count=len(batch))
                ys = np.fromiter((q[1] for q in batch), dtype=np.int64, count=len(batch))
                np.fmax.at(max_pvalues, (xs, ys), p)
                np.fmax.at(max_pvalues, (ys, xs), p)
            batch = steps.send(answers)
    except StopIteration as stop:
        return stop.value


def first_sepsets(sepsets: Mapping) -> dict[Pair, tuple[int, ...]]:
    """One separating set per removed pair: the first one FCI recorded (sorted ids).

    The skeleton phase records every set of the removal level (sizes increase level by level, so
    the first is a minimum-size set among those tried: our reading of Condition 3.7's "minimal",
    docs/choices.md, FedCDnv); the Possible-D-Sep phase records the one set that removed the edge.
    """
    out: dict[Pair, tuple[int, ...]] = {}
    for (x, y), sets in sepsets.items():
        if isinstance(sets, (set, frozenset)):
            chosen = sets
        else:
            sets = list(sets)
            if not sets:
                continue
            chosen = sets[0]
        out[(min(x, y), max(x, y))] = tuple(sorted(int(v) for v in chosen))
    return out


def local_fci(oracle: CIOracle, alpha: float = 0.05, **fci_options: Any) -> LocalFCI:
    """C-InitPag: FCI on one client's oracle, with the per-pair max p-values and sepsets."""
    p = oracle.n_vars
    max_p = np.full((p, p), np.nan)
    before = oracle.n_computed
    result = drive(
        record_max_pvalues(fci_steps(oracle.variables, alpha, **fci_options), max_p), oracle
    )
    return LocalFCI(
        graph=result.graph,
        max_pvalues=max_p,
        sepsets=first_sepsets(result.sepsets),
        n_tests=oracle.n_computed - before,
    )
