"""PCsimple: the parents-and-children set of one target, layer by layer (Li et al. 2015).

Layer ``l`` tests every candidate ``X`` against the target ``T`` given subsets ``Z`` of size ``l``
of
the other candidates; ``X`` leaves the candidate set at the first ``Z`` with ``p > alpha``.
Candidates
are scanned in ascending index order and ``Z`` in ``itertools.combinations`` order.

By default the candidate pool is updated *on the fly* inside a layer (a removed ``X`` is no longer
used in later conditioning sets of the same layer), as in the FedLCS paper's Table 2 trace; with
``stable=True`` the pool is frozen at the layer start. Either way the layer's tests are known up to
a superset at the layer start (on-the-fly pools only shrink), so a layer is **one batch**: the
superset is asked, then the layer is replayed sequentially against the answers.

The search stops when ``|CPC| <= l`` or after ``max_level``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations, islice

from fedcausal_flwr.stats.oracle import Query, normalise_query


@dataclass
class LocalSkeleton:
    """Candidate parents/children of ``target`` and the separating set that removed each other
    node."""

    target: int
    pc: list[int]
    sepsets: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removed_at: dict[int, int] = field(default_factory=dict)
    layers: list[dict] = field(default_factory=list)  # {"level", "tests", "removed"}

    @property
    def n_tests(self) -> int:
        return sum(lv["tests"] for lv in self.layers)


def layer_queries(target: int, candidates: Sequence[int], level: int) -> list[Query]:
    """All tests layer ``level`` may need (the superset when the pool shrinks on the fly)."""
    out: list[Query] = []
    for x in candidates:
        others = [v for v in candidates if v != x]
        out.extend(normalise_query(x, target, z) for z in combinations(others, level))
    return list(dict.fromkeys(out))


def apply_layer(
    target: int,
    candidates: Sequence[int],
    level: int,
    pvalue: Callable[[Query], float | None],
    alpha: float,
    stable: bool = False,
    resume: dict | None = None,
) -> tuple[list[int], dict[int, tuple[int, ...]]]:
    """Replay one layer sequentially; return the kept candidates and the new separating sets.

    ``pvalue`` may return ``None`` for a test not known yet (a batched replay): the candidate's
    fate is then open, it stays for now and its later tests are not scanned. ``resume`` (kept by
    the caller across replays) remembers, per candidate and pool, how many leading subsets are
    already known to be dependent, so a replay does not scan them again.
    """
    current = list(candidates)
    found: dict[int, tuple[int, ...]] = {}
    for x in candidates:
        pool = [v for v in (candidates if stable else current) if v != x]
        key = (x, tuple(pool))
        start = 0 if resume is None else resume.get(key, 0)
        for index, z in enumerate(islice(combinations(pool, level), start, None), start):
            p = pvalue(normalise_query(x, target, z))
            if p is None:
                if resume is not None:
                    resume[key] = index
                break
            if p > alpha:
                found[x] = tuple(z)
                current.remove(x)
                break
    return current, found


def pcsimple_steps(
    n_vars: int,
    target: int,
    alpha: float,
    max_level: int = 3,
    stable: bool = False,
    candidates: Sequence[int] | None = None,
):
    """Generator: one batch per layer; returns a :class:`LocalSkeleton`."""
    if not 0 <= target < n_vars:
        raise KeyError(f"target index {target} is not one of the {n_vars} variables")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    cpc = sorted(v for v in (range(n_vars) if candidates is None else candidates) if v != target)
    result = LocalSkeleton(target=target, pc=cpc)
    level = 0
    while len(cpc) > level and level <= max_level:
        queries = layer_queries(target, cpc, level)
        pvalues = yield queries
        answers = dict(zip(queries, (float(p) for p in pvalues), strict=True))
        kept, found = apply_layer(target, cpc, level, answers.__getitem__, alpha, stable)
        result.sepsets.update(found)
        result.removed_at.update(dict.fromkeys(found, level))
        result.layers.append({"level": level, "tests": len(queries), "removed": len(found)})
        cpc = kept
        level += 1
    result.pc = cpc
    return result
