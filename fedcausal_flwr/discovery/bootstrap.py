"""Bootstrap pieces of FedECD (Guo et al. 2024): resamples, weighted independence evidence,
direction votes and cycle repair. Flower-free; the protocol is in ``strategies/fedecd.py``.

* :func:`bootstrap_rows`: the rows of one resample, a function of ``(seed, client, replicate)``
  only, so a run is reproducible and does not depend on the order clients are served in;
  :func:`resample_rows` adds the half subsample the federated bootstrap draws by default
  (:mod:`fedcausal_flwr.federation.core.bootstrap`).
* :func:`evidence_queries` / :func:`independence_evidence`: FedECD's Eq. 5-6 for the edges that
  lost a layer's vote: every size-``l`` subset of the endpoints' neighbourhoods in the skeleton at
  the start of the layer is tested, and each independence (``p > alpha``, unreliable tests
  ignored) is weighted by ``w(p) = (p - alpha) / (1 - alpha)`` (the authors' ``calculate_weight``).
* :func:`vote_directions`: Eq. 9-10, an edge is present if any vote has it (union), its direction
  is the strict majority; ties follow ``tie_rule``.
* :func:`break_cycles`: the voted graph may contain directed cycles (the paper does not enforce
  acyclicity); this repair drops the weakest-voted edges on cycles.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from fedcausal_flwr.graphs.graph import ARROW, TAIL
from fedcausal_flwr.stats.batch_oracle import Query, normalise_query

EVIDENCE_RULES = ("union", "larger_index")
TIE_RULES = ("undirected", "lower_parent", "higher_parent")


def bootstrap_rows(n_rows: int, seed: int, client: int, replicate: int) -> np.ndarray:
    """Row indices of one bootstrap resample (``n_rows`` draws with replacement).

    Seeded from ``(seed, client, replicate)`` with a NumPy ``SeedSequence``: every client and
    replicate gets an independent stream (the authors' code reuses ``rng(666)``, so all clients
    of equal size draw identical indices; not copied).
    """
    return _stream(n_rows, seed, client, replicate).integers(0, n_rows, size=n_rows)


#: how the federated bootstrap draws a client's rows (:func:`resample_rows`)
RESAMPLINGS = ("subsample", "replace")


def resample_rows(n_rows: int, seed: int, client: int, replicate: int, how: str) -> np.ndarray:
    """Row indices of one resample of a client's ``n_rows`` rows, a function of ``(seed, client,
    replicate)`` only: ``replace`` is :func:`bootstrap_rows`; ``subsample`` draws half the rows
    (at least one) without replacement, in their original order. A subsample repeats no row, so
    a CI test on it keeps its level; duplicated rows make a test see dependence the data does not
    have (under independence a bootstrap sample's chi2 is about twice the original's)."""
    if how == "replace":
        return bootstrap_rows(n_rows, seed, client, replicate)
    if how != "subsample":
        raise ValueError(f"unknown resampling {how!r}; expected one of {RESAMPLINGS}")
    order = _stream(n_rows, seed, client, replicate).permutation(n_rows)
    return np.sort(order[: max(1, n_rows // 2)])


def _stream(n_rows: int, seed: int, client: int, replicate: int) -> np.random.Generator:
    if n_rows < 1:
        raise ValueError(f"client {client}: cannot resample {n_rows} rows")
    if min(seed, client, replicate) < 0:
        raise ValueError(
            f"seed, client and replicate must be >= 0, got {seed}, {client}, {replicate}"
        )
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(client), int(replicate)]))


def evidence_queries(
    skeleton: np.ndarray, pairs: np.ndarray, level: int, rule: str = "union"
) -> tuple[list[Query], np.ndarray, np.ndarray]:
    """The CI tests behind the evidence of each pair, and who they belong to.

    ``skeleton`` is the global skeleton at the start of the layer (it still contains the pairs).
    For the pair ``{a < b}`` the conditioning sets are the size-``level`` subsets of
    ``adj(b) \\ {a}`` (side 1) and of ``adj(a) \\ {b}`` (side 0). Returns the queries (distinct per
    pair under ``union``), the pair index and the side of each query.
    """
    if rule not in EVIDENCE_RULES:
        raise ValueError(f"unknown evidence rule {rule!r}; expected one of {EVIDENCE_RULES}")
    skeleton = np.asarray(skeleton, dtype=bool)
    queries: list[Query] = []
    owner: list[int] = []
    side: list[int] = []
    for k, (u, v) in enumerate(np.asarray(pairs, dtype=np.int64).reshape(-1, 2).tolist()):
        a, b = min(u, v), max(u, v)
        if a == b or not skeleton[a, b]:
            raise ValueError(f"pair ({u}, {v}) is not an edge of the layer's skeleton")
        seen: set[Query] = set()
        for which, (centre, other) in ((1, (b, a)), (0, (a, b))):
            pool = [int(z) for z in np.flatnonzero(skeleton[centre]) if z != other]
            for subset in combinations(pool, level):
                query = normalise_query(a, b, subset)
                if rule == "union":
                    if query in seen:
                        continue
                    seen.add(query)
                queries.append(query)
                owner.append(k)
                side.append(which)
    return queries, np.asarray(owner, dtype=np.int64), np.asarray(side, dtype=np.int64)


def independence_evidence(
    pvalues: np.ndarray,
    owner: np.ndarray,
    side: np.ndarray,
    n_pairs: int,
    alpha: float,
    rule: str = "union",
) -> np.ndarray:
    """Per pair, the mean weight ``(p - alpha) / (1 - alpha)`` over its independent tests.

    NaN p-values (unreliable tests) are ignored; a pair without any independent test gets 0.
    ``union``: mean over every qualifying test of the pair. ``larger_index``: the authors' code
    visits each pair from both ends and the later visit overwrites the earlier one, so the value
    is the mean over side 1 (neighbours of the larger index) if any test there qualified, else
    over side 0 - order-dependent, offered for fidelity.
    """
    if rule not in EVIDENCE_RULES:
        raise ValueError(f"unknown evidence rule {rule!r}; expected one of {EVIDENCE_RULES}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    p = np.asarray(pvalues, dtype=np.float64)
    qualifies = p > alpha  # NaN compares False
    weight = np.where(qualifies, (p - alpha) / (1.0 - alpha), 0.0)
    if rule == "union":
        return _mean_by(owner, weight, qualifies, n_pairs)
    larger = _mean_by(owner, weight, qualifies & (side == 1), n_pairs)
    smaller = _mean_by(owner, weight, qualifies & (side == 0), n_pairs)
    has_larger = np.bincount(owner[qualifies & (side == 1)], minlength=n_pairs) > 0
    return np.where(has_larger, larger, smaller)


def _mean_by(owner: np.ndarray, weight: np.ndarray, mask: np.ndarray, n: int) -> np.ndarray:
    total = np.bincount(owner[mask], weights=weight[mask], minlength=n)
    count = np.bincount(owner[mask], minlength=n)
    return np.divide(total, count, out=np.zeros(n), where=count > 0)


def vote_directions(votes: np.ndarray, tie_rule: str = "undirected") -> np.ndarray:
    """Direction vote over ``votes[i, j]`` = number of graphs with ``i -> j``.

    Returns a 0/1 matrix ``out[i, j] = 1`` for ``i -> j``; an undirected edge has both entries.
    A pair is present iff some vote has it; ``i -> j`` iff strictly more votes say so. Ties:
    ``undirected`` (default, independent of the variable order: the edge stays undirected),
    ``lower_parent`` (the paper's Eq. 9: the lower index is the parent) or ``higher_parent``
    (the authors' ``dag_aggre``, ``>=``: the higher index is the parent).
    """
    if tie_rule not in TIE_RULES:
        raise ValueError(f"unknown tie rule {tie_rule!r}; expected one of {TIE_RULES}")
    votes = np.asarray(votes)
    if votes.ndim != 2 or votes.shape[0] != votes.shape[1]:
        raise ValueError(f"votes must be a square matrix, got shape {votes.shape}")
    if np.any(votes < 0) or np.any(np.diag(votes) != 0):
        raise ValueError("votes must be non-negative with an empty diagonal")
    forward = votes > votes.T
    tie = (votes == votes.T) & (votes > 0)
    if tie_rule == "undirected":
        out = forward | tie
    else:
        upper = np.triu(np.ones_like(tie), k=1).astype(bool)
        out = forward | (tie & (upper if tie_rule == "lower_parent" else upper.T))
    return out.astype(np.uint8)


def directed_part(graph: np.ndarray) -> np.ndarray:
    """The one-way entries of a 0/1 direction matrix (undirected pairs removed)."""
    graph = np.asarray(graph, dtype=bool)
    return graph & ~graph.T


def voted_dag_marks(
    votes: np.ndarray, tie_rule: str, allow_cycles: bool
) -> tuple[np.ndarray, list[tuple[int, int]], int]:
    """The merged graph of direction ``votes`` as endpoint marks, the one merge step of the
    methods that vote DAGs (FedECD, FedCSL): :func:`vote_directions` by ``tie_rule``; unless
    ``allow_cycles``, the weakest edges on directed cycles dropped (:func:`break_cycles`); a
    one-way pair an arrow, a pair voted both ways undirected (tail-tail). Returns the marks, the
    dropped ``(i, j)`` and the number of undirected pairs."""
    voted = vote_directions(votes, tie_rule).astype(bool)
    dropped: list[tuple[int, int]] = []
    if not allow_cycles:
        repaired, dropped = break_cycles(voted, votes)
        voted = repaired.astype(bool)
    marks = np.zeros(voted.shape, dtype=np.int8)
    one_way = directed_part(voted)
    marks[one_way] = ARROW
    marks[one_way.T] = TAIL
    both = voted & voted.T
    marks[both] = TAIL
    return marks, dropped, int(np.triu(both).sum())


def break_cycles(graph: np.ndarray, votes: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Drop the weakest-voted directed edges on cycles until none is left.

    Each pass takes the directed edges inside strongly connected components (exactly the edges
    on some directed cycle) and drops those with the smallest vote margin
    ``votes[i, j] - votes[j, i]``, then the smallest support ``votes[i, j]``; all edges tied at
    that minimum go together, so the result does not depend on the variable order. Undirected
    pairs are left alone. Returns the repaired matrix and the dropped ``(i, j)`` in drop order.
    """
    out = np.array(graph, dtype=bool)
    votes = np.asarray(votes, dtype=np.int64)
    dropped: list[tuple[int, int]] = []
    while True:
        directed = directed_part(out)
        import networkx as nx  # here: a client drawing resamples needs none of it

        dg = nx.DiGraph()
        dg.add_nodes_from(range(len(out)))
        dg.add_edges_from(zip(*np.nonzero(directed), strict=True))
        on_cycle = np.zeros_like(directed)
        for component in nx.strongly_connected_components(dg):
            if len(component) > 1:
                nodes = np.fromiter(component, dtype=np.int64)
                on_cycle[np.ix_(nodes, nodes)] = directed[np.ix_(nodes, nodes)]
        if not on_cycle.any():
            return out.astype(np.uint8), dropped
        rows, cols = np.nonzero(on_cycle)
        key = np.stack([votes[rows, cols] - votes[cols, rows], votes[rows, cols]], axis=1)
        weakest = np.all(key == key[np.lexsort(key.T[::-1])[0]], axis=1)
        for i, j in zip(rows[weakest].tolist(), cols[weakest].tolist(), strict=True):
            out[i, j] = False
            dropped.append((i, j))
