"""A learned graph in the formats other tools read, each with a reader so a file round-trips.

* ``edges``: one line per edge, ``A --> B``, ``A o-> B``, ``A <-> B``, ``A --- B``, ``A o-o B``
  (a directed edge is always written tail first);
* ``dot``: Graphviz, written here (no pydot), every edge ``"u" -> "v" [dir=both,
  arrowtail=..., arrowhead=...]`` with ``none`` (tail), ``normal`` (arrow) and ``odot`` (circle),
  the graph's kind as a graph attribute;
* ``gml`` / ``graphml``: a networkx DiGraph (:func:`to_marked_networkx`) written by networkx: a
  ``-->`` edge is one networkx edge, every other edge (``---``, ``<->``, ``o->``, ``o-o``) both
  directions, so a tool reading the file never mistakes a CPDAG or PAG for a DAG; each networkx
  edge carries the marks at its own ends as ``mark_at_source`` / ``mark_at_target``, the graph
  its kind;
* ``amat``: pcalg's adjacency matrix as CSV with the names as header and first column.
  ``amat.cpdag`` for DAGs and CPDAGs (``a --> b`` is ``[a, b] = 0, [b, a] = 1``; ``a --- b`` is
  1 both ways) and ``amat.pag`` for the rest (entry ``[a, b]`` is the mark at ``b``: 1 circle,
  2 arrowhead, 3 tail), as pcalg's ``amatType`` documents;
* ``causallearn``: causal-learn's endpoint matrix ``G.graph`` as CSV (entry ``[i, j]`` is the mark
  at ``i``: -1 tail, 1 arrow, 2 circle); :func:`to_causallearn_graph` builds its ``GeneralGraph``
  (causal-learn installed).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fedcausal_flwr.graphs.graph import (
    _FROM_CAUSALLEARN,
    _SYMBOL_LEFT,
    _SYMBOL_RIGHT,
    ARROW,
    CIRCLE,
    GRAPH_KINDS,
    MARK_NAMES,
    NONE,
    TAIL,
    Graph,
)

if TYPE_CHECKING:
    import networkx as nx

EXPORT_FORMATS = ("edges", "dot", "gml", "graphml", "amat", "causallearn")
#: the file suffix each format is written with by default
SUFFIXES = {
    "edges": ".txt",
    "dot": ".dot",
    "gml": ".gml",
    "graphml": ".graphml",
    "amat": ".csv",
    "causallearn": ".csv",
}

_DOT_ARROWS = {TAIL: "none", ARROW: "normal", CIRCLE: "odot"}
_FROM_DOT = {v: k for k, v in _DOT_ARROWS.items()}
_PAG_CODES = {NONE: 0, CIRCLE: 1, ARROW: 2, TAIL: 3}
_FROM_PAG = {v: k for k, v in _PAG_CODES.items()}
_SYMBOL_MARKS = {"-": TAIL, "<": ARROW, ">": ARROW, "o": CIRCLE}
_EDGES_HEADER = re.compile(r"^#\s*(\w+) over nodes (\[.*\])\s*$")
_EDGE_LINE = re.compile(r"^\s*(\S.*?)\s+([-<o])-([->o])\s+(\S.*?)\s*$")


def _pairs(graph: Graph) -> list[tuple[int, int]]:
    """Every adjacent pair once, a directed edge tail first, the rest in node order."""
    m = graph.marks
    out = []
    for i, j in zip(*np.nonzero(np.triu(m != NONE)), strict=True):
        i, j = int(i), int(j)
        if m[j, i] == ARROW and m[i, j] == TAIL:  # j --> i: write it tail first
            i, j = j, i
        out.append((i, j))
    return out


# --------------------------------------------------------------------------- edge lines
def edge_pairs(graph: Graph) -> list[tuple[str, str]]:
    """The name pairs of :func:`edge_lines`, in its order."""
    return [(graph.names[i], graph.names[j]) for i, j in _pairs(graph)]


def edge_lines(graph: Graph) -> list[str]:
    """``A --> B``-style lines, one per edge (see the module docstring)."""
    m, names = graph.marks, graph.names
    return [
        f"{names[i]} {_SYMBOL_LEFT[int(m[j, i])]}-{_SYMBOL_RIGHT[int(m[i, j])]} {names[j]}"
        for i, j in _pairs(graph)
    ]


def from_edge_lines(text: str, names: Sequence[str] | None = None, kind: str = "CPDAG") -> Graph:
    """Read :func:`edge_lines` (names from ``names``, else from the ``# KIND over nodes [...]``
    line :func:`graph_text` puts first, else in order of appearance); names may contain spaces
    but not the marks' own ``-->``-style tokens."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if header := _EDGES_HEADER.match(line):  # written by graph_text: kind and node order
            kind, names = header.group(1), names or json.loads(header.group(2))
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _EDGE_LINE.match(line)
        if match is None:
            raise ValueError(f"line {number}: {line.strip()!r} is not 'A --> B'-style")
        u, left, right, v = match.groups()
        rows.append((u, v, _SYMBOL_MARKS[left], _SYMBOL_MARKS[right]))
    if names is None:
        names = list(dict.fromkeys(n for u, v, _, _ in rows for n in (u, v)))
    return Graph.from_edges(list(names), rows, kind=kind)


