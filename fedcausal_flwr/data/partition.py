"""Client partitions: how one data set is spread over the clients of a federation.

Every split is a pure function of its inputs and ``seed``. Clients keep the rows they receive in
their original order and with their original index labels, so ``pd.concat(p.clients)`` sorted by
index gives back the pooled frame (for row splits). Client names default to ``client_0`` ...
``client_{k-1}``, matching Flower's ``partition-id``.

Constant columns: a client may hold a column that never varies (a rare state, a small client).
For user data read from CSV files this is an error (:func:`check_client_data` with
``require_variation=True``), because it usually means a wrong file or a broken export. For
generated data it is allowed and only reported in ``info["constant_columns"]``; CI tests treat
such a column as carrying no information.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from fedcausal_flwr.data.csv_input import read_client_csv
from fedcausal_flwr.data.inputs import client_label
from fedcausal_flwr.data.schema import (
    DataError,
    Schema,
    VariableSpec,
    _python_scalar,
    name_clients,
)
from fedcausal_flwr.data.synthetic import (
    _check_types,
    _mixed_column,
    _mixed_levels,
    _parent_lists,
    _simulate_mixed_values,
    _topological,
    random_variable_types,
)
from fedcausal_flwr.graphs.graph import Graph

SITE_VARIABLE = "__site"


@dataclass
class Partition:
    """Per-client frames over one global :class:`Schema`.

    ``info`` always holds ``sizes``, ``observed`` (client -> its variables), ``never_together``
    (pairs of variables no client observes jointly) and ``constant_columns``; split functions add
    their parameters (``seed``, ...).
    """

    clients: list[pd.DataFrame]
    schema: Schema
    client_names: list[str]
    rule: str
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.info = dict(self.info)
        self.clients = list(self.clients)
        self.client_names = [str(c) for c in self.client_names]
        if len(self.clients) != len(self.client_names):
            raise ValueError(
                f"{len(self.clients)} client frames but {len(self.client_names)} client names"
            )
        if len(set(self.client_names)) != len(self.client_names):
            raise ValueError(f"client names must be unique, got {self.client_names}")
        known = set(self.schema.names)
        for name, df in zip(self.client_names, self.clients, strict=True):
            extra = [c for c in df.columns if c not in known]
            if extra:
                raise DataError(f"client {name!r}: columns {extra} are not in the schema")
        self.info.update(
            sizes=self.sizes,
            observed=self.observed,
            never_together=self.never_together(),
            constant_columns={
                name: _constant_columns(df)
                for name, df in zip(self.client_names, self.clients, strict=True)
            },
        )

    @property
    def n_clients(self) -> int:
        return len(self.clients)

    @property
    def sizes(self) -> list[int]:
        return [len(df) for df in self.clients]

    @property
    def observed(self) -> dict[str, list[str]]:
        """Client name -> the variables it holds, in schema order."""
        return {
            name: [v for v in self.schema.names if v in df.columns]
            for name, df in zip(self.client_names, self.clients, strict=True)
        }

    def never_together(self) -> list[tuple[str, str]]:
        """Pairs of schema variables that no client observes jointly (schema order)."""
        names = self.schema.names
        seen = np.array(
            [[v in df.columns for v in names] for df in self.clients], dtype=np.int64
        ).reshape(len(self.clients), len(names))
        together = seen.T @ seen
        i, j = np.nonzero(np.triu(together == 0, k=1))
        return [(names[a], names[b]) for a, b in zip(i.tolist(), j.tolist(), strict=True)]

    def pooled(self) -> pd.DataFrame:
        """All clients' rows stacked in client order, columns in schema order.

        When every client holds every variable this is a plain ``pd.concat`` (dtypes kept). When
        some client lacks variables, those cells are missing and discrete columns become
        Categoricals with the schema's levels, so the missing cells do not turn them into
        ``object`` columns.
        """
        cols = list(self.schema.names)
        out = pd.concat([df.reindex(columns=cols) for df in self.clients], axis=0)
        if all(len(df.columns) == len(cols) for df in self.clients):
            return out
        for spec in self.schema:
            if spec.is_discrete:
                levels = list(spec.levels)  # type: ignore[arg-type]
                values = out[spec.name].to_numpy(dtype=object)
                codes = pd.Index(levels, dtype=object).get_indexer(values)
                unknown = (codes < 0) & ~pd.isna(values)
                if unknown.any():
                    raise DataError(
                        f"column {spec.name!r}: value {values[unknown][0]!r} is not one of the "
                        f"levels {tuple(levels)}"
                    )
                dtype = pd.CategoricalDtype(levels, ordered=spec.kind == "ordinal")
                out[spec.name] = pd.Categorical.from_codes(codes, dtype=dtype)
        return out

    def encode(self, i: int) -> np.ndarray:
        """Client ``i``'s data encoded by the schema, columns = ``observed[client]``."""
        name = self.client_names[i]
        return self.schema.encode(self.clients[i], client=name, columns=self.observed[name])

    def __repr__(self) -> str:
        return (
            f"Partition(rule={self.rule!r}, clients={self.n_clients}, sizes={self.sizes}, "
            f"variables={len(self.schema)})"
        )


