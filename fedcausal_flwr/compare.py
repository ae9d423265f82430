"""Strategy comparison studies: a resumable sweep of methods x networks x K x seeds.

Every run is a function of ``(network, samples, clients, partition, seed)`` for its data, so
competing methods see the same client data (each run, its plan and its record:
:mod:`fedcausal_flwr.study_runs`).

Layout of ``out/``:

* ``runs/<key>.json``: one record per run (status, error, metrics, costs, the full Result); the
  key is made from method/network/n/K/partition/seed and every effective option (defaults
  included), so a re-run skips what exists and a changed default runs anew.
* ``results.csv``: one row per run, rebuilt from all run records (never duplicates), plus the rows
  a method's ``summaries`` hook adds (``local``: ``local-avg`` and ``local-best-oracle``).
* ``summary.csv`` / ``summary.txt``: mean and sd per network x method x K for the current sweep.
* ``plots/*.png``: metrics against K, costs, and one run's learned graph against its truth, in
  the view its table scores it (a DAG output as its equivalence class, a local structure over
  its target's neighbourhood), its title naming the run and the view.
* ``study.json``: the sweep's plan (settings, metrics, run keys, the drawn run) and
  ``report.html``: one self-contained page of all of it (:mod:`fedcausal_flwr.report`).

The files are read and written by :mod:`fedcausal_flwr.study_files`.

Method specs are a registered name with optional options, ``name:key=value:key=value`` (e.g.
``fedpc:ci=sketch``), validated against the method's declared options before the first run.
Network and partition specs are those of :mod:`fedcausal_flwr.data.specs`.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pandas as pd

from fedcausal_flwr.interrupts import children, end_children, sweep_worker_init
from fedcausal_flwr.options import OptionError
from fedcausal_flwr.outputs import FailedWrites, check_folder, reason, write_text
from fedcausal_flwr.settings import RUN_SETTINGS
from fedcausal_flwr.study_files import (
    DEFAULT_METRICS,
    STUDY_FILE,
    format_summary,
    json_default,
    learned_and_truth,
    load_results,
    read_record,
    read_records,
    record_path,
    summarise,
    write_record,
    write_results,
)
from fedcausal_flwr.study_runs import (
    RunSpec,
    execute_failed,
    execute_run,
    parse_int_list,
    plan_runs,
)

#: runs a sweep's worker process does before a fresh one takes over (memory stays flat)
RUNS_PER_WORKER = 40


# ============================================================================ progress
#: seconds without a finished run before the progress says the sweep is still going (and again
#: after as many)
HEARTBEAT_S = 10.0


class Progress:
    """Plain-text progress with counts and ETA on stderr (one line per update off a terminal),
    and a heartbeat line every :data:`HEARTBEAT_S` seconds while no run finishes (a slow run is
    then told from a hung sweep); used as a context manager, which runs the heartbeat.

    ``enabled``: ``None`` shows it only when the stream is a terminal, so a log file or a pipe
    gets only what the caller prints; ``True`` shows it anywhere (a line per update).
    """

    def __init__(
        self,
        total: int,
        skipped: int,
        stream: TextIO | None = None,
        enabled: bool | None = None,
    ) -> None:
        self.total, self.skipped, self.done, self.failed = total, skipped, 0, 0
        self.stream = stream or sys.stderr
        self.started = self.last = time.perf_counter()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = self.tty if enabled is None else enabled
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def __enter__(self) -> Progress:
        if self.enabled and self.total > self.skipped:
            self._beat = threading.Thread(target=self._heartbeat, name="progress", daemon=True)
            self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S / 4):
            now = time.perf_counter()
            if now - self.last < HEARTBEAT_S:
                continue
            todo = self.total - self.skipped
            self._write(
                f"{self.done}/{todo} runs, {now - self.started:.0f}s elapsed: still running "
                f"({now - self.last:.0f}s since the last run ended)",
                final=False,
            )
            self.last = now

    def update(self, record: dict[str, Any]) -> None:
        self.done += 1
        self.failed += record.get("status") != "ok"
        self.last = time.perf_counter()
        if not self.enabled:
            return
        todo = self.total - self.skipped
        elapsed = time.perf_counter() - self.started
        eta = elapsed / self.done * (todo - self.done)
        width = 24
        filled = int(width * self.done / max(todo, 1))
        line = (
            f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{todo} runs "
            f"({self.skipped} skipped, {self.failed} failed) {elapsed:.0f}s elapsed, "
            f"ETA {eta:.0f}s | {record['method']} {record['network']} K={record['K']} "
            f"seed={record['seed']}: {record['status']}"
        )
        self._write(line, final=self.done == todo)

    def _write(self, line: str, *, final: bool) -> None:
        end = "\n" if not self.tty or final else ""
        with self._lock:
            self.stream.write(("\r\033[K" if self.tty else "") + line + end)
            self.stream.flush()


# ============================================================================ the sweep
@dataclass
class Study:
    """What a sweep did and produced; ``frame`` holds the current sweep's rows only."""

    out: Path
    frame: pd.DataFrame
    summary: pd.DataFrame
    n_planned: int
    n_run: int
    n_skipped: int
    n_failed: int
    plots: list[Path] = field(default_factory=list)
    report: Path | None = None
    #: what could not be written after the runs, and why (``{"plots": "No space left on
    #: device"}``); the runs themselves are kept in ``out/runs``
    not_written: dict[str, str] = field(default_factory=dict)

    def summary_text(self, metrics: Sequence[str] = DEFAULT_METRICS) -> str:
        return format_summary(self.summary, metrics)


