"""``fedcausal_flwr.run``: one call from data (or a benchmark network) to a scored :class:`Result`.

The command line is a thin wrapper over this module. A run is a function of (data, partition,
method options, seed): the same arguments give the same graph on every backend.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fedcausal_flwr.data import load_network
from fedcausal_flwr.data.partition import (
    Partition,
    split_heterogeneous,
    split_iid,
    split_sizes,
)
from fedcausal_flwr.federation.registry import get_method, known_methods
from fedcausal_flwr.federation.runners import run_method
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.graphs.truth import dag_to_cpdag, dag_to_pag
from fedcausal_flwr.metrics import graph_metrics
from fedcausal_flwr.result import Result

PARTITIONS = ("iid", "dirichlet", "heterogeneous")


def make_partition(
    pooled: pd.DataFrame, clients: int, partition: str = "iid", seed: int = 0, **options: Any
) -> Partition:
    """Split a pooled frame into ``clients`` parts by a named rule (see :mod:`.data.partition`)."""
    if partition == "iid":
        return split_iid(pooled, clients, seed=seed)
    if partition == "dirichlet":
        return split_sizes(
            pooled,
            k=clients,
            alpha=float(options.get("dirichlet_alpha", 1.0)),
            seed=seed,
            min_rows=int(options.get("min_rows", 10)),
        )
    if partition == "heterogeneous":
        return split_heterogeneous(pooled, clients, seed=seed)
    raise ValueError(f"unknown partition {partition!r}; expected one of {PARTITIONS}")


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


def score_graph(result: Result, dag: Graph) -> dict[str, float]:
    """Metrics of a result against the true DAG: whole-graph metrics against the truth of the
    learned graph's kind, or FedLCS's local metrics of the target for a ``LOCAL`` graph."""
    if result.graph.kind == "LOCAL":
        from fedcausal_flwr.metrics import local_metrics
        from fedcausal_flwr.strategies.fedlcs import full_graph

        embedded = full_graph(result.graph, dag.names)
        return local_metrics(embedded, dag, result.extra["target"])
    return graph_metrics(result.graph, truth_for(result.graph, dag))


def run(
    method: str = "fedpc",
    *,
    data: Sequence[pd.DataFrame] | Partition | None = None,
    network: str | None = "alarm",
    samples: int = 10_000,
    clients: int = 10,
    partition: str = "iid",
    backend: str = "ray",
    seed: int = 0,
    truth: Graph | str | Path | None = None,
    min_clients: int | None = None,
    secure: bool | None = None,
    **method_options: Any,
) -> Result:
    """Run ``method`` on client data and score it when a ground truth is known.

    ``data``: one DataFrame per client (or a :class:`Partition`); otherwise ``samples`` rows of the
    benchmark ``network`` drawn with ``seed`` and split into ``clients`` by ``partition``.
    ``truth``: a DAG (:class:`Graph`) or a ``cause,effect`` CSV; for a network, its DAG.
    ``secure``: route summed statistics through SecAgg+ (default: on when ``ci="secure"``).
    Every other keyword is a method option (``ci``, ``test``, ``alpha``, ``max_depth``, ...).
    """
    if method not in known_methods():
        get_method(method)  # raises with the list of known methods
    started = time.perf_counter()
    dag: Graph | None = None
    if data is not None:
        part = data if isinstance(data, Partition) else None
        frames = list(part.clients) if part is not None else list(data)
        config = {"data": f"{len(frames)} client frames"}
    else:
        if network is None:
            raise ValueError("give either data (one frame per client) or a network name")
        net = load_network(network)
        pooled = net.sample(samples, seed=seed)
        part = make_partition(pooled, clients, partition, seed, **method_options)
        frames = list(part.clients)
        dag = net.dag
        config = {"network": network, "samples": samples, "partition": partition}
    if truth is not None:
        variables = list(frames[0].columns)
        dag = truth if isinstance(truth, Graph) else read_truth(truth, variables)
    options = {k: v for k, v in method_options.items() if k not in ("dirichlet_alpha", "min_rows")}
    options.setdefault("seed", seed)
    if secure is None:
        secure = options.get("ci") == "secure"
    result = run_method(
        method, frames, options, backend=backend, secure=bool(secure), min_clients=min_clients
    )
    result.config.update(
        {
            "method": method,
            "clients": len(frames),
            "backend": backend,
            "seed": seed,
            "secure": bool(secure),
            **config,
            **options,
        }
    )
    if dag is not None and result.graph is not None:
        result.metrics.update(score_graph(result, dag))
    result.wall_s = max(result.wall_s, 0.0) or time.perf_counter() - started
    return result
