"""IOD (Tillman and Spirtes 2011): every PAG over the union of overlapping datasets' variables
that is consistent with all of their independence evidence.

Local phase (this module): each *dataset* (a distinct variable set; all the sites holding it are
one dataset, and its p-values may pool every site observing a test's variables) runs FCI's
search over its own variables with the shared CI evidence: the PC-stable adjacency search, R0,
Possible-D-Sep, R0 again and Zhang's rules (:func:`~.fci.fci_steps`, the one FCI engine). The
datasets advance in lockstep, so one batch of CI queries (one federated round) serves all of
them. Global phase: :mod:`.iod_candidates` (no CI test is asked there).

IOD only asks tests inside one dataset's variables, so a pair no dataset observes together is
never tested and never imputed: its edge stays in the global skeleton, and RemEdges enumerates
its presence and absence when no dataset could test it (docs/choices.md, IOD).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal

import numpy as np

from fedcausal_flwr.discovery.driver import drive
from fedcausal_flwr.discovery.fci import FCIResult, fci_steps
from fedcausal_flwr.discovery.iod_candidates import (
    PROCEDURES,
    Enumeration,
    LocalStructure,
    enumerate_pags,
    global_graph,
)
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.graphs.sepsets import recorded_sepsets
from fedcausal_flwr.stats.batch_oracle import CIOracle, Query, normalise_query

Procedure = Literal["original", "orderedcolls", "orderedtriplets"]
EMPTY_MESSAGE = (
    "IOD found no PAG over the union consistent with every dataset's independence evidence "
    "(the evidence is mutually inconsistent, e.g. a test decided wrongly at this sample size)"
)


@dataclass
class IODResult:
    """The PAGs over ``names`` (possibly none), each dataset's local PAG and search outcome, and
    the enumeration's bookkeeping (``candidates``: distinct graphs before validation)."""

    names: tuple[str, ...]
    pags: list[Graph]
    local: list[LocalStructure]
    enumeration: Enumeration
    procedure: str
    n_tests: int

    @property
    def candidates(self) -> int:
        return self.enumeration.candidates

    @property
    def partial(self) -> bool:
        return self.enumeration.partial

    @property
    def message(self) -> str:
        """A sentence for the user: how many PAGs, and why none if so."""
        if self.pags:
            found = f"IOD found {len(self.pags)} PAG(s) from {self.candidates} candidate(s)"
        else:
            found = EMPTY_MESSAGE
        if self.partial:
            found += (
                f"; PARTIAL: only {self.enumeration.enumerated:,} of "
                f"{self.enumeration.size:,} combinations were enumerated (max_candidates)"
            )
        return found

    def local_pags(self) -> list[Graph]:
        return [d.pag for d in self.local]


def check_datasets(
    names: Sequence[str], datasets: Sequence[Sequence[int]]
) -> list[tuple[int, ...]]:
    """The distinct variable sets, ascending; an error names a set that cannot take part."""
    p = len(names)
    out: dict[tuple[int, ...], None] = {}
    for k, d in enumerate(datasets):
        ids = tuple(sorted({int(v) for v in d}))
        if len(ids) != len(d):
            raise ValueError(f"dataset {k} lists a variable twice: {[names[v] for v in d]}")
        if any(v < 0 or v >= p for v in ids):
            raise ValueError(f"dataset {k} has a variable index outside 0..{p - 1}: {list(d)}")
        if len(ids) < 2:
            raise ValueError(
                f"dataset {k} observes {[names[v] for v in ids]}: IOD needs at least two "
                "variables per dataset"
            )
        out[ids] = None
    covered = set().union(*out) if out else set()
    missing = [names[v] for v in range(p) if v not in covered]
    if missing:
        raise ValueError(f"no dataset observes the variable(s) {missing}")
    return list(out)


def feasible_tests(
    datasets: Sequence[Sequence[int]], max_conditioning: int | None = None
) -> list[Query]:
    """Every test ``(x, y, S)`` (normalised, x < y) whose variables one dataset observes together,
    ``|S| <= max_conditioning``: the tests IOD may ask, and the table a precomputed-evidence run
    fills (the paper's 42 for five variables split 3 shared / 2 exclusive, ``|S| <= 3``)."""
    out: dict[Query, None] = {}
    for d in datasets:
        ids = sorted({int(v) for v in d})
        for x, y in combinations(ids, 2):
            rest = [v for v in ids if v not in (x, y)]
            top = len(rest) if max_conditioning is None else min(len(rest), max_conditioning)
            for k in range(top + 1):
                for s in combinations(rest, k):
                    out[(x, y, s)] = None
    return sorted(out, key=lambda q: (len(q[2]), q))


