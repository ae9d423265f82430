"""Greedy equivalence search (Chickering 2002) over CPDAGs for any decomposable score, batched.

GES starts from the empty graph; the forward phase repeatedly applies the best-scoring valid
``Insert(x, y, T)``, the backward phase the best ``Delete(x, y, H)``, each while the best change
is positive. A state is a CPDAG; after each operator the graph is completed again (a consistent
DAG extension, Dor and Tarsi 1992, then its CPDAG: v-structures and Meek's rules).

The search is written once, as a generator (:func:`ges_steps`): each step yields the batch of
families ``(child, sorted parents)`` whose scores it has not seen, receives their scores, and
picks its move. :func:`ges` drives it with a per-family callback; a federated strategy answers one
batch per round (RFCD: :mod:`fedcausal_flwr.strategies.rfcd`). Scores are cached by family, so a
step costs a round only when it needs a family no earlier step needed.

The defaults reproduce causal-learn 0.1.4.8's ``ges`` (``causallearn/search/ScoreBased/GES.py``
and ``utils/GESUtils.py``), which *maximises* the score:

* operators are enumerated ``for x in range(p): for y in range(p)``, then the subsets ``T`` of
  ``nbrs(y) - adj(x)`` (``H`` of ``nbrs(y) & adj(x)``) by size, each size in
  ``itertools.combinations`` order; the first strict maximum wins;
* ``Insert(x, y, T)`` is valid iff ``NA u T`` is a clique (``NA = nbrs(y) & adj(x)``) and every
  semi-directed path from ``y`` to ``x`` meets ``NA u T``; its change is
  ``s(y, NA u T u Pa(y) u {x}) - s(y, NA u T u Pa(y))``; it is only tried when ``y`` has at most
  ``max_parents`` directed parents (causal-learn's ``maxP``; no cap by default);
* ``Delete(x, y, H)`` (``x - y`` or ``x --> y``) is valid iff ``NA - H`` is a clique; its change
  is ``s(y, (NA - H) u Pa(y)) - s(y, (NA - H) u Pa(y) u {x})``; it orients ``y --> h`` and
  ``x --> h`` for ``h`` in ``H``;
* the running total starts as the empty graph's score summed in node order, and a phase stops
  when ``(total + best) - total <= 0`` (causal-learn's test, rounding included).

:class:`CausalLearnBDeu` is causal-learn's ``local_score_BDeu`` on the project's
:class:`~fedcausal_flwr.discovery.score.BDeuScorer`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from fedcausal_flwr.discovery.score import BDeuScorer
from fedcausal_flwr.graphs.extension import pdag_to_dag
from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL, Graph
from fedcausal_flwr.graphs.truth import dag_to_cpdag

Family = tuple[int, tuple[int, ...]]  # (child, parents sorted ascending)
FamilyScore = Callable[[int, tuple[int, ...]], float]
Steps = Generator[list[Family], np.ndarray, "GESResult"]
INSERT, DELETE = "insert", "delete"


def family(child: int, parents: Iterable[int]) -> Family:
    """The normalised key of a family: the child and its parents in ascending order."""
    return int(child), tuple(sorted(int(v) for v in parents))


@dataclass(frozen=True)
class Operator:
    """``Insert(tail, head, subset)`` or ``Delete(tail, head, subset)`` with the two families of
    ``head`` whose scores decide it (with and without ``tail`` among the parents)."""

    kind: str
    tail: int
    head: int
    subset: tuple[int, ...]
    with_tail: Family
    without_tail: Family

    def change(self, scores: dict[Family, float]) -> float:
        """Score change of applying the operator."""
        if self.kind == INSERT:
            return scores[self.with_tail] - scores[self.without_tail]
        return scores[self.without_tail] - scores[self.with_tail]


@dataclass
class GESResult:
    """The final CPDAG (``directed[a, b]``: ``a --> b``; ``undirected`` symmetric), its total
    score as GES tracked it, the operators applied (``(tail, head, subset)`` per phase), the number
    of distinct families scored and of batches (one per step that needed new families)."""

    directed: np.ndarray
    undirected: np.ndarray
    score: float
    inserts: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)
    deletes: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)
    families_scored: int = 0
    batches: int = 0

    def graph(self, names: Sequence[str]) -> Graph:
        """The CPDAG as a :class:`~fedcausal_flwr.graphs.graph.Graph` of kind ``CPDAG``."""
        return Graph(names, _marks(self.directed, self.undirected), "CPDAG")


# ============================================================================ the search
def ges_steps(n_vars: int, max_parents: float | None = None) -> Steps:
    """GES as a batch generator: yields the families it needs scored, receives one score per
    family (same order), returns a :class:`GESResult`. See the module docstring."""
    if isinstance(n_vars, bool) or not isinstance(n_vars, (int, np.integer)) or n_vars < 1:
        raise ValueError(f"n_vars must be a positive integer, got {n_vars!r}")
    if max_parents is not None and not (
        isinstance(max_parents, (int, float, np.integer, np.floating))
        and not isinstance(max_parents, bool)
        and max_parents >= 0
    ):
        raise ValueError(f"max_parents must be a number >= 0 or None, got {max_parents!r}")
    p = int(n_vars)
    scores: dict[Family, float] = {}
    batches = 0

    def need(families: Iterable[Family]) -> Generator[list[Family], np.ndarray, None]:
        nonlocal batches
        missing = list(dict.fromkeys(f for f in families if f not in scores))
        if not missing:
            return
        answers = np.asarray((yield missing), dtype=np.float64)
        if answers.shape != (len(missing),):
            raise ValueError(
                f"expected {len(missing)} family scores for the batch, got shape {answers.shape}"
            )
        if not np.all(np.isfinite(answers)):
            bad = missing[int(np.flatnonzero(~np.isfinite(answers))[0])]
            raise ValueError(f"the score of family {bad} is not finite")
        batches += 1
        scores.update(zip(missing, answers.tolist(), strict=True))

    directed = np.zeros((p, p), dtype=bool)
    undirected = np.zeros((p, p), dtype=bool)
    empty = [family(j, ()) for j in range(p)]
    operators = insert_operators(directed, undirected, max_parents)
    yield from need([*empty, *_families(operators)])
    total = 0.0
    for key in empty:  # causal-learn's score_g: the empty graph, summed in node order
        total = total + scores[key]
    inserts: list[tuple[int, int, tuple[int, ...]]] = []
    deletes: list[tuple[int, int, tuple[int, ...]]] = []
    for phase in (INSERT, DELETE):
        while True:
            if phase == DELETE or inserts:  # the first forward step's operators are known
                operators = (
                    insert_operators(directed, undirected, max_parents)
                    if phase == INSERT
                    else delete_operators(directed, undirected)
                )
            yield from need(_families(operators))
            best, chosen = -math.inf, None
            for op in operators:
                change = op.change(scores)
                if change > best:
                    best, chosen = change, op
            if chosen is None or (total + best) - total <= 0:
                break
            directed, undirected = apply_operator(chosen, directed, undirected)
            total = total + best
            (inserts if phase == INSERT else deletes).append(
                (chosen.tail, chosen.head, chosen.subset)
            )
            operators = []
    return GESResult(directed, undirected, total, inserts, deletes, len(scores), batches)


def ges(n_vars: int, score: FamilyScore, max_parents: float | None = None) -> GESResult:
    """Run GES locally: ``score(child, parents)`` gives a family's score (parents sorted)."""
    steps = ges_steps(n_vars, max_parents)
    try:
        batch = next(steps)
        while True:
            batch = steps.send(np.array([score(c, ps) for c, ps in batch], dtype=np.float64))
    except StopIteration as stop:
        return stop.value


