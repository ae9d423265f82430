"""PNG plots of a comparison study (matplotlib, Agg backend; imported only when plotting).

* :func:`plot_metric_vs_clients`: one panel per network, a metric against K, one line per method
  with mean ± sd error bars over seeds.
* :func:`plot_costs`: rounds and bytes moved (up + down) against K per method.
* :func:`plot_graph_vs_truth`: a learned graph over its truth on a networkx layout, each pair
  styled by what went right or wrong (correct, extra, missing, reversed, other mark).
"""

from __future__ import annotations

from collections.abc import Sequence
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


def _k_axis(ax: Any, ks: Sequence[int]) -> None:
    ks = sorted(set(int(k) for k in ks))
    if len(ks) > 1 and ks[0] > 0 and ks[-1] / ks[0] >= 4:
        ax.set_xscale("log", base=2)
    ax.set_xticks(ks)
    ax.set_xticklabels([str(k) for k in ks])
    ax.set_xlabel("clients K")


def plot_metric_vs_clients(frame: pd.DataFrame, metric: str, path: str | Path) -> Path:
    """``metric`` against K, a panel per network, a line per method (mean ± sd over seeds)."""
    plt = _pyplot()
    ok = _ok(frame)
    if metric not in ok.columns:
        raise KeyError(f"no metric {metric!r} in the results; have {sorted(ok.columns)}")
    networks = list(dict.fromkeys(ok["network"]))
    fig, axes = plt.subplots(
        1, max(len(networks), 1), figsize=(5 * max(len(networks), 1), 3.8), squeeze=False
    )
    for ax, network in zip(axes[0], networks, strict=False):
        per_net = ok[ok["network"] == network]
        _method_lines(ax, per_net, metric)
        _k_axis(ax, per_net["K"])
        ax.set_title(network)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def _method_lines(ax, per_net: pd.DataFrame, column: str) -> None:
    """One error-bar line per method: mean +- sd of ``column`` over seeds, against K (derived
    rows such as local-avg dashed)."""
    for method, rows in per_net.groupby("method", sort=False):
        stats = rows.groupby("K")[column].agg(["mean", "std"]).sort_index()
        ax.errorbar(
            stats.index,
            stats["mean"],
            yerr=stats["std"].fillna(0.0),
            marker="o",
            capsize=3,
            label=method,
            linestyle="--" if method in DERIVED_METHODS else "-",
        )


def plot_costs(frame: pd.DataFrame, path: str | Path) -> Path:
    """Rounds and bytes (up + down) against K per method (log scale), a column per network."""
    plt = _pyplot()
    ok = _ok(frame)
    ok = ok[~ok["method"].isin(DERIVED_METHODS)].assign(
        bytes_total=lambda f: f["bytes_up"] + f["bytes_down"]
    )
    networks = list(dict.fromkeys(ok["network"]))
    cols = max(len(networks), 1)
    fig, axes = plt.subplots(2, cols, figsize=(5 * cols, 7), squeeze=False)
    for col, network in enumerate(networks):
        per_net = ok[ok["network"] == network]
        for row, (column, label) in enumerate(
            (("rounds", "rounds"), ("bytes_total", "bytes up + down"))
        ):
            ax = axes[row][col]
            _method_lines(ax, per_net, column)
            if (per_net[column] > 0).any():
                ax.set_yscale("log")
            _k_axis(ax, per_net["K"])
            ax.set_ylabel(label)
            ax.set_title(f"{network}: {label}")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
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


def plot_graph_vs_truth(
    learned: Graph, truth: Graph | None, path: str | Path, title: str = "", seed: int = 0
) -> Path:
    """Draw the learned graph's edges (the truth's for missing ones) styled by category; with
    no ``truth``, the learned graph alone.

    Arrowheads show the drawn graph's marks; a circle mark is a small hollow circle near its node.
    """
    import networkx as nx

    plt = _pyplot()
    from fedcausal_flwr.metrics import align

    if truth is None:
        truth = learned
        pairs = np.nonzero(np.triu(learned.marks != NONE, k=1))
        groups = {"edges": list(zip(pairs[0].tolist(), pairs[1].tolist(), strict=True))}
    else:
        learned = align(learned, truth)
        groups = classify_pairs(learned, truth)
    skeleton = nx.Graph()
    skeleton.add_nodes_from(range(truth.n_nodes))
    skeleton.add_edges_from(pair for pairs in groups.values() for pair in pairs)
    pos = graph_layout(skeleton, seed)
    size = max(5.0, 0.35 * truth.n_nodes + 3.0)
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
            for node, other, mark in ((i, j, at_i), (j, i, at_j)):
                if mark == CIRCLE:  # a fixed distance from the node, past its label's box
                    step = np.asarray(pos[other]) - np.asarray(pos[node])
                    length = float(np.hypot(*step)) or 1.0
                    spot = np.asarray(pos[node]) + min(0.4 * length, 0.05 * span) * step / length
                    ax.plot(*spot, marker="o", mfc="white", mec=style["color"], ms=6)
        ax.plot([], [], color=style["color"], linestyle=style["linestyle"], lw=style["lw"],
                label=f"{category} ({len(pairs)})")  # fmt: skip
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
