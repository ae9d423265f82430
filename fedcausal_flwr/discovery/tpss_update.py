"""FedCDnv's second client step, C-Update (Algorithm 2): G0's colliders brought into the
client's PAG.

:func:`c_update_steps` imports the arrowheads of G0's v-structures and orients away from them
after one batch of extra local tests; its three stages are the helpers below it. Apart because
it is the one step that changes a client's marks from the server's graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from fedcausal_flwr.discovery.driver import Steps
from fedcausal_flwr.graphs.fci_rules import apply_fci_rules
from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL, Graph
from fedcausal_flwr.stats.batch_oracle import Query


@dataclass
class CUpdateResult:
    """Algorithm 2's outcome on one client (local ids)."""

    graph: Graph  # PagU: Pag0's adjacencies, updated marks
    imported: list[tuple[int, int, int]]  # (Xi, Y, Xj) G0 colliders that added an arrowhead
    propagated: list[tuple[int, int]]  # (Y, B): Y --> B oriented after an extra CI test
    conflicts: list[tuple[int, int]]  # (Y, B) skipped: an arrowhead already at Y
    n_queries: int = 0


def g0_v_structures(g0: np.ndarray) -> list[tuple[int, int, int]]:
    """Every ``(Xi, Y, Xj)`` with ``Xi *-> Y <-* Xj`` in G0 and Xi, Xj not adjacent (Xi < Xj)."""
    g0 = np.asarray(g0)
    adjacent = g0 != NONE
    out = []
    for y in range(g0.shape[0]):
        into = np.flatnonzero(g0[:, y] == ARROW)
        for a, b in combinations(into.tolist(), 2):
            if not adjacent[a, b]:
                out.append((a, y, b))
    return out


def c_update_steps(
    pag0: Graph,
    observed: Sequence[int] | np.ndarray,
    g0: np.ndarray,
    alpha: float = 0.05,
    max_depth: int | None = 3,
    rerun_rules: bool = False,
    sepsets: Mapping | None = None,
) -> Steps[CUpdateResult]:
    """Generator (one batch of extra CI tests, local ids): C-Update, Algorithm 2.

    For every v-structure ``Xi *-> Y <-* Xj`` of G0 (global ids, mapped to the client's):

    (a) if Xi, Y, Xj are all observed and ``Xi ~ Y``, ``Xj ~ Y`` in Pag0, put arrowheads at Y on
        both edges [REC: only the arrowhead; a collider does not make Xi an ancestor of Y];
    (b) if Y is observed, for each observed ``X in {Xi, Xj}`` adjacent to Y in Pag0, and each
        ``B in adj(Y) - {Xi, Xj}`` not adjacent to X: if ``X _||_ B | Z + {Y}`` for some
        ``Z <= adj(Y) - {B, Xi, Xj}`` with ``|Z| <= max_depth``, orient ``Y --> B`` (Y is a
        non-collider on X *-> Y - B, Zhang's R1 with a fresh test for the non-adjacency).

    All (a) imports are applied before any (b) orientation, so the result does not depend on the
    order of the v-structures. A (b) candidate whose tail would replace an arrowhead at Y, or
    that is already ``Y --> B``, costs no test; one made conflicting by an earlier (b)
    orientation (``B --> Y``, in candidate order) is skipped and reported. (b)'s tests form
    one batch. Adjacencies never change. ``rerun_rules`` applies Zhang's rules afterwards with
    the client's separating sets.
    """
    local = {int(g): k for k, g in enumerate(observed)}
    if len(local) != pag0.n_nodes:
        raise ValueError(
            f"{len(local)} distinct observed ids for a PAG over {pag0.n_nodes} variables"
        )
    graph = pag0.copy()
    adj0 = pag0.marks != NONE
    structures = g0_v_structures(g0)
    imported = _import_colliders(graph.marks, adj0, structures, local)
    candidates = _propagation_candidates(graph.marks, adj0, structures, local, max_depth)
    batch = [q for *_, queries in candidates for q in queries]
    pvalues = np.asarray((yield batch) if batch else [], dtype=float)
    propagated, conflicts = _orient_propagated(graph.marks, candidates, pvalues, alpha)
    if rerun_rules:
        sets = {pair: [set(s)] for pair, s in (sepsets or {}).items()}
        apply_fci_rules(graph, sets, mode="zhang")
    return CUpdateResult(graph, imported, propagated, conflicts, len(batch))


