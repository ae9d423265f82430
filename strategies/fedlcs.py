"""FedLCS: federated local causal structure of target variables (Yu et al., Sci China Inf Sci 2025).

The server learns, for each target T, its parents, children and still-undirected neighbours;
clients only ever run CI tests on their own rows. Three stages, all driven by one search
(:func:`lcs_search`) that yields *requests* and is answered either by a federation (votes, max-p)
or by one local oracle (:func:`local_structure`, used for the per-client and pooled baselines):

**FLSke** (layer-wise federated PCsimple). For every variable V whose parents-and-children set is
needed, the server broadcasts V's current candidate set and a layer ``l``; each client replays
PCsimple's layer ``l`` on it with its own tests
(:func:`~fedcausal_flwr.discovery.pcsimple.apply_layer`, on-the-fly pool unless ``stable``) and
returns one keep flag per candidate. The server keeps a candidate with ``votes >= ratio * K``
(K = clients answering; exact decimal comparison, i.e. ``ceil(ratio * K)`` votes, Eq. 2 of the
paper: ratio 0.4 gives 2 of 3, 2 of 5, 4 of 10, 6 of 15; FedPC's MATLAB ``round`` would give 1 of
3). A variable stops when (digest A2) ``stop_unchanged`` is on, ``l >= 1`` and the layer removed
nothing; when ``|CPC| <= l`` for the next layer; or after ``max_level`` (default 6, inclusive).
**All pending variables advance together**: one round per layer, whatever their number.

**FLSori**. PC sets of every member of PC_T (one batched FLSke stage), then the AND rule: an edge
u - v exists iff v is in PC_u and u in PC_v when both are learned; if only PC_u is learned, v in
PC_u keeps it provisionally (digest A6). For every unshielded ``a - T - b`` (a, b not adjacent)
the consistent separating set is searched over ``U = (PC_a | PC_b) \\ {a, b}``, level ``l = 0, 1,
...`` up to ``sep_depth`` (default 3, as FedPC's code; the paper gives no value): each client
tests ``a _||_ b | Z`` for every ``Z`` of size ``l`` in U (``itertools.combinations`` order) and
uploads the p-values above alpha only (NaN otherwise). The server keeps the level's largest
p over (subsets, clients) with :func:`~fedcausal_flwr.strategies.fedpc_vote.max_pvalue_choice`
(first maximum: subset order, then partition id) and the overall maximum over levels with strict
``>`` (lower levels win ties). ``sep_stop="first_empty"`` stops a pair at the first level where no
client found an independent set (the paper's literal rule, which misses a collider whose ends are
marginally dependent); the default ``"after_found"`` stops at the first empty level *after* a set
was found; ``"first_found"`` stops at the first level where some client found one (PC's
"first separating set"). The max over levels x subsets x clients favours spurious high p: with
more, smaller clients a set containing a true collider (tests of low power, or df = 0 giving
p = 1) can win over the lower-level true set. Measured with ``experiments/fedlcs.py`` (5000
rows, up to 40 targets, N = 3, 5, 10, 15; mean arrowhead F1 ``after_found`` / ``first_found``):
insurance .660/.570, .599/.511, .513/.414, .473/.468; win95pts .354/.318, .301/.253, .240/.183,
.193/.179; andes .681/.641, .666/.582, .607/.510, .448/.424; alarm .746/.717, .579/.699,
.407/.611, .270/.535. ``after_found`` is better in 13 of 16 settings and stays the default;
ALARM with 5 or more clients is the exception where stopping at the first set found is better.
No set found: the triple stays undecided (never a collider). Pairs of all triples and
all targets are searched in the same rounds. Colliders (``T`` not in the set) are oriented in
causal-learn's triple order without overwriting arrowheads, then Meek R1-R4
(:func:`~fedcausal_flwr.graphs.orientation.orient_colliders`, ``apply_meek``).

**FLEori** (extension, then backtracking by Meek). While some T - X stays undirected, up to
``extension_depth`` (default 2) rings: depth 1 learns the PC sets of the neighbours of the
undirected X and examines triples centred at X; depth d > 1 learns the next ring and examines
triples centred at ring d - 1. After each depth the orientation is rebuilt from the skeleton
knowledge and every separating-set decision, so new arrows propagate back to T. The undirected
X of one depth are handled together (the paper treats them one after another). An outer node
whose PC set is unknown has unknown adjacencies to other outer nodes; triples are examined only
at centres whose neighbours are all learned, so every pair decided is known to be non-adjacent.

What stays undirected is reported as ``undirected``. The paper orients it at random under
acyclicity; ``random_orient=True`` does so (seeded by ``seed`` and the target), **off** by default.

Caches: PC sets and separating-set decisions are deterministic functions of the variable (pair),
so they are shared across targets; several targets (option ``target="A,B"`` or ``"all"``) run in
the same rounds and give exactly the per-target results.

Wire protocol (after ``hello``; ``variables, levels, test, alpha`` in every payload):

================  ========================================  =====================================
action            payload                                    reply (per client, server sees each)
================  ========================================  =====================================
``lcs_prune``     ``jobs = [[V, [CPC...], l], ...]``,        uint8 keep flag per candidate, jobs
                  ``stable``                                 concatenated
``lcs_sepsets``   ``jobs = [[a, b, [U...], l], ...]``        float64 p per subset of size l of U
                                                             (NaN where p <= alpha), concatenated
================  ========================================  =====================================

What the server learns: each client's keep/remove decision for every candidate of every layer,
and the p-values of the conditioning sets under which a client found a triple's ends independent.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.pcsimple import apply_layer
from fedcausal_flwr.federation.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.registry import register_method
from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL, Graph
from fedcausal_flwr.graphs.orientation import apply_meek, orient_colliders, pair_key
from fedcausal_flwr.metrics import local_metrics
from fedcausal_flwr.result import Result
from fedcausal_flwr.stats.oracle import CIOracle, normalise_query
from fedcausal_flwr.strategies.fedpc_vote import max_pvalue_choice, vote_threshold
from fedcausal_flwr.strategies.voting import (
    DiscreteMethodStrategy,
    option_flag,
    option_number,
    parse_common,
    pooled_oracle,
)

SEP_STOPS = ("after_found", "first_empty", "first_found")
Pair = tuple[int, int]
PruneJob = tuple[int, tuple[int, ...], int]  # (variable, candidates, level)
SepsetJob = tuple[int, int, tuple[int, ...], int]  # (a, b, pool, level)
SepChoice = tuple[tuple[int, ...], float, int]  # (set, p, client position)


# ============================================================================ options and state
@dataclass(frozen=True)
class LCSOptions:
    """Search options (see the module docstring for their meaning and defaults)."""

    alpha: float = 0.05
    max_level: int = 6
    stable: bool = False
    stop_unchanged: bool = True
    sep_depth: int = 3
    sep_stop: str = "after_found"
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


@dataclass(frozen=True)
class PruneRequest:
    """One FLSke layer for several variables: keep flags per candidate are wanted."""

    jobs: list[PruneJob]


@dataclass(frozen=True)
class SepsetRequest:
    """One level of the consistent separating-set search for several pairs."""

    jobs: list[SepsetJob]


@dataclass
class Knowledge:
    """What the search has learned so far (shared by all targets)."""

    pc: dict[int, tuple[int, ...]] = field(default_factory=dict)
    layers: dict[int, list[dict]] = field(default_factory=dict)
    sepsets: dict[Pair, dict | None] = field(default_factory=dict)


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
def lcs_search(
    n_vars: int, targets: Sequence[int], options: LCSOptions
) -> Generator[PruneRequest | SepsetRequest, list, tuple[dict[int, LocalStructure], Knowledge]]:
    """Generator: yields requests (one round each), returns per-target structures + knowledge.

    A :class:`PruneRequest` is answered with the kept candidates per job (list of tuples), a
    :class:`SepsetRequest` with the level's best ``(set, p, client)`` per job or ``None``.
    """
    for t in targets:
        if not 0 <= t < n_vars:
            raise KeyError(f"target index {t} is not one of the {n_vars} variables")
    kb = Knowledge()
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
    level = dict.fromkeys(variables, 0)
    active = [v for v in variables if len(cpc[v]) > 0 and options.max_level >= 0]
    for v in variables:
        kb.layers[v] = []
    while active:
        jobs = [(v, cpc[v], level[v]) for v in active]
        kept = yield PruneRequest(jobs)
        still = []
        for (v, before, lv), now in zip(jobs, kept, strict=True):
            now = tuple(now)
            removed = [u for u in before if u not in now]
            kb.layers[v].append({"level": lv, "candidates": len(before), "removed": removed})
            cpc[v], level[v] = now, lv + 1
            unchanged = options.stop_unchanged and lv >= 1 and not removed
            if not unchanged and len(now) > lv + 1 and lv + 1 <= options.max_level:
                still.append(v)
        active = still
    kb.pc.update(cpc)


def _sepset_search(pairs: list[tuple[Pair, tuple[int, ...]]], kb: Knowledge, options: LCSOptions):
    """Batched max-p consistent separating-set search, one level per request."""
    best: dict[Pair, dict | None] = dict.fromkeys((p for p, _ in pairs), None)
    pools = dict(pairs)
    level = dict.fromkeys(pools, 0)
    active = list(pools)
    while active:
        jobs = [(a, b, pools[(a, b)], level[(a, b)]) for a, b in active]
        answers = yield SepsetRequest(jobs)
        still = []
        for (a, b, pool, lv), answer in zip(jobs, answers, strict=True):
            key = (a, b)
            if answer is None:
                if options.sep_stop == "first_empty" or best[key] is not None:
                    continue
            else:
                subset, p, client = answer
                if best[key] is None or p > best[key]["p"]:
                    best[key] = {"set": tuple(subset), "p": float(p), "client": client, "level": lv}
                if options.sep_stop == "first_found":
                    continue
            if lv + 1 <= min(options.sep_depth, len(pool)):
                level[key] = lv + 1
                still.append(key)
        active = still
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
    """AND rule where both PC sets are learned; one-sided where only one is."""
    in_u = u in known and v in kb.pc[u]
    in_v = v in known and u in kb.pc[v]
    if u in known and v in known:
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
            decisions[pair_key(index[a], index[b])] = [tuple(index[v] for v in choice["set"])]
    orient_colliders(graph, decisions, rule="conservative", conflict="existing")
    apply_meek(graph, mode="complete")
    return nodes, graph.marks


def _undirected_at(nodes: list[int], marks: np.ndarray, t: int) -> list[int]:
    i = nodes.index(t)
    return [nodes[j] for j in np.flatnonzero((marks[i] == TAIL) & (marks[:, i] == TAIL))]


def _collider_list(
    nodes: list[int], marks: np.ndarray, kb: Knowledge, examined: set[Pair]
) -> list[tuple[int, int, int]]:
    out = []
    index = {v: i for i, v in enumerate(nodes)}
    for a, b in sorted(examined):
        choice = kb.sepsets.get((a, b))
        if choice is None or a not in index or b not in index:
            continue
        ia, ib = index[a], index[b]
        for ic in np.flatnonzero((marks[ia] != NONE) & (marks[ib] != NONE)):
            if marks[ia, ic] == ARROW and marks[ib, ic] == ARROW and nodes[ic] not in choice["set"]:
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
    a, b, pool, level = job
    return [(a, b, z) for z in combinations(pool, level)]


def answer_prune(
    oracle: CIOracle,
    jobs: Sequence[PruneJob],
    alpha: float,
    stable: bool,
    first: int = 4,
    growth: float = 2.0,
) -> list[tuple[int, ...]]:
    """One client's kept candidates per job: PCsimple's layer with its own tests.

    The result is exactly a sequential replay (:func:`apply_layer`), but tests are fetched in
    batches: each pass replays every job; a candidate that meets an unknown test stays open
    (kept, its later tests not scanned in this pass), and every open candidate gets its next
    tests (in scan order, a prefix that at least doubles) in ONE oracle batch. A candidate
    removed early thus costs few tests beyond the one that removed it, and the number of batches
    grows with log(tests per candidate). Each job remembers how many leading subsets of a
    candidate are known dependent, so a pass does not rescan them.
    Tests that condition on a candidate scanned earlier whose fate is still open, or on one this
    pass removed, are not fetched speculatively (with the on-the-fly pool the replay may never
    ask them); the first open candidate of a job is always served, so every pass progresses.
    ``first`` and ``growth`` set the prefix sizes (fewer tests vs fewer oracle batches).
    """
    scans: dict[tuple[int, int], list] = {}
    for j, (v, cpc, lv) in enumerate(jobs):
        for x in cpc:
            others = [u for u in cpc if u != x]
            scans[(j, x)] = [normalise_query(x, v, z) for z in combinations(others, lv)]
    position = {key: {q: i for i, q in enumerate(qs)} for key, qs in scans.items()}
    fetched = dict.fromkeys(scans, 0)
    known: dict = {}
    resumes: list[dict] = [{} for _ in jobs]
    while True:
        short: dict[tuple[int, int], int] = {}
        kept_lists = []
        for j, (v, cpc, lv) in enumerate(jobs):

            def pvalue(q, j=j, v=v, short=short):
                if q in known:
                    return known[q]
                key = (j, q[1] if q[0] == v else q[0])
                short.setdefault(key, position[key][q])
                return None  # open: this candidate stays until the fetch; the pass is replayed

            kept = apply_layer(v, cpc, lv, pvalue, alpha, stable, resume=resumes[j])[0]
            kept_lists.append(tuple(kept))
        if not short:
            return kept_lists
        removed = [set(cpc) - set(kept) for (_, cpc, _), kept in zip(jobs, kept_lists, strict=True)]
        pending: dict[int, list[int]] = {}
        for j, x in short:
            pending.setdefault(j, []).append(x)
        batch = []
        for key, at in short.items():
            j, x = key
            # on the fly, a candidate scanned earlier whose fate is still open may leave the
            # pool: defer tests that condition on it (the first open candidate never waits)
            rank = {u: i for i, u in enumerate(jobs[j][1])}
            unsure = set() if stable else {u for u in pending[j] if rank[u] < rank[x]}
            if unsure and not unsure.isdisjoint(scans[key][at][2]):
                continue
            stop = min(len(scans[key]), max(math.ceil(growth * fetched[key]), at + first))
            skip = removed[j] | unsure
            batch.append(scans[key][at])  # the test the replay asked
            batch.extend(
                q for q in scans[key][at + 1 : stop] if q not in known and skip.isdisjoint(q[2])
            )
            fetched[key] = stop
        batch = list(dict.fromkeys(batch))
        known.update(zip(batch, oracle.test_batch(batch).tolist(), strict=True))


def answer_sepsets(oracle: CIOracle, jobs: Sequence[SepsetJob], alpha: float) -> np.ndarray:
    """One client's p-values of every job's subsets, NaN where not independent (not revealed)."""
    queries = [q for job in jobs for q in sepset_queries(job)]
    if not queries:
        return np.zeros(0)
    pvalues = oracle.test_batch(queries)
    return np.where(pvalues > alpha, pvalues, np.nan)


def choose_sepsets(
    jobs: Sequence[SepsetJob], pvalues: np.ndarray, alpha: float
) -> list[SepChoice | None]:
    """Per job, the largest p over (subsets, clients) of a ``clients x tests`` matrix."""
    out: list[SepChoice | None] = []
    start = 0
    for job in jobs:
        subsets = list(combinations(job[2], job[3]))
        pick = max_pvalue_choice(pvalues[:, start : start + len(subsets)], alpha)
        start += len(subsets)
        out.append(None if pick is None else (subsets[pick[0]], pick[2], pick[1]))
    return out


def local_structure(
    oracle: CIOracle, targets: Sequence[int], options: LCSOptions
) -> tuple[dict[int, LocalStructure], Knowledge]:
    """Run the whole search against one oracle (one site, or pooled data): LCS without votes."""
    steps = lcs_search(oracle.n_vars, targets, options)
    try:
        request = next(steps)
        while True:
            if isinstance(request, PruneRequest):
                answer = answer_prune(oracle, request.jobs, options.alpha, options.stable)
            else:
                values = answer_sepsets(oracle, request.jobs, options.alpha)[None, :]
                answer = choose_sepsets(request.jobs, values, options.alpha)
            request = steps.send(answer)
    except StopIteration as stop:
        return stop.value


# ============================================================================ strategy
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


class FedLCSStrategy(DiscreteMethodStrategy):
    """FedLCS server: see the module docstring for rules, ties and the wire protocol."""

    name = "fedlcs"

    def __init__(
        self,
        target: str | int | Sequence = "",
        ratio: float | str = 0.4,
        lcs: LCSOptions | None = None,
        **common: Any,
    ):
        super().__init__(**common)
        vote_threshold(ratio, 1)
        self.target_option = target
        self.ratio = ratio
        self.options = lcs or LCSOptions(alpha=self.alpha)
        if self.options.alpha != self.alpha:
            raise ValueError(f"alpha {self.alpha} differs from the LCS options' {self.options}")
        self.targets: list[int] = []
        self.steps: Generator | None = None
        self.request: PruneRequest | SepsetRequest | None = None
        self.results: dict[int, LocalStructure] | None = None
        self.knowledge: Knowledge | None = None
        self.client_tests: dict[int, int] = {}
        self.stage_rounds = {"prune": 0, "sepsets": 0}
        self.session = uuid.uuid4().hex  # scopes the clients' test caches to this run

    def next_request(self) -> Request | None:
        if self.results is not None:
            return None
        if self.steps is None:
            self.start()
            self.targets = parse_targets(self.target_option, self.variables)
            self.steps = lcs_search(len(self.variables), self.targets, self.options)
            self._advance(None)
        if self.request is None:
            return None
        payload = {**self.base_payload(), "session": self.session}
        if isinstance(self.request, PruneRequest):
            jobs = [[v, list(cpc), lv] for v, cpc, lv in self.request.jobs]
            return Request("lcs_prune", {**payload, "jobs": jobs, "stable": self.options.stable})
        jobs = [[a, b, list(pool), lv] for a, b, pool, lv in self.request.jobs]
        return Request("lcs_sepsets", {**payload, "jobs": jobs})

    def _advance(self, answer: list | None) -> None:
        try:
            self.request = next(self.steps) if answer is None else self.steps.send(answer)
        except StopIteration as stop:
            self.request = None
            self.results, self.knowledge = stop.value

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        for r in replies:
            self.client_tests[r.client] = self.client_tests.get(r.client, 0) + int(
                r.meta.get("tests", 0)
            )
        if request.action == "lcs_prune":
            answer = self._vote(replies)
            self.stage_rounds["prune"] += 1
            self.annotate(stage="flske", variables=len(answer))
        else:
            jobs = self.request.jobs
            n = sum(math.comb(len(pool), lv) for _, _, pool, lv in jobs)
            values = np.stack([self._vector(r, n, np.float64) for r in replies]).astype(float)
            answer = choose_sepsets(jobs, values, self.alpha)
            clients = [r.client for r in replies]
            answer = [None if a is None else (a[0], a[1], clients[a[2]]) for a in answer]
            self.stage_rounds["sepsets"] += 1
            self.annotate(stage="sepsets", pairs=len(jobs), tests=n)
        self._advance(answer)

    def _vector(self, reply: Reply, n: int, dtype) -> np.ndarray:
        values = np.asarray(reply.arrays[0]) if reply.arrays else np.zeros(0)
        if values.shape != (n,):
            raise ClientProtocolError(
                f"client {reply.client} sent {values.shape} values, expected {n} for "
                f"this {self.request.__class__.__name__}"
            )
        return values.astype(dtype)

    def _vote(self, replies: list[Reply]) -> list[tuple[int, ...]]:
        jobs = self.request.jobs
        n = sum(len(cpc) for _, cpc, _ in jobs)
        flags = [self._vector(r, n, np.int64) for r in replies]
        for r, f in zip(replies, flags, strict=True):
            if not np.isin(f, (0, 1)).all():
                raise ClientProtocolError(f"client {r.client} sent keep flags other than 0/1")
        votes = np.sum(flags, axis=0)
        keep = votes >= vote_threshold(self.ratio, len(replies))
        out, start = [], 0
        for _, cpc, _ in jobs:
            flags = keep[start : start + len(cpc)]
            out.append(tuple(v for v, k in zip(cpc, flags, strict=True) if k))
            start += len(cpc)
        return out

    def result_payload(self) -> dict:
        return {
            **structure_payload(self.variables, self.targets, self.results, self.knowledge),
            "ratio": str(self.ratio),
            "options": options_dict(self.options),
            "stage_rounds": dict(self.stage_rounds),
            "client_tests": {str(c): n for c, n in sorted(self.client_tests.items())},
            "tests": int(sum(self.client_tests.values())),
        }


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
            }
            for (a, b), c in sorted(kb.sepsets.items())
        },
    }


# ============================================================================ baselines
class LCSBaselineStrategy(DiscreteMethodStrategy):
    """Shared set-up of FedLCS's baselines: the target option and the search options."""

    def __init__(self, target: str | int | Sequence = "", lcs: LCSOptions | None = None, **common):
        super().__init__(**common)
        self.target_option = target
        self.options = lcs or LCSOptions(alpha=self.alpha)
        if self.options.alpha != self.alpha:
            raise ValueError(f"alpha {self.alpha} differs from the LCS options' {self.options}")
        self.targets: list[int] = []


