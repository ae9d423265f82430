"""One self-contained HTML page per results folder: ``report.html``.

``compare`` and every named experiment write it at the end; ``fedcausal-flwr report DIR``
rebuilds it from what the folder holds, so it never needs the process that ran the study:

* ``study.json`` (written by :func:`~fedcausal_flwr.compare.compare`): the settings and the keys of
  the sweep's runs; ``runs/*.json`` the run records (metrics, rounds, bytes, the learned graph,
  the privacy ledger);
* ``experiment.json`` and ``log.txt`` (written by a named experiment): what ran, the paper's
  setting, the choices made where the paper is silent, and the console output with the paper's
  numbers beside ours;
* every PNG under the folder (plots of the study or of an experiment script).

Images are inlined as base64 ``data:`` URIs and the page carries its own CSS, so it opens from a
mail attachment or an offline machine (no script, no font, no request).
"""

from __future__ import annotations

import base64
import html
import json
import math
import warnings
from collections.abc import Collection, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fedcausal_flwr.notes import InputNote
from fedcausal_flwr.outputs import write_text
from fedcausal_flwr.result import confidence_labels
from fedcausal_flwr.server_held import (
    LEGEND,
    held_by_kind,
    recorded_sums,
    run_mode,
    run_sentence,
)
from fedcausal_flwr.study_files import (
    DEFAULT_METRICS,
    STUDY_FILE,
    cell_text,
    learned_and_truth,
    method_label,
    method_views,
    read_record,
    read_records,
    results_frame,
    summarise,
    summary_blocks,
    view_statement,
)