def _families(operators: Iterable[Operator]) -> list[Family]:
    return [f for op in operators for f in (op.with_tail, op.without_tail)]


# ============================================================================ operators
class _View:
    """Neighbour, adjacency and parent sets of a CPDAG, computed once per step."""

    def __init__(self, directed: np.ndarray, undirected: np.ndarray):
        p = directed.shape[0]
        self.adjacent = directed | directed.T | undirected
        self.semi = directed | undirected  # semi[a, b]: a --> b or a --- b
        self.nbrs = [set(np.flatnonzero(undirected[v]).tolist()) for v in range(p)]
        self.adj = [set(np.flatnonzero(self.adjacent[v]).tolist()) for v in range(p)]
        self.parents = [set(np.flatnonzero(directed[:, v]).tolist()) for v in range(p)]
        self.successors = [np.flatnonzero(self.semi[v]).tolist() for v in range(p)]
        reach = self.semi.copy()  # reach[a, b]: a semi-directed path a ~> b (Warshall)
        for k in range(p):
            reach |= np.outer(reach[:, k], reach[k])
        self.reach = reach

    def clique(self, nodes: set[int]) -> bool:
        members = sorted(nodes)
        return all(self.adjacent[a, b] for a, b in combinations(members, 2))

    def blocked(self, start: int, target: int, blockers: set[int]) -> bool:
        """Every semi-directed path ``start ~> target`` passes through ``blockers``."""
        if not self.reach[start, target]:
            return True
        seen = blockers | {start}
        frontier = [start]
        while frontier:
            reached = []
            for v in frontier:
                for w in self.successors[v]:
                    if w not in seen:
                        if w == target:
                            return False
                        seen.add(w)
                        reached.append(w)
            frontier = reached
        return True


