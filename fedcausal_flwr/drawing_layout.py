"""Where things sit on a graph drawing (:mod:`fedcausal_flwr.plots`), in drawing pixels: node
positions from a layout of the truth's skeleton with node labels pulled apart, label boxes
measured as matplotlib renders them, and each edge label's spot on its own edge, clear of node
boxes, arrowheads, other labels and other edges."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.graphs.graph import NONE, Graph

#: A graph drawing is as many pixels wide as the report's content column, so the report shows it
#: at its own size: at 100% zoom a node label's capitals are about 10 px tall.
GRAPH_WIDTH_PX = 1200
GRAPH_DPI = 100
NODE_FONT = 10.0  # points
EDGE_FONT = 8.5
_NODE_PAD, _EDGE_PAD = 0.35, 0.2  # label box padding, in font sizes
_GAP_PX = 10  # the space around boxes


def graph_layout(skeleton: Any, seed: int = 0) -> dict[int, np.ndarray]:
    """Node positions: Kamada-Kawai on the nodes with edges (it spreads dense clusters more
    evenly than a spring layout), nodes without edges in rows below them."""
    import networkx as nx

    linked = [v for v in skeleton if skeleton.degree(v) > 0]
    alone = sorted(v for v in skeleton if skeleton.degree(v) == 0)
    pos: dict[int, np.ndarray] = {}
    if len(linked) > 1:
        start = nx.spring_layout(skeleton.subgraph(linked), seed=seed)
        pos = nx.kamada_kawai_layout(skeleton.subgraph(linked), pos=start)
    elif linked:
        pos = {linked[0]: np.zeros(2)}
    if alone:
        per_row = max(4, int(np.ceil(np.sqrt(len(skeleton)))))
        bottom = min((p[1] for p in pos.values()), default=0.0) - 0.25
        for k, v in enumerate(alone):
            row, col = divmod(k, per_row)
            x = -1.0 + 2.0 * (col + 0.5) / per_row
            pos[v] = np.array([x, bottom - 0.2 * row])
    return pos


def separate_labels(
    pos: dict[int, np.ndarray],
    widths: np.ndarray,
    height: float | np.ndarray,
    iterations: int = 400,
) -> dict[int, np.ndarray]:
    """Move nodes apart until no two label boxes (``widths[v]`` x ``height``, layout units,
    centred on the node) overlap: each overlapping pair is pushed apart by its overlap along the
    axis where it is smaller, half each way, so a dense cluster opens up and the rest stays put.
    ``height`` is one number or one per node."""
    nodes = sorted(pos)
    if len(nodes) < 2:
        return pos
    xy = np.array([pos[v] for v in nodes], dtype=float)
    w = np.asarray(widths, dtype=float)[nodes]
    h = np.broadcast_to(np.asarray(height, dtype=float), (max(nodes) + 1,))[nodes]
    i, j = np.triu_indices(len(nodes), k=1)
    gap_x, gap_y = (w[i] + w[j]) / 2 * 1.08, (h[i] + h[j]) / 2 * 1.25
    for _ in range(iterations):
        d = xy[j] - xy[i]
        over_x, over_y = gap_x - np.abs(d[:, 0]), gap_y - np.abs(d[:, 1])
        hit = (over_x > 0) & (over_y > 0)
        if not hit.any():
            break
        along_y = hit & (over_y <= over_x)
        along_x = hit & ~along_y
        push = np.zeros_like(d)
        sign_y = np.where(d[:, 1] >= 0, 1.0, -1.0)
        sign_x = np.where(d[:, 0] >= 0, 1.0, -1.0)
        push[along_y, 1] = sign_y[along_y] * over_y[along_y] / 2
        push[along_x, 0] = sign_x[along_x] * over_x[along_x] / 2
        move = np.zeros_like(xy)
        np.add.at(move, j, push)
        np.add.at(move, i, -push)
        xy += move
    return {v: xy[k] for k, v in enumerate(nodes)}


def _text_sizes(texts: Sequence[str], fontsize: float, pad: float) -> np.ndarray:
    """(width, height) in drawing pixels of each text's label box (text plus ``pad`` font sizes
    each side), measured by matplotlib's Agg renderer, as the drawing renders them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(dpi=GRAPH_DPI)
    renderer = FigureCanvasAgg(fig).get_renderer()
    margin = 2 * pad * fontsize * GRAPH_DPI / 72
    sizes = np.zeros((len(texts), 2))
    for k, text in enumerate(texts):
        extent = fig.text(0, 0, text, fontsize=fontsize).get_window_extent(renderer)
        sizes[k] = extent.width + margin, extent.height + margin
    return sizes


