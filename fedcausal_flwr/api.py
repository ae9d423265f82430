"""``fedcausal_flwr.run``: one call from data (or a benchmark network) to a scored :class:`Result`.

The command line is a thin wrapper over this module. A run is a function of (data, partition,
method options, seed): the same arguments give the same graph on every backend, and the result
records every effective option, the run settings, the data's provenance and fingerprint and the
software versions, so :func:`rerun` reproduces it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fedcausal_flwr.data.csv_input import read_client_files
from fedcausal_flwr.data.fingerprint import data_fingerprint, matches_recorded
from fedcausal_flwr.data.frame_cache import one_run
from fedcausal_flwr.data.inputs import InputError, setting_text
from fedcausal_flwr.data.partition import Partition
from fedcausal_flwr.data.specs import make_partition, sample_partition
from fedcausal_flwr.federation.core.input_checks import check_client_inputs, client_info_of
from fedcausal_flwr.federation.core.protocol import ProtocolStrategy
from fedcausal_flwr.federation.core.registry import MethodSpec, check_secure, get_method
from fedcausal_flwr.federation.runtime.runners import run_prepared
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.options import OptionError
from fedcausal_flwr.outputs import reading_inputs, reason
from fedcausal_flwr.result import Result
from fedcausal_flwr.scoring import read_truth, score_graph, score_result, truth_for
from fedcausal_flwr.settings import NETWORK_SETTINGS, resolve_settings

__all__ = ["make_partition", "read_truth", "rerun", "run", "score_graph", "truth_for"]


def run(
    method: str,
    *,
    data: Sequence[pd.DataFrame] | Sequence[str | os.PathLike] | Partition | None = None,
    network: str | None = None,
    samples: int | None = None,
    clients: int | None = None,
    partition: str | None = None,
    seed: int | None = None,
    backend: str | None = None,
    truth: Graph | str | Path | None = None,
    min_clients: int | None = None,
    secure: bool | None = None,
    ray_address: str | None = None,
    keep_evidence: bool | None = None,
    sep: str | None = None,
    keep_index: bool = False,
    **method_options: Any,
) -> Result:
    """Run ``method`` on client data and score it when a ground truth is known.

    Parameters
    ----------
    method : str
        A registered method (``fedcausal-flwr methods`` lists them with their options).
    data : sequence of DataFrame, sequence of CSV paths, or Partition, optional
        One frame or one CSV file (``str`` or ``Path``) per client; files are read and checked as
        ``fedcausal-flwr run --data`` reads them (``None`` is a level there, not a missing value).
        Without it, ``samples`` rows of ``network`` are drawn with ``seed`` and split into
        ``clients`` by ``partition``.
    network, samples, clients, partition, seed, backend, min_clients, secure, ray_address
        Run settings (:data:`fedcausal_flwr.settings.RUN_SETTINGS`); ``None`` takes the default.
        ``network`` and ``data`` are alternatives, and the network settings do not apply with
        ``data``.
    keep_evidence : bool, optional
        The run setting ``keep_evidence``: keep a PC/FCI search's per-pair evidence
        (``Result.evidence``, saved beside the result; default True).
    truth : Graph or path, optional
        A DAG or a ``cause,effect`` CSV for the metrics; with a network, its DAG by default.
    sep, keep_index
        How CSV files in ``data`` are read, as ``--sep`` and ``--keep-index``: the delimiter
        (sniffed if ``None``) and whether an index-like first column is kept as a variable.
    **method_options
        The method's own options (``alpha``, ``max_depth``, ...), validated before the first
        round: an unknown name, a wrong type or an out-of-range value is an :class:`OptionError`.
    """
    settings_raw = {
        "network": network,
        "samples": samples,
        "clients": clients,
        "partition": partition,
        "seed": seed,
        "backend": backend,
        "min_clients": min_clients,
        "secure": secure,
        "ray_address": ray_address,
        "keep_evidence": keep_evidence,
    }
    frames, files = _frames_or_files(data)
    return execute(
        method,
        settings_raw,
        method_options,
        data=frames,
        files=files,
        sep=sep,
        keep_index=keep_index,
        truth=truth,
        entry_point="python",
    )


def _frames_or_files(
    data: Sequence[Any] | Partition | None,
) -> tuple[Sequence[pd.DataFrame] | Partition | None, list[str | Path] | None]:
    """``data=`` as ``(frames, None)`` or ``(None, CSV paths)``: paths are read by the same
    reader as ``run --data``, since ``pd.read_csv`` turns a level named ``None`` into a gap."""
    if isinstance(data, (str, os.PathLike)):
        raise OptionError(
            f"data={str(data)!r}: give a list with one CSV file per client, e.g. "
            f"data=[{str(data)!r}, ...]"
        )
    if data is None or isinstance(data, Partition):
        return data, None
    if isinstance(data, pd.DataFrame):  # iterating it would give its column names
        raise OptionError(
            f"data= is one DataFrame ({len(data):,} rows, {data.shape[1]} columns): give a list "
            "with one DataFrame per client, e.g. data=[df_site_a, df_site_b] (one frame is one "
            "site: data=[df])"
        )
    items = list(data)
    is_path = [isinstance(item, (str, os.PathLike)) for item in items]
    if items and all(is_path):
        return None, [item if isinstance(item, str) else Path(item) for item in items]
    if any(is_path):
        first = next(k for k, flag in enumerate(is_path) if not flag)
        raise OptionError(
            f"data= mixes CSV paths and {type(items[first]).__name__} (client {first}): give "
            "one kind, one per client"
        )
    return items, None


@one_run
def execute(
    method: str,
    settings_raw: Mapping[str, Any],
    options_raw: Mapping[str, Any],
    *,
    data: Sequence[pd.DataFrame] | Partition | None = None,
    files: Sequence[str | Path] | None = None,
    sep: str | None = None,
    keep_index: bool = False,
    truth: Graph | str | Path | None = None,
    entry_point: str = "python",
    expect_fingerprint: str | None = None,
    source: Mapping[str, Any] | None = None,
    announce: Callable[[str], None] | None = None,
    progress: Callable[[str], None] | None = None,
    with_truth: Callable[[Result, Graph | None], None] | None = None,
    on_result: Callable[[Result], None] | None = None,
) -> Result:
    """The body of every single-run entry_point: settings and options as typed on ``entry_point``.

    ``files``: one CSV per client, client ``k`` reading ``files[k]``, read and checked by
    :func:`~fedcausal_flwr.data.csv_input.read_client_csv` (``sep``: the delimiter, sniffed if
    ``None``; ``keep_index``: keep an index-like first column as a variable); recorded in the
    result for :func:`rerun`. Every entry point's data then passes the server's input check
    (:func:`check_frames`) before a backend starts.
    ``expect_fingerprint``: a re-run's recorded data fingerprint; other data is an error.
    ``source``: where in-memory ``data`` came from, for the result's provenance.
    ``announce``: called with one line saying what is about to run (no default stays silent).
    ``progress``: called with one line per round (a slow run is told from a hung one).
    ``with_truth``: called with the result and the true DAG it was scored against (None without
    one) before the result is returned (the command line draws the graph with it).
    ``on_result``: called with the finished result before it is scored, so a caller can save it
    first: a scoring failure then loses no run.
    """
    started = time.perf_counter()
    spec = get_method(method)
    with_data = data is not None or files is not None
    settings = resolve_settings(settings_raw, with_data=with_data, entry_point=entry_point)
    options = spec.resolve(
        spec.seeded(options_raw, settings["seed"]), entry_point
    )  # fail on a bad option before reading any data
    check_secure(spec, options, settings["secure"], entry_point)
    frames, provenance, dag = _client_frames(
        settings, options, data, files, sep, keep_index, source, entry_point
    )
    strategy = spec.new_strategy(options)  # made once: it checks the data, then runs
    check_frames(spec, strategy, frames, files, entry_point)
    if expect_fingerprint is not None and not matches_recorded(frames, expect_fingerprint):
        raise OptionError(
            f"the data differs from the recorded run's (fingerprint {data_fingerprint(frames)} "
            f"vs {expect_fingerprint}): the files changed or other data was given"
        )
    if announce is not None:
        announce(_run_line(method, settings, provenance, len(frames)))
    dag, truth_label = _scoring_truth(truth, dag, frames, entry_point)
    result = run_prepared(
        spec,
        strategy,
        frames,
        options,
        backend=settings["backend"],
        secure=settings["secure"],
        min_clients=settings["min_clients"],
        entry_point=entry_point,
        data=provenance,
        progress=progress,
        ray_address=settings["ray_address"],
    )
    _record_run(result, settings, truth_label, started)
    if on_result is not None:
        on_result(result)
    if dag is not None and (result.graph is not None or spec.score is not None):
        score_result(result, dag)  # a score hook needs no single graph
    if with_truth is not None:
        with_truth(result, dag)
    return result


def _client_frames(
    settings: Mapping[str, Any],
    options: Mapping[str, Any],
    data: Sequence[pd.DataFrame] | Partition | None,
    files: Sequence[str | Path] | None,
    sep: str | None,
    keep_index: bool,
    source: Mapping[str, Any] | None,
    entry_point: str,
) -> tuple[list[pd.DataFrame], dict[str, Any], Graph | None]:
    """A run's client frames, their provenance (for the result) and the true DAG when they were
    sampled from a benchmark network: read from ``files``, taken from ``data``, or sampled as
    the settings say. ``sep`` and ``keep_index`` are for files only; no frame is an error."""
    dag: Graph | None = None
    if files is None and (sep is not None or keep_index):
        reading = (("sep", sep), ("keep_index", keep_index))
        given = " and ".join(setting_text(k, v, entry_point) for k, v in reading if v)
        raise OptionError(f"{given}: only for data read from files")
    if files is not None:
        with reading_inputs(files, entry_point):  # permission denied: one line naming the file
            frames = read_client_files(
                list(files),
                sep=sep,
                keep_index=keep_index,
                entry_point=entry_point,
                allow_missing=options.get("missing", "error") != "error",
            )
        provenance: dict[str, Any] = {
            "source": "files",
            "files": [str(Path(f).resolve()) for f in files],
            "sep": sep,
            "keep_index": bool(keep_index),
        }
    elif data is not None:
        frames = list(data.clients) if isinstance(data, Partition) else list(data)
        provenance = dict(source or {"source": "frames"})
    else:
        part, net = sample_partition(
            settings["network"],
            settings["samples"],
            settings["clients"],
            settings["partition"],
            settings["seed"],
        )
        frames = list(part.clients)
        dag = net.dag
        provenance = {
            "source": "network",
            **{key: settings[key] for key in ("network", "samples", "partition")},
        }
    if not frames:
        raise OptionError("no client data: give at least one frame or file")
    return frames, provenance, dag


def _run_line(
    method: str, settings: Mapping[str, Any], provenance: Mapping[str, Any], clients: int
) -> str:
    """The line announcing what is about to run: the method, on which data, seed and backend."""
    where = (
        f"{settings['network']}, {settings['samples']} rows split {settings['partition']} "
        f"into {settings['clients']} clients"
        if provenance["source"] == "network"
        else f"{clients} clients' data"
    )
    return f"{method} on {where}; seed {settings['seed']}, backend {settings['backend']}" + (
        ", secure" if settings["secure"] else ""
    )


def _scoring_truth(
    truth: Graph | str | Path | None,
    dag: Graph | None,
    frames: Sequence[pd.DataFrame],
    entry_point: str,
) -> tuple[Graph | None, str | None]:
    """The true DAG a run is scored against and its label in the result: ``truth`` as given (a
    graph, or a file read over every client's columns before the run starts), else the sampled
    network's ``dag``, else none."""
    truth_label = None
    if truth is not None:
        try:
            # every client's columns (methods over non-identical variable sets: their union)
            union = list(dict.fromkeys(str(c) for frame in frames for c in frame.columns))
            dag = truth if isinstance(truth, Graph) else read_truth(truth, union)
        except OSError as err:  # missing, a folder, permission denied: before the run starts
            given = setting_text("truth", str(truth), entry_point)
            raise OptionError(f"{given}: cannot be read ({reason(err)})") from None
        truth_label = "graph" if isinstance(truth, Graph) else str(Path(truth).resolve())
    elif dag is not None:
        truth_label = "network"
    return dag, truth_label


def _record_run(
    result: Result, settings: Mapping[str, Any], truth_label: str | None, started: float
) -> None:
    """Record the run's seed, evidence setting and truth in ``result`` (dropping its evidence
    unless kept), and its wall time if the backend gave none."""
    result.config["run"]["seed"] = settings["seed"]
    result.config["run"]["keep_evidence"] = settings["keep_evidence"]
    if not settings["keep_evidence"]:
        result.evidence = None
    result.config["truth"] = truth_label
    result.wall_s = max(result.wall_s, 0.0) or time.perf_counter() - started


def check_frames(
    spec: MethodSpec,
    strategy: ProtocolStrategy,
    frames: Sequence[pd.DataFrame],
    files: Sequence[str | Path] | None,
    entry_point: str,
) -> None:
    """The input check the server runs after hello, run on the frames before a backend starts
    (a Ray run fails in a second, not after Ray's start-up): the same reports, the same needs."""
    for k, frame in enumerate(frames):
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"client {k}: expected a pandas DataFrame, got {type(frame).__name__}")
    names = None if files is None else {k: Path(f).name for k, f in enumerate(files)}
    info = {}
    for k, frame in enumerate(frames):
        try:
            info[k] = client_info_of(frame, k, strategy.hello_max_levels)
        except InputError as error:  # a value no test can use: name the client's file
            if names is not None and error.file is None:
                error.file = names.get(k)
            raise error.in_entry_point(entry_point) from None
    check_client_inputs(
        info,
        strategy.input_needs(),
        method=spec.name,
        min_sites=spec.min_sites,
        files=names,
        entry_point=entry_point,
    )


