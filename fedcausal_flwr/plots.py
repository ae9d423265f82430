"""PNG plots of a comparison study (matplotlib, Agg backend; imported only when plotting).

* :func:`plot_metric_vs_clients`: one panel per network, a metric against K, one line per method
  with mean ± sd error bars over seeds.
* :func:`plot_costs`: rounds and bytes moved (up + down) against K per method.
* :func:`plot_graph_vs_truth`: a learned graph over its truth on a networkx layout, each pair
  styled by what went right or wrong (correct, extra, missing, reversed, other mark).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from fedcausal_flwr.drawing_layout import (
    _EDGE_PAD,
    _GAP_PX,
    _NODE_PAD,
    EDGE_FONT,
    GRAPH_DPI,
    GRAPH_WIDTH_PX,
    NODE_FONT,
    _boxes_at,
    _edge_ends,
    _fit_to_frame,
    _text_sizes,
    place_edge_labels,
    truth_layout,
)
from fedcausal_flwr.drawing_layout import graph_layout as graph_layout
from fedcausal_flwr.drawing_layout import separate_labels as separate_labels
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.study_files import method_label, method_views, view_statement

DERIVED_METHODS = ("local-avg", "local-best-oracle")
EDGE_STYLES: dict[str, dict[str, Any]] = {
    "correct": {"color": "black", "linestyle": "-", "lw": 1.6},
    "reversed": {"color": "tab:orange", "linestyle": "-", "lw": 2.2},
    "other mark": {"color": "tab:blue", "linestyle": "-.", "lw": 1.8},
    "extra": {"color": "tab:red", "linestyle": "--", "lw": 1.6},
    "missing": {"color": "0.6", "linestyle": ":", "lw": 1.6},
}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "plots need matplotlib: pip install 'fedcausal-flwr[plot]' (or pass plots=False / "
            "--no-plots)"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["status"] == "ok"] if not frame.empty else frame


#: axis labels of the metrics a study reports (other columns are shown as they are named)
METRIC_LABELS = {
    "shd": "SHD",
    "shd_cl0128": "SHD (causal-learn 0.1.2.8's rule)",
    "shd_normalised": "SHD / possible pairs",
    "adj_f1": "adjacency F1",
    "adj_precision": "adjacency precision",
    "adj_recall": "adjacency recall",
    "arrow_f1": "arrowhead F1",
    "arrow_precision": "arrowhead precision",
    "arrow_recall": "arrowhead recall",
    "tpr": "true positive rate",
    "fdr": "false discovery rate",
    "n_edges_learned": "edges learned",
    "wall_s": "seconds",
}


def metric_label(metric: str) -> str:
    return METRIC_LABELS.get(metric, metric.replace("_", " "))


def setting_title(per_net: pd.DataFrame, network: str) -> str:
    """What a panel ran: network, rows, partition and seeds (from the results' columns)."""
    parts = [network]
    if "n" in per_net.columns and per_net["n"].nunique() == 1:
        parts.append(f"{int(per_net['n'].iloc[0]):,} rows")
    if "partition" in per_net.columns and per_net["partition"].nunique() == 1:
        parts.append(str(per_net["partition"].iloc[0]))
    if "seed" in per_net.columns:
        seeds = sorted(set(int(x) for x in per_net["seed"]))
        parts.append(f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}")
    return ", ".join(parts)


def _k_axis(ax: Any, ks: Sequence[int]) -> None:
    ks = sorted(set(int(k) for k in ks))
    if len(ks) > 1 and ks[0] > 0 and ks[-1] / ks[0] >= 4:
        ax.set_xscale("log", base=2)
    ax.set_xticks(ks)
    ax.set_xticklabels([str(k) for k in ks])
    ax.set_xlabel("clients K")


def plot_metric_vs_clients(
    frame: pd.DataFrame,
    metric: str,
    path: str | Path,
    *,
    title: str | None = None,
    ylabel: str | None = None,
) -> Path:
    """``metric`` against K, a panel per network, a line per method (mean ± sd over seeds).

    ``title``: a figure title over the panels (what sets this plot apart from a sibling, such as
    the scoring view); ``ylabel``: the y axis label (default: the metric's readable name)."""
    plt = _pyplot()
    ok = _ok(frame)
    if metric not in ok.columns:
        raise KeyError(f"no metric {metric!r} in the results; have {sorted(ok.columns)}")
    networks = list(dict.fromkeys(ok["network"]))
    fig, axes = plt.subplots(
        1, max(len(networks), 1), figsize=(7 * max(len(networks), 1), 3.8), squeeze=False
    )
    views = method_views(ok)
    for ax, network in zip(axes[0], networks, strict=False):
        per_net = ok[ok["network"] == network]
        _method_lines(ax, per_net, metric, views)
        _k_axis(ax, per_net["K"])
        ax.set_title(setting_title(per_net, network), fontsize=10)
        ax.set_ylabel(ylabel or metric_label(metric))
        ax.margins(y=0.08)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    # every plot of a metric says which view its numbers are in and what the error bars are
    notes = [title] if title else []
    notes.append(view_statement(views, list(dict.fromkeys(ok["method"]))))
    seeds = int(ok["seed"].nunique()) if "seed" in ok.columns else 0
    notes.append(f"error bars: sd over {seeds} seeds" if seeds > 1 else "one seed: no error bars")
    title = "\n".join(notes)
    if title:  # wrapped to the figure's width (about 11 characters an inch at 11 pt)
        width = int(fig.get_figwidth() * 11)
        lines = [textwrap.fill(line, width) for line in title.splitlines()]
        fig.suptitle("\n".join(lines), fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _method_lines(ax, per_net: pd.DataFrame, column: str, views: dict | None = None) -> None:
    """One error-bar line per method: mean +- sd of ``column`` over seeds, against K (derived
    rows such as local-avg dashed). A line equal to one drawn before it (pooled and exact FedPC,
    say) would hide under it: its legend entry says so and it is drawn thinner, on top, with
    hollow markers."""
    drawn: list[tuple[str, pd.DataFrame]] = []
    for index, (method, rows) in enumerate(per_net.groupby("method", sort=False)):
        stats = rows.groupby("K")[column].agg(["mean", "std"]).sort_index()
        same = next(
            (
                other
                for other, seen in drawn
                if seen.index.equals(stats.index)
                and np.allclose(seen["mean"], stats["mean"], equal_nan=True)
            ),
            None,
        )
        drawn.append((str(method), stats))
        ax.errorbar(
            stats.index,
            stats["mean"],
            yerr=stats["std"].fillna(0.0),
            marker=_MARKERS[index % len(_MARKERS)],
            capsize=3,
            label=method_label(str(method), views or {}) + ("" if same is None else f" (= {same})"),
            linestyle="--" if method in DERIVED_METHODS or same is not None else "-",
            mfc="none" if same is not None else None,
            lw=1.0 if same is not None else 1.5,
            zorder=3 if same is not None else 2,
        )


def byte_text(value: float, digits: int | None = None) -> str:
    """Bytes in B / kB / MB / GB (``digits``: significant digits; default as ``:g``)."""
    spec = "g" if digits is None else f".{digits}g"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:{spec}} {unit}"
    return f"{value:{spec}} B"


def plot_costs(frame: pd.DataFrame, path: str | Path) -> Path:
    """Rounds (linear) and bytes up + down (log) against K per method, a column per network."""
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ok = _ok(frame)
    ok = ok[~ok["method"].isin(DERIVED_METHODS)].assign(
        bytes_total=lambda f: f["bytes_up"] + f["bytes_down"]
    )
    networks = list(dict.fromkeys(ok["network"]))
    cols = max(len(networks), 1)
    fig, axes = plt.subplots(2, cols, figsize=(7 * cols, 7), squeeze=False)
    for col, network in enumerate(networks):
        per_net = ok[ok["network"] == network]
        for row, (column, label) in enumerate(
            (("rounds", "rounds"), ("bytes_total", "bytes up + down"))
        ):
            ax = axes[row][col]
            _method_lines(ax, per_net, column)
            if column == "rounds":  # few and whole: a linear axis with integer ticks
                ax.yaxis.set_major_locator(MaxNLocator(integer=True))
                ax.set_ylim(bottom=0)
            elif (per_net[column] > 0).any():
                ax.set_yscale("log")
                ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: byte_text(v)))
            _k_axis(ax, per_net["K"])
            ax.set_ylabel(label)
            ax.set_title(f"{setting_title(per_net, network)}: {label}", fontsize=10)
            ax.margins(y=0.08)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return _save(fig, path)