def _import_colliders(
    m: np.ndarray,
    adj0: np.ndarray,
    structures: Sequence[tuple[int, int, int]],
    local: Mapping[int, int],
) -> list[tuple[int, int, int]]:
    """C-Update's step (a) on the marks ``m``: arrowheads at Y on both edges of each G0 collider
    whose three nodes are observed and both edges in Pag0. Returns the colliders that changed a
    mark (local ids)."""
    imported = []
    for a, y, b in structures:
        if a in local and y in local and b in local:
            la, ly, lb = local[a], local[y], local[b]
            if adj0[la, ly] and adj0[lb, ly] and (m[la, ly] != ARROW or m[lb, ly] != ARROW):
                m[la, ly] = ARROW
                m[lb, ly] = ARROW
                imported.append((la, ly, lb))
    return imported


def _propagation_candidates(
    m: np.ndarray,
    adj0: np.ndarray,
    structures: Sequence[tuple[int, int, int]],
    local: Mapping[int, int],
    max_depth: int | None,
) -> list[tuple[int, int, int, list[Query]]]:
    """C-Update's step (b) candidates ``(X, Y, B, queries)`` (local ids), each with the tests
    ``X _||_ B | Z + {Y}`` that decide it; candidates that need no test are left out."""
    candidates: list[tuple[int, int, int, list[Query]]] = []
    seen: set[tuple[int, int, int]] = set()
    for a, y, b in structures:
        if y not in local:
            continue
        ly = local[y]
        pool = [int(v) for v in np.flatnonzero(adj0[ly])]
        ends = {local[v] for v in (a, b) if v in local}
        for x in (a, b):
            if x not in local or not adj0[local[x], ly]:
                continue
            lx = local[x]
            for lb_ in pool:
                if lb_ in ends or adj0[lx, lb_] or (lx, ly, lb_) in seen:
                    continue
                seen.add((lx, ly, lb_))
                if m[lb_, ly] == ARROW or (m[ly, lb_] == ARROW and m[lb_, ly] == TAIL):
                    continue  # an arrowhead at Y would conflict; or Y --> B already
                rest = [v for v in pool if v != lb_ and v not in ends]
                top = len(rest) if max_depth is None else min(max_depth, len(rest))
                queries = [
                    (lx, lb_, tuple(sorted((*z, ly))))
                    for size in range(top + 1)
                    for z in combinations(rest, size)
                ]
                candidates.append((lx, ly, lb_, queries))
    return candidates


def _orient_propagated(
    m: np.ndarray,
    candidates: Sequence[tuple[int, int, int, list[Query]]],
    pvalues: np.ndarray,
    alpha: float,
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """C-Update's step (b) orientations on the marks ``m``, in candidate order: ``Y --> B`` when
    a test of the candidate's block says independent, unless an arrowhead is at Y by then.
    Returns the pairs oriented and the pairs skipped as conflicting."""
    propagated, conflicts = [], []
    done: set[tuple[int, int]] = set()
    start = 0
    for _, ly, lb_, queries in candidates:
        block = pvalues[start : start + len(queries)]
        start += len(queries)
        if (ly, lb_) in done or not np.any(block > alpha):
            continue
        if m[lb_, ly] == ARROW:
            conflicts.append((ly, lb_))
            done.add((ly, lb_))
            continue
        m[lb_, ly] = TAIL
        m[ly, lb_] = ARROW
        propagated.append((ly, lb_))
        done.add((ly, lb_))
    return propagated, conflicts
