"""One graph type with edge marks, covering DAG, CPDAG, MAG, PAG and local structures.

Encoding: ``marks[i, j]`` is the mark *at node j* on the edge between i and j, so ``i --> j`` is
``marks[i, j] == ARROW`` and ``marks[j, i] == TAIL`` (read "i points into j"). ``NONE`` (0) on both
sides means no edge. This is pcalg's ``amat`` convention; causal-learn stores the transpose with
other codes (see :meth:`Graph.to_causallearn`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # networkx is imported where a graph is converted (~0.2 s to import)
    import networkx as nx

NONE, TAIL, ARROW, CIRCLE = 0, 1, 2, 3
MARK_NAMES = {TAIL: "tail", ARROW: "arrow", CIRCLE: "circle"}
MARK_CODES = {name: code for code, name in MARK_NAMES.items()}
GRAPH_KINDS = ("DAG", "CPDAG", "MAG", "PAG", "SKELETON", "LOCAL")

# causal-learn endpoint codes: graph[i, j] is the mark at node i on the edge i-j.
_TO_CAUSALLEARN = {NONE: 0, TAIL: -1, ARROW: 1, CIRCLE: 2}
_FROM_CAUSALLEARN = {v: k for k, v in _TO_CAUSALLEARN.items()}

_SYMBOL_LEFT = {TAIL: "-", ARROW: "<", CIRCLE: "o"}
_SYMBOL_RIGHT = {TAIL: "-", ARROW: ">", CIRCLE: "o"}


@dataclass(init=False)
class Graph:
    """A mixed graph with marks at both ends of every edge.

    Parameters
    ----------
    names : sequence of str
        Node names, distinct; node ``i`` is ``names[i]``.
    marks : ndarray of int8, shape (p, p), optional
        ``marks[i, j]`` is the mark at node ``j`` on the edge ``i - j`` (pcalg's convention):
        ``TAIL``, ``ARROW``, ``CIRCLE``, or ``NONE`` for no edge (every edge has a mark at both
        ends). Default: no edges.
    kind : str
        How to read the marks: ``DAG``, ``CPDAG`` (tails at both ends: undirected), ``MAG``,
        ``PAG`` (circles: undetermined), ``LOCAL`` (a local structure) or ``SKELETON``.

    Notes
    -----
    :meth:`to_causallearn` gives causal-learn's ``G.graph`` (entry ``[i, j]`` is the mark at
    ``i``: -1 tail, 1 arrow, 2 circle); :meth:`to_json` / :meth:`from_json` round-trip.
    """

    names: tuple[str, ...]
    marks: np.ndarray
    kind: str = "SKELETON"

    # A hand-written __init__ rather than the dataclass one: ``marks`` may be omitted or None
    # (no edges), while the attribute is always the p x p int8 array.
    def __init__(
        self, names: Iterable[str], marks: np.ndarray | None = None, kind: str = "SKELETON"
    ) -> None:
        self.names = tuple(str(n) for n in names)
        self.kind = kind
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"duplicate node names in {self.names}")
        p = len(self.names)
        if marks is None:
            self.marks = np.zeros((p, p), dtype=np.int8)
        else:
            self.marks = np.array(marks, dtype=np.int8)
        if self.marks.shape != (p, p):
            raise ValueError(f"marks must be {p}x{p}, got {self.marks.shape}")
        if self.kind not in GRAPH_KINDS:
            raise ValueError(f"unknown graph kind {self.kind!r}; expected one of {GRAPH_KINDS}")
        if np.any(np.diag(self.marks) != NONE):
            raise ValueError("self-loops are not allowed")
        if np.any((self.marks == NONE) != (self.marks.T == NONE)):
            raise ValueError("an edge must carry a mark at both ends")

    # ----------------------------------------------------------------- construction
    @classmethod
    def empty(cls, names: Sequence[str], kind: str = "SKELETON") -> Graph:
        return cls(tuple(names), None, kind)

    @classmethod
    def complete(cls, names: Sequence[str], mark: int = CIRCLE, kind: str = "SKELETON") -> Graph:
        p = len(names)
        m = np.full((p, p), mark, dtype=np.int8)
        np.fill_diagonal(m, NONE)
        return cls(tuple(names), m, kind)

    @classmethod
    def from_edges(
        cls, names: Sequence[str], edges: Iterable[Sequence], kind: str = "DAG"
    ) -> Graph:
        """Build from ``(u, v)`` directed pairs or ``(u, v, mark_at_u, mark_at_v)`` rows.

        Nodes may be given by name or index; marks by code or name (``tail|arrow|circle``).
        """
        g = cls.empty(names, kind)
        for e in edges:
            u, v = g.index(e[0]), g.index(e[1])
            if len(e) == 2:
                g.set_edge(u, v, TAIL, ARROW)
            else:
                g.set_edge(u, v, _mark(e[2]), _mark(e[3]))
        return g

    @classmethod
    def from_causallearn(cls, matrix: np.ndarray, names: Sequence[str], kind: str) -> Graph:
        """From causal-learn's ``G.graph`` (entry [i, j] is the mark at i; -1 tail, 1 arrow, 2
        circle)."""
        cl = np.asarray(matrix)
        m = np.vectorize(_FROM_CAUSALLEARN.__getitem__, otypes=[np.int8])(cl.T)
        return cls(tuple(names), m, kind)

    def copy(self, kind: str | None = None) -> Graph:
        return Graph(self.names, self.marks.copy(), kind or self.kind)

    # ----------------------------------------------------------------- queries
    @property
    def n_nodes(self) -> int:
        return len(self.names)

    def index(self, node: int | str) -> int:
        if isinstance(node, (int, np.integer)):
            if not 0 <= int(node) < len(self.names):
                raise IndexError(f"node index {node} out of range 0..{len(self.names) - 1}")
            return int(node)
        # a name's position, from a table built once per names tuple (a graph of 2,000 nodes
        # read from a file looks up its 100,000 edges' ends)
        positions = self.__dict__.get("_positions")
        if positions is None or positions[0] is not self.names:
            positions = (self.names, {name: i for i, name in enumerate(self.names)})
            self.__dict__["_positions"] = positions
        try:
            return positions[1][str(node)]
        except KeyError:
            raise KeyError(f"unknown node {node!r}; nodes are {list(self.names)}") from None

    def adjacency(self) -> np.ndarray:
        """Boolean symmetric adjacency matrix."""
        return self.marks != NONE

    def adjacent(self, i: int, j: int) -> bool:
        return bool(self.marks[i, j] != NONE)

    def neighbors(self, i: int) -> np.ndarray:
        """Indices adjacent to ``i`` (any marks), ascending."""
        return np.flatnonzero(self.marks[i] != NONE)

    def n_edges(self) -> int:
        return int(np.count_nonzero(np.triu(self.marks != NONE)))

    def is_directed(self, i: int, j: int) -> bool:
        """``i --> j``."""
        return bool(self.marks[i, j] == ARROW and self.marks[j, i] == TAIL)

    def is_undirected(self, i: int, j: int) -> bool:
        """``i --- j``."""
        return bool(self.marks[i, j] == TAIL and self.marks[j, i] == TAIL)

    def parents(self, j: int) -> np.ndarray:
        return np.flatnonzero((self.marks[:, j] == ARROW) & (self.marks[j, :] == TAIL))

    def children(self, i: int) -> np.ndarray:
        return np.flatnonzero((self.marks[i, :] == ARROW) & (self.marks[:, i] == TAIL))

    def edges(self) -> list[tuple[str, str, str, str]]:
        """Every edge once as ``(u, v, mark_at_u, mark_at_v)`` with u before v in node order."""
        out = []
        for i, j in zip(*np.nonzero(np.triu(self.marks != NONE)), strict=True):
            out.append(
                (
                    self.names[i],
                    self.names[j],
                    MARK_NAMES[int(self.marks[j, i])],
                    MARK_NAMES[int(self.marks[i, j])],
                )
            )
        return out

    # ----------------------------------------------------------------- mutation
    def set_edge(self, i: int, j: int, mark_at_i: int, mark_at_j: int) -> None:
        if i == j:
            raise ValueError("self-loops are not allowed")
        if (mark_at_i == NONE) != (mark_at_j == NONE):
            raise ValueError("an edge must carry a mark at both ends")
        self.marks[j, i] = mark_at_i
        self.marks[i, j] = mark_at_j

    def remove_edge(self, i: int, j: int) -> None:
        self.marks[i, j] = self.marks[j, i] = NONE

    def orient(self, i: int, j: int) -> None:
        """Make ``i --> j``."""
        self.set_edge(i, j, TAIL, ARROW)

    # ----------------------------------------------------------------- conversion
    def to_causallearn(self) -> np.ndarray:
        """causal-learn's encoding: ``out[i, j]`` is the mark at i (-1 tail, 1 arrow, 2 circle)."""
        return np.vectorize(_TO_CAUSALLEARN.__getitem__, otypes=[np.int64])(self.marks.T)

    def to_networkx(self) -> nx.DiGraph:
        """Directed edges as networkx edges; other edges get both directions with a ``marks``
        attr."""
        import networkx as nx

        dg = nx.DiGraph()
        dg.add_nodes_from(self.names)
        for u, v, mu, mv in self.edges():
            if mu == "tail" and mv == "arrow":
                dg.add_edge(u, v)
            elif mu == "arrow" and mv == "tail":
                dg.add_edge(v, u)
            else:
                dg.add_edge(u, v, marks=(mu, mv))
                dg.add_edge(v, u, marks=(mv, mu))
        return dg

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "nodes": list(self.names),
            "edges": [list(e) for e in self.edges()],
        }

    @classmethod
    def from_json(cls, obj: dict) -> Graph:
        return cls.from_edges(obj["nodes"], obj["edges"], kind=obj["kind"])

    def skeleton(self) -> Graph:
        m = np.where(self.marks != NONE, CIRCLE, NONE).astype(np.int8)
        return Graph(self.names, m, "SKELETON")

    def subgraph(self, nodes: Sequence[str | int]) -> Graph:
        idx = [self.index(n) for n in nodes]
        return Graph(tuple(self.names[i] for i in idx), self.marks[np.ix_(idx, idx)], self.kind)

    # ----------------------------------------------------------------- dunder
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Graph):
            return NotImplemented
        return self.names == other.names and bool(np.array_equal(self.marks, other.marks))

    def __repr__(self) -> str:
        return f"Graph(kind={self.kind}, nodes={self.n_nodes}, edges={self.n_edges()})"

    def __str__(self) -> str:
        lines = [repr(self)]
        for u, v, mu, mv in self.edges():
            lines.append(
                f"  {u} {_SYMBOL_LEFT[MARK_CODES[mu]]}-{_SYMBOL_RIGHT[MARK_CODES[mv]]} {v}"
            )
        return "\n".join(lines)


def _mark(m: int | str) -> int:
    if isinstance(m, str):
        try:
            return MARK_CODES[m]
        except KeyError:
            raise ValueError(f"unknown edge mark {m!r}; expected tail|arrow|circle") from None
    if int(m) not in MARK_NAMES:
        raise ValueError(f"unknown edge mark code {m}")
    return int(m)
