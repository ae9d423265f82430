"""IOD's global phase: from the datasets' local structures to every PAG over the union that is
consistent with all of them (Tillman and Spirtes 2011, "Learning equivalence classes of acyclic
models with latent and selection variables from multiple datasets with overlapping variables",
Algorithms 1-3), with the candidate-reducing procedures of Hahn et al. (fedCI paper, App. D).

No CI test is asked here: everything comes from the local phase (:mod:`.iod`). Steps:

1. **Global graph** (:func:`global_graph`). ``G`` starts complete with circles; an edge goes when
   some dataset separated its ends; ``IP`` records every pair adjacent in a dataset's skeleton.
   Marks transferred by the procedure:

   * ``original``: arrowheads of every unshielded collider of a local skeleton (R0 with the
     dataset's separating set), where the edges exist in ``G``;
   * ``orderedcolls`` (collider-with-order, CWO): also the arrowheads of every collider with
     order of each local PAG (:func:`~fedcausal_flwr.graphs.pag_validity.triples_with_order`);
   * ``orderedtriplets`` (triple-with-order, TWO): CWO plus the tails at the middle node of every
     non-collider with order, and a tail opposite an arrowhead ``G`` already has at the middle
     of a local ``o-o`` non-collider. Those tails are *saved*: circles while the rules run,
     re-imposed after them (a candidate with an arrowhead where a saved tail goes is dropped).

   A local PAG that is not a PAG or contradicts its own separating sets contributes only what
   ``original`` transfers; a mark two datasets claim differently (arrowhead vs tail) is not
   transferred (docs/choices.md, IOD).
2. **RemEdges** (:func:`removable_edges`): edges no dataset could test: no dataset holds
   ``{X, Y} | Adj(X) | Possible-Sep(X, Y)`` nor ``{X, Y} | Adj(Y) | Possible-Sep(Y, X)`` (on ``G``
   after the unshielded-collider transfer, the same for every procedure).
3. **Enumeration**: for every ``E`` in the power set of RemEdges, ``H = G - E``; PossImm(H) are its
   unshielded triples that no dataset could decide (not a collider already, no tail at the
   middle); for every subset ``t`` of PossImm, ``t``'s triples become colliders. The size
   ``sum_E 2^|PossImm(G - E)|`` is computed before anything is enumerated (the cap).
4. **Orientation** (:func:`orient_with_branching`): FCI's R1-R3 and R8-R10 (Zhang 2008; no
   selection bias, so no R5-R7) to closure, then a *branching* R4: for a discriminating path
   ``<theta, ..., a, b, c>`` with ``b o-* c`` two graphs, ``b --> c`` and ``a <-> b <-> c``, each
   closed again, until no path is left open. Duplicates are dropped: the distinct graphs are the
   *candidates before validation*.
5. **Validation** (:func:`validation_problem`): a candidate is kept iff it is a PAG (canonical
   MAG ancestral and maximal, and its own MAG's PAG), every recorded separating set of every
   dataset m-separates its pair in that MAG, and every pair of IP is m-connected given *every*
   subset of its dataset's other variables.

Steps 4 and 5 are memoised per mark matrix (:class:`MarksMemo`, bounded, process-wide): the
orientation and the marks-only part of validation read nothing else, and a study meets the same
small graphs in every run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, combinations

import numpy as np

from fedcausal_flwr.graphs.fci_context import DiscriminatingPath
from fedcausal_flwr.graphs.fci_rules import apply_zhang_rules
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.graphs.pag_validity import (
    MSeparation,
    canonical_mag,
    pag_problem,
    triples_with_order,
)

PROCEDURES = ("original", "orderedcolls", "orderedtriplets")
Pair = tuple[int, int]
Triple = tuple[int, int, int]
#: Subsets of RemEdges visited to compute the exact enumeration size; beyond, a lower bound.
EXACT_SIZE_LIMIT = 2**16
#: Seconds between two progress lines during enumeration and validation.
PROGRESS_EVERY_S = 1.0


class IODTooLargeError(ValueError):
    """The enumeration would exceed the cap (the message says by how much and what to raise)."""

    def __init__(self, size: int, exact: bool, cap: int, removable: int):
        self.size, self.exact, self.cap = size, exact, cap
        amount = f"{size:,}" if exact else f"at least {size:,}"
        super().__init__(
            f"IOD would enumerate {amount} candidate graphs ({removable} edges whose absence no "
            f"site could test, 2^{removable} edge subsets, times the subsets of possible "
            f"unshielded colliders), above max_candidates={cap:,}; raise max_candidates (at "
            f"least {size:,}) or set partial=true to keep the PAGs validated within the cap"
        )


@dataclass
class LocalStructure:
    """What IOD keeps of one dataset's local FCI run (global variable ids throughout).

    ``variables``: the dataset's variables, ascending; ``adjacency``: its final skeleton (local
    order); ``sepsets``: the first separating set of each non-adjacent pair; ``pag``: the local
    PAG (over the dataset's names, local order); ``n_tests``: CI tests its search asked.
    """

    variables: tuple[int, ...]
    adjacency: np.ndarray
    sepsets: dict[Pair, frozenset[int]]
    pag: Graph
    n_tests: int = 0
    clients: tuple[int, ...] = ()


@dataclass
class GlobalGraph:
    """IOD's ``G`` after a procedure's transfers (``marks``), ``G`` after the original transfer
    (``base``), the saved tails ``(u, z)`` (tail at z on u-z), the datasets' variable sets and
    separating sets, and IP ``(x, y, dataset)``."""

    marks: np.ndarray
    base: np.ndarray
    saved_tails: list[Pair]
    datasets: list[frozenset[int]]
    sepsets: list[dict[Pair, frozenset[int]]]
    ip: list[tuple[int, int, int]]
    decided: np.ndarray  # [x, z, y]: some dataset holds x, y, z and separated x and y
    conflicts: list[Pair] = field(default_factory=list)
    invalid_local: list[int] = field(default_factory=list)


# ============================================================================ 1: global graph
def _unshielded_colliders(local: LocalStructure) -> Iterator[Triple]:
    """Global ``(x, z, y)`` of the local skeleton's unshielded triples with z not separating."""
    ids, adj = local.variables, local.adjacency
    for zl in range(len(ids)):
        for xl, yl in combinations(np.flatnonzero(adj[zl]).tolist(), 2):
            if adj[xl, yl]:
                continue
            x, z, y = ids[xl], ids[zl], ids[yl]
            if z not in local.sepsets[(min(x, y), max(x, y))]:
                yield x, z, y


def _local_pag_is_valid(local: LocalStructure) -> bool:
    """The local PAG is a PAG and its canonical MAG m-separates every recorded pair."""
    mag = canonical_mag(local.pag)
    if pag_problem(local.pag, mag) is not None:
        return False
    where = {g: k for k, g in enumerate(local.variables)}
    msep = MSeparation(mag)
    return all(
        msep.separated(where[x], where[y], [where[v] for v in s])
        for (x, y), s in local.sepsets.items()
    )


def _ordered_claims(local: LocalStructure, tails: bool) -> tuple[list, list]:
    """Marks a valid local PAG fixes through its triples with order: ``(u, z, mark)`` claims
    (mark at z on u-z), and the ``o-o`` non-colliders ``(x, z, y)`` (global ids)."""
    ids, m = local.variables, local.pag.marks
    claims, open_noncolliders = [], []
    for t in triples_with_order(canonical_mag(local.pag)):
        x, z, y = ids[t.x], ids[t.z], ids[t.y]
        if t.collider:
            claims += [(x, z, ARROW), (y, z, ARROW)]
        elif tails:
            for ul, u in ((t.x, x), (t.y, y)):
                if m[ul, t.z] == TAIL:
                    claims.append((u, z, TAIL))
            if m[t.x, t.z] == CIRCLE and m[t.y, t.z] == CIRCLE:
                open_noncolliders.append((x, z, y))
    return claims, open_noncolliders


def global_graph(p: int, local: Sequence[LocalStructure], procedure: str) -> GlobalGraph:
    """Step 1 of the module docstring for ``p`` variables."""
    if procedure not in PROCEDURES:
        raise ValueError(f"unknown IOD procedure {procedure!r}; expected one of {PROCEDURES}")
    marks = np.full((p, p), CIRCLE, dtype=np.int8)
    np.fill_diagonal(marks, NONE)
    datasets = [frozenset(d.variables) for d in local]
    sepsets = [dict(d.sepsets) for d in local]
    ip = []
    decided = np.zeros((p, p, p), dtype=bool)
    for k, d in enumerate(local):
        for x, y in d.sepsets:
            marks[x, y] = marks[y, x] = NONE
            for z in d.variables:
                if z not in (x, y):
                    decided[x, z, y] = decided[y, z, x] = True
        ids = d.variables
        for xl, yl in zip(*np.nonzero(np.triu(d.adjacency, k=1)), strict=True):
            ip.append((ids[xl], ids[yl], k))
    for d in local:
        for x, z, y in _unshielded_colliders(d):
            for u in (x, y):
                if marks[u, z] != NONE:
                    marks[u, z] = ARROW
    base = marks.copy()
    out = GlobalGraph(marks, base, [], datasets, sepsets, ip, decided)
    if procedure == "original":
        return out
    claims: dict[Pair, set[int]] = {}
    open_noncolliders = []
    for k, d in enumerate(local):
        if not _local_pag_is_valid(d):
            out.invalid_local.append(k)
            continue
        found, cc = _ordered_claims(d, tails=procedure == "orderedtriplets")
        for u, z, mark in found:
            claims.setdefault((u, z), set()).add(mark)
        open_noncolliders += cc
    for (u, z), wanted in sorted(claims.items()):
        if marks[u, z] == NONE:
            continue
        if len(wanted) > 1 or (wanted == {TAIL} and marks[u, z] == ARROW):
            out.conflicts.append((u, z))
            continue
        marks[u, z] = wanted.pop()
    changed = True
    while changed:  # a tail opposite a known arrowhead at a local o-o non-collider
        changed = False
        for x, z, y in open_noncolliders:
            for u, w in ((x, y), (y, x)):
                if (
                    marks[u, z] == ARROW
                    and marks[w, z] == CIRCLE
                    and ARROW not in claims.get((w, z), ())
                ):
                    marks[w, z] = TAIL
                    changed = True
    out.saved_tails = [(int(u), int(z)) for u, z in zip(*np.nonzero(marks == TAIL), strict=True)]
    return out


# ============================================================================ 2: RemEdges
def possible_sep(marks: np.ndarray, decided: np.ndarray, x: int, y: int) -> set[int]:
    """Nodes reachable from x (avoiding y) by a path whose every inner triple ``<a, b, c>`` is a
    triangle, a collider, or an unshielded triple no dataset decided with no tail at b (a
    possible collider: docs/choices.md, IOD). Walk-based (a superset of the simple paths)."""
    adj = marks != NONE
    reach: set[int] = set()
    seen: set[Pair] = set()
    frontier = [(x, b) for b in np.flatnonzero(adj[x]).tolist() if b != y]
    for edge in frontier:
        seen.add(edge)
        reach.add(edge[1])
    while frontier:
        a, b = frontier.pop()
        for c in np.flatnonzero(adj[b]).tolist():
            if c in (a, x, y) or (b, c) in seen:
                continue
            passable = bool(adj[a, c]) or (marks[a, b] == ARROW and marks[c, b] == ARROW)
            if not passable:
                no_tail = marks[a, b] != TAIL and marks[c, b] != TAIL
                passable = no_tail and not decided[a, b, c]
            if passable:
                seen.add((b, c))
                reach.add(c)
                frontier.append((b, c))
    reach.discard(x)
    reach.discard(y)
    return reach


def removable_edges(gg: GlobalGraph) -> list[Pair]:
    """RemEdges of ``G`` (see the module docstring), ``(x, y)`` with x < y, ascending."""
    marks = gg.base
    adj = marks != NONE
    out = []
    for x, y in zip(*np.nonzero(np.triu(adj, k=1)), strict=True):
        x, y = int(x), int(y)
        sides = []
        for a, b in ((x, y), (y, x)):
            need = {a, b} | set(np.flatnonzero(adj[a]).tolist())
            sides.append(need | possible_sep(marks, gg.decided, a, b))
        if not any(side <= d for side in sides for d in gg.datasets):
            out.append((x, y))
    return out


# ============================================================================ 3: enumeration
def possible_immoralities(marks: np.ndarray, decided: np.ndarray) -> list[Triple]:
    """PossImm of ``marks``: unshielded ``(x, z, y)`` (x < y) that no dataset decided, not yet a
    collider, no tail at z."""
    adj = marks != NONE
    out = []
    for z in range(marks.shape[0]):
        for x, y in combinations(np.flatnonzero(adj[z]).tolist(), 2):
            if adj[x, y] or decided[x, z, y]:
                continue
            if TAIL in (marks[x, z], marks[y, z]):
                continue
            if marks[x, z] == ARROW and marks[y, z] == ARROW:
                continue
            out.append((x, z, y))
    return out


def subsets(items: Sequence) -> Iterator[tuple]:
    """Every subset of ``items``, by increasing size, each size in combinations order."""
    return chain.from_iterable(combinations(items, k) for k in range(len(items) + 1))


def without(marks: np.ndarray, edges: Sequence[Pair]) -> np.ndarray:
    out = marks.copy()
    for x, y in edges:
        out[x, y] = out[y, x] = NONE
    return out


def enumeration_size(gg: GlobalGraph, removable: Sequence[Pair]) -> tuple[int, bool]:
    """``sum_E 2^|PossImm(G - E)|`` exactly, or (``exact=False``) its lower bound
    ``2^|RemEdges|`` when there are more than :data:`EXACT_SIZE_LIMIT` edge subsets."""
    if 2 ** len(removable) > EXACT_SIZE_LIMIT:
        return 2 ** len(removable), False
    total = 0
    for edges in subsets(removable):
        total += 2 ** len(possible_immoralities(without(gg.marks, edges), gg.decided))
    return total, True


# ============================================================================ 4: orientation
class MarksMemo:
    """A bounded, process-wide memo of a pure function of a mark matrix, keyed by its bytes.

    IOD orients and validates the same small graphs again and again (every run of a study on
    one graph, every evidence source on one run); the rules and the marks-only part of the
    validation read nothing but the marks. When full, the oldest entries go first.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.table: dict[bytes, object] = {}
        self.hits = self.misses = 0
        self._lock = threading.Lock()  # a server may run IOD in several threads

    @staticmethod
    def key(marks: np.ndarray) -> bytes:
        p = marks.shape[0]
        return p.to_bytes(2, "little") + np.ascontiguousarray(marks, dtype=np.int8).tobytes()

    def get(self, key: bytes) -> object | None:
        found = self.table.get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def put(self, key: bytes, value: object) -> None:
        if self.limit <= 0:
            return
        with self._lock:
            while len(self.table) >= self.limit:
                del self.table[next(iter(self.table))]
            self.table[key] = value

    def clear(self) -> None:
        self.table.clear()
        self.hits = self.misses = 0


#: orient_with_branching's results (read-only arrays; callers get copies); about 0.5 kB each.
ORIENTATION_MEMO = MarksMemo(200_000)


def orient_with_branching(marks: np.ndarray, names: Sequence[str]) -> list[np.ndarray]:
    """FCI's rules without R0 and with R4 branching (step 4 of the module docstring).

    The result depends on the marks only (memoised in :data:`ORIENTATION_MEMO`); the arrays
    returned are the caller's to change.
    """
    if len(names) != marks.shape[0]:
        raise ValueError(f"{len(names)} names for a {marks.shape[0]}x{marks.shape[0]} graph")
    key = MarksMemo.key(marks)
    known = ORIENTATION_MEMO.get(key)
    if known is None:
        known = tuple(_orient_with_branching(marks))
        for m in known:
            m.flags.writeable = False
        ORIENTATION_MEMO.put(key, known)
    assert isinstance(known, tuple)
    return [m.copy() for m in known]


def _orient_with_branching(marks: np.ndarray) -> list[np.ndarray]:
    out = []
    met: list[tuple[int, ...]] = []

    def undecided(dp: DiscriminatingPath) -> None:
        met.append(dp.path)
        return None

    stack = [np.array(marks, dtype=np.int8)]
    while stack:
        m = stack.pop()
        met.clear()
        apply_zhang_rules(m, discriminating_decision=undecided)
        path = next((q for q in met if m[q[-1], q[-2]] == CIRCLE), None)
        if path is None:
            out.append(m)
            continue
        a, b, c = path[-3:]
        collider = m.copy()
        collider[c, b] = ARROW
        for i, j in ((a, b), (b, a), (b, c)):
            if collider[i, j] == CIRCLE:
                collider[i, j] = ARROW
        noncollider = m.copy()
        noncollider[c, b] = TAIL
        if noncollider[b, c] == CIRCLE:
            noncollider[b, c] = ARROW
        stack += [collider, noncollider]
    return out


# ============================================================================ 5: validation
@dataclass
class _MarksFacts:
    """What validation reads off a candidate's marks alone (memoised across candidates/runs)."""

    pag: Graph
    mag: Graph
    tail_tail: bool
    msep: MSeparation
    pag_problem: str | None = None
    pag_checked: bool = False

    def is_pag(self) -> bool:
        if not self.pag_checked:
            self.pag_problem = pag_problem(self.pag, self.mag)
            self.pag_checked = True
        return self.pag_problem is None


#: canonical MAG, m-separation cache and PAG check per candidate marks (names do not matter:
#: validation only asks whether there is a problem); a few kB each.
VALIDATION_MEMO = MarksMemo(50_000)


def _marks_facts(marks: np.ndarray, names: Sequence[str]) -> _MarksFacts:
    key = MarksMemo.key(marks)
    facts = VALIDATION_MEMO.get(key)
    if facts is None:
        pag = Graph(names, marks, "PAG")
        mag = canonical_mag(pag)
        tail_tail = bool(np.any((mag.marks == TAIL) & (mag.marks.T == TAIL)))
        facts = _MarksFacts(pag, mag, tail_tail, MSeparation(mag))
        VALIDATION_MEMO.put(key, facts)
    assert isinstance(facts, _MarksFacts)
    return facts


def validation_problem(marks: np.ndarray, names: Sequence[str], gg: GlobalGraph) -> str | None:
    """Why a candidate fails validation (``"pag"``, ``"sepset"``, ``"ip"``), or None if kept."""
    if len(names) != marks.shape[0]:
        raise ValueError(f"{len(names)} names for a {marks.shape[0]}x{marks.shape[0]} graph")
    facts = _marks_facts(marks, names)
    if facts.tail_tail:
        return "pag"
    msep = facts.msep
    for sepsets in gg.sepsets:
        for (x, y), s in sepsets.items():
            if not msep.separated(x, y, s):
                return "sepset"
    for x, y, k in gg.ip:
        if marks[x, y] != NONE:  # adjacent: m-connected given any set
            continue
        rest = sorted(gg.datasets[k] - {x, y})
        if any(msep.separated(x, y, s) for s in subsets(rest)):
            return "ip"
    if not facts.is_pag():
        return "pag"
    return None


# ============================================================================ driver
@dataclass
class Enumeration:
    """What the global phase found (see :func:`enumerate_pags`)."""

    pags: list[np.ndarray]
    candidates: int  # distinct candidates before validation
    enumerated: int  # (E, t) combinations oriented
    size: int
    size_exact: bool
    removable: list[Pair]
    partial: bool
    rejected: dict[str, int]
    seconds: float


class Progress:
    """Calls ``report(line)`` at most every ``every_s`` seconds (and never if it is None)."""

    def __init__(self, report: Callable[[str], None] | None, every_s: float | None = None):
        self.report = report
        self.every_s = PROGRESS_EVERY_S if every_s is None else every_s
        self.last = time.monotonic()

    def __call__(self, line: str, *values: object) -> None:
        """Report ``line.format(*values)`` if it is time (formatted only then)."""
        if self.report is not None and time.monotonic() - self.last >= self.every_s:
            self.last = time.monotonic()
            self.report(line.format(*values))


def enumerate_pags(
    names: Sequence[str],
    gg: GlobalGraph,
    *,
    max_candidates: int | None = 100_000,
    partial: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Enumeration:
    """Steps 2-5 of the module docstring on ``gg``.

    ``max_candidates`` caps the enumeration size (``None``: no cap); above it the run stops with
    :class:`IODTooLargeError`, or, with ``partial=True``, enumerates the first ``max_candidates``
    combinations and keeps the PAGs validated among them (``Enumeration.partial``).
    """
    started = time.perf_counter()
    removable = removable_edges(gg)
    size, exact = enumeration_size(gg, removable)
    cap = max_candidates
    is_partial = cap is not None and size > cap
    if is_partial and not partial:
        assert cap is not None  # is_partial needs a cap
        raise IODTooLargeError(size, exact, cap, len(removable))
    tick = Progress(progress)
    saved = [(u, z) for u, z in gg.saved_tails]
    seen: dict[bytes, np.ndarray] = {}
    enumerated = 0
    stopped = False  # the cap cut the enumeration short (also when the size was a bound)
    for edges in subsets(removable):
        if stopped or (cap is not None and enumerated >= cap):
            stopped = True
            break
        h = without(gg.marks, edges)
        for chosen in subsets(possible_immoralities(h, gg.decided)):
            if cap is not None and enumerated >= cap:
                stopped = True
                break
            enumerated += 1
            ht = h.copy()
            for x, z, y in chosen:
                ht[x, z] = ht[y, z] = ARROW
            kept_tails = [(u, z) for u, z in saved if ht[u, z] == TAIL]
            for u, z in kept_tails:
                ht[u, z] = CIRCLE
            for m in orient_with_branching(ht, names):
                if any(m[u, z] == ARROW for u, z in kept_tails):
                    continue
                for u, z in kept_tails:
                    m[u, z] = TAIL
                seen.setdefault(m.tobytes(), m)
            tick("IOD enumeration: {:,} of {:,} combinations, {:,} distinct candidates",
                 enumerated, min(size, cap or size), len(seen))  # fmt: skip
    if stopped and not partial:  # only when the size was a lower bound at most the cap
        assert cap is not None  # stopped needs a cap
        raise IODTooLargeError(enumerated + 1, False, cap, len(removable))
    is_partial = is_partial or stopped
    rejected = {"pag": 0, "sepset": 0, "ip": 0}
    pags = []
    for k, m in enumerate(seen.values()):
        problem = validation_problem(m, names, gg)
        if problem is None:
            pags.append(m)
        else:
            rejected[problem] += 1
        tick("IOD validation: {:,} of {:,} candidates, {:,} PAGs kept", k + 1, len(seen),
             len(pags))  # fmt: skip
    return Enumeration(
        pags=pags,
        candidates=len(seen),
        enumerated=enumerated,
        size=size,
        size_exact=exact,
        removable=removable,
        partial=is_partial,
        rejected=rejected,
        seconds=time.perf_counter() - started,
    )
