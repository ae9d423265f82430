"""Scoring a result against a ground truth, the same way on every entry point (Flower-free).

One view per column. A result is scored as a whole graph in the common view of what it claims:
a DAG or CPDAG output as a CPDAG against the true CPDAG (a DAG output is first reduced to its
Markov equivalence class), a MAG or PAG output as a PAG against the true PAG. The common columns
(``shd``, ``adj_f1``, ``arrow_f1``, ...) always mean that view. A DAG output also gets DAG-view
columns (``dag_shd``, ``dag_arrow_f1``, ...: the DAG against the true DAG), never mixed into the
common ones. A DAG output that left edges undirected (a tied vote) is scored by the equivalence
class of its Dor-Tarsi extension; one with a directed cycle, or no consistent extension, has no
common view (no common numbers, a note).
A method whose registration scores it another way (``score``, with its ``score_view``: FedLCS
scores the local structure of its target) keeps its own numbers, in the view it declares. A
``LOCAL`` output (a target's local structure) is compared over its target's neighbourhood only:
the edges at the target, against the true DAG's edges there (its parents and children,
:func:`~fedcausal_flwr.metrics.target_neighbourhood`), and gets the common column names in that
view too, so a table's row for it is not empty. A drawing shows what the common columns compare
(:func:`view_graphs`). A comparison adds the rows a method's ``summaries`` hook gives
(``local``'s per-client average and best-oracle rows). No method is named here: the registry
says.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from fedcausal_flwr.federation.core.registry import MethodSpec, UnknownMethodError, get_method
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.graphs.extension import pdag_to_dag
from fedcausal_flwr.graphs.truth import check_dag, dag_to_cpdag, dag_to_pag
from fedcausal_flwr.metrics import graph_metrics, target_neighbourhood
from fedcausal_flwr.result import Result


def read_truth(path: str | Path, variables: Sequence[str], *, quote: bool = True) -> Graph:
    """A DAG from a ``cause,effect`` CSV over ``variables``; unknown names are an error.

    Read as a local file (a URL is not fetched). ``quote=False`` (the coordinator) keeps the
    file's content out of every error: it names the file and what is wrong."""
    with open(path, encoding="utf-8", newline="") as handle:  # never a URL
        try:
            edges = pd.read_csv(handle)
        except pd.errors.EmptyDataError:
            raise ValueError(
                f"{path}: an empty file; a truth file is a CSV with a header cause,effect and "
                "one edge per line"
            ) from None
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
    loops = sorted({a for a, b in pairs if a == b})
    if loops:
        named = "" if not quote else f" ({', '.join(f'{a},{a}' for a in loops)})"
        raise ValueError(
            f"{path}: {len(loops)} row(s) name a variable as its own cause{named}; a true DAG "
            "has no self-loop"
        )
    cycle = _directed_cycle(pairs)
    if cycle:
        named = " through " + " -> ".join([*cycle, cycle[0]]) if quote else ""
        raise ValueError(
            f"{path}: its edges form a directed cycle{named}; a true DAG has none (remove one "
            "of its edges)"
        )
    # both directions listed: the graph would keep one of them silently, so neither is a truth
    listed = set(map(tuple, pairs))
    both = sorted({tuple(sorted(p)) for p in listed if p[0] != p[1] and (p[1], p[0]) in listed})
    if both:
        if not quote:
            raise ValueError(
                f"{path}: {len(both)} pair(s) are listed in both directions (cause,effect and "
                "effect,cause); a true DAG has one direction per pair"
            )
        shown = ", ".join(f"{a},{b} and {b},{a}" for a, b in both)
        raise ValueError(
            f"{path}: lists both {shown}; a true DAG has one direction per pair (keep the right "
            "one)"
        )
    if quote:
        return Graph.from_edges(list(variables), pairs)
    try:
        return Graph.from_edges(list(variables), pairs)
    except ValueError:
        raise ValueError(f"{path}: its edges do not form a graph over the data columns") from None


def _directed_cycle(pairs: Sequence[Sequence[str]]) -> list[str]:
    """The variables of one directed cycle of ``pairs`` (cause -> effect) in order, longer than
    two (two-way pairs are named on their own); ``[]``: none."""
    import networkx as nx

    listed = {(a, b) for a, b in pairs}
    graph = nx.DiGraph([(a, b) for a, b in listed if (b, a) not in listed])
    try:
        return [a for a, _ in nx.find_cycle(graph)]
    except nx.NetworkXNoCycle:
        return []


