"""The files of a results folder (``compare``'s layout, see :mod:`fedcausal_flwr.compare`): run
records under ``runs/``, ``results.csv`` rebuilt from them, the sweep's plan in ``study.json``,
and the summaries and graphs read back from them (by ``compare`` and by the report)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fedcausal_flwr.outputs import write_text
from fedcausal_flwr.scoring import view_graphs

DEFAULT_METRICS = ("shd", "adj_f1", "arrow_f1")
ROW_COLUMNS = (
    "method", "view", "network", "n", "K", "partition", "seed", "options", "status", "error",
    "rounds", "bytes_up", "bytes_down", "wall_s", "data_hash", "key",
)  # fmt: skip


def network_for(spec: str, seed: int) -> Any:
    """The :class:`Network` behind a network spec (see :mod:`fedcausal_flwr.data.specs`)."""
    from fedcausal_flwr.data.specs import network_for as build

    return build(spec, seed)


def json_default(value: Any) -> Any:
    """numpy scalars and arrays (metrics, options) as JSON-native values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot store {type(value).__name__} value {value!r} in a run record")


#: the sweep's plan (settings, metrics, run keys), read by ``fedcausal-flwr report``
STUDY_FILE = "study.json"


def record_path(out: Path, key: str) -> Path:
    return Path(out) / "runs" / f"{key}.json"


def write_record(out: Path, record: dict[str, Any]) -> Path:
    """Write atomically (temp file + rename), so a killed sweep never leaves a half record, nor
    a full disk (an :class:`~fedcausal_flwr.outputs.OutputError`, an ``OSError``)."""
    return write_text(
        record_path(out, record["key"]), json.dumps(record, indent=1, sort_keys=True) + "\n"
    )


def read_record(path: Path) -> dict[str, Any] | None:
    """A stored record, or None when the file is unreadable (it is then re-run)."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) and "key" in record else None


# ============================================================================ tables
def record_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The results.csv rows of one record: the run, plus local-avg / local-best-oracle."""
    base = {col: record.get(col, "") for col in ROW_COLUMNS}
    base["options"] = json.dumps(record.get("options", {}), sort_keys=True)
    base["error"] = record.get("error") or ""
    rows = [{**base, **_scalar_metrics(record.get("metrics", {}))}]
    for label, metrics in sorted(record.get("derived", {}).items()):
        rows.append({**base, "method": label, **_scalar_metrics(metrics)})
    return rows


def _scalar_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and k != "client"}


def read_records(out: str | Path) -> list[dict[str, Any]]:
    """Every readable run record of ``out/runs``, in key order."""
    paths = sorted((Path(out) / "runs").glob("*.json"))
    return [r for r in map(read_record, paths) if r is not None]


def load_results(out: str | Path) -> pd.DataFrame:
    """Every stored run of ``out/runs`` as one tidy frame (one row per run and derived row)."""
    return results_frame(read_records(out))