class OutFolderError(OptionError):
    """``out`` cannot keep a sweep's results (a file, a folder that cannot be made or written,
    a full disk): said in one line before any run starts, or when a finished run's record cannot
    be written (the sweep then stops: every later run would be lost too)."""


def check_out(out: str | Path) -> Path:
    """``out`` as a folder this process can write, made if missing, or :class:`OutFolderError`
    naming ``--out``: checked before the first run, so a sweep never runs for hours to find it
    cannot keep them. A file is written there and removed (a full disk, a quota, a file system
    that says yes and then no)."""
    where = f"--out {out}"
    try:
        check_folder(out, where)
    except OptionError as err:
        raise OutFolderError(str(err)) from None
    path = Path(out)
    runs = path / "runs"
    probe = runs / f".write-check{os.getpid()}"
    try:
        if runs.exists() and not runs.is_dir():
            raise OutFolderError(f"{where}: {runs} is a file, not a folder")
        runs.mkdir(parents=True, exist_ok=True)
        with probe.open("wb") as stream:
            stream.write(b"0")
            stream.flush()
            os.fsync(stream.fileno())
    except OSError as err:
        raise OutFolderError(
            f"{where}: cannot write in the folder {path} ({reason(err)})"
        ) from None
    finally:
        try:
            probe.unlink(missing_ok=True)
        except OSError:
            pass
    return path


def run_sweep(
    specs: Sequence[RunSpec],
    out: str | Path,
    jobs: int = 1,
    retry_failed: bool = False,
    progress: bool | None = None,
    on_run_done: Callable[[dict[str, Any]], None] | None = None,
    start_method: str = "spawn",
) -> tuple[int, int, int]:
    """Run every spec without a stored record; returns (run, skipped, failed).

    ``progress``: a line per finished run on stderr; ``None`` only when stderr is a terminal.

    ``jobs > 1`` uses a process pool (``start_method`` spawn, fork or forkserver); each record is
    written as soon as its run ends, then ``on_run_done(record)`` is called.
    """
    out = Path(out)
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    pending: list[RunSpec] = []
    for spec in dict.fromkeys(specs):  # a repeated spec runs once
        stored = read_record(record_path(out, spec.key))
        if stored is None or (retry_failed and stored.get("status") != "ok"):
            pending.append(spec)
    n_skipped = len(dict.fromkeys(specs)) - len(pending)
    with Progress(n_skipped + len(pending), n_skipped, enabled=progress) as bar:

        def finish(record: dict[str, Any]) -> None:
            try:
                write_record(out, record)
            except OSError as err:  # e.g. a full disk: every later run would be lost too
                kept = len(read_records(out))
                raise OutFolderError(
                    f"--out {out}: a finished run's record was not written ({reason(err)}); the "
                    f"sweep stops, {kept} finished run{'s' * (kept != 1)} kept in {out / 'runs'}, "
                    "run again to resume"
                ) from None
            bar.update(record)
            if on_run_done is not None:
                on_run_done(record)

        if jobs == 1 or len(pending) <= 1:
            for spec in pending:
                finish(execute_run(spec))
            return len(pending), n_skipped, bar.failed
        os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
        context = multiprocessing.get_context(start_method)
        # fresh worker processes every RUNS_PER_WORKER runs each, so what runs leave behind in a
        # process (caches, fragmentation) cannot add up over a long sweep (Python 3.11's
        # max_tasks_per_child can hang the pool when it replaces a worker: not used)
        chunk = RUNS_PER_WORKER * jobs
        for start in range(0, len(pending), chunk):
            _run_pool(pending[start : start + chunk], jobs, context, finish)
        return len(pending), n_skipped, bar.failed