# --------------------------------------------------------------------------- helpers
def _constant_columns(df: pd.DataFrame) -> list[str]:
    if len(df) == 0:
        return list(df.columns)
    return [c for c in df.columns if df[c].nunique(dropna=False) <= 1]


def _require_one_of(**options: Any) -> None:
    """Refuse a call that gives both or neither of two keyword options."""
    (first, a), (second, b) = options.items()
    if (a is None) == (b is None):
        raise ValueError(f"give exactly one of {first}= or {second}=")


def _check_frame(df: Any) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"expected a pandas DataFrame, got {type(df).__name__}")
    return df


def _check_k(n_rows: int, k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"number of clients must be a positive integer, got {k!r}")
    if k > n_rows:
        raise ValueError(f"cannot split {n_rows} rows into {k} clients")
    return int(k)


def _from_assignment(
    df: pd.DataFrame,
    assignment: np.ndarray,
    k: int,
    rule: str,
    info: dict,
    client_names: Sequence[str] | None,
    schema: Schema | None = None,
) -> Partition:
    """Client ``i`` gets the rows with ``assignment == i`` (original order, original labels)."""
    clients = [df.iloc[np.flatnonzero(assignment == i)] for i in range(k)]
    schema = Schema.infer([df]) if schema is None else schema
    return Partition(clients, schema, name_clients(k, client_names, "clients"), rule, info)


def _require_min_rows(sizes: Sequence[int], min_rows: int, what: str) -> None:
    small = [i for i, s in enumerate(sizes) if s < min_rows]
    if small:
        raise ValueError(
            f"{what}: clients {small} got fewer than {min_rows} rows (sizes {list(sizes)}); "
            "use more rows, fewer clients or another seed"
        )


# --------------------------------------------------------------------------- row splits
def split_iid(
    df: pd.DataFrame, k: int, seed: int = 0, client_names: Sequence[str] | None = None
) -> Partition:
    """Random equal split: a seeded permutation cut into ``k`` parts whose sizes differ by <= 1."""
    df = _check_frame(df)
    k = _check_k(len(df), k)
    rng = np.random.default_rng(seed)
    assignment = np.empty(len(df), dtype=np.int64)
    for i, rows in enumerate(np.array_split(rng.permutation(len(df)), k)):
        assignment[rows] = i
    return _from_assignment(df, assignment, k, "iid", {"seed": seed}, client_names)


