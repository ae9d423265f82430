"""BDeu scoring and tabu hill climbing restricted to a skeleton (FedECD Phase 2).

FedECD's clients learn one DAG per bootstrap sample with the Mens X Machina hill climber: BDeu
(equivalent sample size 10) plus a structure prior of ``ln(1 / (ess + 1))`` per parent, tabu
search over add / delete / reverse moves on the edges of the federated skeleton ``S*``, tabu list
of the last 100 *structures*, stop after 15 iterations without a new best. :class:`BDeuScorer`
and :func:`hill_climb` reimplement that search with numpy so that 450 searches (30 clients x 15
bootstraps) on ALARM take seconds.

Two deliberate choices:

* Cardinalities are the ones given (the global level sets of the federation), not the largest
  code observed in the sample as in the reference (which shrinks ``r`` and ``q`` when a bootstrap
  misses the top level). Empty cells add nothing to the score, so the given cards only enter
  through the Dirichlet hyper-parameters ``ess / q`` and ``ess / (q r)``.
* The default search may add, delete and reverse either orientation of every skeleton edge.
  ``lower_triangle_compat=True`` reproduces the reference's ``CPM = tril(S*)`` quirk instead.

Why not pgmpy's ``HillClimbSearch``: on ALARM with the same moves it was 43-170x slower than this
search in its like-for-like greedy mode (``experiments/bench_score.py``; 450 searches at n = 333
would take about 14 minutes instead of 15 s); it has no tabu-with-barren-iterations rule, its
BDeu has no structure prior, its local score is wrong when a child state is unobserved and the
family has parents, and it breaks score ties in Python set order (results change with the hash
seed). The local scores here are checked against pgmpy's where pgmpy is right and against
causal-learn's ``local_score_BDeu`` where it is not.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# A running parent-configuration code is compressed to observed configurations (np.unique) before
# it could pass this bound, so (configuration, child) strata always fit in int64.
_MAX_CONFIG_CODE = 1 << 40
# Count tables with more cells than this (and more than 8 cells per row) are built over the
# observed parent configurations only.
_DENSE_CELLS = 1 << 16
IMPROVEMENT_TOLERANCE = 1e-10  # a new best structure must beat the old one by more than this

ADD, DELETE, REVERSE = 0, 1, 2
MOVE_KINDS = ("add", "delete", "reverse")


class BDeuScorer:
    """Decomposable BDeu score of discrete data with a cache of family scores.

    ``local(child, parents)`` is, with ``q`` = product of the parents' cards, ``r`` = the child's
    card and counts ``N_jk`` (parent configuration ``j``, child state ``k``)::

        sum_j [lnG(ess/q) - lnG(ess/q + N_j)] + sum_jk [lnG(ess/(q r) + N_jk) - lnG(ess/(q r))]
        + |Pa| * ln(1 / (ess + 1))          # only when ``structure_prior``

    The last term is the Heckerman et al. (1995) prior against an empty prior network that
    FedECD's reference scorer adds; pgmpy's ``BDeu`` omits it. ``cards`` are taken as given (the
    global level sets), never the largest observed code. Scores are cached by
    ``(child, sorted parents)``; ``n_requests`` / ``n_computed`` count calls and cache misses.
    """

    def __init__(
        self,
        codes: np.ndarray,
        cards: Sequence[int],
        ess: float = 10.0,
        structure_prior: bool = True,
        *,
        names: Sequence[str] | None = None,
    ) -> None:
        codes = np.asarray(codes)
        if codes.ndim != 2:
            raise ValueError(
                f"codes must be a 2-D (rows x variables) array, got shape {codes.shape}"
            )
        if not np.issubdtype(codes.dtype, np.integer):
            raise TypeError(f"codes must hold integer state codes, got dtype {codes.dtype}")
        n, p = codes.shape
        if n == 0:
            raise ValueError("codes has no rows: a BDeu score needs at least one observation")
        self.names = (
            tuple(str(v) for v in names) if names is not None else tuple(f"X{j}" for j in range(p))
        )
        if len(self.names) != p:
            raise ValueError(f"got {len(self.names)} names for {p} variables")
        cards_arr = np.asarray(cards)
        if cards_arr.shape != (p,):
            raise ValueError(f"cards must give one cardinality per variable ({p}), got {cards}")
        if not np.issubdtype(cards_arr.dtype, np.integer) or np.any(cards_arr < 1):
            raise ValueError(f"cards must be positive integers, got {cards_arr.tolist()}")
        if p:
            low, high = codes.min(axis=0), codes.max(axis=0)
            for j in range(p):
                if low[j] < 0 or high[j] >= cards_arr[j]:
                    bad = int(low[j]) if low[j] < 0 else int(high[j])
                    raise ValueError(
                        f"variable {self.names[j]!r} (column {j}) has code {bad}, outside "
                        f"0..{int(cards_arr[j]) - 1} for card {int(cards_arr[j])}"
                    )
        if isinstance(ess, bool) or not isinstance(ess, (int, float, np.integer, np.floating)):
            raise TypeError(f"ess must be a number, got {ess!r}")
        if not (math.isfinite(ess) and ess > 0):
            raise ValueError(f"ess (equivalent sample size) must be finite and > 0, got {ess}")
        self.n_rows, self.n_vars = n, p
        self.cards = tuple(int(c) for c in cards_arr)
        self.ess = float(ess)
        self.structure_prior = bool(structure_prior)
        self._prior_per_parent = math.log(1.0 / (self.ess + 1.0)) if structure_prior else 0.0
        self._columns = np.ascontiguousarray(codes.T, dtype=np.int64)  # one row per variable
        self._cache: dict[tuple[int, tuple[int, ...]], float] = {}
        self.n_requests = 0
        self.n_computed = 0

    # ----------------------------------------------------------------- scores
    def local(self, child: int, parents: Sequence[int] = ()) -> float:
        """BDeu score of the family ``parents -> child`` (parents in any order)."""
        return self._local(child, tuple(sorted(parents)))

    def _local(self, child: int, parents: tuple[int, ...]) -> float:
        """``local`` for parents already sorted (the hill climber's hot path)."""
        self.n_requests += 1
        key = (child, parents)
        score = self._cache.get(key)
        if score is None:
            self._check_family(child, parents)
            score = self._compute(child, parents)
            self._cache[key] = score
            self.n_computed += 1
        return score

    def score_dag(self, dag: np.ndarray) -> float:
        """Total score of a DAG given as a boolean matrix with ``dag[i, j]`` = ``i -> j``."""
        dag = _check_square_bool(dag, self.n_vars, "dag")
        if np.any(np.diag(dag)) or _topological_order(dag) is None:
            raise ValueError("dag has a self-loop or a directed cycle")
        total = np.array(
            [self._local(j, tuple(np.flatnonzero(dag[:, j]).tolist())) for j in range(self.n_vars)]
        )
        return float(total.sum())

    def _check_family(self, child: int, parents: tuple[int, ...]) -> None:
        p = self.n_vars
        for v in (child, *parents):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < p:
                raise ValueError(f"variable index {v!r} is not in 0..{p - 1}")
        if child in parents:
            raise ValueError(f"variable {self.names[child]!r} cannot be its own parent")
        if len(set(parents)) != len(parents):
            raise ValueError(f"duplicate parents {list(parents)} for {self.names[child]!r}")

    def _compute(self, child: int, parents: tuple[int, ...]) -> float:
        from scipy.special import gammaln  # here: a client's hello imports this module

        r = self.cards[child]
        q = math.prod(self.cards[v] for v in parents)
        if not parents:
            bound = 1
            strata = self._columns[child]
        else:
            config = self._columns[parents[0]]
            bound = self.cards[parents[0]]
            for v in parents[1:]:
                card = self.cards[v]
                if bound * card > _MAX_CONFIG_CODE:
                    observed, config = np.unique(config, return_inverse=True)
                    bound = observed.size
                config = config * card + self._columns[v]
                bound *= card
            if bound * r > max(_DENSE_CELLS, 8 * self.n_rows):
                observed, config = np.unique(config, return_inverse=True)
                bound = observed.size
            strata = config * r + self._columns[child]
        counts = np.bincount(strata, minlength=bound * r)
        config_totals = counts.reshape(bound, r).sum(axis=1)
        n_jk = counts[counts > 0].astype(np.float64)
        n_j = config_totals[config_totals > 0].astype(np.float64)
        # Empty cells and configurations add lnG(a) - lnG(a + 0) = 0, so only observed ones enter.
        alpha_j = self.ess / q
        alpha_jk = alpha_j / r
        score = (
            n_j.size * math.lgamma(alpha_j)
            - float(gammaln(n_j + alpha_j).sum())
            + float(gammaln(n_jk + alpha_jk).sum())
            - n_jk.size * math.lgamma(alpha_jk)
        )
        return score + len(parents) * self._prior_per_parent


@dataclass
class HillClimbResult:
    """Best structure found: ``dag[i, j]`` is ``i -> j``; ``score`` its total score.

    ``iterations`` counts move selections, ``moves`` the moves applied (including non-improving
    ones after the best), ``local_evaluations`` the family scores requested from the scorer
    (cache hits included), ``stop_reason`` is ``"barren"``, ``"no_move"`` or ``"max_iter"``;
    ``trace`` lists the applied moves ``(kind, tail, head)`` in order, kind in ``MOVE_KINDS``.
    """

    dag: np.ndarray
    score: float
    iterations: int
    moves: int
    local_evaluations: int
    stop_reason: str
    trace: list[tuple[str, int, int]]


def hill_climb(
    scorer: BDeuScorer,
    allowed: np.ndarray,
    *,
    tabu_length: int = 100,
    max_barren: int = 15,
    max_iter: int | None = None,
    lower_triangle_compat: bool = False,
) -> HillClimbResult:
    """Tabu hill climbing over DAGs whose edges lie in the skeleton ``allowed``.

    As the Mens X Machina hill climber FedECD uses: start from the empty graph; every iteration
    applies the best-scoring legal move that does not lead to a structure in the tabu list, even
    if it lowers the score; the tabu list holds the last ``tabu_length`` structures (the start
    included); the best structure is replaced only when beaten by more than 1e-10; the search
    stops after ``max_barren`` consecutive iterations without a new best, when no legal non-tabu
    move remains, or after ``max_iter`` iterations, and returns the best structure.

    Moves: add ``i -> j`` (no edge between ``i, j`` and ``j`` does not reach ``i``), delete
    ``i -> j``, reverse ``i -> j`` (no other directed path ``i ~> j``). Ties between equal deltas
    go to the first move in the order (kind: add, delete, reverse; then child; then parent),
    which is the reference's order (MATLAB's first maximum in column-major order). Equivalent
    DAGs have equal BDeu scores up to rounding, so e.g. which direction a first edge takes is
    decided by the last bits of the two sums: deterministic, but arbitrary.

    ``tabu_length=0, max_barren=0`` is plain greedy hill climbing: it stops at the first
    iteration whose best move does not improve the score (that move is applied, found barren
    and discarded). ``lower_triangle_compat=True`` emulates the reference's candidate-parent
    matrix ``tril(S*)``: a move on ``x -> y`` is selectable only if ``x > y`` (index order), so an
    edge ``{a < b}`` can only be added as ``b -> a``, reversed once to ``a -> b``, then is frozen.

    Only the families whose parent set changed (one for add / delete, two for reverse) are
    re-scored after a move; reachability is a boolean matrix updated in place on additions and
    recomputed after deletions and reversals.
    """
    p = scorer.n_vars
    allowed, tabu_length, max_barren, max_iter = _checked_search_args(
        allowed, p, tabu_length, max_barren, max_iter
    )
    permit = allowed.copy()  # permit[x, y]: a move on the edge x -> y may be selected
    if lower_triangle_compat:
        permit &= np.tri(p, p, -1, dtype=bool)
    neighbours = [np.flatnonzero(allowed[:, j]).tolist() for j in range(p)]

    requests_before = scorer.n_requests
    state = _empty_state(scorer, neighbours)
    tabu = _TabuList(tabu_length)
    return _climb(scorer, state, permit, neighbours, tabu, max_barren, max_iter, requests_before)


def _climb(
    scorer: BDeuScorer,
    state: _ClimbState,
    permit: np.ndarray,
    neighbours: Sequence[Sequence[int]],
    tabu: _TabuList,
    max_barren: int,
    max_iter: int | None,
    requests_before: int,
) -> HillClimbResult:
    """:func:`hill_climb`'s search loop from ``state`` (the start, not yet in the tabu list):
    apply the best non-tabu move each iteration, keep the best structure, stop as
    :func:`hill_climb` says. ``requests_before``: the scorer's request count before the start
    was scored, so the result counts every family score the search asked for."""
    tabu.remember(state.dag)
    current = float(state.family.sum())
    best_dag, best_score = state.dag.copy(), current
    iterations = moves = barren = 0
    stop_reason = "max_iter"
    trace: list[tuple[str, int, int]] = []

    while max_iter is None or iterations < max_iter:
        moves_now = _candidate_moves(state.dag, state.reach, permit, state.succ, state.family)
        iterations += 1
        chosen = _best_move(state.dag, *moves_now, tabu)
        if chosen < 0:
            stop_reason = "no_move"
            break
        kinds, tails, heads, _ = moves_now
        kind, i, j = int(kinds[chosen]), int(tails[chosen]), int(heads[chosen])
        _apply_move(state, kind, i, j)
        moves += 1
        trace.append((MOVE_KINDS[kind], i, j))
        tabu.remember(state.dag)
        current = float(state.family.sum())
        if current > best_score and abs(current - best_score) > IMPROVEMENT_TOLERANCE:
            best_dag, best_score = state.dag.copy(), current
            barren = 0
        else:
            barren += 1
            if barren >= max_barren:
                stop_reason = "barren"
                break
        _rescore(scorer, state, neighbours, j)
        if kind == REVERSE:
            _rescore(scorer, state, neighbours, i)

    return HillClimbResult(
        dag=best_dag,
        score=best_score,
        iterations=iterations,
        moves=moves,
        local_evaluations=scorer.n_requests - requests_before,
        stop_reason=stop_reason,
        trace=trace,
    )


def _checked_search_args(
    allowed: np.ndarray, p: int, tabu_length: int, max_barren: int, max_iter: int | None
) -> tuple[np.ndarray, int, int, int | None]:
    """:func:`hill_climb`'s arguments checked: ``allowed`` a p x p boolean skeleton (symmetric,
    no self-loops) and the counts non-negative integers, as plain ints."""
    allowed = _check_square_bool(allowed, p, "allowed")
    if not np.array_equal(allowed, allowed.T):
        raise ValueError("allowed must be symmetric (a skeleton)")
    if np.any(np.diag(allowed)):
        raise ValueError("allowed must have a False diagonal (no self-loops)")
    tabu_length = _check_count(tabu_length, "tabu_length")
    max_barren = _check_count(max_barren, "max_barren")
    if max_iter is not None:
        max_iter = _check_count(max_iter, "max_iter")
    return allowed, tabu_length, max_barren, max_iter


@dataclass
class _ClimbState:
    """The search's current DAG (``dag[i, j]``: ``i -> j``) and what scoring its moves needs:
    ``reach[i, j]``, a directed path ``i ~> j`` of length >= 1; each node's parents and family
    score; ``succ[k, j]``, the score of j's family once k is toggled in (added to / removed from)
    its parents."""

    dag: np.ndarray
    reach: np.ndarray
    parents: list[set[int]]
    family: np.ndarray
    succ: np.ndarray


def _empty_state(scorer: BDeuScorer, neighbours: Sequence[Sequence[int]]) -> _ClimbState:
    """The search's start: the empty graph, each family scored without parents, then each
    family's toggles of its skeleton neighbours."""
    p = scorer.n_vars
    state = _ClimbState(
        dag=np.zeros((p, p), dtype=bool),
        reach=np.zeros((p, p), dtype=bool),
        parents=[set() for _ in range(p)],
        family=np.array([scorer._local(j, ()) for j in range(p)], dtype=np.float64),
        succ=np.full((p, p), -np.inf),
    )
    for j in range(p):
        _rescore(scorer, state, neighbours, j)
    return state


def _rescore(
    scorer: BDeuScorer, state: _ClimbState, neighbours: Sequence[Sequence[int]], j: int
) -> None:
    """Score j's family with each of its skeleton neighbours toggled, once j's parents changed."""
    for k in neighbours[j]:
        state.succ[k, j] = scorer._local(j, tuple(sorted(state.parents[j] ^ {k})))


class _TabuList:
    """The last ``length`` structures visited, as packed adjacency bytes (none if ``length`` is
    0): a move leading back to one of them is not selected."""

    def __init__(self, length: int) -> None:
        self.length = length
        self._order: deque[bytes] = deque()
        self._keys: set[bytes] = set()

    def remember(self, structure: np.ndarray) -> None:
        """Add ``structure``, forgetting the oldest one when the list is full."""
        if self.length == 0:
            return
        if len(self._order) == self.length:
            self._keys.discard(self._order.popleft())
        key = np.packbits(structure).tobytes()
        self._order.append(key)
        self._keys.add(key)

    def forbids(self, dag: np.ndarray, kind: int, i: int, j: int) -> bool:
        """Whether the move on ``i -> j`` leads to a remembered structure."""
        return bool(self.length) and _key_after(dag, kind, i, j) in self._keys


def _best_move(
    dag: np.ndarray,
    kinds: np.ndarray,
    tails: np.ndarray,
    heads: np.ndarray,
    deltas: np.ndarray,
    tabu: _TabuList,
) -> int:
    """The index of the best-scoring move that is not tabu (the first of equal deltas), or -1
    when no legal non-tabu move remains. Tabu moves' ``deltas`` are set to -inf on the way."""
    while deltas.size:
        k = int(np.argmax(deltas))
        if deltas[k] == -np.inf:
            break
        if tabu.forbids(dag, kinds[k], tails[k], heads[k]):
            deltas[k] = -np.inf
            continue
        return k
    return -1


def _apply_move(state: _ClimbState, kind: int, i: int, j: int) -> None:
    """Apply the move on ``i -> j`` to the DAG, the parents and the family scores (both families
    on a reversal), and update reachability: in place on an addition, recomputed otherwise."""
    dag, parents, family, succ = state.dag, state.parents, state.family, state.succ
    family[j] = succ[i, j]
    if kind == ADD:
        dag[i, j] = True
        parents[j].add(i)
        if not state.reach[i, j]:
            sources = state.reach[:, i].copy()
            sources[i] = True
            targets = state.reach[j].copy()
            targets[j] = True
            state.reach |= np.outer(sources, targets)
    elif kind == DELETE:
        dag[i, j] = False
        parents[j].discard(i)
        state.reach = _closure(dag)
    else:
        family[i] = succ[j, i]
        dag[i, j], dag[j, i] = False, True
        parents[j].discard(i)
        parents[i].add(j)
        state.reach = _closure(dag)


def _candidate_moves(
    dag: np.ndarray, reach: np.ndarray, permit: np.ndarray, succ: np.ndarray, family: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Legal moves ``(kind, tail, head)`` in tie-break order, with their score deltas."""
    no_edge = ~(dag | dag.T)
    add = permit & no_edge & ~reach.T
    present = dag & permit
    # flat indices of the transpose list (head, tail) pairs sorted by head, then tail
    p = dag.shape[0]
    add_h, add_t = np.divmod(np.flatnonzero(add.T), p)
    del_h, del_t = np.divmod(np.flatnonzero(present.T), p)
    # i -> j may be reversed unless another path i ~> k -> j exists (k != i as reach[i, i] = 0)
    other_path = (reach[del_t] & dag[:, del_h].T).any(axis=1)
    rev_h, rev_t = del_h[~other_path], del_t[~other_path]
    gain = succ - family[None, :]  # gain[k, j]: change of j's family score when toggling k
    deltas = np.concatenate(
        [gain[add_t, add_h], gain[del_t, del_h], gain[rev_t, rev_h] + gain[rev_h, rev_t]]
    )
    kinds = np.repeat(
        np.array([ADD, DELETE, REVERSE], dtype=np.int8), [add_h.size, del_h.size, rev_h.size]
    )
    tails = np.concatenate([add_t, del_t, rev_t])
    heads = np.concatenate([add_h, del_h, rev_h])
    return kinds, tails, heads, deltas


def _key_after(dag: np.ndarray, kind: int, i: int, j: int) -> bytes:
    """Tabu key (packed adjacency bytes) of the structure after a move on ``i -> j``."""
    if kind == ADD:
        dag[i, j] = True
        key = np.packbits(dag).tobytes()
        dag[i, j] = False
    elif kind == DELETE:
        dag[i, j] = False
        key = np.packbits(dag).tobytes()
        dag[i, j] = True
    else:
        dag[i, j], dag[j, i] = False, True
        key = np.packbits(dag).tobytes()
        dag[i, j], dag[j, i] = True, False
    return key


def _topological_order(dag: np.ndarray) -> tuple[list[int], list[list[int]]] | None:
    """Kahn's order of a directed graph and its child lists; None if it has a cycle."""
    p = dag.shape[0]
    children: list[list[int]] = [[] for _ in range(p)]
    indegree = [0] * p
    tails, heads = np.nonzero(dag)
    for t, h in zip(tails.tolist(), heads.tolist(), strict=True):
        children[t].append(h)
        indegree[h] += 1
    order = [v for v in range(p) if indegree[v] == 0]
    for v in order:  # the list grows while we walk it
        for c in children[v]:
            indegree[c] -= 1
            if indegree[c] == 0:
                order.append(c)
    return (order, children) if len(order) == p else None


def _closure(dag: np.ndarray) -> np.ndarray:
    """``out[i, j]``: a directed path ``i ~> j`` of length >= 1 in the DAG ``dag``.

    Descendant sets as Python-int bitsets in reverse topological order, then unpacked: no BLAS
    (small boolean matmuls are slow and thread-contended with OpenBLAS on few cores).
    """
    p = dag.shape[0]
    found = _topological_order(dag)
    if found is None:
        raise ValueError("the graph has a directed cycle")
    order, children = found
    descendants = [0] * p
    for v in reversed(order):
        bits = 0
        for c in children[v]:
            bits |= descendants[c] | (1 << c)
        descendants[v] = bits
    width = (p + 7) // 8
    packed = b"".join(bits.to_bytes(width, "little") for bits in descendants)
    unpacked = np.unpackbits(np.frombuffer(packed, dtype=np.uint8), bitorder="little")
    return unpacked.reshape(p, 8 * width)[:, :p].astype(bool)


def _check_square_bool(matrix: np.ndarray, p: int, what: str) -> np.ndarray:
    matrix = np.asarray(matrix)
    if matrix.dtype != np.bool_:
        raise TypeError(f"{what} must be a boolean matrix, got dtype {matrix.dtype}")
    if matrix.shape != (p, p):
        raise ValueError(f"{what} must be {p}x{p} for {p} variables, got shape {matrix.shape}")
    return matrix


def _check_count(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{what} must be a non-negative integer, got {value!r}")
    return int(value)