def classify_pairs(learned: Graph, truth: Graph) -> dict[str, list[tuple[int, int]]]:
    """Every adjacent pair (i < j, truth's node order) of either graph, by what happened to it."""
    from fedcausal_flwr.metrics import align

    learned = align(learned, truth)
    a, t = learned.marks, truth.marks
    groups: dict[str, list[tuple[int, int]]] = {name: [] for name in EDGE_STYLES}
    rows, cols = np.nonzero(np.triu((a != NONE) | (t != NONE), k=1))
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        if t[i, j] == NONE:
            groups["extra"].append((i, j))
        elif a[i, j] == NONE:
            groups["missing"].append((i, j))
        elif a[i, j] == t[i, j] and a[j, i] == t[j, i]:
            groups["correct"].append((i, j))
        elif a[i, j] == t[j, i] and a[j, i] == t[i, j] and {t[i, j], t[j, i]} == {TAIL, ARROW}:
            groups["reversed"].append((i, j))
        else:
            groups["other mark"].append((i, j))
    return groups


#: Arrowhead length in points (the heads' ``mutation_scale``): 12 pt is about 17 px at
#: :data:`GRAPH_DPI`, several line widths long, so an edge's direction reads at 100% zoom even
#: on a dense graph (matplotlib's default head, 0.4 of a 15 pt scale, drew 8 px heads, and a
#: dotted edge drew a dotted head). Heads are drawn solid and filled on every edge class.
ARROWHEAD_PT = 12.0
#: Arrowhead width over its length (a head ``0.75 * ARROWHEAD_PT`` = 9 pt wide, about 12 px).
ARROWHEAD_WIDTH = 0.75
#: an arrowhead: a filled triangle ARROWHEAD_PT long (its path is exactly that long: no shaft)
_HEADSTYLE = f"-|>,head_length=1,head_width={ARROWHEAD_WIDTH / 2:g}"
_SHRINK_PT = 2.0  # the gap between an edge's end and its node's label box, in points