def _run_pool(
    specs: Sequence[RunSpec],
    jobs: int,
    context: Any,
    finish: Callable[[dict[str, Any]], None],
) -> None:
    """Run ``specs`` on ``jobs`` fresh worker processes, each record to ``finish`` as it ends."""
    before = children()
    # a worker ends with this process even when it is killed (SIGKILL): its parent is this
    # process, except under forkserver (the server, which ends with this process)
    parent = None if context.get_start_method() == "forkserver" else os.getpid()
    with ProcessPoolExecutor(
        max_workers=min(jobs, len(specs)),
        mp_context=context,
        initializer=sweep_worker_init,
        initargs=(parent,),
    ) as pool:
        futures: dict[Future, RunSpec] = {pool.submit(execute_run, s): s for s in specs}
        remaining = set(futures)
        try:
            while remaining:
                done, remaining = wait(remaining, return_when=FIRST_COMPLETED)
                for future in done:
                    try:
                        record = future.result()
                    except Exception as err:
                        record = execute_failed(futures[future], err)
                    finish(record)
        except BaseException:
            # interrupted: the runs under way are dropped (their records are never written, so
            # a resume runs them), and the workers end now rather than after their runs
            pool.shutdown(wait=False, cancel_futures=True)
            end_children(spare=before)
            raise


# ============================================================================ the one call
def compare(
    methods: Sequence[str],
    networks: Sequence[str],
    clients: Sequence[int] | str,
    samples: int | None = None,
    partition: str | None = None,
    seeds: Sequence[int] | str = (0,),
    backend: str | None = None,
    jobs: int = 1,
    out: str | Path = "results",
    options: dict[str, Any] | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
    plots: bool = True,
    graph_run: str | None = None,
    retry_failed: bool = False,
    report: bool = True,
    progress: bool | None = None,
    on_run_done: Callable[[dict[str, Any]], None] | None = None,
    start_method: str = "spawn",
    warn: Callable[[str], None] | None = None,
    failed: FailedWrites | None = None,
) -> Study:
    """Run (or resume) a comparison sweep, then write results.csv, the summary and the plots.

    ``samples``, ``partition`` and ``backend`` default as on every entry point
    (:data:`~fedcausal_flwr.settings.RUN_SETTINGS`). ``options`` apply to every method that
    declares them (e.g. ``{"alpha": 0.01}``; ``warn`` hears about the others); a method spec's
    own options override them. ``graph_run``: the key of the run whose learned graph is drawn
    against the truth (default: the first method's run on the first network at the largest K and
    first seed). ``report``: write ``out/report.html`` (:mod:`fedcausal_flwr.report`; its learned
    graphs are drawn even with ``plots=False``), and ``out/study.json``, from which
    ``fedcausal-flwr report`` rebuilds it. ``progress``: a line per finished run on stderr
    (``None``: only when stderr is a terminal, so a redirected stderr stays clean).

    ``out`` is checked before the first run (:func:`check_out`). A file that cannot be written
    after the runs (a full disk) loses no run and no table: ``Study.not_written`` says which,
    and one line tells it: into ``failed`` (the command line prints it after the table), else
    to ``warn``, else as a :class:`RuntimeWarning`.
    """
    clients = parse_int_list(clients, "clients")
    seeds = parse_int_list(seeds, "seeds")
    settings, specs = _planned_runs(
        methods, networks, clients, samples, partition, seeds, backend, options, warn
    )
    out = check_out(out)
    n_run, n_skipped, n_failed = run_sweep(
        specs, out, jobs, retry_failed, progress, on_run_done, start_method
    )
    # the runs are kept (runs/); what is written from them now may fail (a full disk): then the
    # study still comes back, with one line per file that was not written
    everything = load_results(out)
    keys = {s.key for s in specs}
    frame = everything[everything["key"].isin(keys)].reset_index(drop=True)
    summary = summarise(frame, metrics)
    study = Study(out, frame, summary, len(specs), n_run, n_skipped, n_failed)
    _write_tables(study, everything, metrics)
    chosen = graph_run or default_graph_run(specs, frame)
    plan = _study_plan(methods, networks, clients, seeds, settings, options, metrics, chosen, specs)
    _attempt(
        study,
        STUDY_FILE,
        lambda: write_text(
            out / STUDY_FILE, json.dumps(plan, indent=1, default=json_default) + "\n"
        ),
    )
    _write_drawings(study, plots, report, metrics, chosen)
    _tell_not_written(study, failed, warn)
    return study