def results_frame(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """``records`` as one tidy frame: one row per run and derived row, results.csv's columns."""
    rows = [row for record in records for row in record_rows(record)]
    frame = pd.DataFrame(rows, columns=None if rows else list(ROW_COLUMNS))
    if frame.empty:
        return frame
    metric_cols = sorted(c for c in frame.columns if c not in ROW_COLUMNS)
    ordered = ["method", "view", "network", "n", "K", "partition", "seed", *metric_cols]
    ordered += ["rounds", "bytes_up", "bytes_down", "wall_s", "status", "error"]
    ordered += ["options", "data_hash", "key"]
    frame = frame[ordered].sort_values(["network", "n", "partition", "K", "seed", "method", "key"])
    return frame.reset_index(drop=True)


def write_results(out: str | Path, frame: pd.DataFrame | None = None) -> tuple[Path, pd.DataFrame]:
    """Rebuild ``out/results.csv`` from the run records (so rows are never duplicated), or write
    ``frame``, :func:`load_results` of them; atomically, so no reader sees half a table."""
    frame = load_results(out) if frame is None else frame
    return write_text(Path(out) / "results.csv", frame.to_csv(index=False)), frame


def summarise(frame: pd.DataFrame, metrics: Sequence[str] = DEFAULT_METRICS) -> pd.DataFrame:
    """Mean, sd and count of each metric per network x method x K over successful runs, with
    the view the method's numbers are in (``view``)."""
    ok = frame[frame["status"] == "ok"] if not frame.empty else frame
    present = [m for m in metrics if m in ok.columns]
    if ok.empty or not present:
        return pd.DataFrame(columns=["network", "method", "view", "K", "runs"])
    keys = ["network", "method", "K"]
    groups = ok.groupby(keys, sort=False)[present]
    table = groups.agg(["mean", "std"])
    table.columns = [f"{m}_{stat}" for m, stat in table.columns]
    table["runs"] = groups.size()
    if "view" in ok.columns:
        table["view"] = ok.groupby(keys, sort=False)["view"].first()
    return table.reset_index()


def method_views(table: pd.DataFrame) -> dict[str, str]:
    """Each method's scoring view (from results.csv's or a summary's ``view`` column)."""
    if "view" not in table.columns or table.empty:
        return {}
    views = table.dropna(subset=["view"]).groupby("method", sort=False)["view"].first()
    return {str(m): str(v) for m, v in views.items() if str(v)}


def view_text(view: str) -> str:
    """A view in words (the common views spelled out; a method's own view as it declared it)."""
    from fedcausal_flwr.scoring import VIEW_TEXT

    return VIEW_TEXT.get(view, view)


def view_tag(view: str) -> str:
    """A view's short name, for row and legend labels: a common view's key (``CPDAG``), a
    declared view's words before its first colon (``local structure``), else the whole view."""
    return view.partition(":")[0].strip() if ":" in view else view


def view_statement(views: dict[str, str], methods: Sequence[str] | None = None) -> str:
    """The sentence beside a table or plot saying which view its numbers are in: one view for
    every method, or each method's (``[tag] what it compares: methods``)."""
    shown = {m: v for m, v in views.items() if methods is None or m in methods}
    distinct = list(dict.fromkeys(shown.values()))
    if not distinct:
        return "view: as each method scores itself"
    if len(distinct) == 1:
        return f"view: {view_text(distinct[0])}"
    parts = []
    for view in distinct:
        tag, text = view_tag(view), view_text(view)
        text = text[len(tag) + 1 :].strip() if text.startswith(f"{tag}:") else text
        named = f"[{tag}]" if text == tag else f"[{tag}] {text}"
        parts.append(f"{named}: {', '.join(m for m, w in shown.items() if w == view)}")
    return "views: " + "; ".join(parts)


def method_label(method: str, views: dict[str, str]) -> str:
    """A method's row or legend label, with its view's tag in brackets when a table mixes
    views (:func:`view_statement` beside the table says what each tag means)."""
    if len(set(views.values())) <= 1 or method not in views:
        return method
    return f"{method} [{view_tag(views[method])}]"


def cell_text(mean: float, sd: float, runs: int) -> str:
    """A table cell: ``mean ± sd`` over seeds, or the value and "(1 seed)" for a single run."""
    if runs == 1:
        return f"{mean:.3g} (1 seed)"
    return f"{mean:.3g} ± {sd:.2g}"


def summary_blocks(
    summary: pd.DataFrame, metrics: Sequence[str]
) -> Iterator[tuple[str, str, list[int], list[tuple[str, list[tuple[float, float, int] | None]]]]]:
    """Per network and metric: ``(network, metric, Ks, [(method, cells)])``, a cell per K being
    ``(mean, sd, runs)`` (sd 0 for one run) or None where the method has no run at that K or
    no such column."""
    for network, per_net in summary.groupby("network", sort=False):
        ks = sorted(int(k) for k in per_net["K"].unique())
        for metric in metrics:
            if f"{metric}_mean" not in per_net:
                continue
            rows = []
            for method, group in per_net.groupby("method", sort=False):
                cells: list[tuple[float, float, int] | None] = []
                for k in ks:
                    hit = group[group["K"] == k]
                    mean = hit[f"{metric}_mean"].iloc[0] if not hit.empty else math.nan
                    if math.isnan(mean):  # no run at K, or no such column (a derived row)
                        cells.append(None)
                        continue
                    sd = hit[f"{metric}_std"].iloc[0]
                    cells.append((mean, 0.0 if math.isnan(sd) else sd, int(hit["runs"].iloc[0])))
                rows.append((str(method), cells))
            yield str(network), metric, ks, rows


def format_summary(summary: pd.DataFrame, metrics: Sequence[str] = DEFAULT_METRICS) -> str:
    """Mean ± sd per method (rows) x K (columns), one block per network and metric."""
    if summary.empty:
        return "no successful runs to summarise"
    views = method_views(summary)
    blocks = []
    for network, metric, ks, rows in summary_blocks(summary, metrics):
        methods = [m for m, _ in rows]
        width = max(28, *(len(method_label(m, views)) + 2 for m in methods))
        header = f"{'method':<{width}}" + "".join(f"{f'K={k}':>18}" for k in ks)
        lines = [
            f"{network}: {metric} (mean ± sd over seeds); {view_statement(views, methods)}",
            header,
            "-" * len(header),
        ]
        for method, cells in rows:
            text = ["-" if c is None else cell_text(*c) for c in cells]
            label = method_label(method, views)
            lines.append(f"{label:<{width}}" + "".join(f"{t:>18}" for t in text))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def learned_and_truth(out: str | Path, key: str) -> tuple[Any, Any, dict[str, Any]]:
    """The learned graph of a stored run and its truth as the run's common columns compare them
    (:func:`~fedcausal_flwr.scoring.view_graphs`: a local structure at its target, a DAG output
    as its equivalence class), and the record: what a drawing of the run shows."""
    from fedcausal_flwr.graphs import Graph

    record = read_record(record_path(Path(out), key))
    if record is None:
        raise KeyError(f"no run record {key!r} under {Path(out) / 'runs'}")
    if record.get("status") != "ok" or not (record.get("result") or {}).get("graph"):
        raise ValueError(f"run {key!r} has no learned graph (status {record.get('status')})")
    learned = Graph.from_json(record["result"]["graph"])
    dag = network_for(record["network"], int(record["seed"])).dag
    target = (record["result"].get("extra") or {}).get("target")
    drawn, truth = view_graphs(learned, dag, None if target is None else str(target))
    return drawn, truth, record
