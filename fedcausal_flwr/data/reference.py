"""Reference data shipped inside the package: the Sachs et al. (2005) protein-signalling sets.

Read through :mod:`importlib.resources`, so they load from a source checkout and from an installed
wheel alike, offline. Provenance, formats and checksums: ``fedcausal_flwr/data/sachs/README.md``.
Flower-free (pandas and the graph type only).
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable

import pandas as pd

from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.graphs.truth import check_dag

SACHS_DISCRETE_FILE = "sachs_discrete_853.txt"
SACHS_DISCRETE_TRUTH_FILE = "sachs_bnlearn_edges_17.csv"
SACHS_CONTINUOUS_FILE = "sachs_continuous_7466.csv"
SACHS_CONTINUOUS_TRUTH_FILE = "sachs_consensus_edges_17.csv"
SACHS_FILES = (
    SACHS_DISCRETE_FILE,
    SACHS_DISCRETE_TRUTH_FILE,
    SACHS_CONTINUOUS_FILE,
    SACHS_CONTINUOUS_TRUTH_FILE,
)


def sachs_file(name: str) -> Traversable:
    """One packaged Sachs file (one of :data:`SACHS_FILES`), to open or hash it in place."""
    if name not in SACHS_FILES:
        raise KeyError(f"no packaged Sachs file {name!r}; known: {', '.join(SACHS_FILES)}")
    return files("fedcausal_flwr.data").joinpath("sachs", name)


def read_sachs_discrete(source: Traversable) -> pd.DataFrame:
    """The discrete Sachs layout (space separated, header row, integer levels) from a packaged
    file or a :class:`pathlib.Path`."""
    with source.open("rb") as fh:
        return pd.read_csv(fh, sep=r"\s+").astype("int64")


def read_edge_list(source: Traversable, variables: list[str], kind: str = "DAG") -> Graph:
    """Directed edges from a ``cause,effect`` CSV (header in any case, quoted or not; a packaged
    file or a :class:`pathlib.Path`) over ``variables``, in their order; a name that is not a
    variable is an error."""
    with source.open("rb") as fh:
        edges = pd.read_csv(fh)
    edges.columns = [str(c).strip().lower() for c in edges.columns]
    if not {"cause", "effect"} <= set(edges.columns):
        raise ValueError(f"{source}: an edge list needs columns cause,effect; got {list(edges)}")
    pairs = edges[["cause", "effect"]].astype(str).values.tolist()
    unknown = sorted({name for pair in pairs for name in pair} - set(variables))
    if unknown:
        raise ValueError(f"{source}: names {unknown} are not among {list(variables)}")
    return Graph.from_edges(list(variables), pairs, kind=kind)


def sachs_discrete() -> pd.DataFrame:
    """Sachs' CD3/CD28 condition, 853 rows x 11 proteins, each discretised to levels 0, 1, 2: the
    discrete set of bnlearn and of the FedC2SL paper."""
    return read_sachs_discrete(sachs_file(SACHS_DISCRETE_FILE))


def sachs_discrete_truth() -> Graph:
    """The bnlearn repository's 17-edge consensus DAG over :func:`sachs_discrete`'s columns (in
    their order): the ground truth the FedC2SL and FedCDnv papers score the discrete set against."""
    names = list(read_sachs_discrete(sachs_file(SACHS_DISCRETE_FILE)).columns)
    dag = read_edge_list(sachs_file(SACHS_DISCRETE_TRUTH_FILE), names)
    check_dag(dag)
    return dag


def sachs_continuous() -> pd.DataFrame:
    """All 7466 rows (9 experimental conditions pooled) x 11 proteins, raw continuous values."""
    with sachs_file(SACHS_CONTINUOUS_FILE).open("rb") as fh:
        return pd.read_csv(fh).astype("float64")


def sachs_continuous_truth() -> Graph:
    """The consensus graph distributed with the continuous set, over its columns (in their order).

    Despite the file name it lists 18 directed edges, among them the cycle
    PIP3 -> plcg -> PIP2 -> PIP3, so it is no DAG: the graph has kind ``SKELETON`` (compare
    adjacencies) while its marks keep the distributed directions.
    """
    with sachs_file(SACHS_CONTINUOUS_FILE).open("rb") as fh:
        names = list(pd.read_csv(fh, nrows=0).columns)
    return read_edge_list(sachs_file(SACHS_CONTINUOUS_TRUTH_FILE), names, kind="SKELETON")