def _planned_runs(
    methods: Sequence[str],
    networks: Sequence[str],
    clients: Sequence[int],
    samples: int | None,
    partition: str | None,
    seeds: Sequence[int],
    backend: str | None,
    options: dict[str, Any] | None,
    warn: Callable[[str], None] | None,
) -> tuple[dict[str, Any], list[RunSpec]]:
    """A sweep's run settings (those given, the others' defaults) and its planned runs, every
    spec validated before the first run."""
    if not methods or not networks:
        raise ValueError("give at least one method and one network")
    settings = RUN_SETTINGS.resolve(
        {
            k: v
            for k, v in {"samples": samples, "partition": partition, "backend": backend}.items()
            if v is not None
        },
        owner="compare",
    )
    specs = plan_runs(
        methods,
        networks,
        clients,
        settings["samples"],
        settings["partition"],
        seeds,
        settings["backend"],
        options,
        warn,
    )
    return settings, specs


def _attempt(study: Study, what: str, write: Callable[[], Any], drawn: bool = False) -> Any:
    """Write one of a study's files after its runs, and return what ``write`` returns. A file
    that cannot be written (a full disk), or a plot or page that cannot be drawn (``drawn``), is
    noted in ``study.not_written`` with why, and None returned: the runs and tables are kept."""
    try:
        return write()
    except OSError as err:
        study.not_written[what] = reason(err)
    except (ValueError, KeyError) as err:  # a plot or page that cannot be drawn: the runs
        if not drawn:  # and tables are kept, and the line says why
            raise
        study.not_written[what] = str(err.args[0] if isinstance(err, KeyError) else err)
    return None


def _write_tables(study: Study, everything: pd.DataFrame, metrics: Sequence[str]) -> None:
    """Write results.csv (every run record's rows) and the sweep's summary as CSV and text."""
    out, summary = study.out, study.summary
    _attempt(study, "results.csv", lambda: write_results(out, everything))
    _attempt(
        study, "summary.csv", lambda: write_text(out / "summary.csv", summary.to_csv(index=False))
    )
    _attempt(
        study,
        "summary.txt",
        lambda: write_text(out / "summary.txt", format_summary(summary, metrics) + "\n"),
    )


def _study_plan(
    methods: Sequence[str],
    networks: Sequence[str],
    clients: list[int],
    seeds: list[int],
    settings: dict[str, Any],
    options: dict[str, Any] | None,
    metrics: Sequence[str],
    chosen: str | None,
    specs: Sequence[RunSpec],
) -> dict[str, Any]:
    """The sweep's plan as study.json keeps it: what ran, with which settings and metrics, the
    run drawn against its truth, and every run's key (the report rebuilds the study from it)."""
    return {
        "methods": list(methods),
        "networks": list(networks),
        "clients": clients,
        "seeds": seeds,
        # the run settings the sweep uses (the others, such as one run's clients or seed, are
        # the sweep's lists above)
        **{k: settings[k] for k in ("samples", "partition", "backend")},
        "options": dict(options or {}),
        "metrics": list(metrics),
        "graph_run": chosen,
        "keys": [s.key for s in specs],
    }