REPORT_NAME = "report.html"
EXPERIMENT_FILE = "experiment.json"
LOG_FILE = "log.txt"
#: a console log longer than this many characters is cut in the page (the file keeps all of it)
MAX_LOG_CHARS = 400_000

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0 auto;
max-width:1200px;padding:1.5em 2em;color:#1d1d1f;line-height:1.45}
h1{font-size:1.7em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:2px solid #e3e3e8;
padding-bottom:.2em}h3{margin-bottom:.4em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.92em}
th,td{border:1px solid #d6d6de;padding:.28em .6em;text-align:right}
th{background:#f1f1f6}td.name,th.name{text-align:left}
.muted{color:#6e6e73}.bad{color:#b00020}
img{max-width:100%;height:auto;border:1px solid #e3e3e8;margin:.4em 0}
pre{background:#f6f6f9;padding:.8em;overflow-x:auto;font-size:.82em;max-height:40em}
nav a{margin-right:1em}dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}
dt{font-weight:600}dd{margin:0}figure{margin:1em 0}figcaption{font-size:.9em;color:#444}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(540px,1fr));gap:0 1.5em}
"""


# ============================================================================ inputs
def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _records(out: Path, keys: Iterable[str] | None) -> list[dict[str, Any]]:
    """The folder's run records (only ``keys`` when the study named them), in key order."""
    wanted = None if keys is None else set(keys)
    return [r for r in read_records(out) if wanted is None or r["key"] in wanted]


# ============================================================================ html pieces
def _esc(value: Any) -> str:
    return html.escape(str(value))


def _number(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _esc(value)
    if isinstance(value, float) and math.isnan(value):
        return "–"
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.{digits}g}"


def _table(
    header: Sequence[str], rows: Iterable[Sequence[Any]], names: int = 1, text: int = 0
) -> str:
    """An HTML table; the first ``names`` and the last ``text`` columns are text (escaped,
    left-aligned), the others numbers or trusted HTML."""
    width = len(header)

    def is_text(i: int) -> bool:
        return i < names or i >= width - text

    head = "".join(
        f"<th class='name'>{_esc(h)}</th>" if is_text(i) else f"<th>{_esc(h)}</th>"
        for i, h in enumerate(header)
    )
    body = []
    for row in rows:
        cells = "".join(
            f"<td class='name'>{_esc(c)}</td>" if is_text(i) else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _image(path: Path, caption: str = "") -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    alt = _esc(caption or path.stem.replace("_", " "))
    cap = f"<figcaption>{_esc(caption)}</figcaption>" if caption else ""
    return f"<figure><img alt='{alt}' src='data:image/png;base64,{data}'>{cap}</figure>"


def _section(anchor: str, title: str, body: str) -> tuple[str, str, str]:
    return anchor, title, f"<section id='{anchor}'><h2>{_esc(title)}</h2>{body}</section>"


# ============================================================================ sections
def settings_section(study: dict[str, Any] | None, records: Sequence[dict[str, Any]]) -> str:
    """What ran: methods (with their options), networks, K, rows, partition, seeds, backend."""
    if not records and not study:
        return ""

    def values(column: str) -> str:
        seen = list(dict.fromkeys(str(r.get(column)) for r in records))
        return ", ".join(seen) if seen else "–"

    items = [
        ("methods", ", ".join((study or {}).get("methods", [])) or values("method")),
        ("networks", values("network")),
        ("clients K", ", ".join(str(k) for k in sorted({int(r["K"]) for r in records}))),
        ("rows per run", values("n")),
        ("partition", values("partition")),
        ("seeds", ", ".join(str(s) for s in sorted({int(r["seed"]) for r in records}))),
        ("backend", values("backend")),
    ]
    shared = (study or {}).get("options") or {}
    if shared:
        items.append(("options for every method", json.dumps(shared, sort_keys=True)))
    rows = "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in items)
    per_method: dict[str, str] = {}
    for r in records:
        given = r.get("options") or {}
        shown = json.dumps(given, sort_keys=True) if given else "defaults"
        per_method.setdefault(r["method"], shown)
    table = _table(["method", "options as run"], sorted(per_method.items()), names=2)
    return f"<dl>{rows}</dl><h3>Each method's own options</h3>{table}"


def summary_section(frame: pd.DataFrame, metrics: Sequence[str]) -> str:
    """Mean ± sd over seeds, one table per network and metric: methods x K, each table with the
    view its numbers are in."""
    from fedcausal_flwr.plots import metric_label

    summary = summarise(frame, metrics)
    if summary.empty:
        return "<p class='bad'>No successful run to summarise.</p>"
    views = method_views(summary)
    parts = [
        "<p>One view per column: every method is scored in the common view of what it learns "
        "(a DAG or CPDAG as a CPDAG against the true CPDAG, a DAG output first reduced to its "
        "equivalence class; a PAG against the true PAG), or in the view its method declares. "
        "Methods that learn a DAG also have DAG-view columns (<code>dag_shd</code>, "
        "<code>dag_arrow_f1</code>, ...) in results.csv, never mixed into these.</p>"
    ]
    for network, metric, ks, rows in summary_blocks(summary, metrics):
        body = [
            [method_label(method, views)]
            + [
                "–" if c is None
                else _esc(cell_text(*c))
                + (f" <span class='muted'>({c[2]} runs)</span>" if c[2] > 1 else "")
                for c in cells
            ]
            for method, cells in rows
        ]  # fmt: skip
        methods = [m for m, _ in rows]
        parts.append(f"<h3>{_esc(network)}: {_esc(metric_label(metric))}</h3>")
        parts.append(f"<p class='muted'>{_esc(view_statement(views, methods))}</p>")
        parts.append(_table(["method", *[f"K = {k}" for k in ks]], body))
    parts.append("<p class='muted'>mean ± sd over seeds (number of runs); one run shows its "
                 "value and (1 seed).</p>")  # fmt: skip
    return "".join(parts)


def costs_section(frame: pd.DataFrame) -> str:
    """Rounds, bytes up/down and wall time per method and K. Rounds are counted, so they show as
    whole numbers: the median over seeds and, when seeds differ, their range; the rest as means."""
    from fedcausal_flwr.plots import byte_text

    ok = frame[frame["status"] == "ok"] if not frame.empty else frame
    if ok.empty:
        return ""
    ok = ok[ok["method"].isin(set(_run_methods(ok)))]
    groups = ok.groupby(["network", "method", "K"], sort=False)
    table = groups[["bytes_up", "bytes_down", "wall_s"]].mean()
    rounds = groups["rounds"].agg(["median", "min", "max"])
    table["rounds"] = _rounds_text(rounds["median"], rounds["min"], rounds["max"])
    rows = [
        [r.network, r.method, _number(r.K), r.rounds, byte_text(r.bytes_up, 3),
         byte_text(r.bytes_down, 3), f"{r.wall_s:.2f}"]
        for r in table.reset_index().itertuples()
    ]  # fmt: skip
    header = ["network", "method", "K", "rounds", "bytes up", "bytes down", "wall s"]
    return _table(header, rows, names=2) + (
        "<p class='muted'>rounds: median over seeds, rounded (with the fewest and most in "
        "brackets when seeds differ); bytes and seconds: means over seeds. Bytes are the "
        "protocol's messages (a SecAgg+ round's own traffic is in each run record's "
        "<code>secagg</code> fields).</p>"
    )


def _rounds_text(median: pd.Series, low: pd.Series, high: pd.Series) -> pd.Series:
    """Whole rounds: ``median`` rounded half up, then ``(low–high)`` when they differ."""
    text = np.floor(median + 0.5).astype("Int64").astype(str)
    spread = low != high
    ranges = " (" + low.astype("Int64").astype(str) + "–" + high.astype("Int64").astype(str) + ")"
    return text.where(~spread, text + ranges).where(median.notna(), "–")


def _run_methods(frame: pd.DataFrame) -> list[str]:
    """Methods that ran (not the derived local-avg / local-best rows, which share a run)."""
    from fedcausal_flwr.plots import DERIVED_METHODS

    return [m for m in dict.fromkeys(frame["method"]) if m not in DERIVED_METHODS]


def failures_section(records: Sequence[dict[str, Any]], unreadable: Sequence[str] = ()) -> str:
    """Failed runs with their errors, and run records that could not be read (cut short, say:
    those runs are left out of every table here; `compare` runs them again)."""
    failed = [r for r in records if r.get("status") != "ok"]
    parts = []
    if unreadable:
        names = ", ".join(unreadable)
        parts.append(
            f"<p class='bad'>{len(unreadable)} run record(s) could not be read and are left out "
            f"of this report (compare runs them again): {_esc(names)}</p>"
        )
    if failed:
        rows = [[r["key"], r.get("error") or "(no message)"] for r in failed]
        parts.append(f"<p class='bad'>{len(failed)} run(s) failed.</p>")
        parts.append(_table(["run", "error"], rows, 2))
    if not parts:
        return "<p>Every run succeeded.</p>"
    return "".join(parts)


def unreadable_records(out: Path) -> list[str]:
    """The run records of ``out/runs`` that do not parse (their file names)."""
    return [p.name for p in sorted((out / "runs").glob("*.json")) if read_record(p) is None]


class SkippedRecordWarning(InputNote):
    """A run record the report cannot read (cut short, not JSON): its run is missing from every
    table, which a cell's seed count alone does not show."""


def warn_unreadable(names: Sequence[str]) -> None:
    """One line per run record left out of the report, so a truncated file is not silent."""
    for name in names:
        warnings.warn(
            f"run record runs/{name} could not be read (cut short or not JSON) and is left out "
            "of the report; `compare` runs it again",
            SkippedRecordWarning,
            stacklevel=3,
        )


def ledger_summary(
    ledger: Sequence[dict[str, Any]],
    config: dict[str, Any] | None = None,
    summed_kinds: Collection[str] | None = None,
) -> list[list[Any]]:
    """Per message kind: what the server held of it in this run (:mod:`~.server_held`: SecAgg+
    or not, whose noise; a kind held differently in different rounds has a row per label),
    rounds, clients, how many numbers it received per client, and the metadata keys.
    ``config``: the run's recorded settings; ``summed_kinds``: the actions the method declares
    summed (:func:`summed_actions`)."""
    rows = []
    for kind, held, entries in held_by_kind(ledger, config, summed_kinds):
        clients = max((int(e.get("n_clients", 0)) for e in entries), default=0)
        numbers = 0
        meta: set[str] = set()
        for entry in entries:
            for array in entry.get("arrays", []):  # distinct shapes: a client's largest reply
                sizes = [math.prod(int(s) for s in shape) for shape in array.get("shapes", [])]
                numbers += max(sizes, default=0)
            meta.update(entry.get("meta_keys", []))
        rows.append(
            [kind, held, len(entries), clients, _number(numbers), ", ".join(sorted(meta)) or "–"]
        )
    return rows


def summed_actions(result: dict[str, Any]) -> list[str] | None:
    """The actions a run record's method declares only their sum is needed of: as the run
    recorded them, else (an older record) as the method's registration declares them; None for
    a method not registered here, whose ledger entries then say it themselves."""
    from fedcausal_flwr.federation.core.disclosure import summed_actions as declared
    from fedcausal_flwr.federation.core.registry import UnknownMethodError, get_method

    config = result.get("config") or {}
    recorded = recorded_sums(config)
    if recorded is not None:
        return recorded
    try:
        spec = get_method(str(config.get("method") or result.get("method")))
    except UnknownMethodError:
        return None
    return declared(spec.disclosures)


def ledger_section(
    records: Sequence[dict[str, Any]], key: str | None, order: Sequence[str] = ()
) -> str:
    """What the server received, per method, from one run each (the drawn run's setting): each
    message kind as the run held it, and one sentence on the run's mode."""
    chosen = _runs_like(records, key, order)
    if not chosen:
        return ""
    parts = []
    for record in chosen:
        result = record.get("result") or {}
        ledger = result.get("ledger") or []
        where = f"K = {record['K']}, seed {record['seed']}"
        parts.append(f"<h3>{_esc(record['method'])} <span class='muted'>({where})</span></h3>")
        if not ledger:
            parts.append("<p class='muted'>no ledger recorded.</p>")
            continue
        config = result.get("config") or {}
        summed = summed_actions(result)
        header = ["message", "server held", "rounds", "clients", "numbers received", "metadata"]
        parts.append(_table(header, ledger_summary(ledger, config, summed), names=2, text=1))
        parts.append(f"<p>{_esc(run_sentence(*run_mode(config, ledger)))}</p>")
        privacy = (result.get("extra") or {}).get("privacy")
        if privacy:
            parts.append(f"<p>{_esc(privacy_sentence(privacy))}</p>")
    parts.append(
        f"<p class='muted'>{_esc(LEGEND)} “numbers received”: array entries of one client's "
        "(largest) reply, added over the rounds of that kind.</p>"
    )
    return "".join(parts)


def privacy_sentence(privacy: dict[str, Any]) -> str:
    """A private run's accountant in one sentence (its ``extra["privacy"]``)."""
    releases = privacy.get("releases") or []
    # in the released statistics' own units (a lattice's releases state their resolution)
    variances = [float(r["variance"]) * float(r.get("resolution", 1.0)) ** 2 for r in releases]
    target, delta = privacy.get("target_epsilon"), privacy.get("delta")
    noisy = [v for v in variances if v > 0]  # a release of variance 0 (epsilon inf) has none
    if not noisy:
        released = f"{len(releases)} release(s), no noise"
    else:
        released = (
            f"{len(releases)} noisy release(s)"
            if len(noisy) == len(releases)
            else f"{len(releases)} release(s), {len(noisy)} with noise"
        ) + f"; noise variance per cell {min(noisy):.4g} to {max(noisy):.4g}"
    return (
        f"Differential privacy ({privacy.get('mechanism', '?')}): target epsilon {target:g} at "
        f"delta {delta:g}; spent epsilon {float(privacy.get('epsilon') or 0):.4g} "
        f"({privacy.get('accounting', 'zCDP')}; zCDP rho {float(privacy.get('rho') or 0):.4g}) "
        f"over {privacy.get('batches', 0)} batch(es), "
        f"{released}." + (f" The search {privacy['stopped']}." if privacy.get("stopped") else "")
    )


def _runs_like(
    records: Sequence[dict[str, Any]], key: str | None, order: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """One successful run per method at the setting (network, n, K, partition, seed) of ``key``
    (default: the first record's network at its largest K, lowest seed), methods in ``order``."""
    ok = [r for r in records if r.get("status") == "ok"]
    if not ok:
        return []
    anchor = next((r for r in ok if r["key"] == key), None)
    if anchor is None:
        first = ok[0]["network"]
        anchor = min(
            (r for r in ok if r["network"] == first), key=lambda r: (-int(r["K"]), int(r["seed"]))
        )
    setting = ("network", "n", "K", "partition", "seed")
    same = [r for r in ok if all(r.get(c) == anchor.get(c) for c in setting)]
    methods = list(dict.fromkeys([*order, *(r["method"] for r in same)]))
    return sorted({r["method"]: r for r in same}.values(), key=lambda r: methods.index(r["method"]))


#: Learned edges up to which a drawing labels each edge with its confidence.
MAX_LABELLED_EDGES = 80


def graphs_section(
    out: Path, records: Sequence[dict[str, Any]], key: str | None, order: Sequence[str] = ()
) -> str:
    """Each method's learned graph against the truth at one setting, drawn and as edges. Every
    drawing uses the truth's layout (computed once), so a node sits in one place in all of them
    and the methods compare node by node."""
    from fedcausal_flwr.graphs.export import edge_lines, edge_pairs
    from fedcausal_flwr.plots import drawing_title, plot_graph_vs_truth, truth_layout

    chosen = _runs_like(records, key, order)
    parts = []
    layouts: dict[tuple[str, ...], dict[int, Any]] = {}  # by the truth's nodes
    local = False
    for record in chosen:
        # each graph in its table's view (a local structure at its target), so the drawing
        # shows what the row's numbers count; its title names the run and the view
        path = out / "plots" / "graphs" / f"{record['key']}.png"
        try:
            learned, truth, _ = learned_and_truth(out, record["key"])
            title = drawing_title(record)
            extra = (record.get("result") or {}).get("extra") or {}
            confidence = confidence_labels(extra)
            # labels stay readable up to about 80 edges; the list below always has them
            pairs = {frozenset(pair) for pair in edge_pairs(learned)}
            short = {k: v for k, v in confidence_labels(extra, short=True).items() if k in pairs}
            drawn = short if len(short) <= MAX_LABELLED_EDGES else None
            nodes = tuple(truth.names)
            if nodes not in layouts:
                layouts[nodes] = truth_layout(truth)
            plot_graph_vs_truth(learned, truth, path, title, edge_labels=drawn, pos=layouts[nodes])
        except (KeyError, ValueError) as err:
            parts.append(f"<p class='bad'>{_esc(record['method'])}: not drawn: {_esc(err)}</p>")
            continue
        local |= learned.kind == "LOCAL"
        lines = [
            f"{line}   {confidence[frozenset(pair)]}" if frozenset(pair) in confidence else line
            for line, pair in zip(edge_lines(learned), edge_pairs(learned), strict=True)
        ]
        edges = _esc("\n".join(lines)) if lines else "(no edges)"
        note = " (with each edge's confidence)" if confidence else ""
        parts.append(
            "<div>"
            + _image(path, title)
            + f"<details><summary>{len(lines)} learned edges{note}</summary><pre>{edges}</pre>"
            "</details></div>"
        )
    if not parts:
        return ""
    where = (
        "<p class='muted'>Each drawing is one run (its title names it: the tables average over "
        "seeds) in the view of its table's rows. Every drawing puts each node where the true "
        "graph's layout puts it, so the same node sits in the same place in each method's "
        "drawing"
        + (
            "; a local structure is drawn over its target's neighbourhood only (the target, its "
            "true parents and children and its learned neighbours), on that neighbourhood's "
            "layout."
            if local
            else "."
        )
        + "</p>"
    )
    return where + "".join(parts)


def figures_section(out: Path, skip: set[Path]) -> str:
    """Every other PNG under the folder (the study's plots, an experiment script's figures)."""
    found = sorted(p for p in out.rglob("*.png") if p.resolve() not in skip)
    return "".join(_image(p, str(p.relative_to(out))) for p in found)


def experiment_section(meta: dict[str, Any]) -> str:
    items = [
        ("experiment", f"{meta.get('name')} (version {meta.get('version')})"),
        ("what it runs", meta.get("description", "")),
        ("paper", meta.get("paper", "")),
        ("command", meta.get("command", "")),
        ("exit code", meta.get("exit_code", "")),
        ("wall time", f"{meta['wall_s']:.0f} s" if "wall_s" in meta else ""),
    ]
    body = "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in items if v != "")
    choices = "".join(f"<li>{_esc(a)}</li>" for a in meta.get("ambiguities", []))
    more = f"<h3>Where the paper is silent, and what we chose</h3><ul>{choices}</ul>"
    return f"<dl>{body}</dl>" + (more if choices else "")


def log_section(text: str) -> str:
    cut = ""
    if len(text) > MAX_LOG_CHARS:
        cut = f"<p class='muted'>the last {MAX_LOG_CHARS:,} characters; {LOG_FILE} has all.</p>"
        text = text[-MAX_LOG_CHARS:]
    return f"{cut}<pre>{_esc(text)}</pre>"


# ============================================================================ the page
def build_report(out: str | Path, title: str | None = None) -> str:
    """The HTML of ``out``'s report (see the module docstring for what it reads)."""
    out = Path(out)
    study = _read_json(out / STUDY_FILE)
    meta = _read_json(out / EXPERIMENT_FILE)
    records = _records(out, None if study is None else study.get("keys"))
    frame = results_frame(records) if records else pd.DataFrame()
    metrics = (study or {}).get("metrics") or list(DEFAULT_METRICS)
    graph_key = (study or {}).get("graph_run")
    order = (study or {}).get("methods") or []
    unreadable = unreadable_records(out)
    warn_unreadable(unreadable)
    sections = []
    if meta:
        sections.append(_section("experiment", "Experiment", experiment_section(meta)))
    if records:
        sections.append(_section("settings", "Settings", settings_section(study, records)))
        sections.append(_section("summary", "Summary", summary_section(frame, metrics)))
    plots = out / "plots"
    study_plots = [plots / f"{m}_vs_K.png" for m in metrics] + [plots / "costs_vs_K.png"]
    study_plots = [p for p in study_plots if p.exists()]
    if study_plots:
        images = "".join(_image(p) for p in study_plots)
        sections.append(_section("plots", "Plots", f"<div class='grid'>{images}</div>"))
    drawn = {p.resolve() for p in study_plots} | {(plots / "graph_vs_truth.png").resolve()}
    if records:
        graphs = graphs_section(out, records, graph_key, order)
        drawn |= {p.resolve() for p in (plots / "graphs").glob("*.png")}
        if graphs:
            intro = "<p>Each method's learned graph over the truth at one setting.</p>"
            sections.append(_section("graphs", "Learned graphs", intro + graphs))
        sections.append(_section("costs", "Rounds and bytes", costs_section(frame)))
        failures = failures_section(records, unreadable)
        sections.append(_section("failures", "Failures", failures))
        ledger = ledger_section(records, graph_key, order)
        if ledger:
            sections.append(_section("privacy", "What the server received", ledger))
    if unreadable and not records:  # every record cut short: the page still says which
        sections.append(_section("failures", "Failures", failures_section([], unreadable)))
    figures = figures_section(out, drawn)
    if figures:
        sections.append(_section("figures", "Figures", figures))
    log = out / LOG_FILE
    if log.exists():
        text = log.read_text(errors="replace")
        sections.append(_section("output", "Console output", log_section(text)))
    if not sections:
        raise FileNotFoundError(
            f"{out} holds no study (runs/ or {STUDY_FILE}), experiment ({EXPERIMENT_FILE}, "
            f"{LOG_FILE}) or figure to report on"
        )
    heading = title or (
        f"Experiment {meta['name']}" if meta else f"Comparison study: {out.resolve().name}"
    )
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    nav = "".join(f"<a href='#{a}'>{_esc(t)}</a>" for a, t, _ in sections)
    body = "".join(s for _, _, s in sections)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_esc(heading)}</title><style>{CSS}</style></head><body>"
        f"<h1>{_esc(heading)}</h1><p class='muted'>fedcausal-flwr report, written {stamp}; "
        f"rebuild it with <code>fedcausal-flwr report {_esc(out.name)}</code>.</p>"
        f"<nav>{nav}</nav>{body}</body></html>"
    )


class ReportError(ValueError):
    """A report that could not be built: one line saying why, the old page removed."""


def rebuild_page(out: str | Path, title: str | None = None) -> str:
    """:func:`build_report`, or, when the page cannot be built, :class:`ReportError` in one line
    (``report DIR: why``) and no ``report.html`` left behind: a page from an earlier run would
    look current."""
    try:
        return build_report(out, title)
    except (ValueError, KeyError, OSError) as err:
        old = Path(out) / REPORT_NAME
        gone = ""
        if old.is_file():
            try:
                old.unlink()
                gone = f"; the old {REPORT_NAME} was removed"
            except OSError:
                gone = f"; the old {REPORT_NAME} could not be removed and is out of date"
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        raise ReportError(f"report {out}: {message}{gone}") from None


def write_report(out: str | Path, title: str | None = None) -> Path:
    """Write ``out/report.html`` (see :func:`build_report`) and return its path; a page that
    cannot be built is :class:`ReportError`, and no old page stays (:func:`rebuild_page`)."""
    return write_text(Path(out) / REPORT_NAME, rebuild_page(out, title))  # no half page