#: what each class of pair means, for the legend
EDGE_MEANINGS = {
    "correct": "adjacent in both, the truth's endpoint marks",
    "reversed": "the truth's arrow, pointing the other way",
    "other mark": "adjacent in both, other endpoint marks than the truth's (not simply reversed)",
    "extra": "learned, not adjacent in the truth",
    "missing": "adjacent in the truth, not learned (drawn with the truth's marks)",
    "edges": "learned edge",
}
_TITLE_PX = 44  # a one-line title's band above the graph
TITLE_FONT = 12.0  # points
TITLE_CHARS = 150  # characters a title line holds at TITLE_FONT across the drawing


def compared_text(learned: Graph, truth: Graph | None) -> str:
    """What a drawing's two graphs are, for its legend: ``CPDAG against the true CPDAG``, a local
    structure as the target's edges against the true ones."""
    if truth is None:
        return f"learned {learned.kind}"
    if learned.kind == "LOCAL":
        return "the target's learned edges against its true edges (parents and children)"
    return f"{learned.kind} against the true {truth.kind}"


def drawing_title(record: Mapping[str, Any]) -> str:
    """The title of a study's drawing of one stored run (a ``compare`` run record): see
    :func:`run_title`."""
    extra = (record.get("result") or {}).get("extra") or {}
    method, network, view = str(record["method"]), str(record["network"]), record.get("view")
    metrics, target = record.get("metrics") or {}, extra.get("target")
    return run_title(method, network, record["seed"], record["K"], record.get("n"),
                     str(view or ""), metrics, target)  # fmt: skip