def _write_drawings(
    study: Study, plots: bool, report: bool, metrics: Sequence[str], chosen: str | None
) -> None:
    """Draw the study's plots (``plots``) and write its report page (``report``); when either
    fails part way, the PNGs cut short in plots/ are removed (the report draws there too)."""
    out = study.out
    if plots:
        from fedcausal_flwr.plots import plot_study

        drawn = _attempt(
            study,
            "plots",
            lambda: plot_study(study.frame, out, metrics, graph_to_draw(out, chosen)),
            True,
        )
        study.plots = list(drawn or [])
    if report:
        from fedcausal_flwr.report import write_report

        study.report = _attempt(study, "report.html", lambda: write_report(out), True)
    if {"plots", "report.html"} & set(study.not_written):  # the report draws into plots/ too
        remove_cut_pngs(out / "plots")


def _tell_not_written(
    study: Study, failed: FailedWrites | None, warn: Callable[[str], None] | None
) -> None:
    """One line saying which files were not written and why, if any: into ``failed`` (the
    command line prints it after the table), else to ``warn``, else as a RuntimeWarning
    attributed to :func:`compare`'s caller."""
    if study.not_written:
        line = not_written_line(study.out, study.not_written)
        if failed is not None:
            failed.lines[f"--out {study.out}"] = line
        elif warn is not None:
            warn(line)
        else:
            warnings.warn(line, RuntimeWarning, stacklevel=3)


def not_written_line(out: str | Path, missing: dict[str, str]) -> str:
    """One line for every file a sweep could not write after its runs, grouped by the reason
    (a full disk fails them all): what is missing, why, and that no run was lost."""
    reasons: dict[str, list[str]] = {}
    for what, why in missing.items():
        reasons.setdefault(why, []).append(what)
    parts = [f"not written ({why}): {', '.join(whats)}" for why, whats in reasons.items()]
    return f"--out {out}: {'; '.join(parts)}; the runs are kept in {Path(out) / 'runs'}"


#: the last 8 bytes of every whole PNG file (its IEND chunk and that chunk's CRC)
PNG_END = b"IEND\xaeB`\x82"


def remove_cut_pngs(folder: Path) -> list[Path]:
    """Remove the plots under ``folder`` a full disk cut short (no PNG end): a half image is no
    plot, and the next sweep draws it again. Returns what was removed."""
    removed = []
    for png in sorted(Path(folder).rglob("*.png")):
        try:
            with png.open("rb") as stream:
                stream.seek(max(png.stat().st_size - len(PNG_END), 0))
                if stream.read() != PNG_END:
                    png.unlink()
                    removed.append(png)
        except OSError:
            continue
    return removed


def default_graph_run(specs: Sequence[RunSpec], frame: pd.DataFrame) -> str | None:
    """The first method's successful run on the first network at the largest K, lowest seed."""
    ok = set(frame.loc[frame["status"] == "ok", "key"]) if not frame.empty else set()
    ranked = sorted(
        (s for s in specs if s.key in ok),
        key=lambda s: (
            s.network != specs[0].network,
            s.method != specs[0].method,
            -s.clients,
            s.seed,
        ),
    )
    return ranked[0].key if ranked else None


def graph_to_draw(out: str | Path, key: str | None) -> tuple[Any, Any, str] | None:
    """``(learned graph, its truth, title)`` of a stored run, for the study's graph plot: the two
    graphs its table's columns compare (a local structure at its target, a DAG output as its
    equivalence class), the title naming the run and that view."""
    from fedcausal_flwr.plots import drawing_title

    if key is None:
        return None
    learned, truth, record = learned_and_truth(out, key)
    return learned, truth, drawing_title(record)
