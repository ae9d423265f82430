"""What a PC or FCI search found, as a result reports it: each tested pair's deciding p-value and
depth, the separating sets, and what background knowledge did.

Apart from :mod:`.pc` and :mod:`.fci` because it reads the results of both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.fci import FCIResult
from fedcausal_flwr.discovery.pair_record import collector_paused, sorted_entries, sorted_numbers
from fedcausal_flwr.discovery.pc import PCResult
from fedcausal_flwr.evidence import POSSIBLE_DSEP, Evidence


def search_evidence(result: PCResult | FCIResult) -> dict[str, Any]:
    """The result fields every PC and FCI method reports: ``knowledge`` (what background
    knowledge did, :func:`knowledge_report`), ``edge_pvalues`` (each edge's deciding p-value,
    ``kept`` of :func:`edge_pvalues`) and the per-pair ``evidence`` (:func:`search_record`)."""
    deciding = _deciding_pvalues(result)
    with collector_paused():
        return {
            "knowledge": knowledge_report(result),
            "edge_pvalues": {"kept": _kept(result.graph.names, *deciding[:3])},
            "evidence": search_record(result, deciding),
        }


def knowledge_report(result: PCResult | FCIResult) -> dict[str, list[list[str]]]:
    """What background knowledge did, by name (empty without knowledge): pairs ``removed``
    untested, ``required`` edges kept untested, edges ``oriented`` before the colliders (and for
    FCI the ``arrowheads`` it set: ``[other end, head]``)."""
    names = result.graph.names
    applied = result.knowledge
    return {key: [[names[a], names[b]] for a, b in pairs] for key, pairs in applied.items()}


def _deciding_pvalues(
    result: PCResult | FCIResult,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every tested pair (k, 2) in pair order, its largest p over the sets it was tested on,
    whether it is still adjacent, and the depth that removed it (-1: FCI's Possible-D-Sep)."""
    skeleton = result.skeleton
    pds = getattr(result, "pds_max_pvalue", {})
    largest: Any = skeleton.max_pvalue
    if pds:
        largest = dict(largest.items())
        for pair, p in pds.items():
            largest[pair] = max(largest.get(pair, -1.0), p)
    pairs, pvalues_array = sorted_numbers(largest)
    a, b = pairs[:, 0], pairs[:, 1]
    adjacent = result.graph.adjacency()[a, b]
    depths_at, depths = sorted_numbers(skeleton.removed_at, np.int64)
    n = len(result.graph.names)
    depth = np.full(len(a), POSSIBLE_DSEP, dtype=np.int64)
    if len(depths):
        codes, wanted = depths_at[:, 0] * n + depths_at[:, 1], a * n + b
        where = np.minimum(np.searchsorted(codes, wanted), len(codes) - 1)
        found = codes[where] == wanted
        depth[found] = depths[where[found]]
    return pairs, pvalues_array, adjacent, depth


def edge_pvalues(result: PCResult | FCIResult) -> dict[str, list[list]]:
    """Each tested pair's deciding p-value, by name: the largest p over the sets it was tested
    on. A ``removed`` pair ``[x, y, p, depth]``: the p that removed it (p > alpha) and its depth
    (``"possible-dsep"`` for FCI's Possible-D-Sep phase); a ``kept`` edge ``[x, y, p]``: its
    weakest evidence of dependence (p <= alpha, the smallest margin ``alpha - p``). Pairs never
    tested (background knowledge) are in neither. A result keeps ``kept`` by name and the
    removed pairs as arrays (:func:`search_record`)."""
    pairs, pvalues, adjacent, depth = _deciding_pvalues(result)
    removed = (pairs[~adjacent], pvalues[~adjacent], depth[~adjacent])
    return {
        "kept": _kept(result.graph.names, pairs, pvalues, adjacent),
        "removed": Evidence.build(result.graph.names, removed=removed).removed(),
    }


def _kept(
    names: Sequence[str], pairs: np.ndarray, pvalues: np.ndarray, adjacent: np.ndarray
) -> list[list]:
    named = np.array(names, dtype=object)
    at = np.flatnonzero(adjacent)
    return [
        [x, y, p]
        for x, y, p in zip(
            named[pairs[at, 0]].tolist(),
            named[pairs[at, 1]].tolist(),
            pvalues[at].tolist(),
            strict=True,
        )
    ]


def search_record(
    result: PCResult | FCIResult,
    deciding: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> Evidence:
    """The search's per-pair evidence as arrays: every removed pair's deciding p-value and
    depth, and every recorded separating set."""
    pairs, pvalues, adjacent, depth = deciding or _deciding_pvalues(result)
    return Evidence.build(
        result.graph.names,
        removed=(pairs[~adjacent], pvalues[~adjacent], depth[~adjacent]),
        sepsets=sorted_entries(result.skeleton.sepsets),
    )