def run_title(
    method: str,
    network: str | None,
    seed: Any,
    clients: Any,
    samples: Any,
    view: str,
    metrics: Mapping[str, Any],
    target: Any = None,
) -> str:
    """A drawing's title: which run it is (method, network, seed, K, rows; a local structure's
    target) and the view its graphs and SHD are in, worded as its table's view note. Tables
    average over seeds and a drawing shows one of those runs, so it says "one run"."""
    setting = [f"seed {seed}" if seed is not None else "", f"K = {clients} clients"]
    if samples:
        setting.append(f"n = {int(samples):,} rows")
    if target:
        setting.append(f"target {target}")
    where = f" on {network}" if network else ""
    run = f"{method}{where}, one run: " + ", ".join(p for p in setting if p)
    statement = view_statement({method: view} if view else {})
    if "shd" in metrics:
        return f"{run}: SHD {metrics['shd']:g}\n{statement}"
    if "dag_shd" in metrics:  # a DAG output with no equivalence class: drawn as the DAG
        return (
            f"{run}: SHD {metrics['dag_shd']:g} in the DAG view (the DAG against the true DAG)\n"
            f"{statement}"
        )
    return f"{run}\n{statement}" if view else run


def result_drawing(result: Any, dag: Graph | None) -> tuple[Graph, Graph | None, str]:
    """What ``run --draw`` draws: a :class:`~fedcausal_flwr.result.Result`'s graph and truth as
    its summary's metrics compare them (a DAG output as its equivalence class, a local structure
    at its target; the graph alone without a truth), and the title naming the run and view."""
    from fedcausal_flwr.scoring import view_graphs

    if result.graph is None:
        raise ValueError(f"{result.method} returned no single graph to draw")
    data = result.config.get("data") or {}
    target = result.extra.get("target") if result.graph.kind == "LOCAL" else None
    title = run_title(
        result.method,
        data.get("network"),
        (result.config.get("run") or {}).get("seed"),
        data.get("clients", "?"),
        data.get("samples"),
        str(result.config.get("view") or "") if dag is not None else "",
        result.metrics if dag is not None else {},
        target,
    )
    if dag is None:
        return result.graph, None, title
    learned, truth = view_graphs(result.graph, dag, None if target is None else str(target))
    return learned, truth, title


def _head_tip(
    xy: np.ndarray, nodes: np.ndarray, node: int, other: int
) -> tuple[np.ndarray, np.ndarray]:
    """Where an arrowhead at ``node`` on the edge from ``other`` has its tip (the edge's end, just
    off the node's label box), and the unit vector from there back along the edge."""
    step = xy[other] - xy[node]
    unit = step / (float(np.hypot(*step)) or 1.0)
    end = _edge_ends(xy, nodes, node, other)[0]
    return end + _SHRINK_PT * GRAPH_DPI / 72 * unit, unit


class GraphDrawing(NamedTuple):
    """A drawn graph and its text artists (to measure them: ``figure.canvas.draw()``, then
    ``text.get_window_extent(figure.canvas.get_renderer())``)."""

    figure: Any
    node_labels: list[Any]
    edge_labels: list[Any]  # labels and numbers drawn on edges
    notes: list[Any]  # the labels with no room on their edge, under the drawing
    heading: Any = None  # the title: which run, in which view


#: a pair drawn: (its class, i, j), i < j in the truth's node order
DrawnPair = tuple[str, int, int]
#: an arrowhead: (its pair's index, the node it points at, its tip, the unit vector back along
#: the edge)
Arrowhead = tuple[int, int, np.ndarray, np.ndarray]