def split_sizes(
    df: pd.DataFrame,
    sizes: Sequence[int] | None = None,
    alpha: float | None = None,
    k: int | None = None,
    seed: int = 0,
    min_rows: int = 1,
    client_names: Sequence[str] | None = None,
) -> Partition:
    """Unequal random split, by explicit ``sizes`` or by Dirichlet(``alpha``) proportions.

    ``sizes``: client ``i`` gets ``sizes[i]`` rows of a seeded permutation; the sizes may sum to
    less than ``len(df)``, and the rows left over are reported in ``info["unused_rows"]``.
    ``alpha`` (with ``k``): proportions ``~ Dirichlet(alpha * 1_k)``, sizes
    ``min_rows + Multinomial(n - k * min_rows, proportions)``, so every row is used.
    """
    df = _check_frame(df)
    n = len(df)
    rng = np.random.default_rng(seed)
    _require_one_of(sizes=sizes, alpha=alpha)
    if sizes is not None:
        sizes = [int(s) for s in sizes]
        if k is not None and k != len(sizes):
            raise ValueError(f"k={k} but {len(sizes)} sizes given")
        k = _check_k(n, len(sizes))
        if sum(sizes) > n:
            raise ValueError(f"sizes {sizes} sum to {sum(sizes)} > {n} rows")
        _require_min_rows(sizes, min_rows, "split_sizes")
        info: dict = {"seed": seed, "unused_rows": n - sum(sizes)}
    else:
        assert alpha is not None  # exactly one of sizes and alpha is given
        if k is None:
            raise ValueError("alpha= needs the number of clients k=")
        k = _check_k(n, k)
        if alpha <= 0:
            raise ValueError(f"alpha must be > 0, got {alpha}")
        if k * min_rows > n:
            raise ValueError(f"cannot give {k} clients {min_rows} rows each from {n} rows")
        props = rng.dirichlet(np.full(k, float(alpha)))
        sizes = (min_rows + rng.multinomial(n - k * min_rows, props)).tolist()
        info = {"seed": seed, "alpha": alpha, "proportions": props.tolist()}
    assignment = np.full(n, -1, dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    perm = rng.permutation(n)
    for i in range(k):
        assignment[perm[bounds[i] : bounds[i + 1]]] = i
    return _from_assignment(df, assignment, k, "sizes", info, client_names)


def _discretise_causes(
    df: pd.DataFrame, cause_vars: list[str], n_bins: int
) -> tuple[np.ndarray, list[int]]:
    """Per-row codes of the cause variables (continuous ones cut at sample quantiles)."""
    schema = Schema.infer([df[cause_vars]])
    columns, cards = [], []
    for spec in schema:
        if spec.is_discrete:
            columns.append(schema.encode(df, client="pooled", columns=[spec.name])[:, 0])
            cards.append(spec.card)
        else:
            x = schema.encode(df, client="pooled", columns=[spec.name])[:, 0]
            edges = np.quantile(x, np.arange(1, n_bins) / n_bins)
            columns.append(np.searchsorted(edges, x, side="right"))
            cards.append(n_bins)
    return np.column_stack(columns).astype(np.int64), cards


def split_heterogeneous(
    df: pd.DataFrame,
    k: int,
    cause_vars: Sequence[str] | int = 5,
    seed: int = 0,
    strength: float = 1.0,
    n_bins: int = 3,
    min_rows: int = 1,
    client_names: Sequence[str] | None = None,
) -> Partition:
    """FedC2SL Definition 1: the client is a surrogate variable C, a child of ``cause_vars``.

    Each row's client is drawn from ``P(C | causes)``, so clients hold biased sub-populations
    (selection on a collider) while the union of all clients is exactly the pooled data.
    ``P(C | s) = (1 - strength) / k + strength * q_s`` with ``q_s ~ Dirichlet(a_s * 1_k)`` and
    ``a_s ~ U(0.1, 1)`` per cause configuration ``s``: with ``strength=1`` this is FedC2SL's rule
    (C's CPT drawn like every other CPT of its generator), ``strength=0`` is an i.i.d. split.
    ``cause_vars`` is a list of columns or a number of columns drawn at random (FedC2SL uses 5).
    Continuous causes are cut into ``n_bins`` sample-quantile bins. Client sizes are random.
    """
    df = _check_frame(df)
    k = _check_k(len(df), k)
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f"strength must be in [0, 1], got {strength}")
    rng = np.random.default_rng(seed)
    columns = list(df.columns)
    if isinstance(cause_vars, (int, np.integer)):
        if not 0 <= cause_vars <= len(columns):
            raise ValueError(f"cannot choose {cause_vars} cause variables from {len(columns)}")
        picked = set(rng.choice(len(columns), size=int(cause_vars), replace=False).tolist())
        causes = [c for i, c in enumerate(columns) if i in picked]
    else:
        causes = list(cause_vars)
        unknown = [c for c in causes if c not in df.columns]
        if unknown:
            raise ValueError(f"cause variables {unknown} are not columns of the data")
    if causes:
        codes, cards = _discretise_causes(df, causes, n_bins)
        strides = np.cumprod([1, *cards[::-1]])[:-1][::-1]
        cfg = codes @ strides
        n_cfg = int(np.prod(cards))
    else:
        cfg, n_cfg = np.zeros(len(df), dtype=np.int64), 1
    if n_cfg > 10**6:
        raise ValueError(f"{n_cfg} cause configurations; use fewer cause variables")
    a = rng.uniform(0.1, 1.0, size=n_cfg)
    q = rng.gamma(np.broadcast_to(a[:, None], (n_cfg, k)))
    q = np.maximum(q, 1e-300)
    q /= q.sum(axis=1, keepdims=True)
    table = (1.0 - strength) / k + strength * q  # rows: configuration, columns: client
    cdf = np.cumsum(table, axis=1)
    u = rng.random(len(df))
    assignment = np.zeros(len(df), dtype=np.int64)
    for c in range(k - 1):
        assignment += u >= cdf[cfg, c]
    sizes = np.bincount(assignment, minlength=k).tolist()
    _require_min_rows(sizes, min_rows, "split_heterogeneous")
    info = {
        "seed": seed,
        "cause_vars": causes,
        "strength": strength,
        "client_given_causes": table,
    }
    return _from_assignment(df, assignment, k, "heterogeneous", info, client_names)


