"""FedLCS's skeleton phase (FLSke): learning the PC sets layer by layer, both sides of it.

:func:`flske` is the server's part, a generator that asks one PCsimple layer of several
variables per request; :func:`answer_prune` is a client's (or a single oracle's) answer, which
replays the layer exactly while fetching its tests in a few batches. The batched replay
(:class:`_Scan`, :class:`_PruneJob`) is most of this module and is why it stands apart from the
search that schedules it.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Generator, Sequence

import numpy as np

from fedcausal_flwr.discovery.lcs_state import Knowledge, LCSOptions, PruneJob, PruneRequest
from fedcausal_flwr.discovery.pcsimple import (
    combination_ranks,
    combination_rows,
    first_stop,
    subset_members,
)
from fedcausal_flwr.stats.batch_oracle import CIOracle


def flske(
    n_vars: int, variables: list[int], kb: Knowledge, options: LCSOptions
) -> Generator[PruneRequest, list, None]:
    """Batched FLSke: every variable's layer l in the same request."""
    cpc = {v: tuple(u for u in range(n_vars) if u != v) for v in variables}
    depth = dict.fromkeys(variables, 0)
    active = [v for v in variables if len(cpc[v]) > 0 and options.max_level >= 0]
    for v in variables:
        kb.layers[v] = []
    while active:
        jobs = [(v, cpc[v], depth[v]) for v in active]
        kept = yield PruneRequest(jobs)
        still = []
        for (v, before, lv), now in zip(jobs, kept, strict=True):
            now = tuple(now)
            removed = [u for u in before if u not in now]
            kb.layers[v].append({"level": lv, "candidates": len(before), "removed": removed})
            cpc[v], depth[v] = now, lv + 1
            unchanged = options.stop_unchanged and lv >= 1 and not removed
            if not unchanged and len(now) > lv + 1 and lv + 1 <= options.max_level:
                still.append(v)
        active = still
    kb.pc.update(cpc)


class _Scan:
    """What one client knows of one candidate's scan in a prune job (indices: subset order).

    ``known`` / ``dependent`` cover the subsets fetched so far (past their end: unknown).
    """

    def __init__(self, total: int):
        self.total = total
        self.known = np.zeros(0, dtype=bool)
        self.dependent = np.zeros(0, dtype=bool)
        self.dependent_prefix = 0  # every subset before it is known dependent
        self.fetched = 0  # the end of the prefix asked for so far
        self.partners: list[tuple[int, int]] = []  # (job, position) scanning the same test pair

    def fill(self, index: np.ndarray, independent: np.ndarray) -> None:
        """Record fetched tests (``independent``: p > alpha) at these subset indices."""
        if index.size == 0:
            return
        need = int(index.max()) + 1
        if need > len(self.known):
            grow = min(self.total, max(need, 2 * len(self.known))) - len(self.known)
            self.known = np.concatenate([self.known, np.zeros(grow, dtype=bool)])
            self.dependent = np.concatenate([self.dependent, np.zeros(grow, dtype=bool)])
        self.known[index] = True
        self.dependent[index] = ~independent
        not_dependent = np.flatnonzero(~self.dependent[self.dependent_prefix :])
        self.dependent_prefix = (
            self.dependent_prefix + int(not_dependent[0]) if not_dependent.size else len(self.known)
        )


