"""FCI's orientation rules after R0: Zhang's (2008) R1-R10, and :func:`apply_fci_rules`, which runs
them or causal-learn's rule loop (:mod:`.causallearn_fci`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from itertools import combinations

import numpy as np

from fedcausal_flwr.graphs.causallearn_fci import causallearn_rule_loop
from fedcausal_flwr.graphs.fci_context import DiscriminatingDecision, FCIContext, Independence
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.graphs.marks import (
    adjacent,
    directed_mask,
    is_directed,
    neighbours,
    non_adjacent_mask,
)
from fedcausal_flwr.graphs.sepsets import SEPSET_RULES, Sepsets

FCI_MODES = ("zhang", "causallearn")


def apply_fci_rules(
    graph: Graph,
    sepsets: Sepsets | None = None,
    *,
    mode: str = "zhang",
    sepset_rule: str | None = None,
    independence: Independence | None = None,
    discriminating_decision: DiscriminatingDecision | None = None,
    selection_bias: bool = False,
    max_path_length: int = -1,
    untested_pairs: bool = False,
) -> dict[str, int]:
    """Apply FCI's orientation rules after R0 until nothing changes; returns changes per rule
    (``zhang``: orientations per rule; ``causallearn``: changed end marks per rule function).

    ``mode="zhang"``: Zhang (2008) R1-R4 and R8-R10, plus R5-R7 when ``selection_bias`` is True.
    Rules only turn circles into arrowheads or tails. R3 reads marks only; R4 asks
    :meth:`~.fci_context.FCIContext.noncollider_on_path` (a ``discriminating_decision`` callback,
    else the ``independence`` callback procedure, else the separating sets, which must then cover
    every discriminating pair). Searches for uncovered paths (R5, R9, R10) are exhaustive over
    simple paths.

    ``mode="causallearn"``: causal-learn 0.1.4.8's ``fci`` loop after ``rule0``: ``rulesR1R2cycle``,
    ``ruleR3`` (which also requires the middle node in a separating set), ``ruleR4B`` only when
    R1-R3 changed something in this sweep, then R5, R6, R7, R8, R9, R10 (always, selection bias or
    not), each with causal-learn's visiting order and path searches (breadth-first with a visited
    set, so some uncovered paths are missed). R10 pairs possible children in ascending index order;
    causal-learn iterates a ``set`` of nodes there, whose order follows Python's string hashing.
    A pair missing from ``sepsets`` means "no decision", as in causal-learn.

    ``sepset_rule`` (see :func:`~.sepsets.triple_status`) defaults to ``standard`` for ``zhang``
    and to ``causallearn`` (b in any recorded set) for ``causallearn``.
    ``independence(x, y, cond) -> bool`` (True if independent) lets R4 run causal-learn's two extra
    CI tests on a discriminating path; ``max_path_length`` (-1: unlimited) bounds causal-learn's
    discriminating-path search. ``untested_pairs``: some non-adjacent pairs were never tested
    (background knowledge removed them), so they have no separating set; R4 leaves a path
    between such a pair undecided instead of requiring one.
    """
    if mode not in FCI_MODES:
        raise ValueError(f"unknown FCI rule mode {mode!r}; expected one of {FCI_MODES}")
    if sepset_rule is None:
        sepset_rule = "causallearn" if mode == "causallearn" else "standard"
    if sepset_rule not in SEPSET_RULES:
        raise ValueError(f"unknown separating-set rule {sepset_rule!r}; expected {SEPSET_RULES}")
    ctx = FCIContext(
        sepsets,
        sepset_rule,
        independence,
        discriminating_decision,
        strict=(mode == "zhang" and not untested_pairs),
        max_path_length=max_path_length,
    )
    if mode == "causallearn":
        return causallearn_rule_loop(graph.marks, ctx)
    return _fci_zhang(graph.marks, ctx, selection_bias)


# ---------------------------------------------------------------------------- Zhang (2008)
def apply_zhang_rules(
    m: np.ndarray,
    *,
    discriminating_decision: DiscriminatingDecision | None = None,
    selection_bias: bool = False,
) -> dict[str, int]:
    """:func:`apply_fci_rules` with ``mode="zhang"`` and no separating sets, on a mark matrix in
    place (IOD orients tens of thousands of small graphs: no :class:`Graph` around each)."""
    ctx = FCIContext(None, "standard", None, discriminating_decision, strict=True,
                     max_path_length=-1)  # fmt: skip
    return _fci_zhang(m, ctx, selection_bias)


def _fci_zhang(m: np.ndarray, ctx: FCIContext, selection_bias: bool) -> dict[str, int]:
    rules: list[tuple[str, Callable[[], int]]] = [
        ("R1", lambda: _zhang_r1(m)),
        ("R2", lambda: _zhang_r2(m)),
        ("R3", lambda: _zhang_r3(m)),
        ("R4", lambda: _zhang_r4(m, ctx)),
    ]
    if selection_bias:
        rules += [
            ("R5", lambda: _zhang_r5(m)),
            ("R6", lambda: _zhang_r6(m)),
            ("R7", lambda: _zhang_r7(m)),
        ]
    rules += [
        ("R8", lambda: _zhang_r8(m)),
        ("R9", lambda: _zhang_r9(m)),
        ("R10", lambda: _zhang_r10(m)),
    ]
    counts = {name: 0 for name, _ in rules}
    while True:
        changed = 0
        for name, rule in rules:
            n = rule()
            counts[name] += n
            changed += n
        if not changed:
            return counts


def _zhang_r1(m: np.ndarray) -> int:
    """``a *-> b o-* c``, a, c non-adjacent  =>  ``b --> c``."""
    arrow_in = (m == ARROW).astype(np.int64)  # [a, b]: arrowhead at b on a-b
    na = non_adjacent_mask(m).astype(np.int64)
    # cand[b, c]: circle at b on b-c, not a tail at c, some a *-> b with a, c non-adjacent
    cand = ((arrow_in.T @ na) > 0) & (m.T == CIRCLE) & (m != TAIL) & (m != NONE)
    cand &= ~cand.T
    b_idx, c_idx = np.nonzero(cand)
    m[c_idx, b_idx] = TAIL
    m[b_idx, c_idx] = ARROW
    return int(b_idx.size)


def _zhang_r2(m: np.ndarray) -> int:
    """``a --> b *-> c`` or ``a *-> b --> c``, and ``a *-o c``  =>  ``a *-> c``."""
    d = directed_mask(m).astype(np.int64)
    arrow = (m == ARROW).astype(np.int64)
    cand = (((d @ arrow) > 0) | ((arrow @ d) > 0)) & (m == CIRCLE)
    rows, cols = np.nonzero(cand)
    m[rows, cols] = ARROW
    return int(rows.size)


def _zhang_r3(m: np.ndarray) -> int:
    """``a *-> b <-* c``, ``a *-o d o-* c``, a, c non-adjacent, ``d *-o b``  =>  ``d *-> b``."""
    na = non_adjacent_mask(m)
    # only a b with two non-adjacent nodes pointing into it can gain an arrowhead; the rule
    # adds arrowheads at such b only, so no other b becomes one during the sweep
    into = (m == ARROW).astype(np.int64)
    has_v = ((into.T @ na.astype(np.int64)) * into.T).any(axis=1)
    n = 0
    for d, b in zip(*np.nonzero((m == CIRCLE) & has_v[None, :]), strict=True):
        s = (m[:, b] == ARROW) & (m[:, d] == CIRCLE)
        if s.sum() >= 2 and na[np.ix_(s, s)].any():
            m[d, b] = ARROW
            n += 1
    return n


def _find_discriminating_path(m: np.ndarray, a: int, b: int, c: int) -> tuple[int, ...] | None:
    """Breadth-first search back from a for theta: returns ``(theta, ..., a, b, c)`` or None.

    Interior nodes are parents of c and colliders on the path; reachability over them is local, so
    the search finds a discriminating path whenever one exists (shortest first, lowest index first).
    """
    prev = {a: b}
    queue = deque([a])
    while queue:
        v = queue.popleft()
        for theta in np.flatnonzero(m[:, v] == ARROW).tolist():
            if theta in prev or theta == c:
                continue
            if m[c, theta] == NONE:
                path = [theta, v]
                while path[-1] != b:
                    path.append(prev[path[-1]])
                return (*path, c)
            # theta becomes an interior node: parent of c and a collider (arrowhead from v's side)
            if is_directed(m, theta, c) and m[v, theta] == ARROW:
                prev[theta] = v
                queue.append(theta)
    return None


def _set_if_circle(m: np.ndarray, i: int, j: int, mark: int) -> bool:
    """Put ``mark`` at j on edge i-j if that mark is a circle now; report whether it changed."""
    if m[i, j] == CIRCLE:
        m[i, j] = mark
        return True
    return False


def _zhang_r4(m: np.ndarray, ctx: FCIContext) -> int:
    """Discriminating path ``<theta, ..., a, b, c>`` with ``b o-* c``: ``b --> c`` if b is a
    non-collider, else ``a <-> b <-> c``."""
    # a candidate needs a --> c, b *-> a and a circle at b on c-b; without one nothing fires
    via_parent = (m == ARROW).astype(np.int64) @ directed_mask(m).astype(np.int64)  # [b, c]
    if not ((via_parent.T > 0) & (m == CIRCLE)).any():
        return 0
    n = 0
    for c in range(m.shape[0]):
        parents = None  # of c, read again after an orientation
        for b in np.flatnonzero(m[c] == CIRCLE).tolist():  # circle at b on c-b
            if parents is None:
                parents = np.flatnonzero((m[:, c] == ARROW) & (m[c, :] == TAIL)).tolist()
            for a in parents:
                if a != b and m[b, a] == ARROW and _orient_discriminated(m, ctx, a, b, c):
                    n += 1
                    parents = None
                    break
    return n


def _orient_discriminated(m: np.ndarray, ctx: FCIContext, a: int, b: int, c: int) -> bool:
    """R4 for one candidate ``a --> c``, ``b *-> a``, ``b o-* c``: when a discriminating path
    ``<theta, ..., a, b, c>`` exists and the context decides b on it, ``b --> c`` (a
    non-collider) or ``a <-> b <-> c`` (a collider). Whether it oriented."""
    path = _find_discriminating_path(m, a, b, c)
    if path is None:
        return False
    noncollider = ctx.noncollider_on_path(path)
    if noncollider is None:
        return False
    if noncollider:
        m[c, b] = TAIL
        _set_if_circle(m, b, c, ARROW)
    else:
        m[c, b] = ARROW
        _set_if_circle(m, a, b, ARROW)
        _set_if_circle(m, b, c, ARROW)
    return True


def _uncovered_path_exists(
    m: np.ndarray,
    start: list[int],
    target: int,
    step_ok: Callable[[int, int], bool],
    final_ok: Callable[[list[int]], bool] | None = None,
) -> list[int] | None:
    """Depth-first search for a simple uncovered path extending ``start`` to ``target``.

    ``step_ok(u, v)`` says whether the edge u-v may be walked from u to v; "uncovered" means every
    two nodes two apart on the path are non-adjacent. Returns the path or None.
    """
    if len(start) >= 2 and start[-1] == target:
        return start if final_ok is None or final_ok(start) else None
    stack = [(list(start), iter(neighbours(m, start[-1])))]
    on_path = set(start)
    while stack:
        path, it = stack[-1]
        advanced = False
        for w in it:
            if w in on_path or not step_ok(path[-1], w):
                continue
            if len(path) >= 2 and m[path[-2], w] != NONE:
                continue
            new_path = [*path, w]
            if w == target:
                if final_ok is None or final_ok(new_path):
                    return new_path
                continue
            on_path.add(w)
            stack.append((new_path, iter(neighbours(m, w))))
            advanced = True
            break
        if not advanced:
            stack.pop()
            on_path.discard(path[-1])
    return None


def _circle_cycle_path(m: np.ndarray, a: int, b: int) -> list[int] | None:
    """An uncovered circle path ``<a, c, ..., d, b>`` with c, b and a, d non-adjacent, or None."""

    def circle_step(u: int, v: int) -> bool:
        return m[u, v] == CIRCLE and m[v, u] == CIRCLE

    def closes_cycle(path: list[int]) -> bool:
        return len(path) >= 4 and not adjacent(m, path[-2], a)

    for c in neighbours(m, a):
        if c == b or not circle_step(a, c) or adjacent(m, c, b):
            continue
        path = _uncovered_path_exists(m, [a, c], b, circle_step, final_ok=closes_cycle)
        if path is not None:
            return path
    return None


def _zhang_r5(m: np.ndarray) -> int:
    """``a o-o b`` closing an uncovered circle cycle  =>  every edge on the cycle becomes a - b."""
    n = 0
    for a, b in zip(*np.nonzero(np.triu((m == CIRCLE) & (m.T == CIRCLE))), strict=True):
        if not (m[a, b] == CIRCLE and m[b, a] == CIRCLE):
            continue
        path = _circle_cycle_path(m, int(a), int(b))
        if path is None:
            continue
        m[a, b] = m[b, a] = TAIL
        for u, v in zip(path[:-1], path[1:], strict=True):
            m[u, v] = m[v, u] = TAIL
        n += 1
    return n


def _zhang_r6(m: np.ndarray) -> int:
    """``a - b o-* c``  =>  ``b -* c``."""
    has_undirected = ((m == TAIL) & (m.T == TAIL)).any(axis=0)
    cand = (m == CIRCLE) & has_undirected[None, :]  # [c, b]: circle at b on c-b
    rows, cols = np.nonzero(cand)
    m[rows, cols] = TAIL
    return int(rows.size)


def _zhang_r7(m: np.ndarray) -> int:
    """``a -o b o-* c``, a, c non-adjacent  =>  ``b -* c``."""
    tail_circle = ((m.T == TAIL) & (m == CIRCLE)).astype(np.int64)  # [a, b]: a -o b
    na = non_adjacent_mask(m).astype(np.int64)
    cand = ((tail_circle.T @ na) > 0) & (m.T == CIRCLE)  # [b, c]: circle at b on b-c
    b_idx, c_idx = np.nonzero(cand)
    m[c_idx, b_idx] = TAIL
    return int(b_idx.size)


def _zhang_r8(m: np.ndarray) -> int:
    """``a --> b --> c`` or ``a -o b --> c``, and ``a o-> c``  =>  ``a --> c``."""
    d = directed_mask(m).astype(np.int64)
    first = ((m.T == TAIL) & ((m == ARROW) | (m == CIRCLE))).astype(np.int64)
    cand = ((first @ d) > 0) & (m == ARROW) & (m.T == CIRCLE)
    a_idx, c_idx = np.nonzero(cand)
    m[c_idx, a_idx] = TAIL
    return int(a_idx.size)


def _pd_step(m: np.ndarray) -> Callable[[int, int], bool]:
    """A potentially directed step u *-> v: no arrowhead at u, no tail at v."""
    return lambda u, v: m[v, u] != ARROW and m[u, v] != TAIL


class _PdPaths:
    """Uncovered potentially directed paths out of a node, with a cheap walk-based pre-filter.

    ``walk_reach(a, mu)`` is every node reachable by an uncovered p.d. *walk* ``<a, mu, ...>``
    (a superset of the path ends, found breadth-first over (previous, current) pairs); the exact
    depth-first search over simple paths only runs for targets in it. Cached per marks state.
    """

    def __init__(self, m: np.ndarray):
        self.m = m
        self.step = _pd_step(m)
        self._walk: dict[tuple[int, int], set[int]] = {}
        self._path: dict[tuple[int, int, int], bool] = {}

    def walk_reach(self, a: int, mu: int) -> set[int]:
        if (a, mu) not in self._walk:
            m, step = self.m, self.step
            seen = {(a, mu)}
            queue = deque([(a, mu)])
            reach = {mu}
            while queue:
                prev, cur = queue.popleft()
                for w in neighbours(m, cur):
                    if w == prev or m[prev, w] != NONE or not step(cur, w) or (cur, w) in seen:
                        continue
                    seen.add((cur, w))
                    reach.add(w)
                    queue.append((cur, w))
            self._walk[(a, mu)] = reach
        return self._walk[(a, mu)]

    def exists(self, a: int, mu: int, target: int) -> bool:
        """Is there an uncovered p.d. path ``<a, mu, ..., target>`` (``<a, mu>`` if mu = target)?"""
        if not self.step(a, mu) or target not in self.walk_reach(a, mu):
            return False
        key = (a, mu, target)
        if key not in self._path:
            found = _uncovered_path_exists(self.m, [a, mu], target, self.step)
            self._path[key] = found is not None
        return self._path[key]


def _zhang_r9(m: np.ndarray) -> int:
    """``a o-> c``, an uncovered p.d. path ``<a, b, ..., c>``, b, c non-adjacent  =>  a --> c."""
    n = 0
    paths = _PdPaths(m)  # R9 only changes circles at a on a-c into tails: p.d. steps stay valid
    for a, c in zip(*np.nonzero((m == ARROW) & (m.T == CIRCLE)), strict=True):
        for b in neighbours(m, a):
            if b == c or adjacent(m, b, c):
                continue
            if paths.exists(int(a), b, int(c)):
                m[c, a] = TAIL
                n += 1
                break
    return n


def _zhang_r10(m: np.ndarray) -> int:
    """``a o-> c``, ``b --> c <-- d``, uncovered p.d. paths a..b and a..d whose first nodes after a
    are distinct and non-adjacent  =>  ``a --> c``."""
    n = 0
    paths = _PdPaths(m)  # R10 only changes circles at a on a-c into tails: p.d. steps stay valid
    for a, c in zip(*np.nonzero((m == ARROW) & (m.T == CIRCLE)), strict=True):
        into_c = np.flatnonzero((m[:, c] == ARROW) & (m[c, :] == TAIL)).tolist()
        if len(into_c) < 2:
            continue
        mus = [mu for mu in neighbours(m, a) if paths.step(a, mu)]
        pairs = [(mu, om) for mu, om in combinations(mus, 2) if not adjacent(m, mu, om)]
        if any(
            (paths.exists(a, mu, b) and paths.exists(a, om, d))
            or (paths.exists(a, om, b) and paths.exists(a, mu, d))
            for b, d in combinations(into_c, 2)
            for mu, om in pairs
        ):
            m[c, a] = TAIL
            n += 1
    return n