class LCSLocalStrategy(LCSBaselineStrategy):
    """``fedlcs-local``: each client runs the whole search (PCsimple + orientation) on its own rows.

    One round (action ``lcs_local``, payload ``targets`` + ``lcs`` options): every client returns an
    int8 ``n_targets x p x p`` stack, each slice the target's local graph embedded into all
    variables (:func:`full_graph`). Nothing is combined: the main result is the lowest partition
    id's, ``extra["client_graphs"]`` holds all, and :func:`lcs_local_summary` scores them
    (``-avg`` and the oracle ``-best``, like ``local``'s :func:`local_summary`). The server
    learns every client's local structures.
    """

    name = "fedlcs-local"

    def __init__(self, target: str | int | Sequence = "", lcs: LCSOptions | None = None, **common):
        super().__init__(target, lcs, **common)
        self.client_graphs: dict[int, dict[str, Graph]] = {}
        self.client_tests: dict[int, int] = {}

    def next_request(self) -> Request | None:
        if self.client_graphs:
            return None
        self.start()
        self.targets = parse_targets(self.target_option, self.variables)
        payload = {**self.base_payload(), "targets": self.targets}
        return Request("lcs_local", {**payload, "lcs": options_dict(self.options)})

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        p, names = len(self.variables), tuple(self.variables)
        for r in replies:
            stack = np.asarray(r.arrays[0]) if r.arrays else np.zeros(0)
            if stack.shape != (len(self.targets), p, p):
                raise ClientProtocolError(
                    f"client {r.client} sent graphs of shape {stack.shape}, expected "
                    f"{(len(self.targets), p, p)}"
                )
            if not np.isin(stack, (NONE, TAIL, ARROW)).all():
                raise ClientProtocolError(f"client {r.client} sent unknown mark codes")
            try:
                graphs = {
                    names[t]: Graph(names, m.astype(np.int8), "LOCAL")
                    for t, m in zip(self.targets, stack, strict=True)
                }
            except ValueError as err:
                raise ClientProtocolError(
                    f"client {r.client} sent an invalid graph: {err}"
                ) from None
            self.client_graphs[r.client] = graphs
            self.client_tests[r.client] = int(r.meta.get("tests", 0))
        self.annotate(clients=len(replies))

    def result_payload(self) -> dict:
        main = self.client_graphs[min(self.client_graphs)]
        first = self.variables[self.targets[0]]
        per_target = {t: _incident(g, t) for t, g in main.items()}
        return {
            "graph": main[first],
            "variables": list(self.variables),
            "target": first,
            **per_target[first],
            "targets": per_target,
            "main_graph": f"client {min(self.client_graphs)} (use lcs_local_summary for avg/best)",
            "client_graphs": [
                {"client": c, "targets": {t: g.to_json() for t, g in graphs.items()}}
                for c, graphs in sorted(self.client_graphs.items())
            ],
            "options": options_dict(self.options),
            "client_tests": {str(c): n for c, n in sorted(self.client_tests.items())},
            "tests": int(sum(self.client_tests.values())),
        }