def _lockstep(
    datasets: Sequence[tuple[int, ...]], local_steps: Sequence[Generator[Any, Any, Any]]
) -> Generator[list[Query], np.ndarray, list[Any]]:
    """Run every dataset's search together: each batch is the union of their pending queries
    (global ids, normalised, distinct), so one answer serves all of them."""
    results: list[Any] = [None] * len(local_steps)
    pending: dict[int, list[Query]] = {}

    def advance(k: int, answers: np.ndarray | None) -> None:
        try:
            batch = next(local_steps[k]) if answers is None else local_steps[k].send(answers)
        except StopIteration as stop:
            results[k] = stop.value
            pending.pop(k, None)
            return
        ids = datasets[k]
        pending[k] = [
            normalise_query(ids[x], ids[y], tuple(ids[v] for v in s)) for x, y, s in batch
        ]

    for k in range(len(local_steps)):
        advance(k, None)
    while pending:
        union = list(dict.fromkeys(q for batch in pending.values() for q in batch))
        pvalues = np.asarray((yield union), dtype=float)
        if pvalues.shape != (len(union),):
            raise ValueError(f"expected {len(union)} p-values, got shape {pvalues.shape}")
        answer = dict(zip(union, pvalues.tolist(), strict=True))
        for k, batch in list(pending.items()):
            advance(k, np.array([answer[q] for q in batch], dtype=float))
    return results


def _local_structure(ids: tuple[int, ...], found: FCIResult) -> LocalStructure:
    """The dataset's skeleton, first separating sets (global ids) and PAG."""
    adjacency = found.graph.adjacency()
    sepsets = {}
    p = len(ids)
    for x in range(p):
        for y in range(x + 1, p):
            if adjacency[x, y]:
                continue
            sets = recorded_sepsets(found.sepsets, x, y)
            if not sets:
                raise RuntimeError(f"the local search kept no separating set for {ids[x], ids[y]}")
            sepsets[(ids[x], ids[y])] = frozenset(ids[v] for v in sets[0])
    return LocalStructure(ids, adjacency, sepsets, found.graph, n_tests=found.n_tests)


def iod_steps(
    names: Sequence[str],
    datasets: Sequence[Sequence[int]],
    alpha: float = 0.05,
    *,
    procedure: Procedure = "original",
    max_depth: int | None = None,
    possible_dsep: Literal["sequential", "stable", "off"] = "stable",
    pds_max_size: int | None = None,
    max_candidates: int | None = 100_000,
    partial: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Generator[list[Query], np.ndarray, IODResult]:
    """Generator: yields batches of CI queries over ``names`` (global indices), returns the
    :class:`IODResult`. ``datasets``: each dataset's variable indices.

    ``max_candidates`` / ``partial``: the enumeration cap (:func:`~.iod_candidates.
    enumerate_pags`); ``max_depth`` caps the adjacency search's conditioning sets;
    ``possible_dsep``: the schedule of FCI's Possible-D-Sep phase (``stable``: one batch per
    subset size), ``pds_max_size`` its largest conditioning set.
    """
    if procedure not in PROCEDURES:
        raise ValueError(f"unknown IOD procedure {procedure!r}; expected one of {PROCEDURES}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    names = tuple(str(v) for v in names)
    sets = check_datasets(names, datasets)
    local_steps = [
        fci_steps(
            [names[v] for v in ids],
            alpha,
            max_depth=max_depth,
            possible_dsep=possible_dsep,
            pds_max_size=pds_max_size,
            rules="zhang",
        )
        for ids in sets
    ]
    asked: set[Query] = set()

    def counted(
        steps: Generator[list[Query], np.ndarray, list[Any]],
    ) -> Generator[list[Query], np.ndarray, list[Any]]:
        try:
            batch = next(steps)
            while True:
                asked.update(batch)
                batch = steps.send((yield batch))
        except StopIteration as stop:
            return stop.value

    found = yield from counted(_lockstep(sets, local_steps))
    local = [_local_structure(ids, r) for ids, r in zip(sets, found, strict=True)]
    if progress is not None:
        progress(f"IOD local phase done: {len(local)} dataset(s), {len(asked)} distinct CI tests")
    gg = global_graph(len(names), local, procedure)
    enumeration = enumerate_pags(
        names, gg, max_candidates=max_candidates, partial=partial, progress=progress
    )
    pags = [Graph(names, m, "PAG") for m in enumeration.pags]
    return IODResult(names, pags, local, enumeration, procedure, len(asked))


def iod(
    oracle: CIOracle, datasets: Sequence[Sequence[int]], alpha: float = 0.05, **options: Any
) -> IODResult:
    """IOD on a local oracle over the union (see :func:`iod_steps` for the options)."""
    return drive(iod_steps(oracle.variables, datasets, alpha, **options), oracle)