# --------------------------------------------------------------------------- DOT
def _quote(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def to_dot(graph: Graph, name: str = "learned") -> str:
    """Graphviz DOT; marks as ``arrowtail`` / ``arrowhead`` of ``dir=both`` edges."""
    m = graph.marks
    lines = [f"digraph {_quote(name)} {{", f"  graph [kind={_quote(graph.kind)}];"]
    lines += [f"  {_quote(n)};" for n in graph.names]
    for i, j in _pairs(graph):
        tail, head = _DOT_ARROWS[int(m[j, i])], _DOT_ARROWS[int(m[i, j])]
        lines.append(
            f"  {_quote(graph.names[i])} -> {_quote(graph.names[j])} "
            f"[dir=both, arrowtail={tail}, arrowhead={head}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


_DOT_NAME = r'"((?:[^"\\]|\\.)*)"'
_DOT_NODE = re.compile(rf"^\s*{_DOT_NAME}\s*;\s*$")
_DOT_EDGE = re.compile(rf"^\s*{_DOT_NAME}\s*->\s*{_DOT_NAME}\s*\[([^\]]*)\]\s*;\s*$")
_DOT_KIND = re.compile(rf"^\s*graph\s*\[\s*kind\s*=\s*{_DOT_NAME}\s*\]\s*;\s*$")


def from_dot(text: str) -> Graph:
    """Read the DOT :func:`to_dot` writes (not general DOT: no subgraphs, one statement a line)."""
    names: list[str] = []
    rows = []
    kind = "CPDAG"
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("digraph", "}", "//")):
            continue
        if match := _DOT_KIND.match(line):
            kind = _unquote(match.group(1))
        elif match := _DOT_NODE.match(line):
            names.append(_unquote(match.group(1)))
        elif match := _DOT_EDGE.match(line):
            attrs = dict(
                (key.strip(), value.strip())
                for key, _, value in (a.partition("=") for a in match.group(3).split(","))
            )
            try:
                tail = _FROM_DOT[attrs.get("arrowtail", "none")]
                head = _FROM_DOT[attrs.get("arrowhead", "normal")]
            except KeyError as err:
                raise ValueError(f"DOT line {number}: unknown arrow shape {err}") from None
            rows.append((_unquote(match.group(1)), _unquote(match.group(2)), tail, head))
        else:
            raise ValueError(f"DOT line {number}: {stripped!r} is not a node or edge statement")
    return Graph.from_edges(names, rows, kind=kind)


# --------------------------------------------------------------------------- networkx
def to_marked_networkx(graph: Graph) -> nx.DiGraph:
    """A networkx DiGraph that no networkx algorithm mistakes for more than the graph says: a
    ``-->`` edge is one networkx edge, every other edge both directions (GraphML and networkx
    have no mixed graphs, so an undirected edge written once would read as directed). Each edge
    has the string attributes ``mark_at_source`` / ``mark_at_target`` (``tail|arrow|circle``),
    the marks at its own ends, which GML and GraphML store; the graph has ``kind``."""
    import networkx as nx

    m = graph.marks
    dg = nx.DiGraph(kind=graph.kind)
    dg.add_nodes_from(graph.names)
    for i, j in _pairs(graph):
        at_i, at_j = MARK_NAMES[int(m[j, i])], MARK_NAMES[int(m[i, j])]
        u, v = graph.names[i], graph.names[j]
        dg.add_edge(u, v, mark_at_source=at_i, mark_at_target=at_j)
        if (at_i, at_j) != ("tail", "arrow"):
            dg.add_edge(v, u, mark_at_source=at_j, mark_at_target=at_i)
    return dg


def from_marked_networkx(dg: nx.DiGraph, kind: str | None = None) -> Graph:
    """Inverse of :func:`to_marked_networkx`. An edge without marks reads as ``-->``, or as
    ``---`` when the reverse edge is there too (a CPDAG as other tools put it in a DiGraph)."""
    if not dg.is_directed():
        raise ValueError("expected a directed networkx graph (the marks are per direction)")
    marks: dict[frozenset, tuple[str, str, str, str]] = {}
    for u, v, data in dg.edges(data=True):
        default = "tail" if dg.has_edge(v, u) else "arrow"
        row = (u, v, data.get("mark_at_source", "tail"), data.get("mark_at_target", default))
        pair = frozenset((u, v))
        seen = marks.setdefault(pair, row)
        if seen != row and seen != (v, u, row[3], row[2]):
            raise ValueError(f"the edges {u} -> {v} and {v} -> {u} disagree on their marks")
    return Graph.from_edges(
        [str(n) for n in dg.nodes], list(marks.values()), kind=kind or dg.graph.get("kind", "CPDAG")
    )


# --------------------------------------------------------------------------- pcalg amat
def amat_type(graph: Graph) -> str:
    """``cpdag`` for DAG and CPDAG graphs, ``pag`` for the others."""
    return "cpdag" if graph.kind in ("DAG", "CPDAG") else "pag"


def to_amat(graph: Graph, kind: str | None = None) -> np.ndarray:
    """pcalg's ``amat`` of the given type (``cpdag`` or ``pag``; default :func:`amat_type`)."""
    kind = kind or amat_type(graph)
    m = graph.marks
    if kind == "pag":
        return np.vectorize(_PAG_CODES.__getitem__, otypes=[np.int64])(m)
    if kind != "cpdag":
        raise ValueError(f"unknown amat type {kind!r}; expected cpdag or pag")
    if np.any(m == CIRCLE) or np.any((m == ARROW) & (m.T == ARROW)):
        raise ValueError(
            "an amat.cpdag holds only --> and --- edges; this graph has circles or <-> edges "
            "(use the pag type)"
        )
    return (m == TAIL).astype(np.int64)  # [a, b] = 1 unless a --> b (or no edge)


def from_amat(matrix: np.ndarray, names: Sequence[str], kind: str, graph_kind: str) -> Graph:
    """Inverse of :func:`to_amat`."""
    a = np.asarray(matrix, dtype=np.int64)
    if kind == "pag":
        unknown = set(np.unique(a).tolist()) - set(_FROM_PAG)
        if unknown:
            raise ValueError(f"amat.pag entries must be 0..3, found {sorted(unknown)}")
        return Graph(names, np.vectorize(_FROM_PAG.__getitem__, otypes=[np.int8])(a), graph_kind)
    if kind != "cpdag":
        raise ValueError(f"unknown amat type {kind!r}; expected cpdag or pag")
    if not set(np.unique(a).tolist()) <= {0, 1}:
        raise ValueError("amat.cpdag entries must be 0 or 1")
    adjacent = (a + a.T) > 0
    marks = np.where(adjacent, np.where(a == 1, TAIL, ARROW), NONE).astype(np.int8)
    return Graph(names, marks, graph_kind)


# --------------------------------------------------------------------------- causal-learn
def to_causallearn_graph(graph: Graph) -> Any:
    """causal-learn's ``GeneralGraph`` with the same nodes and end marks."""
    try:
        from causallearn.graph.Edge import Edge  # type: ignore[import-untyped]
        from causallearn.graph.Endpoint import Endpoint  # type: ignore[import-untyped]
        from causallearn.graph.GeneralGraph import GeneralGraph  # type: ignore[import-untyped]
        from causallearn.graph.GraphNode import GraphNode  # type: ignore[import-untyped]
    except ImportError:
        raise ImportError(
            "to_causallearn_graph needs causal-learn: pip install causal-learn"
        ) from None
    endpoints = {TAIL: Endpoint.TAIL, ARROW: Endpoint.ARROW, CIRCLE: Endpoint.CIRCLE}
    nodes = [GraphNode(n) for n in graph.names]
    out = GeneralGraph(nodes)
    m = graph.marks
    for i, j in _pairs(graph):
        out.add_edge(Edge(nodes[i], nodes[j], endpoints[int(m[j, i])], endpoints[int(m[i, j])]))
    return out


# --------------------------------------------------------------------------- files
def _matrix_csv(matrix: np.ndarray, names: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["", *names])
    for name, row in zip(names, matrix.tolist(), strict=True):
        writer.writerow([name, *row])
    return buffer.getvalue()


def _read_matrix_csv(text: str, what: str) -> tuple[list[str], np.ndarray]:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise ValueError(f"the {what} file is empty")
    names = rows[0][1:]
    body = rows[1:]
    if len(body) != len(names) or any(len(r) != len(names) + 1 for r in body):
        raise ValueError(f"the {what} file must be a square matrix with a header row and column")
    if [r[0] for r in body] != names:
        raise ValueError(f"the {what} file's row names differ from its column names")
    try:
        matrix = np.array([[int(x) for x in r[1:]] for r in body], dtype=np.int64)
    except ValueError:
        raise ValueError(f"the {what} file holds a non-integer entry") from None
    return names, matrix


def graph_text(graph: Graph, fmt: str) -> str:
    """The graph as the text of a ``fmt`` file."""
    import networkx as nx

    if fmt == "edges":
        header = f"# {graph.kind} over nodes {json.dumps(list(graph.names))}"
        return "\n".join([header, *edge_lines(graph)]) + "\n"
    if fmt == "dot":
        return to_dot(graph)
    if fmt == "gml":
        return "\n".join(nx.generate_gml(to_marked_networkx(graph))) + "\n"
    if fmt == "graphml":
        return "\n".join(nx.generate_graphml(to_marked_networkx(graph))) + "\n"
    if fmt == "amat":
        return _matrix_csv(to_amat(graph), graph.names)
    if fmt == "causallearn":
        return _matrix_csv(graph.to_causallearn(), graph.names)
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(EXPORT_FORMATS)}")