def _fit_to_frame(pos: Mapping[int, np.ndarray], boxes: np.ndarray) -> dict[int, np.ndarray]:
    """Positions in drawing pixels: the layout scaled (same scale both ways) to a width that
    grows with the number of nodes up to the drawing's, then node labels separated (with room
    for edges between them). Positions that already fit (inside the drawing, labels apart, as
    this function leaves them) are kept as they are."""
    nodes = sorted(pos)
    xy = np.array([pos[v] for v in nodes], dtype=float)
    half = boxes[nodes] / 2 + _GAP_PX
    widths, heights = boxes[nodes, 0] + 3 * _GAP_PX, boxes[nodes, 1] + 2 * _GAP_PX
    inside = (xy - half >= -1e-6).all() and (xy[:, 0] + half[:, 0] <= GRAPH_WIDTH_PX + 1e-6).all()
    if inside:
        apart = separate_labels(dict(enumerate(xy)), widths, heights, iterations=1)
        if all(np.array_equal(apart[k], xy[k]) for k in range(len(nodes))):
            return {v: xy[k] for k, v in enumerate(nodes)}
    room = GRAPH_WIDTH_PX - 2 * half[:, 0].max()
    span = min(room, 140 * np.sqrt(len(nodes)) + 200)
    for _ in range(5):
        low, high = xy.min(axis=0), xy.max(axis=0)
        scale = span / (high[0] - low[0]) if high[0] > low[0] else 1.0
        scale = min(scale, 1.2 * GRAPH_WIDTH_PX / (high[1] - low[1])) if high[1] > low[1] else scale
        xy = (xy - low) * scale
        moved = separate_labels(dict(enumerate(xy)), widths, heights)
        xy = np.array([moved[k] for k in range(len(nodes))])
        if np.ptp(xy[:, 0]) <= span + 1e-6:
            break
    xy -= xy.min(axis=0) - [(GRAPH_WIDTH_PX - np.ptp(xy[:, 0])) / 2, half[:, 1].max()]
    return {v: xy[k] for k, v in enumerate(nodes)}


def truth_layout(graph: Graph, seed: int = 0) -> dict[int, np.ndarray]:
    """Node positions (drawing pixels) from ``graph``'s skeleton, labels separated. Pass them
    as ``pos`` to every :func:`plot_graph_vs_truth` of a study: each node then sits in the same
    place in every method's drawing, so drawings compare at a glance."""
    import networkx as nx

    skeleton = nx.Graph()
    skeleton.add_nodes_from(range(graph.n_nodes))
    rows, cols = np.nonzero(np.triu(graph.marks != NONE, k=1))
    skeleton.add_edges_from(zip(rows.tolist(), cols.tolist(), strict=True))
    boxes = _text_sizes(graph.names, NODE_FONT, _NODE_PAD)
    return _fit_to_frame(graph_layout(skeleton, seed), boxes)