# --------------------------------------------------------------------------- site effects
def split_site_effects(
    dag: Graph,
    n: int,
    k: int,
    seed: int = 0,
    types: Mapping[str, str] | None = None,
    affected: Sequence[str] | None = None,
    site_sizes: str = "random",
    n_levels: int = 4,
    beta_range: tuple[float, float] = (0.2, 1.0),
    snr: float = 1.0,
    client_names: Sequence[str] | None = None,
) -> Partition:
    """fedCI's site-effect setting: generate mixed data where a site variable shifts variables,
    then give each site its own rows.

    The site is an extra categorical root with ``k`` levels and a parent of every variable in
    ``affected`` (default: all, as in fedCI's simulations), contributing ``k - 1`` dummy
    coefficients (an intercept shift per site, no slope change) inside
    :func:`~fedcausal_flwr.data.synthetic.simulate_mixed`'s generator. ``site_sizes="random"``
    draws the site like fedCI (a standard normal cut at ``k`` quantiles, so sizes are about
    ``n / k`` but random); ``"equal"`` assigns a seeded permutation of ``0..k-1`` repeated, so
    sizes differ by at most one. The site column itself is not part of the clients' data (fedCI
    adds the client id inside its test); ``info["site_of_row"]`` keeps it.
    """
    n = int(n)
    k = _check_k(n, k)
    if site_sizes not in ("random", "equal"):
        raise ValueError(f"site_sizes must be 'random' or 'equal', got {site_sizes!r}")
    names = list(dag.names)
    if SITE_VARIABLE in names:
        raise ValueError(f"the DAG already has a node named {SITE_VARIABLE!r}")
    parents = _parent_lists(dag)
    order = [names[i] for i in _topological(dag)]
    affected = names if affected is None else list(affected)
    unknown = [v for v in affected if v not in names]
    if unknown:
        raise ValueError(f"affected variables {unknown} are not nodes of the DAG")
    if types is None:
        types = random_variable_types(names, seed=seed, min_continuous=min(2, len(names)))
    kinds = _check_types(names, types)
    levels = _mixed_levels(kinds, n_levels)
    rng = np.random.default_rng(seed)
    fixed = {}
    if site_sizes == "equal":
        fixed[SITE_VARIABLE] = rng.permutation(np.arange(n) % k)
    aug_parents = {v: [*parents[v], *([SITE_VARIABLE] if v in affected else [])] for v in names}
    aug_parents[SITE_VARIABLE] = []
    values = _simulate_mixed_values(
        [SITE_VARIABLE, *names],
        aug_parents,
        [SITE_VARIABLE, *order],
        {**kinds, SITE_VARIABLE: "categorical"},
        {**levels, SITE_VARIABLE: k},
        n,
        rng,
        beta_range,
        snr,
        fixed=fixed,
    )
    site = values[SITE_VARIABLE]
    df = pd.DataFrame({v: _mixed_column(kinds[v], values[v], n_levels) for v in names})
    sizes = np.bincount(site, minlength=k).tolist()
    _require_min_rows(sizes, 1, "split_site_effects")
    info = {
        "seed": seed,
        "types": kinds,
        "affected": affected,
        "site_sizes": site_sizes,
        "site_of_row": site,
    }
    return _from_assignment(df, site, k, "site_effects", info, client_names)


