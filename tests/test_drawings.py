"""Graph drawings a reader can read: one layout per study, labels on boxes that never overlap,
no edge under a label, label text at least 10 px tall at 100% zoom in the report, and a legend
that says what each mark class means. Boxes are measured with matplotlib's own renderer."""

import re

import matplotlib.image
import numpy as np
import pytest

from fedcausal_flwr.data import load_network
from fedcausal_flwr.graphs.graph import NONE, Graph
from fedcausal_flwr.graphs.truth import dag_to_cpdag
from fedcausal_flwr.plots import (
    EDGE_MEANINGS,
    GRAPH_DPI,
    draw_graph_vs_truth,
    plot_graph_vs_truth,
    truth_layout,
)
from fedcausal_flwr.report import CSS

PAGE_PX = 1280  # the page width a reader's window gives the report


@pytest.fixture(scope="module")
def alarm() -> Graph:
    return dag_to_cpdag(load_network("alarm").dag)


def _pairs(graph: Graph) -> list[tuple[int, int]]:
    rows, cols = np.nonzero(np.triu(graph.marks != NONE, k=1))
    return list(zip(rows.tolist(), cols.tolist(), strict=True))


def _every_edge_labelled(graph: Graph) -> dict[frozenset[str], str]:
    """A label on every edge, as long as the report's: a p-value or a vote share."""
    return {
        frozenset((graph.names[i], graph.names[j])): "p 1.8e-269" if k % 2 else "kept by 100%"
        for k, (i, j) in enumerate(_pairs(graph))
    }


def _extents(texts, renderer) -> np.ndarray:
    """(x0, y0, x1, y1) display pixels of each text's background box."""
    boxes = [t.get_bbox_patch().get_window_extent(renderer) for t in texts]
    return np.array([[b.x0, b.y0, b.x1, b.y1] for b in boxes])


def test_alarm_labels_sit_on_boxes_apart_and_off_other_edges(alarm):
    labels = _every_edge_labelled(alarm)
    drawing = draw_graph_vs_truth(alarm, alarm, "ALARM", edge_labels=labels)
    fig = drawing.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = drawing.node_labels + drawing.edge_labels
    assert len(drawing.node_labels) == alarm.n_nodes and len(drawing.edge_labels) > 20
    # every label has a background box; edge labels' boxes are white and above the edges
    assert all(t.get_bbox_patch() is not None for t in texts)
    assert all(t.get_bbox_patch().get_facecolor()[:3] == (1, 1, 1) for t in drawing.edge_labels)
    arrows = [t for t in fig.axes[0].texts if getattr(t, "arrow_patch", None) is not None]
    assert len(arrows) == len(_pairs(alarm))
    assert min(t.get_zorder() for t in texts) > max(a.get_zorder() for a in arrows)
    # every label is drawn on its edge, numbered there, or listed in the notes (by its nodes)
    whole = [t for t in drawing.edge_labels if not t.get_text().isdigit()]
    assert len(whole) + len(drawing.notes) == len(labels)
    assert len(whole) > len(labels) / 2

    # no two label boxes (node or edge) intersect, nor two label texts
    for extents in (_extents(texts, renderer),
                    np.array([t.get_window_extent(renderer).extents for t in texts])):  # fmt: skip
        a, b = np.triu_indices(len(extents), k=1)
        over_x = np.minimum(extents[a, 2], extents[b, 2]) - np.maximum(extents[a, 0], extents[b, 0])
        over_y = np.minimum(extents[a, 3], extents[b, 3]) - np.maximum(extents[a, 1], extents[b, 1])
        clash = (over_x > 0) & (over_y > 0)
        assert not clash.any(), [(texts[i].get_text(), texts[j].get_text())
                                 for i, j in zip(a[clash], b[clash], strict=True)]  # fmt: skip

    # no edge runs under an edge label but its own (whose line passes through the label's centre)
    data = fig.axes[0].transData
    starts = data.transform(np.array([a.xyann for a in arrows]))
    ends = data.transform(np.array([a.xy for a in arrows]))
    along = np.linspace(0, 1, 400)[None, :, None]
    points = starts[:, None, :] + along * (ends - starts)[:, None, :]  # (edges, 400, 2)
    boxes = _extents(drawing.edge_labels, renderer)
    inner = boxes + [1, 1, -1, -1]
    low, high = inner[:, None, None, :2], inner[:, None, None, 2:]
    under = ((points[None] > low) & (points[None] < high)).all(axis=3).any(axis=2)
    centres = (boxes[:, :2] + boxes[:, 2:]) / 2
    step = ends - starts
    t = np.einsum("led,ed->le", centres[:, None, :] - starts[None], step) / (step**2).sum(1)
    nearest = starts[None] + t.clip(0, 1)[..., None] * step[None]
    through_centre = np.hypot(*(nearest - centres[:, None, :]).transpose(2, 0, 1)) < 1.5
    assert under.any(axis=1).all()  # each label sits on its own edge ...
    assert not (under & ~through_centre).any()  # ... and on no other
    assert (under.sum(axis=1) == 1).all()