def _incident(graph: Graph, target: str) -> dict[str, list[str]]:
    """Parents, children and undirected neighbours of ``target`` in ``graph``."""
    t = graph.index(target)
    row, col = graph.marks[t], graph.marks[:, t]
    pick = {
        "parents": (col == ARROW) & (row == TAIL),
        "children": (row == ARROW) & (col == TAIL),
        "undirected": (row == TAIL) & (col == TAIL),
    }
    return {k: [graph.names[i] for i in np.flatnonzero(m)] for k, m in pick.items()}


def lcs_local_summary(result: Result, truth: Graph) -> dict[str, dict]:
    """Score a ``fedlcs-local`` result: ``fedlcs-local-avg`` and ``fedlcs-local-best``.

    Per client: the mean over targets of :func:`~fedcausal_flwr.metrics.local_metrics` against
    the true DAG ``truth``. ``-avg`` is the mean of those over clients; ``-best`` is the client
    with the highest mean F1 (ties: lowest partition id), an **oracle** (it needs the truth).
    """
    entries = result.extra.get("client_graphs")
    if not entries or "targets" not in entries[0]:
        raise KeyError(
            f"result of method {result.method!r} has no per-target extra['client_graphs']; "
            "lcs_local_summary needs a 'fedlcs-local' result"
        )
    scores = {}
    for entry in entries:
        rows = [
            local_metrics(full_graph(Graph.from_json(g), truth.names), truth, t)
            for t, g in entry["targets"].items()
        ]
        scores[int(entry["client"])] = {
            k: float(np.mean([r[k] for r in rows])) for k in ("precision", "recall", "f1", "shd")
        }
    average = {
        k: float(np.mean([s[k] for s in scores.values()])) for k in next(iter(scores.values()))
    }
    best_client = max(scores, key=lambda c: (scores[c]["f1"], -c))
    best = {**scores[best_client], "client": best_client, "oracle": True}
    return {"fedlcs-local-avg": average, "fedlcs-local-best": best}


