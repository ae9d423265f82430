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
from typing import Any

import numpy as np
import pandas as pd

from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph

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
    for ax, network in zip(axes[0], networks, strict=False):
        per_net = ok[ok["network"] == network]
        _method_lines(ax, per_net, metric)
        _k_axis(ax, per_net["K"])
        ax.set_title(setting_title(per_net, network), fontsize=10)
        ax.set_ylabel(ylabel or metric_label(metric))
        ax.margins(y=0.08)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if title:  # wrapped to the figure's width (about 11 characters an inch at 11 pt)
        width = int(fig.get_figwidth() * 11)
        lines = [textwrap.fill(line, width) for line in title.splitlines()]
        fig.suptitle("\n".join(lines), fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _method_lines(ax, per_net: pd.DataFrame, column: str) -> None:
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
            label=str(method) if same is None else f"{method} (= {same})",
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


_ARROWSTYLE = {
    (TAIL, ARROW): "-|>",
    (ARROW, TAIL): "<|-",
    (ARROW, ARROW): "<|-|>",
}


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
    height: float,
    iterations: int = 400,
) -> dict[int, np.ndarray]:
    """Move nodes apart until no two label boxes (``widths[v]`` x ``height``, layout units,
    centred on the node) overlap: each overlapping pair is pushed apart by its overlap along the
    axis where it is smaller, half each way, so a dense cluster opens up and the rest stays put."""
    nodes = sorted(pos)
    if len(nodes) < 2:
        return pos
    xy = np.array([pos[v] for v in nodes], dtype=float)
    w = np.asarray(widths, dtype=float)[nodes]
    i, j = np.triu_indices(len(nodes), k=1)
    gap_x, gap_y = (w[i] + w[j]) / 2 * 1.08, height * 1.25
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


def plot_graph_vs_truth(
    learned: Graph,
    truth: Graph | None,
    path: str | Path,
    title: str = "",
    seed: int = 0,
    edge_labels: Mapping[frozenset[str], str] | None = None,
) -> Path:
    """Draw the learned graph's edges (the truth's for missing ones) styled by category; with
    no ``truth``, the learned graph alone.

    Arrowheads show the drawn graph's marks; a circle mark is a small hollow circle near its node.
    ``edge_labels`` (by the pair of names) are written at the middle of learned edges: each edge's
    confidence, such as its deciding p-value.
    """
    import networkx as nx

    plt = _pyplot()
    from fedcausal_flwr.metrics import align

    if truth is None:
        truth = learned
        rows, cols = np.nonzero(np.triu(learned.marks != NONE, k=1))
        groups = {"edges": list(zip(rows.tolist(), cols.tolist(), strict=True))}
    else:
        learned = align(learned, truth)
        groups = classify_pairs(learned, truth)
    skeleton = nx.Graph()
    skeleton.add_nodes_from(range(truth.n_nodes))
    skeleton.add_edges_from(pair for pairs in groups.values() for pair in pairs)
    pos = graph_layout(skeleton, seed)
    size = max(5.0, 0.35 * truth.n_nodes + 3.0)
    # label boxes in layout units: the drawing area is about 0.8 * size inches across the span
    per_inch = float(np.ptp(np.array(list(pos.values())), axis=0).max() or 1.0) / (0.8 * size)
    widths = np.array([0.075 * len(name) + 0.12 for name in truth.names]) * per_inch
    pos = separate_labels(pos, widths, 0.24 * per_inch)
    fig, ax = plt.subplots(figsize=(size + 2, size))
    xy = np.array([pos[v] for v in range(truth.n_nodes)])
    ax.scatter(xy[:, 0], xy[:, 1], s=0)  # the axes' limits (text does not set them)
    span = float(np.ptp(xy, axis=0).max()) or 1.0
    boxes = {
        v: ax.text(*pos[v], name, ha="center", va="center", fontsize=8, zorder=3,
                   bbox={"boxstyle": "round,pad=0.35", "fc": "#e8eef7", "ec": "0.3"})
        for v, name in enumerate(truth.names)
    }  # fmt: skip
    for category, pairs in groups.items():
        style = EDGE_STYLES.get(category, EDGE_STYLES["correct"])
        drawn = truth if category == "missing" else learned
        for i, j in pairs:
            at_i, at_j = int(drawn.marks[j, i]), int(drawn.marks[i, j])
            ax.annotate(
                "",
                xy=pos[j],
                xytext=pos[i],
                arrowprops={
                    "arrowstyle": _ARROWSTYLE.get((at_i, at_j), "-"),
                    "color": style["color"],
                    "linestyle": style["linestyle"],
                    "lw": style["lw"],
                    "patchA": boxes[i].get_bbox_patch(),  # edges end at the label's box
                    "patchB": boxes[j].get_bbox_patch(),
                    "shrinkA": 3,
                    "shrinkB": 3,
                    "mutation_scale": 14,
                },
            )
            label = (
                None
                if edge_labels is None or category == "missing"
                else edge_labels.get(frozenset((truth.names[i], truth.names[j])))
            )
            if label:
                middle = (np.asarray(pos[i]) + np.asarray(pos[j])) / 2
                box = {"fc": "white", "ec": "none", "pad": 0.3}
                ax.text(*middle, label, fontsize=7, ha="center", va="center", zorder=2,
                        color=style["color"], bbox=box)  # fmt: skip
            for node, other, mark in ((i, j, at_i), (j, i, at_j)):
                if mark == CIRCLE:  # a fixed distance from the node, past its label's box
                    step = np.asarray(pos[other]) - np.asarray(pos[node])
                    length = float(np.hypot(*step)) or 1.0
                    spot = np.asarray(pos[node]) + min(0.4 * length, 0.05 * span) * step / length
                    ax.plot(*spot, marker="o", mfc="white", mec=style["color"], ms=6)
        ax.plot([], [], color=style["color"], linestyle=style["linestyle"], lw=style["lw"],
                label=f"{category} ({len(pairs)})")  # fmt: skip
    if edge_labels:
        note = (
            "on an edge: its confidence (deciding\np-value, share of clients keeping it,\n"
            "share of bootstrap resamples with it)"
        )
        ax.plot([], [], " ", label=note)
    ax.margins(0.06)
    against = "" if truth is learned else f" against the true {truth.kind}"
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=9,
              title=f"{learned.kind}{against}")  # fmt: skip
    ax.set_title(title or f"learned {learned.kind}{against}")
    ax.set_axis_off()
    fig.tight_layout()
    return _save(fig, path)


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