def rerun_arguments(config: Mapping[str, Any]) -> dict[str, Any]:
    """What :func:`execute` needs to repeat a recorded run: method, settings, options, files."""
    try:
        method = config["method"]
        options = dict(config["options"])
        run_settings = dict(config["run"])
        data = dict(config["data"])
    except (KeyError, TypeError):
        raise OptionError(
            "this result's config has no method/options/run/data record (written by an older "
            "version?); it cannot be re-run"
        ) from None
    settings = {
        k: run_settings.get(k)
        for k in ("seed", "backend", "min_clients", "secure", "keep_evidence")
    }
    files = None
    reading = {"sep": data.get("sep"), "keep_index": bool(data.get("keep_index", False))}
    if data.get("source") == "network":
        settings.update({k: data.get(k) for k in ("network", "samples", "partition")})
        settings["clients"] = data.get("clients")
    elif data.get("source") == "files":
        files = list(data["files"])
    else:
        raise OptionError(
            f"the recorded run used data of source {data.get('source')!r} (in-memory frames or a "
            "deployment's sites), which a re-run cannot read back; run it again on that data"
        )
    return {
        "method": method,
        "settings": settings,
        "options": options,
        "files": files,
        "reading": reading,
        "fingerprint": data.get("fingerprint"),
        "truth": config.get("truth"),
    }


def rerun(result: Result | str | Path, **overrides: Any) -> Result:
    """Repeat a recorded run (a :class:`Result` or its JSON file) and check the data is the same.

    ``overrides`` change run settings (``backend="ray"``) or method options; the recorded data
    fingerprint is checked either way.
    """
    if not isinstance(result, Result):
        result = Result.load(result)
    args = rerun_arguments(result.config)
    settings, options = args["settings"], args["options"]
    spec = get_method(args["method"])
    for key, value in overrides.items():
        if key in settings:
            settings[key] = value
        elif key in spec.options:
            options[key] = value
        else:
            raise OptionError(spec.options.unknown_message(key, spec.owner, "python"))
    truth = args["truth"] if args["truth"] not in (None, "network", "graph") else None
    if args["files"] is not None:
        settings = {k: v for k, v in settings.items() if k not in NETWORK_SETTINGS}
    return execute(
        args["method"],
        settings,
        options,
        files=args["files"],
        **(args["reading"] if args["files"] is not None else {}),
        truth=truth,
        entry_point="python",
        expect_fingerprint=args["fingerprint"],
    )