def test_one_layout_for_every_drawing_of_a_study(alarm):
    pos = truth_layout(alarm)
    marks = alarm.marks.copy()
    (i, j), (k, m) = _pairs(alarm)[:2]
    marks[i, j] = marks[j, i] = NONE  # a missing edge
    marks[k, m], marks[m, k] = marks[m, k], marks[k, m]  # a changed one
    other = Graph(alarm.names, marks, alarm.kind)

    def places(drawing) -> np.ndarray:
        fig = drawing.figure
        fig.canvas.draw()
        centres = [t.get_window_extent(fig.canvas.get_renderer()) for t in drawing.node_labels]
        top = fig.get_figheight() * fig.dpi  # from the top: the legends below differ in height
        return np.array([[(c.x0 + c.x1) / 2, top - (c.y0 + c.y1) / 2] for c in centres])

    first = places(draw_graph_vs_truth(alarm, alarm, "one", pos=pos))
    second = places(draw_graph_vs_truth(other, alarm, "two", pos=pos,
                                        edge_labels=_every_edge_labelled(other)))  # fmt: skip
    assert np.allclose(first, second, atol=0.01)
    assert np.allclose(first, places(draw_graph_vs_truth(alarm, alarm, "default")), atol=0.01)
    assert np.ptp(first[:, 0]) > 800  # the drawing's width is used


def _content_width(page: int) -> float:
    """The report's content column on a ``page`` px wide window, as its CSS makes it."""
    body = re.search(r"body\{([^}]*)\}", CSS).group(1)
    most = float(re.search(r"max-width:(\d+)px", body).group(1))
    padding = re.search(r"padding:([\d.]+)em ([\d.]+)em", body)
    side = float(padding.group(2)) * 16  # em of the browser's default 16 px font
    assert re.search(r"img\{max-width:100%", CSS)  # an image shrinks to the column, never grows
    return min(most, page - 2 * side)


def test_node_labels_are_at_least_10px_tall_at_100_percent_in_the_report(alarm, tmp_path):
    path = plot_graph_vs_truth(alarm, alarm, tmp_path / "alarm.png", "ALARM",
                               edge_labels=_every_edge_labelled(alarm))  # fmt: skip
    image_width = matplotlib.image.imread(path).shape[1]
    shown = min(image_width, _content_width(PAGE_PX))
    drawing = draw_graph_vs_truth(alarm, alarm, "ALARM", edge_labels=_every_edge_labelled(alarm))
    fig = drawing.figure
    assert fig.get_figwidth() * GRAPH_DPI == pytest.approx(image_width)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    heights = [t.get_window_extent(renderer).height * shown / image_width
               for t in drawing.node_labels]  # fmt: skip
    assert min(heights) >= 10, min(heights)
    edge_heights = [t.get_window_extent(renderer).height * shown / image_width
                    for t in drawing.edge_labels]  # fmt: skip
    assert min(edge_heights) >= 10, min(edge_heights)
    assert path.stat().st_size < 600_000  # the report inlines it as base64


def test_legend_explains_every_mark_class_it_shows():
    names = ["a", "b", "c", "d", "e"]
    truth = Graph.from_edges(names, [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e")])
    marks = Graph.from_edges(names, [("a", "b"), ("c", "b"), ("a", "e"), ("d", "e")]).marks
    marks[4, 3] = marks[3, 4]  # d - e undirected: adjacent in both, other marks, not reversed
    learned = Graph(names, marks, truth.kind)
    drawing = draw_graph_vs_truth(learned, truth, edge_labels={frozenset("ab"): "p 0.01"})
    legend = drawing.figure.legends[0]
    entries = [t.get_text() for t in legend.get_texts()]
    for category, count in (("correct", 1), ("reversed", 1), ("other mark", 1), ("extra", 1),
                            ("missing", 1)):  # fmt: skip
        line = next(e for e in entries if e.startswith(f"{category} ("))
        assert line == f"{category} ({count}): {EDGE_MEANINGS[category]}"
    assert "not simply reversed" in EDGE_MEANINGS["other mark"]
    assert any(e.startswith("on an edge: its confidence") for e in entries)
