"""FedLCS's search (Yu et al., Sci China Inf Sci 2025), Flower-free: the schedule over targets.

:func:`lcs_search` is a generator over the local structures of some target variables: it yields
one request per round, a :class:`~.lcs_state.PruneRequest` (a PCsimple layer for several
variables, FLSke: :mod:`~.lcs_skeleton`) or a :class:`~.lcs_state.SepsetRequest` (one depth of
the consistent separating-set search for several pairs: :mod:`~.lcs_sepsets`), and returns every
target's :class:`~.lcs_state.LocalStructure` plus the shared :class:`~.lcs_state.Knowledge` (PC
sets and separating-set decisions, shared by all targets). Each target runs its own program
(what it needs next, then its graph re-oriented by :mod:`~.lcs_orient`); this module merges their
needs into one request per round. A federation answers a request with votes and separating-set
choices over its clients (:mod:`~fedcausal_flwr.discovery.sepset_choice`;
:mod:`fedcausal_flwr.strategies.fedlcs`, whose module docstring documents the rules and defaults;
the wire protocol is :mod:`fedcausal_flwr.protocols.fedlcs`'s); one oracle answers it alone with
:func:`~.lcs_skeleton.answer_prune`, :func:`~.lcs_sepsets.answer_sepsets` and
:func:`~.sepset_choice.decide_sepsets`, which is :func:`local_structure` (a site's own search, or
the pooled reference). A federated client answers its share of a request with the same
``answer_prune`` and ``answer_sepsets``. The options and the result encodings are
:mod:`~.lcs_state`'s and :mod:`~.lcs_payload`'s.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from fedcausal_flwr.discovery.lcs_orient import (
    collider_list,
    orient_local,
    orient_randomly,
    undirected_at,
)
from fedcausal_flwr.discovery.lcs_sepsets import answer_sepsets, sepset_search
from fedcausal_flwr.discovery.lcs_skeleton import answer_prune, flske
from fedcausal_flwr.discovery.lcs_state import (
    Knowledge,
    LCSOptions,
    LocalStructure,
    Pair,
    PruneRequest,
    SepsetRequest,
    adjacent,
)
from fedcausal_flwr.discovery.sepset_choice import SepChoice, decide_sepsets
from fedcausal_flwr.graphs.graph import ARROW, TAIL
from fedcausal_flwr.graphs.sepsets import pair_key
from fedcausal_flwr.stats.batch_oracle import CIOracle


@dataclass
class _Need:
    """What one target's program waits for before it can go on."""

    pcs: set[int] = field(default_factory=set)
    pairs: dict[Pair, tuple[int, ...]] = field(default_factory=dict)  # pair -> pool


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
            yield from flske(n_vars, pcs, kb, options)
        else:
            pairs: dict[Pair, tuple[int, ...]] = {}
            for n in needs.values():
                pairs.update((k, v) for k, v in n.pairs.items() if k not in kb.sepsets)
            if pairs:
                yield from sepset_search(sorted(pairs.items()), kb, options)
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


def _target_program(
    n_vars: int, t: int, kb: Knowledge, options: LCSOptions
) -> Generator[_Need, None, LocalStructure]:
    """The FedLCS logic for one target; yields what it needs, returns its structure."""
    yield _Need(pcs={t})
    yield _Need(pcs=set(kb.pc[t]))
    known = {t, *kb.pc[t]}
    centres = [t]
    pairs = _unshielded_pairs(kb, known, centres)
    yield _Need(pairs=pairs)
    examined = set(pairs)
    depth = 0
    nodes, marks = orient_local(kb, known, examined)
    previous_ring: list[int] = []
    while depth < options.extension_depth:
        undirected = undirected_at(nodes, marks, t)
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
        nodes, marks = orient_local(kb, known, examined)
        previous_ring = ring
    randomly = []
    if options.random_orient:
        randomly = orient_randomly(nodes, marks, t, options.seed)
    local = nodes.index(t)
    row, col = marks[local], marks[:, local]
    parents = [nodes[i] for i in np.flatnonzero((col == ARROW) & (row == TAIL))]
    children = [nodes[i] for i in np.flatnonzero((row == ARROW) & (col == TAIL))]
    undirected = [nodes[i] for i in np.flatnonzero((row == TAIL) & (col == TAIL))]
    colliders = collider_list(nodes, marks, kb, examined)
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


def _neighbours(kb: Knowledge, known: set[int], c: int) -> list[int]:
    return [v for v in kb.pc[c] if adjacent(kb, known, c, v)]


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
            if not adjacent(kb, known, a, b):
                pool = tuple(sorted((set(kb.pc[a]) | set(kb.pc[b])) - {a, b}))
                out[pair_key(a, b)] = pool
    return out


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