class LCSPooledStrategy(LCSBaselineStrategy):
    """``lcs-pooled`` (LCS-All): the centralised reference, NOT private. Every client sends its
    raw (encoded) rows (action ``raw_data``, as ``pooled``) and the server runs the same search on
    the union with one oracle (:func:`local_structure`): the upper bound for ``fedlcs``."""

    name = "lcs-pooled"

    def __init__(self, target: str | int | Sequence = "", lcs: LCSOptions | None = None, **common):
        super().__init__(target, lcs, **common)
        self.rows: dict[int, int] = {}
        self.found: tuple[dict[int, LocalStructure], Knowledge] | None = None
        self.n_tests = 0

    def next_request(self) -> Request | None:
        if self.found is not None:
            return None
        self.start()
        self.targets = parse_targets(self.target_option, self.variables)
        return Request("raw_data", {"variables": self.variables, "levels": self.levels})

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        oracle = pooled_oracle(
            replies, self.variables, self.cards, self.test, self.rows, self.reliability
        )
        self.found = local_structure(oracle, self.targets, self.options)
        self.n_tests = oracle.n_computed
        self.annotate(rows=int(sum(self.rows.values())))

    def result_payload(self) -> dict:
        results, kb = self.found
        return {
            **structure_payload(self.variables, self.targets, results, kb),
            "reference": "centralised: clients sent raw data (not private)",
            "options": options_dict(self.options),
            "rows": {str(c): n for c, n in sorted(self.rows.items())},
            "tests": int(self.n_tests),
        }


