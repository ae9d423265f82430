"""Scores of a *list* of PAGs (IOD's output) against the true PAG.

IOD returns every PAG consistent with the evidence, so one number per graph is not enough: whether
the truth is in the list, how long the list is, and the min / mean / max of the per-graph scores.
SHD is fedCI's ``shd_PAG`` (differing off-diagonal end-mark entries: a missing or extra edge costs
2, a wrong mark 1; :func:`~fedcausal_flwr.metrics.shd` ``entries``), normalised by ``p (p - 1)``
(the paper's /20 for five variables). The paper's "best normalised SHD" is ``nshd_min``. FDR is the
share of a graph's adjacencies absent in the truth, FOR the share of its non-adjacencies present in
the truth, averaged over the list. An empty list scores ``truth_in_list = 0``, ``n_pags = 0`` and
NaN elsewhere (the paper drops such runs; report the empty rate beside: docs/choices.md, IOD).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.metrics import align, edge_fdr, non_edge_fdr, normalised_shd, shd

LIST_METRICS = ("truth_in_list", "n_pags", "shd_min", "shd_mean", "shd_max", "nshd_min",
                "nshd_mean", "nshd_max", "fdr", "for")  # fmt: skip


def pag_list_metrics(pags: Sequence[Graph], truth: Graph) -> dict[str, float]:
    """The metrics of :data:`LIST_METRICS` for ``pags`` against ``truth`` (see the module)."""
    aligned = [align(g, truth) for g in pags]
    out: dict[str, float] = {
        "truth_in_list": float(any(g == truth for g in aligned)),
        "n_pags": float(len(aligned)),
    }
    if not aligned:
        return out | {k: float("nan") for k in LIST_METRICS if k not in out}
    shds = np.array([shd(g, truth, "entries") for g in aligned], dtype=float)
    nshds = np.array([normalised_shd(g, truth, "entries") for g in aligned], dtype=float)
    for name, values in (("shd", shds), ("nshd", nshds)):
        out[f"{name}_min"] = float(values.min())
        out[f"{name}_mean"] = float(values.mean())
        out[f"{name}_max"] = float(values.max())
    out["fdr"] = float(np.mean([edge_fdr(g, truth) for g in aligned]))
    out["for"] = float(np.mean([non_edge_fdr(g, truth) for g in aligned]))
    return out


def best_normalised_shd(pags: Sequence[Graph], references: Sequence[Graph]) -> float:
    """The paper's Table III score: the smallest normalised SHD over all pairs (inferred PAG,
    reference PAG), e.g. against oracle IOD's list; NaN if either list is empty."""
    if not pags or not references:
        return float("nan")
    return min(normalised_shd(g, r, "entries") for g in pags for r in references)