# --------------------------------------------------------------------------- variable subsets
def split_variable_subsets(
    data: pd.DataFrame | Partition,
    k: int | None = None,
    fraction: float | None = None,
    subsets: Sequence[Sequence[str]] | None = None,
    seed: int = 0,
    cover_all: bool = True,
    structured: bool = False,
    max_tries: int = 1000,
    client_names: Sequence[str] | None = None,
) -> Partition:
    """Each client observes only a subset of the variables (non-identical variable sets).

    ``data`` is a pooled frame (rows are first split i.i.d. into ``k`` clients with ``seed``) or
    an existing :class:`Partition` (its rows are kept; subsets intersect its columns).

    * ``subsets``: explicit variable lists; client ``i`` gets ``subsets[i % len(subsets)]``
      (two lists over ``k`` clients give fedCI's even/odd layout).
    * ``fraction``: every client observes ``round(fraction * p)`` variables, chosen uniformly at
      random, redrawn (up to ``max_tries``) until every variable is observed by some client when
      ``cover_all``. With ``structured=True`` client ``i`` instead drops a contiguous (cyclic)
      block of variables starting at position ``floor(i * p / k)``, which creates pairs that are
      never observed together (FedCDnv's paper does not say how subsets are drawn:
      docs/choices.md, FedCDnv).

    ``info["never_together"]`` lists the pairs no client observes jointly.
    """
    base = _rows_to_subset(data, k, seed, client_names)
    k = base.n_clients
    names = list(base.schema.names)
    rng = np.random.default_rng(seed)
    _require_one_of(subsets=subsets, fraction=fraction)
    if subsets is not None:
        chosen, mode = _listed_subsets(subsets, names, k)
    else:
        assert fraction is not None
        chosen, mode = _drawn_subsets(fraction, names, k, rng, cover_all, structured, max_tries)
    clients = []
    for i, df in enumerate(base.clients):
        keep = [v for v in names if v in chosen[i] and v in df.columns]
        if not keep:
            raise ValueError(f"client {base.client_names[i]!r} would observe no variable")
        clients.append(df[keep])
    covered = set().union(*(set(df.columns) for df in clients))
    if cover_all and covered != set(names):
        missing = [v for v in names if v not in covered]
        raise ValueError(f"variables {missing} are observed by no client (cover_all=True)")
    info = {**base.info, "seed": seed, "row_rule": base.rule, **mode}
    return Partition(clients, base.schema, base.client_names, "variable_subsets", info)


def _rows_to_subset(
    data: pd.DataFrame | Partition,
    k: int | None,
    seed: int,
    client_names: Sequence[str] | None,
) -> Partition:
    """The clients' rows :func:`split_variable_subsets` takes columns from: a partition as it is
    (``k``, if given, must match), a pooled frame split i.i.d. into ``k`` clients."""
    if isinstance(data, Partition):
        if k is not None and k != data.n_clients:
            raise ValueError(f"k={k} but the partition has {data.n_clients} clients")
        return data
    if k is None:
        raise ValueError("k= is needed to split a data frame")
    return split_iid(_check_frame(data), k, seed=seed, client_names=client_names)


def _listed_subsets(
    subsets: Sequence[Sequence[str]], names: Sequence[str], k: int
) -> tuple[list[set[str]], dict[str, Any]]:
    """Each client's variables from explicit lists (client ``i`` gets list ``i`` modulo their
    number), every listed variable checked against ``names``; and the split's info entry."""
    lists = [list(s) for s in subsets]
    if not lists:
        raise ValueError("subsets must not be empty")
    for s in lists:
        unknown = [v for v in s if v not in names]
        if unknown:
            raise ValueError(f"subset variables {unknown} are not in the data")
    chosen = [set(lists[i % len(lists)]) for i in range(k)]
    return chosen, {"subsets": lists}