def _drawn_groups(
    learned: Graph, truth: Graph | None
) -> tuple[Graph, Graph, dict[str, list[tuple[int, int]]]]:
    """The two graphs a drawing draws and its pairs by class: the learned graph aligned to the
    truth and every pair classified; with no truth the learned graph stands in for it (the same
    object, so the legend can tell) and its edges are one class."""
    from fedcausal_flwr.metrics import align

    if truth is None:
        rows, cols = np.nonzero(np.triu(learned.marks != NONE, k=1))
        return learned, learned, {"edges": list(zip(rows.tolist(), cols.tolist(), strict=True))}
    learned = align(learned, truth)
    return learned, truth, classify_pairs(learned, truth)


def _node_frame(
    truth: Graph, seed: int, pos: Mapping[int, np.ndarray] | None
) -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
    """The nodes' label box sizes, their positions (``pos``, default the truth's layout, fitted
    to the drawing) and the graph's frame (width, height), all in drawing pixels."""
    node_sizes = _text_sizes(truth.names, NODE_FONT, _NODE_PAD)
    pos = _fit_to_frame(truth_layout(truth, seed) if pos is None else pos, node_sizes)
    xy = np.array([pos[v] for v in range(truth.n_nodes)])
    frame = (float(GRAPH_WIDTH_PX), float(xy[:, 1].max() + node_sizes[:, 1].max() / 2 + _GAP_PX))
    return node_sizes, xy, frame


def _wanted_labels(
    drawn_pairs: Sequence[DrawnPair],
    names: Sequence[str],
    edge_labels: Mapping[frozenset[str], str] | None,
) -> list[tuple[int, str]]:
    """The edge labels to write, as (index in ``drawn_pairs``, text): one for every learned pair
    that ``edge_labels`` labels (a missing pair was not learned and has no confidence)."""
    return [
        (k, text)
        for k, (category, i, j) in enumerate(drawn_pairs)
        if category != "missing"
        and (text := (edge_labels or {}).get(frozenset((names[i], names[j]))))
    ]


def _arrowheads(
    drawn_pairs: Sequence[DrawnPair],
    learned: Graph,
    truth: Graph,
    xy: np.ndarray,
    node_sizes: np.ndarray,
) -> list[Arrowhead]:
    """Every arrowhead of the drawing, at each end a pair's drawn graph marks with an arrow (the
    truth's marks for a missing pair, the learned graph's for the others)."""
    return [
        (k, node, *_head_tip(xy, node_sizes, node, other))
        for k, (category, i, j) in enumerate(drawn_pairs)
        for node, other in ((i, j), (j, i))
        if (truth if category == "missing" else learned).marks[other, node] == ARROW
    ]


def _label_spots(
    xy: np.ndarray,
    node_sizes: np.ndarray,
    drawn_pairs: Sequence[DrawnPair],
    wanted: Sequence[tuple[int, str]],
    frame: tuple[float, float],
    heads: Sequence[Arrowhead],
) -> list[tuple[np.ndarray | None, bool]]:
    """Where each wanted edge label goes (:func:`place_edge_labels`), kept off every
    arrowhead's box so a label never hides an edge's direction."""
    edges = [(i, j) for _, i, j in drawn_pairs]
    head_px = ARROWHEAD_PT * GRAPH_DPI / 72
    head_boxes = np.array([_boxes_at(tip + unit * head_px / 2, np.full(2, head_px))
                           for _, _, tip, unit in heads]).reshape(-1, 4)  # fmt: skip
    return place_edge_labels(
        xy, node_sizes, edges, [k for k, _ in wanted], [t for _, t in wanted], frame, head_boxes
    )


def _graph_axes(frame: tuple[float, float]) -> tuple[Any, Any, Any]:
    """A figure as wide as a drawing, its Agg canvas, and bare axes whose units are the
    graph frame's drawing pixels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(GRAPH_WIDTH_PX / GRAPH_DPI, 10), dpi=GRAPH_DPI)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, frame[0])
    ax.set_ylim(0, frame[1])
    return fig, canvas, ax


def _draw_nodes(ax: Any, xy: np.ndarray, names: Sequence[str]) -> list[Any]:
    """Each node's name in a box at its position; edges end at these boxes."""
    return [
        ax.text(float(xy[v][0]), float(xy[v][1]), name, ha="center", va="center",
                fontsize=NODE_FONT, zorder=4,
                bbox={"boxstyle": f"round,pad={_NODE_PAD}", "fc": "#e8eef7", "ec": "0.3"})
        for v, name in enumerate(names)
    ]  # fmt: skip


