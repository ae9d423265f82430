"""Scoring a result against a ground truth, the same way on every door (Flower-free).

A result is scored as a whole graph against the truth of its kind (CPDAG, PAG, or the DAG
itself), unless its method registered another way (``score``; FedLCS scores the local structure
of its target); a comparison adds the rows a method's ``summaries`` hook gives (``local``'s
per-client average and best-oracle rows). No method is named here: the registry says.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from fedcausal_flwr.federation.registry import MethodSpec, UnknownMethodError, get_method
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.graphs.truth import dag_to_cpdag, dag_to_pag
from fedcausal_flwr.metrics import graph_metrics
from fedcausal_flwr.result import Result


def read_truth(path: str | Path, variables: Sequence[str], *, quote: bool = True) -> Graph:
    """A DAG from a ``cause,effect`` CSV over ``variables``; unknown names are an error.

    Read as a local file (a URL is not fetched). ``quote=False`` (the coordinator) keeps the
    file's content out of every error: it names the file and what is wrong."""
    with open(path, encoding="utf-8", newline="") as handle:  # never a URL
        try:
            edges = pd.read_csv(handle)
        except (ValueError, UnicodeDecodeError) as err:
            detail = f": {err}" if quote else ""
            raise ValueError(f"{path}: not a cause,effect CSV{detail}") from None
    edges.columns = [str(c).strip().lower() for c in edges.columns]
    if not {"cause", "effect"} <= set(edges.columns):
        got = f"; got {list(edges)}" if quote else ""
        raise ValueError(f"{path}: a truth file needs the columns cause,effect{got}")
    known = set(variables)
    for col in ("cause", "effect"):
        unknown = sorted(set(edges[col].astype(str)) - known)
        if unknown:
            if not quote:
                raise ValueError(f"{path}: {len(unknown)} {col} name(s) are not data columns")
            raise ValueError(
                f"{path}: {col} names {unknown} are not data columns {list(variables)}"
            )
    pairs = edges[["cause", "effect"]].astype(str).values.tolist()
    if quote:
        return Graph.from_edges(list(variables), pairs)
    try:
        return Graph.from_edges(list(variables), pairs)
    except ValueError:
        raise ValueError(f"{path}: its edges do not form a graph over the data columns") from None


def truth_for(result_graph: Graph, dag: Graph, latent: Sequence[str] = ()) -> Graph:
    """The ground truth of the learned graph's kind: CPDAG, PAG or the DAG itself."""
    observed = [v for v in dag.names if v not in set(latent)]
    if result_graph.kind == "PAG":
        return dag_to_pag(dag, list(latent))
    if result_graph.kind == "CPDAG":
        return dag_to_cpdag(dag).subgraph(observed)
    return dag.subgraph(observed)


def method_of(result: Result) -> MethodSpec | None:
    """The registered method that produced ``result`` (None if it is not registered here)."""
    name = (result.config or {}).get("method") or result.method
    try:
        return get_method(str(name))
    except UnknownMethodError:
        return None


def score_graph(result: Result, dag: Graph) -> dict[str, float]:
    """Metrics of a result against the true DAG (see the module docstring)."""
    spec = method_of(result)
    if spec is not None and spec.score is not None:
        return spec.score(result, dag)
    if result.graph is None:
        raise ValueError(f"the {result.method} result has no graph to score")
    return graph_metrics(result.graph, truth_for(result.graph, dag))


def summary_rows(result: Result, dag: Graph) -> dict[str, dict]:
    """Extra comparison rows of a result (``{label: metrics}``; none for most methods)."""
    spec = method_of(result)
    if spec is None or spec.summaries is None:
        return {}
    return spec.summaries(result, dag)