def _subsets(items: Sequence[int]) -> Iterable[tuple[int, ...]]:
    """All subsets by size, each size in ``itertools.combinations`` order (causal-learn's)."""
    for size in range(len(items) + 1):
        yield from combinations(items, size)


def insert_operators(
    directed: np.ndarray, undirected: np.ndarray, max_parents: float | None = None
) -> list[Operator]:
    """The valid ``Insert`` operators of a CPDAG, in causal-learn's order."""
    view = _View(directed, undirected)
    p = directed.shape[0]
    found = []
    for x in range(p):
        for y in range(p):
            if x == y or view.adjacent[x, y]:
                continue
            if max_parents is not None and len(view.parents[y]) > max_parents:
                continue
            na = view.nbrs[y] & view.adj[x]
            for subset in _subsets(sorted(view.nbrs[y] - view.adj[x])):
                nat = na | set(subset)
                if not view.clique(nat) or not view.blocked(y, x, nat):
                    continue
                base = nat | view.parents[y]
                found.append(Operator(INSERT, x, y, subset, family(y, base | {x}), family(y, base)))
    return found


def delete_operators(directed: np.ndarray, undirected: np.ndarray) -> list[Operator]:
    """The valid ``Delete`` operators of a CPDAG, in causal-learn's order."""
    view = _View(directed, undirected)
    p = directed.shape[0]
    found = []
    for x in range(p):
        for y in range(p):
            if not (undirected[x, y] or directed[x, y]):
                continue
            na = view.nbrs[y] & view.adj[x]
            for subset in _subsets(sorted(na)):
                rest = na - set(subset)
                if not view.clique(rest):
                    continue
                base = rest | view.parents[y]
                found.append(
                    Operator(DELETE, x, y, subset, family(y, base | {x}), family(y, base - {x}))
                )
    return found


