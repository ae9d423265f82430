"""Benchmark Bayesian networks: bnlearn's networks as shipped by pgmpy, plus tiled networks.

pgmpy ships bnlearn's discrete networks as ``.bif.gz`` and four Gaussian ones as ``.json`` under
``pgmpy/utils/example_models/``. We read those files directly (importlib.resources + gzip +
our fast reader :func:`fedcausal_flwr.data.bif.read_bif`, checked against pgmpy's ``BIFReader``)
because ``get_example_model`` is deprecated and ``load_model`` downloads from the Hugging Face
Hub. Parsed networks are cached; treat a returned :class:`Network` as read-only.

Variable order: ``Network.variables`` is the *file order* (the column order bnlearn and pgmpy
users see); :attr:`Network.topological_order` gives a topological order (ties by file order),
which the sampler uses.

Tiled networks (``child3``, ``child5``, ``insurance3``, ``insurance5``, ``alarm3``) follow the
idea of Tsamardinos et al. (2006, "Generating realistic large Bayesian networks by tiling"): k
copies of a network joined by a few edges between copies. The original tiled networks are not
public, so these are local substitutes, not the papers' networks; see :func:`tile_network` for
the exact rule. The total number of linking edges of each named network is chosen so that node
and edge counts equal the published ones (Child3 60/79, Child5 100/126, Insurance3 81/163,
Insurance5 135/281, Alarm3 111/149). Child5's published count implies a single linking edge, so
three of its five copies stay disconnected from the rest.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
from dataclasses import dataclass, field
from functools import cache, cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fedcausal_flwr.data.bif import read_bif
from fedcausal_flwr.data.sampling import sample_codes, sample_frame
from fedcausal_flwr.graphs.graph import Graph

if TYPE_CHECKING:
    import pandas as pd

NETWORK_KINDS = ("discrete", "gaussian")
GAUSSIAN_NETWORKS = ("arth150", "ecoli70", "magic-irri", "magic-niab")

# name -> (base network, copies, total linking edges, seed). Linking-edge totals reproduce the
# node/edge counts published with the tiled networks (MMHC paper; FedCDnv and FedECD tables).
TILED_NETWORKS: dict[str, tuple[str, int, int, int]] = {
    "child3": ("child", 3, 4, 0),
    "child5": ("child", 5, 1, 0),
    "insurance3": ("insurance", 3, 7, 0),
    "insurance5": ("insurance", 5, 21, 0),
    "alarm3": ("alarm", 3, 11, 0),
}

_CPT_SUM_TOLERANCE = 1e-4


@dataclass(frozen=True, eq=False, repr=False)
class Network:
    """A Bayesian network: DAG plus CPTs (discrete) or linear-Gaussian equations (gaussian).

    Discrete: ``cpts[v]`` has shape ``(card_v, prod(card of parents[v]))`` as pgmpy's
    ``TabularCPD.get_values()`` gives it: parent configurations in C order over ``parents[v]``
    (the last parent varies fastest), each column a distribution over ``states[v]``.

    Gaussian: ``v = intercepts[v] + coefficients[v] @ parents + noise_sd[v] * N(0, 1)``.
    """

    name: str
    variables: list[str]
    parents: dict[str, list[str]]
    kind: str = "discrete"
    states: dict[str, list[str]] = field(default_factory=dict)
    cpts: dict[str, np.ndarray] = field(default_factory=dict)
    intercepts: dict[str, float] = field(default_factory=dict)
    coefficients: dict[str, np.ndarray] = field(default_factory=dict)
    noise_sd: dict[str, float] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        if self.kind not in NETWORK_KINDS:
            raise ValueError(f"network kind must be one of {NETWORK_KINDS}, got {self.kind!r}")
        variables = [str(v) for v in self.variables]
        if len(set(variables)) != len(variables):
            raise ValueError(f"network {self.name!r}: duplicate variable names")
        known = set(variables)
        if set(self.parents) != known:
            raise ValueError(f"network {self.name!r}: parents must list every variable exactly")
        parents = {}
        for v in variables:
            ps = [str(p) for p in self.parents[v]]
            unknown = [p for p in ps if p not in known]
            if unknown or v in ps or len(set(ps)) != len(ps):
                raise ValueError(f"network {self.name!r}: bad parent list {ps} for {v!r}")
            parents[v] = ps
        object.__setattr__(self, "variables", variables)
        object.__setattr__(self, "parents", parents)
        _ = self.topological_order  # raises on a cycle
        if self.kind == "discrete":
            self._validate_discrete()
        else:
            self._validate_gaussian()

    def _validate_discrete(self) -> None:
        states, cpts = {}, {}
        for v in self.variables:
            if v not in self.states or v not in self.cpts:
                raise ValueError(f"network {self.name!r}: variable {v!r} needs states and a CPT")
            states[v] = [str(s) for s in self.states[v]]
            if len(states[v]) == 0 or len(set(states[v])) != len(states[v]):
                raise ValueError(f"network {self.name!r}: bad states {states[v]} for {v!r}")
        for v in self.variables:
            n_cfg = math.prod(len(states[p]) for p in self.parents[v])
            cpt = np.array(self.cpts[v], dtype=np.float64)
            if cpt.shape != (len(states[v]), n_cfg):
                raise ValueError(
                    f"network {self.name!r}: CPT of {v!r} has shape {cpt.shape}, expected "
                    f"{(len(states[v]), n_cfg)}"
                )
            if np.any(cpt < 0) or not np.all(np.isfinite(cpt)):
                raise ValueError(f"network {self.name!r}: CPT of {v!r} has invalid entries")
            sums = cpt.sum(axis=0)
            worst = int(np.argmax(np.abs(sums - 1.0)))
            if abs(sums[worst] - 1.0) > _CPT_SUM_TOLERANCE:
                raise ValueError(
                    f"network {self.name!r}: CPT column {worst} of {v!r} sums to {sums[worst]}"
                )
            cpt.setflags(write=False)
            cpts[v] = cpt
        object.__setattr__(self, "states", states)
        object.__setattr__(self, "cpts", cpts)

    def _validate_gaussian(self) -> None:
        coefs, intercepts, sds = {}, {}, {}
        for v in self.variables:
            if v not in self.coefficients or v not in self.intercepts or v not in self.noise_sd:
                raise ValueError(
                    f"network {self.name!r}: variable {v!r} needs an intercept, coefficients "
                    "and a noise sd"
                )
            c = np.array(self.coefficients[v], dtype=np.float64).reshape(-1)
            if c.shape != (len(self.parents[v]),):
                raise ValueError(
                    f"network {self.name!r}: {v!r} has {c.size} coefficients for "
                    f"{len(self.parents[v])} parents"
                )
            c.setflags(write=False)
            coefs[v] = c
            intercepts[v] = float(self.intercepts[v])
            sds[v] = float(self.noise_sd[v])
            if not sds[v] >= 0:
                raise ValueError(f"network {self.name!r}: noise sd of {v!r} must be >= 0")
        object.__setattr__(self, "coefficients", coefs)
        object.__setattr__(self, "intercepts", intercepts)
        object.__setattr__(self, "noise_sd", sds)

    # ----------------------------------------------------------------- structure
    @property
    def n_nodes(self) -> int:
        return len(self.variables)

    @property
    def n_edges(self) -> int:
        return sum(len(ps) for ps in self.parents.values())

    @property
    def edges(self) -> list[tuple[str, str]]:
        """Directed ``(parent, child)`` pairs, children in variable order."""
        return [(p, v) for v in self.variables for p in self.parents[v]]

    @cached_property
    def cards(self) -> np.ndarray:
        """Number of states per variable in variable order (0 for Gaussian variables)."""
        if self.kind == "gaussian":
            return np.zeros(self.n_nodes, dtype=np.int64)
        return np.array([len(self.states[v]) for v in self.variables], dtype=np.int64)

    @cached_property
    def topological_order(self) -> tuple[int, ...]:
        """Variable indices in a topological order, ties broken by variable order."""
        import networkx as nx  # here: validating a network name (every flwr run message) needs none

        index = {v: i for i, v in enumerate(self.variables)}
        g = nx.DiGraph()
        g.add_nodes_from(range(self.n_nodes))
        g.add_edges_from((index[p], index[v]) for p, v in self.edges)
        try:
            return tuple(nx.lexicographical_topological_sort(g))
        except nx.NetworkXUnfeasible:
            raise ValueError(f"network {self.name!r} has a directed cycle") from None

    @property
    def dag(self) -> Graph:
        return Graph.from_edges(self.variables, self.edges, kind="DAG")

    def index(self, variable: str) -> int:
        try:
            return self.variables.index(variable)
        except ValueError:
            raise KeyError(f"network {self.name!r} has no variable {variable!r}") from None

    # ----------------------------------------------------------------- sampling
    def sample(self, n: int, seed: int | np.random.Generator | None = 0) -> pd.DataFrame:
        """``n`` i.i.d. rows: Categorical columns (discrete) or float64 columns (gaussian)."""
        return sample_frame(self, n, seed)

    def sample_codes(self, n: int, seed: int | np.random.Generator | None = 0) -> np.ndarray:
        """``n`` rows of state indices (discrete, small int dtype) or values (gaussian)."""
        return sample_codes(self, n, seed)

    # ----------------------------------------------------------------- interop
    def to_pgmpy(self) -> Any:
        """The same network as a pgmpy model (for cross-checks against pgmpy's code)."""
        if self.kind == "discrete":
            from pgmpy.factors.discrete import TabularCPD
            from pgmpy.models import DiscreteBayesianNetwork

            model = DiscreteBayesianNetwork(self.edges)
            model.add_nodes_from(self.variables)
            for v in self.variables:
                ps = self.parents[v]
                model.add_cpds(
                    TabularCPD(
                        v,
                        len(self.states[v]),
                        np.asarray(self.cpts[v]),
                        evidence=ps or None,
                        evidence_card=[len(self.states[p]) for p in ps] or None,
                        state_names={u: list(self.states[u]) for u in [v, *ps]},
                    )
                )
            return model
        from pgmpy.factors.continuous import LinearGaussianCPD
        from pgmpy.models import LinearGaussianBayesianNetwork

        model = LinearGaussianBayesianNetwork(self.edges)
        model.add_nodes_from(self.variables)
        for v in self.variables:
            beta = [self.intercepts[v], *self.coefficients[v].tolist()]
            model.add_cpds(LinearGaussianCPD(v, beta, self.noise_sd[v], self.parents[v]))
        return model

    def __repr__(self) -> str:
        return f"Network {self.name!r}: {self.n_nodes} nodes, {self.n_edges} edges, {self.kind}"

    __str__ = __repr__


# --------------------------------------------------------------------------- loading
def _example_dir() -> Any:
    # found without importing pgmpy: listing the names (every flwr run message checks one) and
    # reading a .bif.gz need only its files
    spec = importlib.util.find_spec("pgmpy")
    if spec is None or not spec.submodule_search_locations:  # pragma: no cover - a dependency
        raise ImportError("benchmark networks are read from pgmpy's files; install pgmpy")
    return Path(next(iter(spec.submodule_search_locations))) / "utils" / "example_models"


@lru_cache(maxsize=1)
def _shipped_networks() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(discrete names, gaussian names) found in pgmpy's example_models folder."""
    names = [entry.name for entry in _example_dir().iterdir()]
    discrete = sorted(n[: -len(".bif.gz")] for n in names if n.endswith(".bif.gz"))
    gaussian = sorted(g for g in GAUSSIAN_NETWORKS if f"{g}.json" in names)
    return tuple(discrete), tuple(gaussian)


def list_networks() -> list[str]:
    """Names accepted by :func:`load_network`: discrete, then Gaussian, then tiled."""
    discrete, gaussian = _shipped_networks()
    tiled = [t for t, spec in TILED_NETWORKS.items() if spec[0] in discrete]
    return [*discrete, *gaussian, *tiled]


def load_network(name: str) -> Network:
    """A benchmark network by bnlearn name (case-insensitive), read offline and cached."""
    if not isinstance(name, str):
        raise TypeError(f"network name must be a string, got {type(name).__name__}")
    key = name.strip().lower()
    if key not in list_networks():
        raise ValueError(f"unknown network {name!r}; available: {', '.join(list_networks())}")
    return _load_cached(key)


@cache
def _load_cached(key: str) -> Network:
    discrete, _ = _shipped_networks()
    if key in TILED_NETWORKS:
        base, copies, n_links, seed = TILED_NETWORKS[key]
        return tile_network(_load_cached(base), copies, seed=seed, n_links=n_links, name=key)
    if key in discrete:
        return _read_bif(key)
    return _read_gaussian_json(key)


def _read_bif(key: str) -> Network:
    with gzip.open(_example_dir() / f"{key}.bif.gz") as fh:
        text = fh.read().decode("utf-8")
    bif = read_bif(text, f"{key}.bif.gz")
    return Network(
        name=key,
        variables=bif.variables,
        parents=bif.parents,
        kind="discrete",
        states=bif.states,
        cpts=bif.cpts,
        description="bnlearn network shipped with pgmpy",
    )


def _read_gaussian_json(key: str) -> Network:
    obj = json.loads((_example_dir() / f"{key}.json").read_text(encoding="utf-8"))
    variables = list(obj["nodes"])
    cpds = obj["cpds"]
    return Network(
        name=key,
        variables=variables,
        parents={v: list(cpds[v]["parents"]) for v in variables},
        kind="gaussian",
        intercepts={v: cpds[v]["coefficients"]["(Intercept)"][0] for v in variables},
        coefficients={
            v: np.array([cpds[v]["coefficients"][p][0] for p in cpds[v]["parents"]])
            for v in variables
        },
        # the files store the residual variance (pgmpy builds LinearGaussianCPD(std=sqrt(var)))
        noise_sd={v: math.sqrt(cpds[v]["variance"][0]) for v in variables},
        description="bnlearn Gaussian network shipped with pgmpy",
    )


# --------------------------------------------------------------------------- tiling
def tile_network(
    net: Network,
    k: int,
    seed: int = 0,
    n_links: int | None = None,
    link_weight: float = 0.5,
    name: str | None = None,
) -> Network:
    """``k`` copies of a discrete network joined by ``n_links`` random edges between copies.

    Exact rule (seeded by ``seed``):

    * Copy ``c`` (1-based) renames every variable ``v`` to ``f"{v}_{c}"``; variables are ordered
      copy by copy, each copy in the base network's order, with the base CPTs.
    * ``n_links`` (default ``2 * (k - 1)``) linking edges are spread over the receiving copies
      ``2..k`` as evenly as possible, earlier copies getting the remainder.
    * A receiving copy picks its targets uniformly without replacement among its own nodes (so no
      node gets more than one new parent); each target's new parent is drawn uniformly from all
      nodes of the earlier copies. Every linking edge points from an earlier copy to a later one,
      so the result is acyclic.
    * The target gets the new parent appended last in its parent list. For base column ``p`` and
      new-parent state ``j`` its CPT column becomes ``(1 - link_weight) * p + link_weight * q``
      with ``q ~ Dirichlet(1, ..., 1)`` drawn per (configuration, j): the copy keeps most of the
      base network's local distribution while the link is a real dependence.
    """
    if net.kind != "discrete":
        raise ValueError(f"tiling is defined for discrete networks; {net.name!r} is {net.kind}")
    if k < 1:
        raise ValueError(f"need at least one copy, got k={k}")
    if not 0.0 < link_weight <= 1.0:
        raise ValueError(f"link_weight must be in (0, 1], got {link_weight}")
    n_links = 2 * (k - 1) if n_links is None else int(n_links)
    p = net.n_nodes
    if n_links < 0 or (k == 1 and n_links > 0):
        raise ValueError(f"cannot add {n_links} linking edges to {k} copies")
    per_copy = [0] * k
    if k > 1:
        base, extra = divmod(n_links, k - 1)
        per_copy[1:] = [base + (1 if i < extra else 0) for i in range(k - 1)]
    if max(per_copy) > p:
        raise ValueError(f"at most {p} linking edges per copy for {net.name!r}; got {per_copy}")

    rng = np.random.default_rng(seed)
    variables = [f"{v}_{c}" for c in range(1, k + 1) for v in net.variables]
    parents = {
        f"{v}_{c}": [f"{u}_{c}" for u in net.parents[v]]
        for c in range(1, k + 1)
        for v in net.variables
    }
    states = {f"{v}_{c}": net.states[v] for c in range(1, k + 1) for v in net.variables}
    cpts: dict[str, np.ndarray] = {
        f"{v}_{c}": net.cpts[v] for c in range(1, k + 1) for v in net.variables
    }
    links = []
    for c in range(1, k):  # 0-based copy index of the receiving copy
        targets = rng.choice(p, size=per_copy[c], replace=False)
        sources = rng.integers(0, c * p, size=per_copy[c])
        for t, s in zip(targets.tolist(), sources.tolist(), strict=True):
            target = variables[c * p + t]
            source = variables[s]
            card_new = len(states[source])
            old = cpts[target]
            q = rng.dirichlet(np.ones(old.shape[0]), size=old.shape[1] * card_new).T
            cpts[target] = (1.0 - link_weight) * np.repeat(old, card_new, axis=1) + link_weight * q
            parents[target] = [*parents[target], source]
            links.append((source, target))
    description = (
        f"{k} tiled copies of {net.name!r} with {len(links)} linking edges (seed {seed}, "
        f"link_weight {link_weight}): " + ", ".join(f"{s}->{t}" for s, t in links)
    )
    return Network(
        name=name or f"{net.name}{k}",
        variables=variables,
        parents=parents,
        kind="discrete",
        states=states,
        cpts=cpts,
        description=description,
    )
