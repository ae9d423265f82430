"""How FedLCS's server chooses a depth's separating set from its clients' p-values (``sep_rule``).

Each rule reads one job's ``clients x subsets`` block (subsets in ``itertools.combinations`` order,
clients in partition order) and returns the chosen subset's column, a client position and the
p-value the search ranks by; :func:`choose_sepsets` applies one rule to every job of a request.
With one client (a site alone, or the pooled reference) all rules choose the same set.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np

SEP_RULES = ("votes", "max_p", "fisher")
SepsetJob = tuple[int, int, tuple[int, ...], int]  # (a, b, pool, depth)
# (set, p, client position[, votes]): votes (clients that found the set) rank before p
SepChoice = tuple[tuple[int, ...], float, int] | tuple[tuple[int, ...], float, int, int]


def max_pvalue_choice(block: np.ndarray, alpha: float) -> tuple[int, int, float] | None:
    """In a (clients x candidates) block, the first (candidate, client) with the largest
    ``p > alpha`` scanning candidates outer, clients inner; ``None`` if no p exceeds alpha."""
    scores = np.where(block > alpha, block, -np.inf).T  # candidates x clients, NaN -> -inf
    if scores.size == 0:
        return None
    flat = int(np.argmax(scores))
    if not np.isfinite(scores.flat[flat]):
        return None
    candidate, client = divmod(flat, block.shape[0])
    return candidate, client, float(scores.flat[flat])


def vote_choice(block: np.ndarray, alpha: float, need: int) -> tuple[int, int, float, int] | None:
    """In a (clients x candidates) block, the candidate found independent (``p > alpha``) by the
    most clients, at least ``need``; ties go to the larger *smallest* p of those clients (the set
    whose weakest agreement is strongest: a set that looks independent only because a weak
    dependence went undetected gets a low p at some client), then to the first candidate.
    Returns (candidate, client with its largest p, that smallest p, votes), ``None`` if no
    candidate has ``need`` votes. NaN (not revealed, unreliable) is no vote."""
    if need < 1:
        raise ValueError(f"a separating set needs at least one client's vote, got need={need}")
    found = block > alpha
    votes = found.sum(axis=0)
    if votes.size == 0 or votes.max() < need:
        return None
    weakest = np.where(found, block, np.inf).min(axis=0)
    top = np.flatnonzero(votes == votes.max())
    candidate = int(top[np.argmax(weakest[top])])
    client = int(np.argmax(np.where(found[:, candidate], block[:, candidate], -np.inf)))
    return candidate, client, float(weakest[candidate]), int(votes[candidate])


def fisher_choice(block: np.ndarray, alpha: float) -> tuple[int, int, float] | None:
    """In a (clients x candidates) block of every client's p-value, the first candidate with the
    largest Fisher-combined p (``chi2_2K`` upper tail of ``-2 sum log p`` over the K clients) if
    it exceeds alpha; NaN (unreliable, read as dependent) makes a candidate's combined p 0.
    Returns (candidate, client with its largest p, combined p) or ``None``."""
    if block.size == 0:
        return None
    combined = fisher_combined(block)
    candidate = int(np.argmax(combined))
    if not combined[candidate] > alpha:
        return None
    client = int(np.argmax(block[:, candidate]))
    return candidate, client, float(combined[candidate])


def fisher_combined(block: np.ndarray) -> np.ndarray:
    """Fisher's combination of a (clients x candidates) block per candidate (NaN reads as 0)."""
    from scipy.stats import chi2  # here: a client's message imports this module, needs no chi2

    with np.errstate(divide="ignore"):
        statistic = -2.0 * np.log(block).sum(axis=0)
    return np.nan_to_num(chi2.sf(statistic, 2 * block.shape[0]), nan=0.0)


def _job_blocks(jobs: Sequence[SepsetJob], pvalues: np.ndarray, rule: str):
    """Each job's subsets (``itertools.combinations`` order) and its ``clients x subsets`` block."""
    if rule not in SEP_RULES:
        raise ValueError(f"unknown sep_rule {rule!r}; expected one of {SEP_RULES}")
    start = 0
    for job in jobs:
        subsets = list(combinations(job[2], job[3]))
        yield subsets, pvalues[:, start : start + len(subsets)]
        start += len(subsets)


def _choice(subsets: list, block: np.ndarray, alpha: float, rule: str, need: int):
    if rule == "votes":
        voted = vote_choice(block, alpha, need)
        if voted is None:
            return None
        candidate, client, p, votes = voted
        return subsets[candidate], p, client, votes
    pick = max_pvalue_choice(block, alpha) if rule == "max_p" else fisher_choice(block, alpha)
    return None if pick is None else (subsets[pick[0]], pick[2], pick[1])


def _independent(subsets: list, block: np.ndarray, alpha: float, rule: str, need: int) -> tuple:
    if rule == "fisher":
        found = fisher_combined(block) > alpha if block.size else np.zeros(0, dtype=bool)
    else:
        found = (block > alpha).sum(axis=0) >= (need if rule == "votes" else 1)
    return tuple(subsets[i] for i in np.flatnonzero(found))


def independent_sets(
    jobs: Sequence[SepsetJob], pvalues: np.ndarray, alpha: float, rule: str, need: int = 1
) -> list[tuple[tuple[int, ...], ...]]:
    """Per job, every subset the federation found independent under ``rule``'s criterion:
    at least ``need`` clients with ``p > alpha`` (``votes``), any client (``max_p``), or the
    Fisher-combined p above alpha (``fisher``). The majority and conservative collider rules
    read them (``LCSOptions.collider_rule``)."""
    return [_independent(z, b, alpha, rule, need) for z, b in _job_blocks(jobs, pvalues, rule)]


def choose_sepsets(
    jobs: Sequence[SepsetJob],
    pvalues: np.ndarray,
    alpha: float,
    rule: str = "max_p",
    need: int = 1,
) -> list[SepChoice | None]:
    """Per job, the depth's separating set from a ``clients x tests`` matrix by ``rule``:
    ``max_p`` (the paper's: largest p over subsets x clients, :func:`max_pvalue_choice`),
    ``votes`` (:func:`vote_choice`, ``need`` clients) or ``fisher`` (:func:`fisher_choice`).
    With one client all three choose the same set."""
    return [_choice(z, b, alpha, rule, need) for z, b in _job_blocks(jobs, pvalues, rule)]


def decide_sepsets(
    jobs: Sequence[SepsetJob], pvalues: np.ndarray, alpha: float, rule: str, need: int = 1
) -> list[tuple[SepChoice | None, tuple[tuple[int, ...], ...]]]:
    """Per job, what the search is sent: (:func:`choose_sepsets`'s choice,
    :func:`independent_sets`'s sets), in one pass over the jobs."""
    return [
        (_choice(z, b, alpha, rule, need), _independent(z, b, alpha, rule, need))
        for z, b in _job_blocks(jobs, pvalues, rule)
    ]
