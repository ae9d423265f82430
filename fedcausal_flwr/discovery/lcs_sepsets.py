"""FedLCS's consistent separating-set search, both sides of it.

:func:`sepset_search` is the server's part, a generator that asks one depth for several pairs
per request and keeps each pair's best choice; :func:`sepset_queries` and
:func:`answer_sepsets` are a client's answer (its p-values). How the clients' p-values become one
choice per pair is :mod:`~fedcausal_flwr.discovery.sepset_choice`'s. Apart from the skeleton
phase because it runs on other requests, with other stop rules.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from itertools import combinations

import numpy as np

from fedcausal_flwr.discovery.lcs_state import Knowledge, LCSOptions, Pair, SepsetRequest
from fedcausal_flwr.discovery.sepset_choice import SepsetJob
from fedcausal_flwr.stats.batch_oracle import CIOracle


def sepset_search(
    pairs: list[tuple[Pair, tuple[int, ...]]], kb: Knowledge, options: LCSOptions
) -> Generator[SepsetRequest, list, None]:
    """Batched consistent separating-set search, one depth per request; each answer is a depth's
    (choice or None, every subset found independent)."""
    best: dict[Pair, dict | None] = dict.fromkeys((p for p, _ in pairs), None)
    found: dict[Pair, list[tuple[int, ...]]] = {p: [] for p, _ in pairs}
    pools = dict(pairs)
    depth = dict.fromkeys(pools, 0)
    active = list(pools)
    while active:
        jobs = [(a, b, pools[(a, b)], depth[(a, b)]) for a, b in active]
        answers = yield SepsetRequest(jobs)
        still = []
        for (a, b, pool, lv), (answer, independent) in zip(jobs, answers, strict=True):
            key = (a, b)
            found[key].extend(tuple(z) for z in independent)
            if answer is None:
                if options.sep_stop == "first_empty" or best[key] is not None:
                    continue
            else:
                subset, p, client, *votes = answer
                current = best[key]
                rank = (votes[0] if votes else 1, p)
                if current is None or rank > (current.get("votes", 1), current["p"]):
                    chosen = {"set": tuple(subset), "p": float(p), "client": client, "level": lv}
                    best[key] = {**chosen, "votes": int(votes[0])} if votes else chosen
                if options.sep_stop == "first_found":
                    continue
            if lv + 1 <= min(options.sep_depth, len(pool)):
                depth[key] = lv + 1
                still.append(key)
        active = still
    for key, choice in best.items():
        if choice is not None:
            choice["independent"] = found[key]
    kb.sepsets.update(best)


def sepset_queries(job: SepsetJob) -> list[tuple[int, int, tuple[int, ...]]]:
    """The tests of one separating-set job, in ``itertools.combinations`` order."""
    a, b, pool, depth = job
    return [(a, b, z) for z in combinations(pool, depth)]


def answer_sepsets(
    oracle: CIOracle, jobs: Sequence[SepsetJob], alpha: float, reveal_all: bool = False
) -> np.ndarray:
    """One client's p-values of every job's subsets, NaN where not independent (not revealed);
    ``reveal_all`` (``sep_rule="fisher"``) sends every p-value (NaN only where unreliable)."""
    queries = [q for job in jobs for q in sepset_queries(job)]
    if not queries:
        return np.zeros(0)
    pvalues = oracle.test_batch(queries)
    return pvalues if reveal_all else np.where(pvalues > alpha, pvalues, np.nan)
