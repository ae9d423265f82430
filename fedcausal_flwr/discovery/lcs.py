"""FedLCS's search engine (Yu et al., Sci China Inf Sci 2025), Flower-free.

:func:`lcs_search` is a generator over the local structures of some target variables: it yields
one request per round, a :class:`PruneRequest` (a PCsimple layer for several variables, FLSke) or a
:class:`SepsetRequest` (one depth of the consistent separating-set search for several pairs), and
returns every target's :class:`LocalStructure` plus the shared :class:`Knowledge` (PC sets and
separating-set decisions, shared by all targets). A federation answers a request with votes and
separating-set choices over its clients (:mod:`~fedcausal_flwr.discovery.sepset_choice`;
:mod:`fedcausal_flwr.strategies.fedlcs`, whose module docstring documents the rules and defaults;
the wire protocol is :mod:`fedcausal_flwr.protocols.fedlcs`'s); one oracle answers it alone with
:func:`answer_prune`, :func:`answer_sepsets` and :func:`decide_sepsets`, which is
:func:`local_structure` (a site's own search, or the pooled reference). A federated client answers
its share of a request with the same :func:`answer_prune` and :func:`answer_sepsets`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.pcsimple import (
    combination_ranks,
    combination_rows,
    first_stop,
    subset_members,
)
from fedcausal_flwr.discovery.sepset_choice import (
    SEP_RULES,
    SepChoice,
    SepsetJob,
    decide_sepsets,
)
from fedcausal_flwr.discovery.sepset_choice import fisher_choice as fisher_choice
from fedcausal_flwr.discovery.sepset_choice import max_pvalue_choice as max_pvalue_choice
from fedcausal_flwr.discovery.sepset_choice import vote_choice as vote_choice
from fedcausal_flwr.graphs.colliders import orient_colliders
from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL, Graph
from fedcausal_flwr.graphs.meek import apply_meek
from fedcausal_flwr.graphs.sepsets import SEPSET_RULES, pair_key, triple_status
from fedcausal_flwr.stats.batch_oracle import CIOracle

SEP_STOPS = ("after_found", "first_empty", "first_found")
EDGE_RULES = ("and", "or")
Pair = tuple[int, int]
PruneJob = tuple[int, tuple[int, ...], int]  # (variable, candidates, depth)


# ============================================================================ options and state
@dataclass(frozen=True)
class LCSOptions:
    """Search options (their meaning and defaults: :mod:`fedcausal_flwr.strategies.fedlcs`)."""

    alpha: float = 0.05
    max_level: int = 6
    stable: bool = True
    stop_unchanged: bool = True
    sep_depth: int = 3
    sep_stop: str = "after_found"
    sep_rule: str = "votes"
    edge_rule: str = "and"
    collider_rule: str = "standard"
    extension_depth: int = 2
    random_orient: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        for name in ("max_level", "sep_depth", "extension_depth"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.sep_stop not in SEP_STOPS:
            raise ValueError(f"unknown sep_stop {self.sep_stop!r}; expected one of {SEP_STOPS}")
        if self.sep_rule not in SEP_RULES:
            raise ValueError(f"unknown sep_rule {self.sep_rule!r}; expected one of {SEP_RULES}")
        if self.edge_rule not in EDGE_RULES:
            raise ValueError(f"unknown edge_rule {self.edge_rule!r}; expected one of {EDGE_RULES}")
        if self.collider_rule not in SEPSET_RULES:
            raise ValueError(
                f"unknown collider_rule {self.collider_rule!r}; expected one of {SEPSET_RULES}"
            )


@dataclass(frozen=True)
class PruneRequest:
    """One FLSke layer for several variables: keep flags per candidate are wanted."""

    jobs: list[PruneJob]

    def __len__(self) -> int:  # one answer (the kept candidates) per job
        return len(self.jobs)


@dataclass(frozen=True)
class SepsetRequest:
    """One depth of the consistent separating-set search for several pairs."""

    jobs: list[SepsetJob]

    def __len__(self) -> int:  # one answer (a choice or None) per job
        return len(self.jobs)


@dataclass
class Knowledge:
    """What the search has learned so far (shared by all targets)."""

    pc: dict[int, tuple[int, ...]] = field(default_factory=dict)
    layers: dict[int, list[dict]] = field(default_factory=dict)
    sepsets: dict[Pair, dict | None] = field(default_factory=dict)
    edge_rule: str = "and"  # LCSOptions.edge_rule: how two learned PC sets make an edge
    collider_rule: str = "standard"  # LCSOptions.collider_rule: which sets decide a triple


@dataclass
class LocalStructure:
    """FedLCS output for one target (indices into the variable list)."""

    target: int
    parents: list[int]
    children: list[int]
    undirected: list[int]
    nodes: list[int]  # variables touched, ascending
    marks: np.ndarray  # marks over ``nodes``
    colliders: list[tuple[int, int, int]]
    undecided_pairs: list[Pair]
    depth_reached: int
    randomly_oriented: list[int] = field(default_factory=list)

    def graph(self, names: Sequence[str]) -> Graph:
        """The local graph over the touched variables (kind ``LOCAL``)."""
        return Graph(tuple(names[v] for v in self.nodes), self.marks, "LOCAL")


@dataclass
class _Need:
    pcs: set[int] = field(default_factory=set)
    pairs: dict[Pair, tuple[int, ...]] = field(default_factory=dict)  # pair -> pool


# ============================================================================ the search
#: What :func:`lcs_search` is: yields requests, is sent their answers, returns the structures.
LCSSteps = Generator[
    PruneRequest | SepsetRequest, list, tuple[dict[int, LocalStructure], Knowledge]
]


def lcs_search(n_vars: int, targets: Sequence[int], options: LCSOptions) -> LCSSteps:
    """Generator: yields requests (one round each), returns per-target structures + knowledge.

    A :class:`PruneRequest` is answered with the kept candidates per job (list of tuples), a
    :class:`SepsetRequest` with the depth's best ``(set, p, client)`` per job or ``None``.
    """
    for t in targets:
        if not 0 <= t < n_vars:
            raise KeyError(f"target index {t} is not one of the {n_vars} variables")
    kb = Knowledge(edge_rule=options.edge_rule, collider_rule=options.collider_rule)
    programs = {t: _target_program(n_vars, t, kb, options) for t in dict.fromkeys(targets)}
    needs = {t: next(p) for t, p in programs.items()}
    results: dict[int, LocalStructure] = {}
    while needs:
        pcs = sorted(set().union(*(n.pcs for n in needs.values())) - set(kb.pc))
        if pcs:
            yield from _flske(n_vars, pcs, kb, options)
        else:
            pairs: dict[Pair, tuple[int, ...]] = {}
            for n in needs.values():
                pairs.update((k, v) for k, v in n.pairs.items() if k not in kb.sepsets)
            if pairs:
                yield from _sepset_search(sorted(pairs.items()), kb, options)
        for t in list(needs):
            need = needs[t]
            if need.pcs - set(kb.pc) or set(need.pairs) - set(kb.sepsets):
                continue
            try:
                needs[t] = next(programs[t])
            except StopIteration as stop:
                results[t] = stop.value
                del needs[t]
    return results, kb


def _flske(n_vars: int, variables: list[int], kb: Knowledge, options: LCSOptions):
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


def _sepset_search(pairs: list[tuple[Pair, tuple[int, ...]]], kb: Knowledge, options: LCSOptions):
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


def _target_program(n_vars: int, t: int, kb: Knowledge, options: LCSOptions):
    """The FedLCS logic for one target; yields what it needs, returns its structure."""
    yield _Need(pcs={t})
    yield _Need(pcs=set(kb.pc[t]))
    known = {t, *kb.pc[t]}
    centres = [t]
    pairs = _unshielded_pairs(kb, known, centres)
    yield _Need(pairs=pairs)
    examined = set(pairs)
    depth = 0
    nodes, marks = _orient(kb, known, examined)
    previous_ring: list[int] = []
    while depth < options.extension_depth:
        undirected = _undirected_at(nodes, marks, t)
        if not undirected:
            break
        depth += 1
        centres = undirected if depth == 1 else previous_ring
        ring = sorted({v for c in centres for v in kb.pc[c]} - known)
        if ring:
            yield _Need(pcs=set(ring))
            known |= set(ring)
        pairs = {k: v for k, v in _unshielded_pairs(kb, known, centres).items()}
        if pairs:
            yield _Need(pairs=pairs)
            examined |= set(pairs)
        nodes, marks = _orient(kb, known, examined)
        previous_ring = ring
    randomly = []
    if options.random_orient:
        randomly = _orient_randomly(nodes, marks, t, options.seed)
    local = nodes.index(t)
    row, col = marks[local], marks[:, local]
    parents = [nodes[i] for i in np.flatnonzero((col == ARROW) & (row == TAIL))]
    children = [nodes[i] for i in np.flatnonzero((row == ARROW) & (col == TAIL))]
    undirected = [nodes[i] for i in np.flatnonzero((row == TAIL) & (col == TAIL))]
    colliders = _collider_list(nodes, marks, kb, examined)
    return LocalStructure(
        target=t,
        parents=parents,
        children=children,
        undirected=undirected,
        nodes=nodes,
        marks=marks,
        colliders=colliders,
        undecided_pairs=sorted(k for k in examined if kb.sepsets[k] is None),
        depth_reached=depth,
        randomly_oriented=randomly,
    )


def _adjacent(kb: Knowledge, known: set[int], u: int, v: int) -> bool:
    """AND rule where both PC sets are learned (OR with ``edge_rule="or"``); one-sided where only
    one is."""
    in_u = u in known and v in kb.pc[u]
    in_v = v in known and u in kb.pc[v]
    if u in known and v in known and kb.edge_rule == "and":
        return in_u and in_v
    return in_u or in_v


def _neighbours(kb: Knowledge, known: set[int], c: int) -> list[int]:
    return [v for v in kb.pc[c] if _adjacent(kb, known, c, v)]


def _unshielded_pairs(
    kb: Knowledge, known: set[int], centres: Iterable[int]
) -> dict[Pair, tuple[int, ...]]:
    """Non-adjacent pairs a, b around each centre whose neighbours are all learned, with pools."""
    out: dict[Pair, tuple[int, ...]] = {}
    for c in centres:
        around = _neighbours(kb, known, c)
        if any(v not in known for v in around):
            continue
        for a, b in combinations(sorted(around), 2):
            if not _adjacent(kb, known, a, b):
                pool = tuple(sorted((set(kb.pc[a]) | set(kb.pc[b])) - {a, b}))
                out[pair_key(a, b)] = pool
    return out


def _orient(kb: Knowledge, known: set[int], examined: set[Pair]) -> tuple[list[int], np.ndarray]:
    """Rebuild the local graph from the skeleton knowledge: colliders, then Meek R1-R4."""
    nodes = sorted(known | {v for c in known for v in kb.pc[c]})
    index = {v: i for i, v in enumerate(nodes)}
    n = len(nodes)
    marks = np.zeros((n, n), dtype=np.int8)
    for c in sorted(known):
        for v in kb.pc[c]:
            if _adjacent(kb, known, c, v):
                marks[index[c], index[v]] = marks[index[v], index[c]] = TAIL
    graph = Graph(tuple(str(v) for v in nodes), marks, "LOCAL")
    adj = (marks != NONE).astype(np.int64)
    candidates = np.triu(((adj @ adj) > 0) & (adj == 0), k=1)
    np.fill_diagonal(candidates, False)
    everyone = tuple(range(n))
    decisions: dict[Pair, list[tuple[int, ...]]] = {}
    for i, j in zip(*np.nonzero(candidates), strict=True):
        # undecided marker: with the conservative rule every centre is "ambiguous"
        decisions[(int(i), int(j))] = [tuple(v for v in everyone if v not in (i, j)), ()]
    for a, b in sorted(examined):
        choice = kb.sepsets.get((a, b))
        if choice is not None and a in index and b in index:
            sets = _deciding_sets(kb, choice)
            decisions[pair_key(index[a], index[b])] = [tuple(index[v] for v in z) for z in sets]
    orient_colliders(graph, decisions, rule=_triple_rule(kb), conflict="existing")
    apply_meek(graph, mode="complete")
    return nodes, graph.marks


def _deciding_sets(kb: Knowledge, choice: dict) -> list[tuple[int, ...]]:
    """The sets that decide a pair's triples: the chosen one (``standard``), or every set found
    independent at the searched depths (the chosen one among them)."""
    return [choice["set"]] if kb.collider_rule == "standard" else choice["independent"]


def _triple_rule(kb: Knowledge) -> str:
    """:func:`~fedcausal_flwr.graphs.sepsets.triple_status`'s rule over :func:`_deciding_sets`
    (one set under ``conservative`` is the standard rule, and leaves the undecided marker alone)."""
    return "conservative" if kb.collider_rule == "standard" else kb.collider_rule


def _undirected_at(nodes: list[int], marks: np.ndarray, t: int) -> list[int]:
    i = nodes.index(t)
    return [nodes[j] for j in np.flatnonzero((marks[i] == TAIL) & (marks[:, i] == TAIL))]


def _collider_list(
    nodes: list[int], marks: np.ndarray, kb: Knowledge, examined: set[Pair]
) -> list[tuple[int, int, int]]:
    out = []
    index = {v: i for i, v in enumerate(nodes)}
    rule = _triple_rule(kb)
    for a, b in sorted(examined):
        choice = kb.sepsets.get((a, b))
        if choice is None or a not in index or b not in index:
            continue
        ia, ib = index[a], index[b]
        for ic in np.flatnonzero((marks[ia] != NONE) & (marks[ib] != NONE)):
            if marks[ia, ic] != ARROW or marks[ib, ic] != ARROW:
                continue
            if triple_status(_deciding_sets(kb, choice), nodes[ic], rule) == "collider":
                out.append((a, nodes[ic], b))
    return out


def _orient_randomly(nodes: list[int], marks: np.ndarray, t: int, seed: int) -> list[int]:
    """The paper's completion: orient T's undirected edges at random, never closing a cycle."""
    rng = np.random.default_rng([seed, t])
    i = nodes.index(t)
    done = []
    for v in _undirected_at(nodes, marks, t):
        j = nodes.index(v)
        if marks[i, j] != TAIL or marks[j, i] != TAIL:
            continue  # oriented by Meek after an earlier random choice
        first = (i, j) if rng.random() < 0.5 else (j, i)
        for a, b in (first, first[::-1]):
            if not _reaches(marks, b, a):
                marks[a, b], marks[b, a] = ARROW, TAIL
                break
        done.append(v)
        graph = Graph(tuple(map(str, nodes)), marks, "LOCAL")
        apply_meek(graph, mode="complete")
        marks[:] = graph.marks
    return done


def _reaches(marks: np.ndarray, start: int, goal: int) -> bool:
    """Is there a directed path start --> ... --> goal?"""
    directed = (marks == ARROW) & (marks.T == TAIL)
    seen, stack = {start}, [start]
    while stack:
        u = stack.pop()
        if u == goal:
            return True
        for w in np.flatnonzero(directed[u]):
            if int(w) not in seen:
                seen.add(int(w))
                stack.append(int(w))
    return False


# ============================================================================ answering
def sepset_queries(job: SepsetJob) -> list[tuple[int, int, tuple[int, ...]]]:
    """The tests of one separating-set job, in ``itertools.combinations`` order."""
    a, b, pool, depth = job
    return [(a, b, z) for z in combinations(pool, depth)]


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


def local_structure(
    oracle: CIOracle, targets: Sequence[int], options: LCSOptions
) -> tuple[dict[int, LocalStructure], Knowledge]:
    """Run the whole search against one oracle (one site, or pooled data): LCS without votes."""
    steps = lcs_search(oracle.n_vars, targets, options)
    answer: list[tuple[int, ...]] | list[tuple[SepChoice | None, tuple]]
    try:
        request = next(steps)
        while True:
            if isinstance(request, PruneRequest):
                answer = answer_prune(oracle, request.jobs, options.alpha, options.stable)
            else:
                reveal = options.sep_rule == "fisher"
                values = answer_sepsets(oracle, request.jobs, options.alpha, reveal)[None, :]
                answer = decide_sepsets(request.jobs, values, options.alpha, options.sep_rule)
            request = steps.send(answer)
    except StopIteration as stop:
        return stop.value


# ============================================================================ targets and results
def parse_targets(target: str | int | Sequence, variables: Sequence[str]) -> list[int]:
    """Target names (or indices) -> indices; ``"all"`` = every variable; comma-separated allowed."""
    if target is None or target == "":
        raise ValueError("fedlcs needs the option 'target' (a variable name, names, or 'all')")
    if isinstance(target, str):
        if target.strip() == "all":
            return list(range(len(variables)))
        items: list = [s.strip() for s in target.split(",") if s.strip()]
    elif isinstance(target, int):
        items = [target]
    else:
        items = list(target)
    out = []
    for item in items:
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            if not 0 <= int(item) < len(variables):
                raise KeyError(f"target index {item} is out of range for {len(variables)} vars")
            out.append(int(item))
        elif str(item) in variables:
            out.append(list(variables).index(str(item)))
        else:
            raise KeyError(f"target {item!r} is not a variable; the clients have {list(variables)}")
    return list(dict.fromkeys(out))


def options_dict(options: LCSOptions) -> dict[str, Any]:
    """The options as a plain dict (payloads, results); ``LCSOptions(**d)`` rebuilds them."""
    return {k: getattr(options, k) for k in options.__dataclass_fields__}


def structure_payload(
    names: Sequence[str],
    targets: Sequence[int],
    results: Mapping[int, LocalStructure],
    kb: Knowledge,
) -> dict:
    """Result fields shared by ``fedlcs`` and ``lcs-pooled``: per-target structure + knowledge."""

    def named(items: Iterable[int]) -> list[str]:
        return [names[v] for v in items]

    per_target = {}
    for t in targets:
        s = results[t]
        per_target[names[t]] = {
            "parents": named(s.parents),
            "children": named(s.children),
            "undirected": named(s.undirected),
            "pc_flske": named(kb.pc[t]),
            "graph": s.graph(names).to_json(),
            "colliders": [named(c) for c in s.colliders],
            "undecided_pairs": [named(p) for p in s.undecided_pairs],
            "extension_depth_reached": s.depth_reached,
            "randomly_oriented": named(s.randomly_oriented),
        }
    first = results[targets[0]]
    main = per_target[names[first.target]]
    return {
        "graph": first.graph(names),
        "variables": named(first.nodes),
        "target": names[first.target],
        "parents": main["parents"],
        "children": main["children"],
        "undirected": main["undirected"],
        "targets": per_target,
        "skeleton_layers": {
            names[v]: [
                {
                    "level": lv["level"],
                    "candidates": lv["candidates"],
                    "removed": named(lv["removed"]),
                }
                for lv in layers
            ]
            for v, layers in sorted(kb.layers.items())
        },
        "pc_sets": {names[v]: named(pc) for v, pc in sorted(kb.pc.items())},
        "consistent_sepsets": {
            f"{names[a]}|{names[b]}": None
            if c is None
            else {
                "set": named(c["set"]),
                "p": c["p"],
                "client": c["client"],
                "level": c["level"],
                **({"votes": c["votes"]} if "votes" in c else {}),
                "independent": [named(z) for z in c["independent"]],
            }
            for (a, b), c in sorted(kb.sepsets.items())
        },
    }


def full_graph(local: Graph, names: Sequence[str]) -> Graph:
    """Embed a ``LOCAL`` graph into all ``names`` (untouched pairs: no edge), e.g. for metrics."""
    marks = np.zeros((len(names), len(names)), dtype=np.int8)
    idx = [list(names).index(v) for v in local.names]
    marks[np.ix_(idx, idx)] = local.marks
    return Graph(tuple(names), marks, "LOCAL")