def read_graph(path: str | Path, fmt: str, kind: str | None = None) -> Graph:
    """Read a file written by :func:`graph_text` (``fedcausal-flwr export``). ``kind`` is needed
    for ``edges`` (default CPDAG), ``amat`` (default CPDAG for an amat.cpdag, which holds only
    ``-->`` and ``---``; give it for an amat.pag) and ``causallearn``; DOT, GML and GraphML carry
    it."""
    import networkx as nx

    if kind is not None and kind not in GRAPH_KINDS:
        raise ValueError(f"unknown graph kind {kind!r}; expected one of {GRAPH_KINDS}")
    text = Path(path).read_text()
    if fmt == "edges":
        graph = from_edge_lines(text)
        return graph if kind is None else graph.copy(kind)
    if fmt == "dot":
        graph = from_dot(text)
        return graph if kind is None else graph.copy(kind)
    if fmt in ("gml", "graphml"):
        dg = nx.parse_gml(text) if fmt == "gml" else nx.parse_graphml(text)
        return from_marked_networkx(dg, kind)
    if fmt == "amat":
        names, matrix = _read_matrix_csv(text, "amat")
        graph_kind = kind or "CPDAG"
        amat_kind = "cpdag" if graph_kind in ("DAG", "CPDAG") else "pag"
        return from_amat(matrix, names, amat_kind, graph_kind)
    if fmt == "causallearn":
        names, matrix = _read_matrix_csv(text, "causal-learn")
        unknown = set(np.unique(matrix).tolist()) - set(_FROM_CAUSALLEARN)
        if unknown:
            raise ValueError(f"causal-learn endpoint codes are -1..2; found {sorted(unknown)}")
        return Graph.from_causallearn(matrix, names, kind or "PAG")
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(EXPORT_FORMATS)}")


__all__ = [
    "EXPORT_FORMATS",
    "amat_type",
    "edge_lines",
    "from_amat",
    "from_dot",
    "from_edge_lines",
    "from_marked_networkx",
    "graph_text",
    "read_graph",
    "to_amat",
    "to_causallearn_graph",
    "to_dot",
    "to_marked_networkx",
]