def _drawn_subsets(
    fraction: float,
    names: Sequence[str],
    k: int,
    rng: np.random.Generator,
    cover_all: bool,
    structured: bool,
    max_tries: int,
) -> tuple[list[set[str]], dict[str, Any]]:
    """Each client's ``round(fraction * p)`` variables: a cyclic block dropped per client
    (``structured``), else drawn at random until they cover every variable (``cover_all``, at
    most ``max_tries`` draws); and the split's info entry."""
    p = len(names)
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    m = max(1, int(round(fraction * p)))
    if cover_all and k * m < p:
        raise ValueError(f"{k} clients observing {m} of {p} variables cannot cover them all")
    if structured:
        drop = p - m
        chosen = []
        for i in range(k):
            start = (i * p) // k
            dropped = {names[(start + j) % p] for j in range(drop)}
            chosen.append(set(names) - dropped)
    else:
        for _ in range(max_tries):
            chosen = [
                {names[j] for j in rng.choice(p, size=m, replace=False).tolist()} for _ in range(k)
            ]
            if not cover_all or set().union(*chosen) == set(names):
                break
        else:
            raise ValueError(f"no cover of all variables found in {max_tries} draws")
    return chosen, {"fraction": fraction, "n_observed": m, "structured": structured}


def drop_latents(
    data: pd.DataFrame | Partition, latents: Sequence[str]
) -> pd.DataFrame | Partition:
    """Remove latent variables from a frame or from every client and the schema of a partition."""
    latents = list(latents)
    if isinstance(data, Partition):
        unknown = [v for v in latents if v not in data.schema.names]
        if unknown:
            raise ValueError(f"latent variables {unknown} are not in the partition's schema")
        keep = [v for v in data.schema.names if v not in latents]
        clients = [df.drop(columns=[v for v in latents if v in df.columns]) for df in data.clients]
        empty = [n for n, df in zip(data.client_names, clients, strict=True) if df.shape[1] == 0]
        if empty:
            raise ValueError(f"clients {empty} would observe no variable")
        info = {**data.info, "latents": latents}
        return replace(data, clients=clients, schema=data.schema.subset(keep), info=info)
    df = _check_frame(data)
    unknown = [v for v in latents if v not in df.columns]
    if unknown:
        raise ValueError(f"latent variables {unknown} are not columns of the data")
    return df.drop(columns=latents)


# --------------------------------------------------------------------------- checks and CSV io
def check_client_data(partition: Partition, require_variation: bool = True) -> None:
    """Raise :class:`DataError` naming client and column for data a CI test cannot use.

    Checks: empty client, missing values (with the first row), values outside the schema's level
    sets, non-numeric continuous columns, and (``require_variation``) columns constant on a
    client.
    """
    for name, df in zip(partition.client_names, partition.clients, strict=True):
        if len(df) == 0:
            raise DataError(f"client {name!r} has no rows")
        if df.shape[1] == 0:
            raise DataError(f"client {name!r} has no columns")
        for col in df.columns:
            missing = df[col].isna().to_numpy()
            if missing.any():
                row = df.index[int(np.flatnonzero(missing)[0])]
                raise DataError(
                    f"client {name!r}, column {col!r}: missing value at row {row!r} "
                    f"({int(missing.sum())} missing in total)"
                )
        partition.schema.encode(df, client=name, columns=list(df.columns))
        if require_variation:
            for col in _constant_columns(df):
                value = _python_scalar(df[col].iloc[0])
                raise DataError(
                    f"client {name!r}, column {col!r} is constant ({value!r}); a "
                    "constant column carries no information (drop it or fix the export)"
                )


def _read_csv(
    path: str | Path,
    client: int | None,
    schema: Schema | None,
    sep: str | None = None,
    keep_index: bool = False,
) -> pd.DataFrame:
    """A client's file read and checked by :func:`~fedcausal_flwr.data.csv_input.read_client_csv`
    (discrete schema columns read as text, matched to the levels by their text form)."""
    path = Path(path)
    dtypes = None if schema is None else {s.name: str for s in schema if s.is_discrete}
    df = read_client_csv(path, client, sep=sep, keep_index=keep_index, dtype=dtypes)
    if schema is None:
        return df
    return _apply_schema(df, schema, client_label(client, path.name))