def _draw_edges(
    ax: Any,
    drawn_pairs: Sequence[DrawnPair],
    learned: Graph,
    truth: Graph,
    xy: np.ndarray,
    node_sizes: np.ndarray,
    nodes: Sequence[Any],
) -> bool:
    """Each pair's line in its class's style, from label box to label box, and a small hollow
    circle at each circle mark; whether any circle was drawn (the legend then says what one
    means). Arrowheads are drawn apart (:func:`_draw_arrowheads`)."""
    circles = False
    for category, i, j in drawn_pairs:
        style = EDGE_STYLES.get(category, EDGE_STYLES["correct"])
        graph = truth if category == "missing" else learned
        at_i, at_j = int(graph.marks[j, i]), int(graph.marks[i, j])
        ax.annotate(  # the edge's line, in its class's style, from box to box
            "",
            xy=xy[j],
            xytext=xy[i],
            zorder=1,
            arrowprops={
                "arrowstyle": "-",
                "color": style["color"],
                "linestyle": style["linestyle"],
                "lw": style["lw"],
                "patchA": nodes[i].get_bbox_patch(),  # edges end at the label's box
                "patchB": nodes[j].get_bbox_patch(),
                "shrinkA": _SHRINK_PT,
                "shrinkB": _SHRINK_PT,
            },
        )
        for node, other, mark in ((i, j, at_i), (j, i, at_j)):
            if mark == CIRCLE:  # just past the node's label box, on the edge
                end = _edge_ends(xy, node_sizes, node, other)[0]
                unit = (xy[other] - xy[node]) / (float(np.hypot(*(xy[other] - xy[node]))) or 1)
                ax.plot(*(end + 6 * unit), marker="o", mfc="white", mec=style["color"], ms=6,
                        zorder=2)  # fmt: skip
                circles = True
    return circles


def _draw_arrowheads(ax: Any, heads: Sequence[Arrowhead], drawn_pairs: Sequence[DrawnPair]) -> None:
    """Each arrowhead, filled and solid in its pair's colour whatever the line's style: a dotted
    head does not read."""
    from matplotlib.patches import FancyArrowPatch

    head_px = ARROWHEAD_PT * GRAPH_DPI / 72
    for k, _, tip, unit in heads:
        style = EDGE_STYLES.get(drawn_pairs[k][0], EDGE_STYLES["correct"])
        (x0, y0), (x1, y1) = (tip + head_px * unit).tolist(), tip.tolist()
        ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle=_HEADSTYLE,
                                     mutation_scale=ARROWHEAD_PT, color=style["color"],
                                     lw=style["lw"], shrinkA=0, shrinkB=0, zorder=2))  # fmt: skip


def _draw_edge_labels(
    ax: Any,
    wanted: Sequence[tuple[int, str]],
    spots: Sequence[tuple[np.ndarray | None, bool]],
    drawn_pairs: Sequence[DrawnPair],
    names: Sequence[str],
) -> tuple[list[Any], list[str]]:
    """Each edge label at its spot, boxed in its pair's colour; a label with no room on its edge
    is numbered there (when even the number fits) and goes to the notes. Returns the texts drawn
    on edges and the notes' lines."""
    on_edges: list[Any] = []
    notes_text: list[str] = []
    for (k, text), (spot, whole) in zip(wanted, spots, strict=True):
        category, i, j = drawn_pairs[k]
        colour = EDGE_STYLES.get(category, EDGE_STYLES["correct"])["color"]
        if not whole:
            number = len(notes_text) + 1
            pair_text = f"{names[i]} – {names[j]}: {text}"
            notes_text.append(f"{number}  {pair_text}" if spot is not None else pair_text)
            text = str(number)
        if spot is not None:
            box = {"boxstyle": f"round,pad={_EDGE_PAD}", "fc": "white", "ec": colour, "lw": 0.6}
            on_edges.append(ax.text(float(spot[0]), float(spot[1]), text, fontsize=EDGE_FONT,
                                    ha="center", va="center", zorder=3, color=colour,
                                    bbox=box))  # fmt: skip
    return on_edges, notes_text