#: the common views, by the kind of the learned graph
COMMON_VIEW = {"DAG": "CPDAG", "CPDAG": "CPDAG", "MAG": "PAG", "PAG": "PAG"}
#: each view in words, for tables, plots and reports
VIEW_TEXT = {
    "CPDAG": "CPDAG against the true CPDAG (a DAG output as its equivalence class)",
    "PAG": "PAG against the true PAG",
}
#: the prefix of the DAG-view columns of a DAG output
DAG_VIEW_PREFIX = "dag_"
NO_COMMON_VIEW = (
    "none (a DAG output with a directed cycle, or with undirected edges no DAG extends, has no "
    "equivalence class)"
)


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
    """Metrics of a result against the true DAG (see the module docstring): the common view's
    columns, and a DAG output's ``dag_*`` columns."""
    spec = method_of(result)
    if spec is not None and spec.score is not None:
        own = spec.score(result, dag)
        if result.graph is None or result.graph.kind != "LOCAL":
            return own
        local = graph_metrics(*target_neighbourhood(result.graph, dag, local_target(result)))
        del local["shd_normalised"]  # over every pair of the neighbourhood: not a local number
        return {**local, **own}  # the method's own numbers win
    learned = result.graph
    if learned is None:
        raise ValueError(f"the {result.method} result has no graph to score")
    if learned.kind != "DAG":
        return graph_metrics(learned, truth_for(learned, dag))
    truth = truth_for(learned, dag)  # the true DAG over the learned graph's variables
    metrics = {DAG_VIEW_PREFIX + k: v for k, v in graph_metrics(learned, truth).items()}
    cpdag = equivalence_class(learned)
    if cpdag is None:
        return metrics
    return {**graph_metrics(cpdag, dag_to_cpdag(truth)), **metrics}


def score_result(result: Result, dag: Graph) -> None:
    """Score ``result`` against the true DAG in place: its metrics, and the view its common
    columns are in (``config["view"]``, which its summary and every table print)."""
    result.metrics.update(score_graph(result, dag))
    result.config["view"] = scoring_view(result)


def scored_state(result: Result) -> str:
    """What :func:`score_result` writes into a result (its metrics and view), as text: a result
    whose state is the same as before was not scored in between (``run --out`` writes once)."""
    return json.dumps([result.metrics, result.config.get("view")], sort_keys=True, default=str)


def scoring_view(result: Result) -> str:
    """The view the common columns of ``result``'s metrics are in, in words (a key of
    :data:`VIEW_TEXT`, a method's own ``score_view``, or :data:`NO_COMMON_VIEW`)."""
    spec = method_of(result)
    if spec is not None and spec.score is not None:
        return spec.score_view
    learned = result.graph
    if learned is None or learned.kind not in COMMON_VIEW:
        return NO_COMMON_VIEW
    if learned.kind == "DAG" and equivalence_class(learned) is None:
        return NO_COMMON_VIEW
    return COMMON_VIEW[learned.kind]


def equivalence_class(learned: Graph) -> Graph | None:
    """The CPDAG a DAG output is scored as: its own, or, for a DAG output that left some edges
    undirected (a vote tied), that of its Dor-Tarsi extension; None if it has a directed cycle
    or no consistent extension."""
    try:
        check_dag(learned)
    except ValueError:
        try:
            extension, consistent = pdag_to_dag(learned)
        except ValueError:  # circle marks: not a partially directed graph
            return None
        if not consistent:
            return None
        learned = extension
    try:
        return dag_to_cpdag(learned)
    except ValueError:  # a directed cycle
        return None


def local_target(result: Result) -> str:
    """The target whose local structure a ``LOCAL`` result is (the first one it names)."""
    target = (result.extra or {}).get("target")
    if not target:
        raise ValueError(f"the {result.method} result is a local structure that names no target")
    return str(target)


def view_graphs(learned: Graph, dag: Graph, target: str | None = None) -> tuple[Graph, Graph]:
    """``(learned, truth)`` as the common columns compare them, for a drawing that matches its
    table: a ``LOCAL`` graph and its truth at ``target`` only (:func:`target_neighbourhood`), a
    DAG output as its equivalence class against the true CPDAG (the DAG against the true DAG
    when it has none: :data:`NO_COMMON_VIEW`), any other graph against :func:`truth_for`."""
    if learned.kind == "LOCAL":
        if target is None:
            raise ValueError("a local structure is compared at its target: give target")
        return target_neighbourhood(learned, dag, target)
    truth = truth_for(learned, dag)
    if learned.kind != "DAG":
        return learned, truth
    cpdag = equivalence_class(learned)
    return (learned, truth) if cpdag is None else (cpdag, dag_to_cpdag(truth))


def summary_rows(result: Result, dag: Graph) -> dict[str, dict]:
    """Extra comparison rows of a result (``{label: metrics}``; none for most methods)."""
    spec = method_of(result)
    if spec is None or spec.summaries is None:
        return {}
    return spec.summaries(result, dag)