class _PruneJob:
    """One prune job's layer replay, kept up to date by events rather than redone per pass.

    Per candidate (a position): ``at``, where its scan stops for its current pool (the number of
    subsets if it is kept), ``row``, that subset's members, and whether it is ``removed`` or
    ``open`` (stopped at an unknown test). A candidate is rescanned only when its tests grew
    (``todo``) or a member of its stop subset left the pool (``watchers``); a candidate that
    rejoins the pool rescans everything after it from the known-dependent prefix (``full``).
    ``served`` are the open candidates whose next test conditions on no earlier open one.
    """

    def __init__(self, target: int, candidates: tuple[int, ...], depth: int, stable: bool):
        if depth < 0:
            raise ValueError(f"prune job for variable {target}: level {depth} is negative")
        if target in candidates:
            raise ValueError(f"prune job for variable {target} lists it among its candidates")
        if len(set(candidates)) != len(candidates):
            raise ValueError(f"prune job for variable {target} repeats a candidate: {candidates}")
        self.target, self.depth, self.size, self.stable = target, depth, len(candidates), stable
        self.candidates = np.asarray(candidates, dtype=np.int64)
        self.ascending = bool(np.all(np.diff(self.candidates) > 0))
        total = math.comb(self.size - 1, depth) if self.size else 0
        self.scans = [_Scan(total) for _ in range(self.size)]
        self.lookup: np.ndarray | None = None  # variable -> position, -1 if not a candidate
        self.at = [0] * self.size
        self.row: list[tuple[int, ...]] = [()] * self.size
        self.removed = np.zeros(self.size, dtype=bool)
        self.open = np.zeros(self.size, dtype=bool)
        self.watchers: list[set[int]] = [set() for _ in range(self.size)]
        self.todo, self.full = set(range(self.size)), set(range(self.size))
        self.served: set[int] = set()

    def members(self, x: int, start: int, stop: int) -> np.ndarray:
        return subset_members(self.size, self.depth, x, start, stop)

    def conditioning(self, members: np.ndarray) -> np.ndarray:
        """Conditioning sets given as candidate positions -> their variables, ascending."""
        values = self.candidates[members]
        return values if self.ascending else np.sort(values, axis=1)

    def locate(self, x: int, variables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which conditioning sets (rows of variables) candidate ``x``'s scan holds, and where."""
        if self.lookup is None or len(self.lookup) <= int(variables.max(initial=0)):
            size = max(int(variables.max(initial=0)), int(self.candidates.max())) + 1
            self.lookup = np.full(size, -1, dtype=np.int64)
            self.lookup[self.candidates] = np.arange(self.size)
        members = self.lookup[variables]
        inside = (members >= 0).all(axis=1)
        members = members[inside]
        members -= members > x
        if not self.ascending:
            members.sort(axis=1)
        return inside, combination_ranks(members, self.size - 1)

    def replay(self) -> None:
        """Bring the layer's replay (:func:`~.pcsimple.apply_layer` against what is known) up
        to date, in scan order from the first candidate that changed."""
        queue = sorted(self.todo)
        queued = set(queue)
        self.todo = set()
        recheck = set()  # candidates whose served status may have changed
        while queue:
            x = heapq.heappop(queue)
            recheck.add(x)
            scan = self.scans[x]
            start = scan.dependent_prefix
            if x in self.full:
                self.full.discard(x)
            else:  # the pool only shrank since ``at``: everything before it is still settled
                start = max(start, self.at[x])
            gone = None
            if not self.stable and self.removed[:x].any():
                gone = self.removed.copy()
                gone[x:] = False  # candidates after x are still in its pool
            at = first_stop(scan.dependent, self.size, self.depth, x, start, gone)
            was_removed, was_open = self.removed[x], self.open[x]
            settled = at < len(scan.known) and scan.known[at]
            self.removed[x] = settled and at < scan.total
            self.open[x] = at < scan.total and not settled
            row: tuple[int, ...] = ()
            if at < scan.total:
                subset = combination_rows(self.size - 1, self.depth, at, at + 1)[0].tolist()
                row = tuple(u + (u >= x) for u in subset)
            self.at[x] = at
            if self.stable:
                continue
            if row != self.row[x]:
                for u in self.row[x]:
                    if u < x:
                        self.watchers[u].discard(x)
                for u in row:
                    if u < x:
                        self.watchers[u].add(x)
                self.row[x] = row
            if self.removed[x] != was_removed:
                if self.removed[x]:  # x left the later pools: rescan who stopped on a subset with x
                    later = set(self.watchers[x])
                else:  # x is back in the later pools
                    later = set(range(x + 1, self.size))
                    self.full |= later
                for y in later - queued:
                    queued.add(y)
                    heapq.heappush(queue, y)
            if self.open[x] != was_open:
                recheck |= self.watchers[x]
        for x in recheck:
            waits = not self.stable and any(u < x and self.open[u] for u in self.row[x])
            if self.open[x] and not waits:
                self.served.add(x)
            else:
                self.served.discard(x)

    def kept(self) -> tuple[int, ...]:
        return tuple(int(u) for u in self.candidates[~self.removed])


def answer_prune(
    oracle: CIOracle,
    jobs: Sequence[PruneJob],
    alpha: float,
    stable: bool,
    first: int = 4,
    growth: float = 2.0,
) -> list[tuple[int, ...]]:
    """One client's kept candidates per job: PCsimple's layer with its own tests.

    The result is exactly a sequential replay (:func:`~.pcsimple.apply_layer`), but tests are
    fetched in batches: each pass replays every job; a candidate that meets an unknown test
    stays open (kept, its later tests not scanned in this pass), and every open candidate gets
    its next tests (in scan order, a prefix that at least doubles) in ONE oracle batch. A candidate
    removed early thus costs few tests beyond the one that removed it, and the number of batches
    grows with log(tests per candidate).
    Tests that condition on a candidate scanned earlier whose fate is still open, or on one this
    pass removed, are not fetched speculatively (with the on-the-fly pool the replay may never
    ask them); the first open candidate of a job is always served, so every pass progresses.
    ``first`` and ``growth`` set the prefix sizes (fewer tests vs fewer oracle batches).

    Each candidate's scan is an array over its subsets (:func:`first_stop`), redone only when
    its tests or its pool changed (:class:`_PruneJob`), so a pass costs work per change rather
    than Python work per subset, and only fetched tests become query tuples; a fetched test is
    recorded in every job that scans the same pair and depth.
    """
    prunes = [_PruneJob(int(v), tuple(int(u) for u in cpc), int(lv), stable) for v, cpc, lv in jobs]
    by_pair: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    for j, job in enumerate(prunes):
        for x, u in enumerate(job.candidates.tolist()):
            by_pair.setdefault((min(u, job.target), max(u, job.target), job.depth), []).append(
                (j, x)
            )
    for slots in by_pair.values():
        for j, x in slots:
            prunes[j].scans[x].partners = [s for s in slots if s != (j, x)]
    while True:
        for job in prunes:
            if job.todo:
                job.replay()
        if not any(job.served for job in prunes):
            return [job.kept() for job in prunes]
        asks = []
        for job in prunes:
            for x in sorted(job.served):
                scan, at = job.scans[x], job.at[x]
                stop = min(scan.total, max(math.ceil(growth * scan.fetched), at + first))
                members = job.members(x, at, stop)
                # tests on a candidate removed in this pass or, on the fly, on one scanned
                # earlier whose fate is open, are not fetched ahead (the replay may not ask them)
                skip = job.removed.copy()
                if not stable:
                    skip[:x] |= job.open[:x]
                wanted = np.ones(len(members), dtype=bool)
                if skip.any():  # one column at a time: any(axis=1) over short rows is slow
                    for column in members.T:
                        wanted &= ~skip[column]
                wanted[0] = True  # the test the replay asked
                seen = min(stop, len(scan.known)) - at
                if seen > 1:
                    wanted[1:seen] &= ~scan.known[at + 1 : at + seen]
                index = at + np.flatnonzero(wanted)
                variables = job.conditioning(members[wanted])
                low, high = sorted((int(job.candidates[x]), job.target))
                asks.append(
                    (job, x, index, variables, [(low, high, tuple(z)) for z in variables.tolist()])
                )
                scan.fetched = stop
        batch = list(dict.fromkeys(q for *_, queries in asks for q in queries))
        values = dict(zip(batch, oracle.test_batch(batch).tolist(), strict=True))
        for job, x, index, variables, queries in asks:
            independent = np.array([values[q] for q in queries]) > alpha
            job.scans[x].fill(index, independent)
            job.todo.add(x)
            for j, y in job.scans[x].partners:
                inside, where = prunes[j].locate(y, variables)
                prunes[j].scans[y].fill(where, independent[inside])
                prunes[j].todo.add(y)