def _draw_legend(
    fig: Any,
    groups: Mapping[str, Sequence[tuple[int, int]]],
    circles: bool,
    labelled: bool,
    numbered: bool,
    compared: str,
) -> Any:
    """The legend under the graph, titled by what is compared: each pair class with its count
    and meaning, then what a circle mark, a label on an edge (``labelled``) and a number on an
    edge (``numbered``) mean, for those the drawing has."""
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], color=s["color"], linestyle=s["linestyle"], lw=s["lw"])
        for s in (EDGE_STYLES.get(c, EDGE_STYLES["correct"]) for c in groups)
    ]
    names = [f"{c} ({len(p)}): {EDGE_MEANINGS.get(c, c)}" for c, p in groups.items()]
    if circles:
        handles.append(Line2D([], [], marker="o", mfc="white", mec="black", ls="none"))
        names.append("circle mark: tail or arrowhead, undecided")
    if labelled:
        handles.append(Line2D([], [], ls="none"))
        names.append("on an edge: its confidence (deciding p-value, share of clients keeping it, "
                     "share of bootstrap resamples with it)")  # fmt: skip
    if numbered:
        handles.append(Line2D([], [], ls="none"))
        names.append("a number on an edge: its label had no room there; see the notes below")
    return fig.legend(handles, names, loc="upper left", fontsize=9.5, handlelength=3,
                      title=compared, title_fontsize=10, frameon=False,
                      alignment="left")  # fmt: skip


def _draw_title(fig: Any, title: str, compared: str) -> tuple[Any, float]:
    """The title (default: what is compared), each line wrapped to the drawing's width, and the
    height in pixels of its band over the graph: one line in ``_TITLE_PX``, a line height more
    per further line."""
    lines = (title or f"learned {compared}").splitlines()
    wrapped = "\n".join(textwrap.fill(line, TITLE_CHARS) for line in lines)
    heading = fig.text(0.5, 1, wrapped, fontsize=TITLE_FONT, ha="center", va="top")
    title_px = _TITLE_PX + wrapped.count("\n") * TITLE_FONT * 1.25 * GRAPH_DPI / 72
    return heading, title_px