def full_graph(local: Graph, names: Sequence[str]) -> Graph:
    """Embed a ``LOCAL`` graph into all ``names`` (untouched pairs: no edge), e.g. for metrics."""
    marks = np.zeros((len(names), len(names)), dtype=np.int8)
    idx = [list(names).index(v) for v in local.names]
    marks[np.ix_(idx, idx)] = local.marks
    return Graph(tuple(names), marks, "LOCAL")


def lcs_options(options: Mapping[str, Any]) -> LCSOptions:
    """:class:`LCSOptions` from run options (``max_depth`` is FLSke's maximum layer)."""
    common = parse_common(options)
    return LCSOptions(
        alpha=common["alpha"],
        max_level=6 if common["max_depth"] is None else common["max_depth"],
        stable=option_flag(options, "stable", False),
        stop_unchanged=option_flag(options, "stop_unchanged", True),
        sep_depth=option_number(options, "sep_depth", 3),
        sep_stop=str(options.get("sep_stop") or "after_found"),
        extension_depth=option_number(options, "extension_depth", 2),
        random_orient=option_flag(options, "random_orient", False),
        seed=option_number(options, "seed", 0),
    )


def make_strategy(options: dict) -> FedLCSStrategy:
    """From run options: ``target, ratio, alpha, test, max_depth, stable, stop_unchanged,
    sep_depth, sep_stop, extension_depth, random_orient, seed``."""
    return FedLCSStrategy(
        target=options.get("target", ""),
        ratio=0.4 if options.get("ratio") in (None, "") else options["ratio"],
        lcs=lcs_options(options),
        **parse_common(options),
    )


