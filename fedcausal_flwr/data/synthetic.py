"""Synthetic generators: random DAGs, random discrete / linear-Gaussian networks, fedCI mixed data,
and latent-variable selection.

Every generator is a pure function of its arguments and ``seed``. Node names are ``X1..Xp`` and
are in topological order (every edge goes from a lower to a higher index).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import networkx as nx
import numpy as np
import pandas as pd

from fedcausal_flwr.data.networks import Network
from fedcausal_flwr.graphs.graph import Graph

MIXED_KINDS = ("continuous", "binary", "ordinal", "categorical")


# --------------------------------------------------------------------------- random DAGs
def random_dag(
    n_nodes: int, expected_degree: float = 2.0, seed: int = 0, method: str = "er"
) -> Graph:
    """A random DAG over ``X1..Xp`` (topological order), as a :class:`Graph` of kind DAG.

    ``expected_degree`` is the mean total degree (in + out), so the expected edge count is
    ``expected_degree * n_nodes / 2`` (degree 2 gives about as many edges as nodes, the FedC2SL
    and FedCDnv setting).

    * ``"er"``: Erdos-Renyi; every pair ``i < j`` gets ``Xi -> Xj`` with probability
      ``expected_degree / (n_nodes - 1)``.
    * ``"sf"`` (alias ``"ba"``): Barabasi-Albert-like preferential attachment; node ``j`` picks
      ``m_j`` distinct earlier nodes with probability proportional to (their degree + 1) and
      receives edges from them. ``m_j`` is ``floor(d/2)`` or ``ceil(d/2)`` with mean ``d/2`` and is
      at most ``j``. Hubs are therefore causes with many children (in-degree stays small, so
      discrete CPTs stay small).
    """
    if n_nodes < 1:
        raise ValueError(f"need at least one node, got {n_nodes}")
    if expected_degree < 0:
        raise ValueError(f"expected_degree must be >= 0, got {expected_degree}")
    rng = np.random.default_rng(seed)
    names = [f"X{i + 1}" for i in range(n_nodes)]
    adj = np.zeros((n_nodes, n_nodes), dtype=bool)
    if method == "er":
        if n_nodes > 1:
            p_edge = min(1.0, expected_degree / (n_nodes - 1))
            adj = np.triu(rng.random((n_nodes, n_nodes)) < p_edge, k=1)
    elif method in ("sf", "ba"):
        half = expected_degree / 2.0
        base, frac = int(np.floor(half)), half - np.floor(half)
        degree = np.zeros(n_nodes, dtype=np.float64)
        for j in range(1, n_nodes):
            m = min(j, base + int(rng.random() < frac))
            if m == 0:
                continue
            weights = degree[:j] + 1.0
            sources = rng.choice(j, size=m, replace=False, p=weights / weights.sum())
            adj[sources, j] = True
            degree[sources] += 1
            degree[j] += m
    else:
        raise ValueError(f"unknown DAG method {method!r}; use 'er' or 'sf'")
    edges = [(names[i], names[j]) for i, j in zip(*np.nonzero(adj), strict=True)]
    return Graph.from_edges(names, edges, kind="DAG")


def _topological(dag: Graph) -> list[int]:
    if dag.kind != "DAG":
        raise ValueError(f"expected a DAG, got a {dag.kind} graph")
    g = nx.DiGraph()
    g.add_nodes_from(range(dag.n_nodes))
    g.add_edges_from((i, j) for j in range(dag.n_nodes) for i in dag.parents(j).tolist())
    try:
        return list(nx.lexicographical_topological_sort(g))
    except nx.NetworkXUnfeasible:
        raise ValueError("the graph has a directed cycle") from None


def _parent_lists(dag: Graph) -> dict[str, list[str]]:
    _topological(dag)
    return {v: [dag.names[i] for i in dag.parents(j).tolist()] for j, v in enumerate(dag.names)}


# --------------------------------------------------------------------------- random networks
def random_discrete_network(
    dag: Graph,
    cards: int | Sequence[int] | Mapping[str, int] = 2,
    seed: int = 0,
    concentration: float | tuple[float, float] = 1.0,
    card_range: tuple[int, int] | None = None,
    name: str = "random",
) -> Network:
    """A discrete network on ``dag`` with Dirichlet CPTs, sampled by the same sampler as bnlearn's.

    ``cards``: one arity for all nodes, one per node (graph order) or a name -> arity mapping;
    ``card_range=(lo, hi)`` instead draws each arity uniformly from ``lo..hi``. Every CPT column is
    ``Dirichlet(a * 1)``; ``concentration`` is ``a`` or a range ``(lo, hi)`` from which ``a`` is
    drawn uniformly per column (FedC2SL uses ``(0.1, 1.0)``; the default ``a = 1`` is uniform on
    the simplex). State names are ``s0, s1, ...``.
    """
    rng = np.random.default_rng(seed)
    names = list(dag.names)
    parents = _parent_lists(dag)
    if card_range is not None:
        lo, hi = card_range
        if not 1 <= lo <= hi:
            raise ValueError(f"bad card_range {card_range}")
        arity = rng.integers(lo, hi + 1, size=len(names)).tolist()
    elif isinstance(cards, Mapping):
        missing = [v for v in names if v not in cards]
        if missing:
            raise ValueError(f"no arity given for {missing}")
        arity = [int(cards[v]) for v in names]
    elif isinstance(cards, (int, np.integer)):
        arity = [int(cards)] * len(names)
    else:
        arity = [int(c) for c in cards]
        if len(arity) != len(names):
            raise ValueError(f"{len(arity)} arities for {len(names)} nodes")
    if min(arity, default=2) < 1:
        raise ValueError("every arity must be >= 1")
    card = dict(zip(names, arity, strict=True))
    states = {v: [f"s{i}" for i in range(card[v])] for v in names}
    cpts = {}
    for v in names:
        n_cfg = int(np.prod([card[p] for p in parents[v]], dtype=np.int64))
        if isinstance(concentration, tuple):
            alpha_lo, alpha_hi = concentration
            alpha = rng.uniform(alpha_lo, alpha_hi, size=n_cfg)
        else:
            alpha = np.full(n_cfg, float(concentration))
        if np.any(alpha <= 0):
            raise ValueError(f"Dirichlet concentration must be > 0, got {concentration}")
        # Dirichlet via normalised Gamma draws; the floor keeps a column sum positive when
        # every draw underflows (possible for tiny concentrations)
        gamma = np.maximum(rng.gamma(np.broadcast_to(alpha, (card[v], n_cfg))), 1e-300)
        cpts[v] = gamma / gamma.sum(axis=0, keepdims=True)
    return Network(
        name=name,
        variables=names,
        parents=parents,
        kind="discrete",
        states=states,
        cpts=cpts,
        description=f"random discrete network (seed {seed}, concentration {concentration})",
    )


def random_gaussian_network(
    dag: Graph,
    seed: int = 0,
    weight_range: tuple[float, float] = (0.5, 2.0),
    noise_sd: float | tuple[float, float] = 1.0,
    name: str = "random_gaussian",
) -> Network:
    """A linear-Gaussian SEM on ``dag``: weights ``+-U(weight_range)`` with a random sign each,
    zero intercepts, noise sd fixed or drawn per node from a ``(lo, hi)`` range.

    Sample it with ``network.sample(n, seed)`` (a float64 DataFrame).
    """
    rng = np.random.default_rng(seed)
    names = list(dag.names)
    parents = _parent_lists(dag)
    lo, hi = weight_range
    if not 0 <= lo <= hi:
        raise ValueError(f"bad weight_range {weight_range}")
    coefficients = {}
    for v in names:
        k = len(parents[v])
        coefficients[v] = rng.uniform(lo, hi, size=k) * rng.choice([-1.0, 1.0], size=k)
    if isinstance(noise_sd, tuple):
        sds = rng.uniform(noise_sd[0], noise_sd[1], size=len(names))
    else:
        sds = np.full(len(names), float(noise_sd))
    return Network(
        name=name,
        variables=names,
        parents=parents,
        kind="gaussian",
        intercepts=dict.fromkeys(names, 0.0),
        coefficients=coefficients,
        noise_sd=dict(zip(names, sds.tolist(), strict=True)),
        description=f"random linear-Gaussian SEM (seed {seed}, weights +-{weight_range})",
    )


# --------------------------------------------------------------------------- fedCI mixed data
def random_variable_types(
    names: Sequence[str],
    seed: int = 0,
    min_continuous: int = 2,
    kinds: Sequence[str] = MIXED_KINDS,
) -> dict[str, str]:
    """fedCI's type draw: each variable uniformly one of ``kinds``, redrawn until at least
    ``min_continuous`` are continuous."""
    if min_continuous > len(names):
        raise ValueError(f"cannot have {min_continuous} continuous among {len(names)} variables")
    unknown = [k for k in kinds if k not in MIXED_KINDS]
    if unknown:
        raise ValueError(f"unknown variable kinds {unknown}; use {MIXED_KINDS}")
    if min_continuous > 0 and "continuous" not in kinds:
        raise ValueError("min_continuous > 0 needs 'continuous' among the kinds")
    rng = np.random.default_rng(seed)
    while True:
        drawn = rng.choice(len(kinds), size=len(names))
        if int(np.sum(np.asarray(kinds)[drawn] == "continuous")) >= min_continuous:
            return {v: kinds[i] for v, i in zip(names, drawn.tolist(), strict=True)}


def _signed_uniform(rng: np.random.Generator, size: int, beta_range: tuple[float, float]):
    return rng.uniform(beta_range[0], beta_range[1], size=size) * rng.choice([-1.0, 1.0], size)


def _simulate_mixed_values(
    names: list[str],
    parents: dict[str, list[str]],
    order: list[str],
    kinds: Mapping[str, str],
    levels: Mapping[str, int],
    n: int,
    rng: np.random.Generator,
    beta_range: tuple[float, float],
    snr: float,
    fixed: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """simMixedDAG semantics: float values for continuous nodes, level codes for discrete ones."""
    values: dict[str, np.ndarray] = dict(fixed or {})
    for v in order:
        if v in values:
            continue
        lp = np.zeros(n)
        for p in parents[v]:
            if kinds[p] == "continuous":
                lp += _signed_uniform(rng, 1, beta_range)[0] * values[p]
            else:
                # dummy coding, first level is the baseline: L - 1 coefficients
                beta = np.concatenate([[0.0], _signed_uniform(rng, levels[p] - 1, beta_range)])
                lp += beta[values[p]]
        spread = lp.var(ddof=1) if n > 1 else 0.0
        sd = 1.0 if spread == 0 else np.sqrt(spread / snr)
        x = lp + rng.normal(0.0, sd, size=n)
        if kinds[v] == "continuous":
            values[v] = x
        else:
            from scipy.stats import norm  # only here: scipy.stats takes 0.7 s to import

            inner = norm.ppf(np.arange(1, levels[v]) / levels[v])
            values[v] = np.searchsorted(inner, x, side="left").astype(np.int64)
    return values


def _mixed_column(kind: str, values: np.ndarray, n_levels: int):
    if kind == "continuous":
        return values.astype(np.float64)
    if kind == "binary":
        return values == 0  # level "A" -> True, as fedCI's generator does
    if kind == "ordinal":
        dtype = pd.CategoricalDtype(list(range(1, n_levels + 1)), ordered=True)
        return pd.Categorical.from_codes(values, dtype=dtype)
    labels = [chr(ord("A") + i) for i in range(n_levels)]
    return pd.Categorical.from_codes(values, dtype=pd.CategoricalDtype(labels))


def _mixed_levels(kinds: Mapping[str, str], n_levels: int) -> dict[str, int]:
    if not 2 <= n_levels <= 26:
        raise ValueError(f"n_levels must be in 2..26, got {n_levels}")
    return {v: (2 if k == "binary" else n_levels) for v, k in kinds.items()}


def _check_types(names: Sequence[str], types: Mapping[str, str]) -> dict[str, str]:
    missing = [v for v in names if v not in types]
    if missing:
        raise ValueError(f"no variable type given for {missing}")
    bad = {v: types[v] for v in names if types[v] not in MIXED_KINDS}
    if bad:
        raise ValueError(f"unknown variable types {bad}; use {MIXED_KINDS}")
    return {v: types[v] for v in names}


def simulate_mixed(
    dag: Graph,
    n: int,
    seed: int = 0,
    types: Mapping[str, str] | None = None,
    n_levels: int = 4,
    beta_range: tuple[float, float] = (0.2, 1.0),
    snr: float = 1.0,
) -> pd.DataFrame:
    """Mixed continuous / binary / ordinal / categorical data as in fedCI's simulations.

    Follows the generator fedCI's experiments actually use (the simMixedDAG package the paper
    names in Sec. IV-A; the paper's text describes GLM sampling: docs/choices.md, fedCI), in
    topological order:

    * ``eta = sum over parents``: a continuous parent contributes ``beta * x``; a discrete parent
      with L levels contributes L - 1 dummy coefficients (first level is the baseline). Every
      coefficient is ``+-U(beta_range)`` with a random sign (``|beta|`` in [0.2, 1]).
    * value ``= eta + e`` with ``e ~ N(0, var(eta) / snr)`` (sample variance, snr 1), or
      ``e ~ N(0, 1)`` when ``eta`` is constant (root nodes).
    * a discrete node with L levels (2 for binary, ``n_levels`` otherwise) cuts the value at the
      standard-normal quantiles ``1/L, ..., (L-1)/L`` (right-closed bins, like R's ``cut``);
      bins are labelled A, B, C, ...

    Output dtypes (so :meth:`Schema.infer` reads the kinds back): continuous float64; binary bool
    (``value == "A"``); ordinal an ordered Categorical with integer levels ``1..L``; categorical an
    unordered Categorical with levels ``"A", "B", ...``. ``types`` defaults to
    :func:`random_variable_types` with the same seed (at least two continuous variables).
    """
    rng = np.random.default_rng(seed)
    names = list(dag.names)
    parents = _parent_lists(dag)
    order = [names[i] for i in _topological(dag)]
    if types is None:
        types = random_variable_types(names, seed=seed, min_continuous=min(2, len(names)))
    kinds = _check_types(names, types)
    levels = _mixed_levels(kinds, n_levels)
    values = _simulate_mixed_values(
        names, parents, order, kinds, levels, int(n), rng, beta_range, snr
    )
    return pd.DataFrame({v: _mixed_column(kinds[v], values[v], n_levels) for v in names})


# --------------------------------------------------------------------------- latent variables
def choose_latents(dag: Graph, fraction: float, seed: int = 0, min_children: int = 2) -> list[str]:
    """``round(fraction * p)`` nodes to hide, preferring nodes with ``>= min_children`` children.

    A latent with two or more children confounds something, which is what makes FCI-type
    settings interesting (FedCDnv's paper does not say which nodes are latent: docs/choices.md,
    FedCDnv). Rule: shuffle the nodes (seeded) and take the first ``round(fraction * p)`` after a
    stable sort that puts qualifying nodes first (in shuffled order, so uniformly at random among
    them) and the others after them by decreasing number of children; so nodes with fewer
    children are used only when too few qualify. Returned in graph node order.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    _topological(dag)
    rng = np.random.default_rng(seed)
    k = int(round(fraction * dag.n_nodes))
    n_children = np.array([len(dag.children(i)) for i in range(dag.n_nodes)])
    perm = rng.permutation(dag.n_nodes)
    qualifies = n_children[perm] >= min_children
    fallback_rank = np.where(qualifies, 0, -n_children[perm])
    ranked = perm[np.lexsort((fallback_rank, ~qualifies))]
    chosen = sorted(ranked[:k].tolist())
    return [dag.names[i] for i in chosen]
