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


def read_truth(path: str | Path, variables: Sequence[str]) -> Graph:
    """A DAG from a ``cause,effect`` CSV over ``variables``; unknown names are an error."""
    edges = pd.read_csv(path)
    edges.columns = [str(c).strip().lower() for c in edges.columns]
    if not {"cause", "effect"} <= set(edges.columns):
        raise ValueError(f"{path}: a truth file needs the columns cause,effect; got {list(edges)}")
    known = set(variables)
    for col in ("cause", "effect"):
        unknown = sorted(set(edges[col].astype(str)) - known)
        if unknown:
            raise ValueError(
                f"{path}: {col} names {unknown} are not data columns {list(variables)}"
            )
    return Graph.from_edges(list(variables), edges[["cause", "effect"]].astype(str).values.tolist())


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