def _stack_parts(
    fig: Any,
    ax: Any,
    canvas: Any,
    frame: tuple[float, float],
    heading: Any,
    title_px: float,
    legend: Any,
    notes: Sequence[Any],
) -> None:
    """Stack title, graph, legend and notes from the top, in pixels (the legend and notes as
    the renderer measures them, the notes in as many columns as fit), then size the figure to
    fit them all."""
    renderer = canvas.get_renderer()
    legend_h = legend.get_window_extent(renderer).height
    note_w = max((t.get_window_extent(renderer).width for t in notes), default=0.0) + 24
    per_row = max(1, int((GRAPH_WIDTH_PX - 40) // note_w))
    line_h = NODE_FONT * 1.5 * GRAPH_DPI / 72
    notes_h = (line_h * (1 + -(-len(notes) // per_row)) + _GAP_PX) if notes else 0.0
    height = title_px + frame[1] + legend_h + notes_h + 2 * _GAP_PX
    fig.set_size_inches(GRAPH_WIDTH_PX / GRAPH_DPI, height / GRAPH_DPI)
    ax.set_position((0, (height - title_px - frame[1]) / height, 1, frame[1] / height))
    heading.set_position((0.5, 1 - 12 / height))
    top = height - title_px - frame[1] - _GAP_PX
    legend.set_bbox_to_anchor((14 / GRAPH_WIDTH_PX, top / height), transform=fig.transFigure)
    top -= legend_h + _GAP_PX
    if notes:
        fig.text(20 / GRAPH_WIDTH_PX, top / height, "Edge labels with no room on their edge:",
                 fontsize=9, va="top", weight="bold")  # fmt: skip
    for k, note in enumerate(notes):
        row, col = divmod(k, per_row)
        x, y = 20 + col * note_w, top - line_h * (row + 1)
        note.set_position((x / GRAPH_WIDTH_PX, y / height))


def draw_graph_vs_truth(
    learned: Graph,
    truth: Graph | None,
    title: str = "",
    seed: int = 0,
    edge_labels: Mapping[frozenset[str], str] | None = None,
    pos: Mapping[int, np.ndarray] | None = None,
) -> GraphDrawing:
    """The drawing :func:`plot_graph_vs_truth` saves, as a figure (see there)."""
    _pyplot()
    learned, truth, groups = _drawn_groups(learned, truth)
    node_sizes, xy, frame = _node_frame(truth, seed, pos)
    drawn_pairs = [(c, i, j) for c, pairs in groups.items() for i, j in pairs]
    wanted = _wanted_labels(drawn_pairs, truth.names, edge_labels)
    heads = _arrowheads(drawn_pairs, learned, truth, xy, node_sizes)
    spots = _label_spots(xy, node_sizes, drawn_pairs, wanted, frame, heads)

    fig, canvas, ax = _graph_axes(frame)
    nodes = _draw_nodes(ax, xy, truth.names)
    circles = _draw_edges(ax, drawn_pairs, learned, truth, xy, node_sizes, nodes)
    _draw_arrowheads(ax, heads, drawn_pairs)
    on_edges, notes_text = _draw_edge_labels(ax, wanted, spots, drawn_pairs, truth.names)
    compared = compared_text(learned, None if truth is learned else truth)
    legend = _draw_legend(fig, groups, circles, bool(wanted), bool(notes_text), compared)
    notes = [fig.text(0, 0, line, fontsize=9, va="top") for line in notes_text]
    heading, title_px = _draw_title(fig, title, compared)
    _stack_parts(fig, ax, canvas, frame, heading, title_px, legend, notes)
    return GraphDrawing(fig, nodes, on_edges, notes, heading)


def plot_graph_vs_truth(
    learned: Graph,
    truth: Graph | None,
    path: str | Path,
    title: str = "",
    seed: int = 0,
    edge_labels: Mapping[frozenset[str], str] | None = None,
    pos: Mapping[int, np.ndarray] | None = None,
) -> Path:
    """Draw the learned graph's edges (the truth's for missing ones) styled by category; with
    no ``truth``, the learned graph alone. A PNG :data:`GRAPH_WIDTH_PX` wide.

    Arrowheads show the drawn graph's marks; a circle mark is a small hollow circle next to its
    node's box. ``edge_labels`` (by the pair of names) are written on learned edges: each edge's
    confidence, such as its deciding p-value. ``pos``: node positions (:func:`truth_layout`;
    default the truth's), shared by the drawings of one study so they compare at a glance.
    """
    drawing = draw_graph_vs_truth(learned, truth, title, seed, edge_labels, pos)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    drawing.figure.savefig(path, dpi=GRAPH_DPI)
    return path


def plot_study(
    frame: pd.DataFrame,
    out: str | Path,
    metrics: Sequence[str],
    graph: tuple[Graph, Graph, str] | None = None,
) -> list[Path]:
    """Every plot of a study into ``out/plots``: metrics vs K, costs, and ``graph`` (a learned
    graph, its truth and a title) drawn over each other."""
    plot_dir = Path(out) / "plots"
    ok = _ok(frame)
    if ok.empty:
        return []
    paths = [
        plot_metric_vs_clients(frame, metric, plot_dir / f"{metric}_vs_K.png")
        for metric in metrics
        if metric in ok.columns
    ]
    paths.append(plot_costs(frame, plot_dir / "costs_vs_K.png"))
    if graph is not None:
        learned, truth, title = graph
        paths.append(plot_graph_vs_truth(learned, truth, plot_dir / "graph_vs_truth.png", title))
    return paths


def _save(fig: Any, path: str | Path) -> Path:
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