def make_local_strategy(options: dict) -> LCSLocalStrategy:
    """``fedlcs-local`` from run options (as ``fedlcs``, without ``ratio``)."""
    return LCSLocalStrategy(
        target=options.get("target", ""), lcs=lcs_options(options), **parse_common(options)
    )


def make_pooled_strategy(options: dict) -> LCSPooledStrategy:
    """``lcs-pooled`` from run options (as ``fedlcs``, without ``ratio``)."""
    return LCSPooledStrategy(
        target=options.get("target", ""), lcs=lcs_options(options), **parse_common(options)
    )


def make_client(partition_id, data, options):
    from fedcausal_flwr.clients.fedlcs import FedLCSClient

    return FedLCSClient(partition_id, data)


register_method(
    "fedlcs",
    make_strategy,
    make_client,
    description="FedLCS (Yu et al. 2025): federated local structure of option 'target'",
)
register_method(
    "fedlcs-local",
    make_local_strategy,
    make_client,
    description="each client alone runs the FedLCS search; see lcs_local_summary for avg/best",
)
register_method(
    "lcs-pooled",
    make_pooled_strategy,
    make_client,
    description="LCS-All, centralised reference (NOT private): raw data, the search on the union",
)

__all__ = [
    "FedLCSStrategy",
    "LCSLocalStrategy",
    "LCSPooledStrategy",
    "Knowledge",
    "LCSOptions",
    "LocalStructure",
    "answer_prune",
    "answer_sepsets",
    "choose_sepsets",
    "full_graph",
    "lcs_local_summary",
    "lcs_options",
    "lcs_search",
    "local_structure",
    "options_dict",
    "parse_targets",
    "structure_payload",
]