def _apply_schema(df: pd.DataFrame, schema: Schema, label: str) -> pd.DataFrame:
    """Typed frame from text read with a schema: level labels matched by their text form;
    ``label`` names the client in errors (``client 2 (site_c.csv)``)."""
    data = {}
    for col in df.columns:
        if col not in schema.names:
            raise DataError(f"{label} column {col!r} is not in the schema")
        spec: VariableSpec = schema.spec(col)
        if not spec.is_discrete:
            if not ptypes.is_numeric_dtype(df[col].dtype) or ptypes.is_bool_dtype(df[col].dtype):
                raise DataError(
                    f"{label} column {col!r}: continuous variable has non-numeric values "
                    f"(dtype {df[col].dtype})"
                )
            data[col] = df[col].to_numpy(dtype=np.float64)
            continue
        levels = list(spec.levels)  # type: ignore[arg-type]
        text = pd.Index([str(v) for v in levels], dtype=object)
        codes = text.get_indexer(df[col].to_numpy(dtype=object))
        if np.any(codes < 0):
            row = int(np.flatnonzero(codes < 0)[0])
            raise DataError(
                f"{label} column {col!r}: value {df[col].iloc[row]!r} in data row {row} (line "
                f"{row + 2} of the file) is not one of the levels {tuple(levels)}"
            )
        data[col] = schema.decode(codes[:, None], columns=[col])[col]
    return pd.DataFrame(data, index=df.index)


def from_csv_files(
    paths: Sequence[str | Path],
    schema: Schema | None = None,
    client_names: Sequence[str] | None = None,
    require_variation: bool = True,
    *,
    sep: str | None = None,
    keep_index: bool = False,
) -> Partition:
    """One CSV per client; variables may differ between clients.

    Each file is read and checked by :func:`~fedcausal_flwr.data.csv_input.read_client_csv`
    (client ``k`` reads ``paths[k]``; ``sep``: the delimiter, sniffed if ``None``;
    ``keep_index``: keep an index-like first column as a variable). Without ``schema`` the kinds
    and the union of levels are inferred (:meth:`Schema.infer`; note that integer columns become
    categorical). With ``schema`` discrete values are matched to the levels by their text form
    (``str(level)``). Missing values, unknown levels and (by default) columns constant on a client
    raise :class:`DataError` naming the client, file, column and row.
    """
    file_paths = [Path(p) for p in paths]
    if not file_paths:
        raise ValueError("no CSV files given")
    if client_names is None:
        names = [p.stem for p in file_paths]
        if len(set(names)) != len(names):
            raise ValueError(f"file names {names} are not unique; pass client_names=")
    else:
        names = name_clients(len(file_paths), client_names, "clients")
    frames = [_read_csv(p, k, schema, sep, keep_index) for k, p in enumerate(file_paths)]
    if schema is None:
        schema = Schema.infer(frames, names)
    info = {"paths": [str(p) for p in file_paths]}
    partition = Partition(frames, schema, names, "csv_files", info)
    check_client_data(partition, require_variation=require_variation)
    return partition


ROW_RULES = ("iid", "sizes", "heterogeneous", "variable_subsets")


def from_pooled_csv(
    path: str | Path,
    rule: str = "iid",
    k: int = 2,
    seed: int = 0,
    schema: Schema | None = None,
    require_variation: bool = True,
    **kwargs: Any,
) -> Partition:
    """One pooled CSV split into ``k`` clients by ``rule`` (``iid``, ``sizes``,
    ``heterogeneous``, ``variable_subsets``); extra keyword arguments go to the split function.
    """
    path = Path(path)
    df = _read_csv(path, None, schema)
    if rule == "iid":
        part = split_iid(df, k, seed=seed, **kwargs)
    elif rule == "sizes":
        if "sizes" not in kwargs:
            kwargs["k"] = k
        part = split_sizes(df, seed=seed, **kwargs)
    elif rule == "heterogeneous":
        part = split_heterogeneous(df, k, seed=seed, **kwargs)
    elif rule == "variable_subsets":
        part = split_variable_subsets(df, k=k, seed=seed, **kwargs)
    else:
        raise ValueError(f"unknown split rule {rule!r}; use one of {ROW_RULES}")
    if schema is not None:
        part = replace(part, schema=schema)
    part.info["path"] = str(path)
    check_client_data(part, require_variation=require_variation)
    return part