def _boxes_at(centres: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Axis-aligned boxes (x0, y0, x1, y1) of ``size`` (width, height) around ``centres``."""
    return np.concatenate([centres - size / 2, centres + size / 2], axis=-1)


def _overlaps(boxes: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Whether each of ``boxes`` (m, 4) intersects any of ``others`` (k, 4)."""
    if len(others) == 0:
        return np.zeros(len(boxes), dtype=bool)
    a, b = boxes[:, None, :], others[None, :, :]
    hit = (a[..., 0] < b[..., 2]) & (a[..., 2] > b[..., 0])
    return np.asarray((hit & (a[..., 1] < b[..., 3]) & (a[..., 3] > b[..., 1])).any(axis=1))


def _crossings(boxes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How many of the segments ``starts``-``ends`` (e, 2) pass through each box (m, 4)
    (Liang-Barsky clipping)."""
    if len(starts) == 0:
        return np.zeros(len(boxes), dtype=int)
    d = (ends - starts)[None, :, :]
    p = np.stack([-d[..., 0], d[..., 0], -d[..., 1], d[..., 1]], axis=-1)
    s = starts[None, :, :]
    b = boxes[:, None, :]
    q = np.stack([s[..., 0] - b[..., 0], b[..., 2] - s[..., 0],
                  s[..., 1] - b[..., 1], b[..., 3] - s[..., 1]], axis=-1)  # fmt: skip
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = q / p
    enter = np.where(p < 0, ratio, -np.inf).max(axis=-1).clip(min=0.0)
    leave = np.where(p > 0, ratio, np.inf).min(axis=-1).clip(max=1.0)
    parallel_out = ((p == 0) & (q < 0)).any(axis=-1)
    return ((enter <= leave) & ~parallel_out).sum(axis=1)


#: where along the visible part of an edge its label may sit, the middle first
_ALONG = 0.5 + np.array([0.0, *(s * k for k in range(1, 9) for s in (-0.05, 0.05))])


def _edge_ends(xy: np.ndarray, nodes: np.ndarray, i: int, j: int) -> tuple[np.ndarray, ...]:
    """Where the edge i-j leaves node i's label box and enters node j's."""
    step = xy[j] - xy[i]
    unit = step / (float(np.hypot(*step)) or 1.0)
    with np.errstate(divide="ignore"):
        out_i = np.min(nodes[i] / 2 / np.abs(unit))
        out_j = np.min(nodes[j] / 2 / np.abs(unit))
    return xy[i] + out_i * unit, xy[j] - out_j * unit


def place_edge_labels(
    xy: np.ndarray,
    node_sizes: np.ndarray,
    edges: Sequence[tuple[int, int]],
    labelled: Sequence[int],
    labels: Sequence[str],
    frame: tuple[float, float],
    avoid: np.ndarray | None = None,
) -> list[tuple[np.ndarray | None, bool]]:
    """Where the label of each ``edges[labelled[k]]`` goes (drawing pixels): on its own edge,
    where its box overlaps no node box, no box of ``avoid`` (x0, y0, x1, y1: the arrowheads) and
    no label placed before it, and no other edge runs under it; the middle if free, else the
    free spot nearest it. With no such spot the label is numbered, the number's small box placed
    the same way, and the label goes to the notes under the drawing. Per label: (centre, or None
    when not even the number fits; whether the full label is drawn there)."""
    ends = np.array([[xy[i], xy[j]] for i, j in edges]).reshape(-1, 2, 2)
    obstacles = [_boxes_at(xy, node_sizes + 4), np.zeros((0, 4)) if avoid is None else avoid]
    full = _text_sizes(labels, EDGE_FONT, _EDGE_PAD)
    numbers = _text_sizes([str(k + 1) for k in range(len(labels))], EDGE_FONT, _EDGE_PAD)
    length = np.hypot(*(ends[labelled, 1] - ends[labelled, 0]).T) if len(labelled) else []
    placed: list[tuple[np.ndarray | None, bool]] = [(None, False)] * len(labels)
    for k in np.argsort(length, kind="stable"):  # short edges have the fewest spots: first
        edge = labelled[k]
        a, b = _edge_ends(xy, node_sizes, *edges[edge])
        centres = a + _ALONG[:, None] * (b - a)
        others = np.arange(len(edges)) != edge
        taken = np.concatenate(obstacles)
        for size, whole in ((full[k], True), (numbers[k], False)):
            boxes = _boxes_at(centres, size + 2)
            free = (boxes[:, :2] >= 0).all(axis=1) & (boxes[:, 2:] <= frame).all(axis=1)
            free &= ~_overlaps(boxes, taken)
            free &= _crossings(boxes, ends[others, 0], ends[others, 1]) == 0
            if free.any():
                spot = int(np.argmax(free))
                placed[k] = (centres[spot], whole)
                obstacles.append(boxes[spot][None, :])
                break
    return placed
