"""causal-learn 0.1.4.8's FCI rule loop after ``rule0``, step by step.

Its visiting orders, its breadth-first path searches (a visited set, so some uncovered paths are
missed), its gating of R4 on a change by R1-R3 and its R5-R7 regardless of selection bias are all
kept, so that an engine can be compared with causal-learn edge by edge. Run it through
:func:`~.fci_rules.apply_fci_rules` with ``mode="causallearn"``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import combinations

import numpy as np

from fedcausal_flwr.graphs.fci_context import FCIContext
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL
from fedcausal_flwr.graphs.marks import adjacent, arrow_allowed, is_directed, neighbours
from fedcausal_flwr.graphs.sepsets import recorded_sepsets, triple_status


def causallearn_rule_loop(m: np.ndarray, ctx: FCIContext) -> dict[str, int]:
    """causal-learn's ``fci`` rule loop on the marks ``m``; returns changed end marks per rule."""
    counts = dict.fromkeys(("R1R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "R10"), 0)

    def run(name: str, fn: Callable[[bool], bool], flag: bool) -> bool:
        before = m.copy()
        flag = fn(flag)
        counts[name] += int(np.count_nonzero(before != m))
        return flag

    change = True
    while change:
        change = False
        change = run("R1R2", lambda f: _cl_r1r2(m, f), change)
        change = run("R3", lambda f: _cl_r3(m, ctx, f), change)
        if change:
            change = run("R4", lambda f: _cl_r4(m, ctx, f), change)
        change = run("R5", lambda f: _cl_r5(m, f), change)
        change = run("R6", lambda f: _cl_r6(m, f), change)
        change = run("R7", lambda f: _cl_r7(m, f), change)
        change = run("R8", lambda f: _cl_r8(m, f), change)
        change = run("R9", lambda f: _cl_r9(m, f), change)
        change = run("R10", lambda f: _cl_r10(m, f), change)
    return counts


def _cl_r1(m: np.ndarray, a: int, b: int, c: int, flag: bool) -> bool:
    if adjacent(m, a, c):
        return flag
    if m[a, b] == ARROW and m[c, b] == CIRCLE:
        if not arrow_allowed(m, b, c):
            return flag
        m[b, c], m[c, b] = ARROW, TAIL
        flag = True
    return flag


def _cl_r2(m: np.ndarray, a: int, b: int, c: int, flag: bool) -> bool:
    if adjacent(m, a, c) and m[a, c] == CIRCLE:
        if m[a, b] == ARROW and m[b, c] == ARROW and (m[b, a] == TAIL or m[c, b] == TAIL):
            if not arrow_allowed(m, a, c):
                return flag
            m[a, c] = ARROW
            flag = True
    return flag


def _cl_r1r2(m: np.ndarray, flag: bool) -> bool:
    for b in range(m.shape[0]):
        adj = neighbours(m, b)
        for a, c in combinations(adj, 2):
            flag = _cl_r1(m, a, b, c, flag)
            flag = _cl_r1(m, c, b, a, flag)
            flag = _cl_r2(m, a, b, c, flag)
            flag = _cl_r2(m, c, b, a, flag)
    return flag


def _cl_noncollider(ctx: FCIContext, a: int, d: int, c: int) -> bool:
    if ctx.sepsets is None:
        return False
    sets = recorded_sepsets(ctx.sepsets, a, c)
    return sets is not None and triple_status(sets, d, ctx.sepset_rule) == "noncollider"


def _cl_r3(m: np.ndarray, ctx: FCIContext, flag: bool) -> bool:
    for b in range(m.shape[0]):
        into_arrows = np.flatnonzero(m[:, b] == ARROW).tolist()
        into_circles = np.flatnonzero(m[:, b] == CIRCLE).tolist()
        for d in into_circles:
            if len(into_arrows) < 2:
                continue
            for a, c in combinations(into_arrows, 2):
                if adjacent(m, a, c):
                    continue
                if not adjacent(m, a, d) or not adjacent(m, c, d):
                    continue
                if not _cl_noncollider(ctx, a, d, c):
                    continue
                if m[a, d] != CIRCLE or m[c, d] != CIRCLE:
                    continue
                if not arrow_allowed(m, d, b):
                    continue
                m[d, b] = ARROW
                flag = True
    return flag


def _cl_r4(m: np.ndarray, ctx: FCIContext, flag: bool) -> bool:
    for b in range(m.shape[0]):
        poss_a = np.flatnonzero(m[b] == ARROW).tolist()  # b *-> a
        poss_c = np.flatnonzero(m[:, b] == CIRCLE).tolist()  # c *-o b
        for a in poss_a:
            for c in poss_c:
                if not is_directed(m, a, c):
                    continue
                if m[b, c] != ARROW:
                    continue
                flag = _cl_ddp_orient(m, ctx, a, b, c, flag)
    return flag


def _cl_ddp_orient(m: np.ndarray, ctx: FCIContext, a: int, b: int, c: int, flag: bool) -> bool:
    """causal-learn's ``ddpOrient``: breadth-first search back from a for a discriminating path."""
    queue = deque([a])
    visited = {a, b}
    e = None
    distance = 0
    previous: dict[int, int] = {a: b}
    c_parents = set(np.flatnonzero((m[:, c] == ARROW) & (m[c, :] == TAIL)).tolist())
    limit = 1000 if ctx.max_path_length == -1 else ctx.max_path_length
    while queue:
        t = queue.popleft()
        if e is None or e == t:
            e = t
            distance += 1
            if distance > 0 and distance > limit:
                return flag
        for d in np.flatnonzero(m[:, t] == ARROW).tolist():
            if d in visited:
                continue
            previous[d] = t
            p = previous[t]
            if not (m[d, t] == ARROW and m[p, t] == ARROW):
                continue
            if not adjacent(m, d, c) and d != c:
                done, flag = _cl_do_ddp(m, ctx, d, a, b, c, previous, flag)
                if done:
                    return flag
            if d in c_parents:
                queue.append(d)
                visited.add(d)
    return flag


def _cl_do_ddp(
    m: np.ndarray,
    ctx: FCIContext,
    d: int,
    a: int,
    b: int,
    c: int,
    previous: dict[int, int],
    flag: bool,
) -> tuple[bool, bool]:
    inner = [previous[d]]  # d's neighbour on the path ... a, b
    while inner[-1] in previous:
        inner.append(previous[inner[-1]])
    noncollider = ctx.noncollider_on_path((d, *inner, c))
    if noncollider is None:
        return False, flag
    if noncollider:
        m[c, b] = TAIL
        return True, True
    if not arrow_allowed(m, a, b) or not arrow_allowed(m, c, b):
        return False, flag
    m[a, b] = ARROW
    m[c, b] = ARROW
    return True, True


def _cl_uncovered(m: np.ndarray, path: Sequence[int]) -> bool:
    return all(m[path[i], path[i + 2]] == NONE for i in range(len(path) - 2))


def _cl_circle_paths(m: np.ndarray, start: int, target: int, exclude: tuple[int, int]) -> Iterator:
    """causal-learn's ``GetUncoveredCirclePath`` (a lazy generator over a changing graph)."""
    queue: deque = deque()
    visited: set[int] = set()
    for u in neighbours(m, start):
        if u in exclude:
            continue
        if not (m[start, u] == CIRCLE and m[u, start] == CIRCLE):
            continue
        if u not in visited:
            visited.add(u)
            queue.append((u, [start, u]))
    while queue:
        t, path = queue.popleft()
        if t == target and _cl_uncovered(m, path):
            yield path
        for u in neighbours(m, t):
            if not (m[t, u] == CIRCLE and m[u, t] == CIRCLE) or u in exclude:
                continue
            if u not in visited:
                visited.add(u)
                queue.append((u, [*path, u]))


def _cl_r5(m: np.ndarray, flag: bool) -> bool:
    for b in range(m.shape[0]):
        into_circles = np.flatnonzero(m[:, b] == CIRCLE).tolist()
        for a in into_circles:
            found = []
            if m[b, a] != CIRCLE:
                continue
            a_circ = [
                n
                for n in neighbours(m, a)
                if n not in (a, b) and m[n, a] == CIRCLE and m[a, n] == CIRCLE
            ]
            b_circ = [
                n
                for n in neighbours(m, b)
                if n not in (a, b) and m[n, b] == CIRCLE and m[b, n] == CIRCLE
            ]
            for c in a_circ:
                if adjacent(m, b, c):
                    continue
                for d in b_circ:
                    if adjacent(m, a, d):
                        continue
                    found.append(_cl_circle_paths(m, c, d, (a, b)))
            for paths in found:
                for path in paths:
                    flag = True
                    m[a, b] = m[b, a] = TAIL
                    m[a, path[0]] = m[path[0], a] = TAIL
                    m[b, path[-1]] = m[path[-1], b] = TAIL
                    for u, v in zip(path[:-1], path[1:], strict=True):
                        m[u, v] = m[v, u] = TAIL
    return flag


def _cl_r6(m: np.ndarray, flag: bool) -> bool:
    for b in range(m.shape[0]):
        into_tails = np.flatnonzero(m[:, b] == TAIL).tolist()
        if not any(m[b, a] == TAIL for a in into_tails):
            continue
        for c in np.flatnonzero(m[:, b] == CIRCLE).tolist():
            flag = True
            m[c, b] = TAIL
    return flag


def _cl_r7(m: np.ndarray, flag: bool) -> bool:
    for b in range(m.shape[0]):
        into_circles = np.flatnonzero(m[:, b] == CIRCLE).tolist()
        a_list = [n for n in into_circles if m[b, n] == TAIL]
        for c in into_circles:
            for a in a_list:
                if a == c:
                    continue
                if not adjacent(m, a, c):
                    flag = True
                    m[c, b] = TAIL
    return flag


def _cl_r8(m: np.ndarray, flag: bool) -> bool:
    for b in range(m.shape[0]):
        for a, c in combinations(neighbours(m, b), 2):
            b_to_c = is_directed(m, b, c)
            a_oto_c = adjacent(m, a, c) and m[a, c] == ARROW and m[c, a] == CIRCLE
            first = m[b, a] == TAIL and m[a, b] in (ARROW, CIRCLE)
            if first and b_to_c and a_oto_c:
                m[a, c], m[c, a] = ARROW, TAIL
                flag = True
    return flag


def _cl_pd_path(m: np.ndarray, start: int, nxt: int, target: int) -> bool:
    """causal-learn's ``existsUncoveredPdPath`` (breadth-first, visited nodes never revisited)."""
    visited = {start, nxt}
    queue: deque = deque()

    def pd(t: int, u: int) -> bool:
        return m[u, t] in (TAIL, CIRCLE) and m[t, u] in (ARROW, CIRCLE)

    for u in neighbours(m, nxt):
        if pd(nxt, u) and u not in visited:
            visited.add(u)
            queue.append((u, [start, nxt, u]))
    while queue:
        t, path = queue.popleft()
        if t == target and _cl_uncovered(m, path):
            return True
        for u in neighbours(m, t):
            if pd(t, u) and u not in visited:
                visited.add(u)
                queue.append((u, [*path, u]))
    return False


def _cl_semidirected(m: np.ndarray, start: int, target: int) -> bool:
    """causal-learn's ``existsSemiDirectedPath``: only the mark at the node left is checked."""
    visited: set[int] = set()
    queue: deque = deque()
    for u in neighbours(m, start):
        if m[u, start] in (TAIL, CIRCLE) and u not in visited:
            visited.add(u)
            queue.append(u)
    while queue:
        t = queue.popleft()
        if t == target:
            return True
        for u in neighbours(m, t):
            if m[u, t] in (TAIL, CIRCLE) and u not in visited:
                visited.add(u)
                queue.append(u)
    return False


def _cl_possible_children(m: np.ndarray, a: int, candidates: list[int]) -> list[int]:
    return [n for n in candidates if n != a and adjacent(m, a, n) and m[n, a] != ARROW]


def _cl_r9(m: np.ndarray, flag: bool) -> bool:
    for c in range(m.shape[0]):
        for a in np.flatnonzero(m[:, c] == ARROW).tolist():
            if m[c, a] != CIRCLE:
                continue
            candidates = [n for n in neighbours(m, a) if n not in (a, c)]
            for b in _cl_possible_children(m, a, candidates):
                if adjacent(m, b, c):
                    continue
                if _cl_pd_path(m, a, b, c):
                    m[a, c], m[c, a] = ARROW, TAIL
                    flag = True
                    break
    return flag


def _cl_r10(m: np.ndarray, flag: bool) -> bool:
    for c in range(m.shape[0]):
        into_arrows = np.flatnonzero(m[:, c] == ARROW).tolist()
        if len(into_arrows) < 2:
            continue
        a_nodes = [a for a in into_arrows if m[c, a] == CIRCLE]
        for a in a_nodes:
            kids = _cl_possible_children(m, a, [i for i in neighbours(m, a) if i != c])
            if len(kids) < 2:
                continue
            for b, d in combinations(into_arrows, 2):
                if m[c, b] != TAIL or m[c, d] != TAIL:
                    continue
                for k1, k2 in combinations(kids, 2):
                    if not _cl_semidirected(m, k1, b) or not _cl_semidirected(m, k2, d):
                        continue
                    if not adjacent(m, k1, k2):
                        m[a, c], m[c, a] = ARROW, TAIL
                        flag = True
                        break
    return flag