def apply_operator(
    op: Operator, directed: np.ndarray, undirected: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The CPDAG after ``op`` (the edited PDAG, extended to a DAG, then completed)."""
    d, u = directed.copy(), undirected.copy()
    x, y = op.tail, op.head
    if op.kind == INSERT:
        d[x, y] = True
        for t in op.subset:
            u[t, y] = u[y, t] = False
            d[t, y] = True
    else:
        d[x, y] = d[y, x] = u[x, y] = u[y, x] = False
        for h in op.subset:
            for source in (y, x):  # y --- h and the edge x - h become y --> h and x --> h
                u[source, h] = u[h, source] = d[h, source] = False
                d[source, h] = True
    return complete_pdag(d, u)


def complete_pdag(directed: np.ndarray, undirected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CPDAG of a PDAG's consistent extension; an error if it has none."""
    p = directed.shape[0]
    names = [str(k) for k in range(p)]
    dag, consistent = pdag_to_dag(Graph(names, _marks(directed, undirected), "CPDAG"))
    if not consistent:
        raise RuntimeError("GES reached a PDAG without a consistent DAG extension")
    marks = dag_to_cpdag(dag).marks
    tails = marks == TAIL
    arrows = marks == ARROW
    return arrows & tails.T, tails & tails.T


def _marks(directed: np.ndarray, undirected: np.ndarray) -> np.ndarray:
    marks = np.full(directed.shape, NONE, dtype=np.int8)
    marks[undirected] = TAIL
    marks[directed] = ARROW
    marks[directed.T] = TAIL
    return marks


# ============================================================================ BDeu
class CausalLearnBDeu:
    """causal-learn's ``local_score_BDeu`` (the log score GES maximises) as family scores.

    The log marginal likelihood with equivalent sample size ``ess`` (causal-learn's
    ``sample_prior``, default 1) is :class:`~fedcausal_flwr.discovery.score.BDeuScorer`'s; the
    structure prior (``structure_prior``, default 1) treats each of the other ``p - 1``
    variables as a parent with probability ``structure_prior / (p - 1)``, independently::

        |Pa| ln(s / (p - 1)) + (p - 1 - |Pa|) ln(1 - s / (p - 1))

    (``None``: no structure term). ``cards=None`` takes each variable's number of observed
    values, as causal-learn's default ``r_i_map`` (the codes are re-indexed over them).
    """

    def __init__(
        self,
        codes: np.ndarray,
        cards: Sequence[int] | None = None,
        *,
        ess: float = 1.0,
        structure_prior: float | None = 1.0,
    ) -> None:
        codes = np.asarray(codes)
        if codes.ndim != 2:
            raise ValueError(f"codes must be a 2-D (rows x variables) array, got {codes.shape}")
        if cards is None:
            codes, cards = observed_levels(codes)
        p = codes.shape[1]
        self.n_vars = p
        self.scorer = BDeuScorer(codes, cards, ess=ess, structure_prior=False)
        self.prior = edge_prior_terms(p, structure_prior)

    def __call__(self, child: int, parents: Sequence[int] = ()) -> float:
        return self.scorer.local(child, parents) + float(self.prior[len(parents)])

    def batch(self, families: Iterable[Family]) -> np.ndarray:
        """Scores of many families (one per family, in order)."""
        return np.array([self(child, parents) for child, parents in families], dtype=np.float64)


def edge_prior_terms(n_vars: int, structure_prior: float | None) -> np.ndarray:
    """causal-learn's BDeu structure term for 0..n_vars-1 parents (zeros for ``None``)."""
    others = n_vars - 1
    if structure_prior is None:
        return np.zeros(max(n_vars, 1))
    if not (0 < structure_prior < others):
        raise ValueError(
            f"structure_prior must be above 0 and below the number of variables minus one "
            f"({others}) so that each potential parent has a prior probability strictly between "
            f"0 and 1; got {structure_prior} (use None for no structure term)"
        )
    rate = structure_prior / others
    k = np.arange(n_vars)
    return k * math.log(rate) + (others - k) * math.log(1.0 - rate)


def observed_levels(codes: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Codes re-indexed over each column's observed values, and their numbers of values."""
    codes = np.asarray(codes)
    out = np.empty(codes.shape, dtype=np.int64)
    cards = []
    for j in range(codes.shape[1]):
        values, out[:, j] = np.unique(codes[:, j], return_inverse=True)
        cards.append(int(values.size))
    return out, cards
