"""``fedcausal_flwr.run``: one call from data (or a benchmark network) to a scored :class:`Result`.

The command line is a thin wrapper over this module. A run is a function of (data, partition,
method options, seed): the same arguments give the same graph on every backend, and the result
records every effective option, the run settings, the data's provenance and fingerprint and the
software versions, so :func:`rerun` reproduces it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fedcausal_flwr.data.fingerprint import data_fingerprint
from fedcausal_flwr.data.partition import Partition, from_csv_files
from fedcausal_flwr.data.specs import make_partition, sample_partition
from fedcausal_flwr.federation.registry import check_secure, get_method
from fedcausal_flwr.federation.runners import run_method
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.options import OptionError
from fedcausal_flwr.result import Result
from fedcausal_flwr.scoring import read_truth, score_graph, truth_for
from fedcausal_flwr.settings import NETWORK_SETTINGS, resolve_settings

__all__ = ["make_partition", "read_truth", "rerun", "run", "score_graph", "truth_for"]


def run(
    method: str,
    *,
    data: Sequence[pd.DataFrame] | Partition | None = None,
    network: str | None = None,
    samples: int | None = None,
    clients: int | None = None,
    partition: str | None = None,
    seed: int | None = None,
    backend: str | None = None,
    truth: Graph | str | Path | None = None,
    min_clients: int | None = None,
    secure: bool | None = None,
    **method_options: Any,
) -> Result:
    """Run ``method`` on client data and score it when a ground truth is known.

    Parameters
    ----------
    method : str
        A registered method (``fedcausal-flwr methods`` lists them with their options).
    data : sequence of DataFrame or Partition, optional
        One frame per client. Without it, ``samples`` rows of ``network`` are drawn with ``seed``
        and split into ``clients`` by ``partition``.
    network, samples, clients, partition, seed, backend, min_clients, secure
        Run settings (:data:`fedcausal_flwr.settings.RUN_SETTINGS`); ``None`` takes the default.
        ``network`` and ``data`` are alternatives, and the network settings do not apply with
        ``data``.
    truth : Graph or path, optional
        A DAG or a ``cause,effect`` CSV for the metrics; with a network, its DAG by default.
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
    }
    return execute(method, settings_raw, method_options, data=data, truth=truth, door="python")


def execute(
    method: str,
    settings_raw: Mapping[str, Any],
    options_raw: Mapping[str, Any],
    *,
    data: Sequence[pd.DataFrame] | Partition | None = None,
    files: Sequence[str | Path] | None = None,
    truth: Graph | str | Path | None = None,
    door: str = "python",
    expect_fingerprint: str | None = None,
    source: Mapping[str, Any] | None = None,
    announce: Callable[[str], None] | None = None,
) -> Result:
    """The body of every single-run door: settings and options as typed on ``door``.

    ``files``: one CSV per client (read here; recorded in the result for :func:`rerun`).
    ``expect_fingerprint``: a re-run's recorded data fingerprint; other data is an error.
    ``source``: where in-memory ``data`` came from, for the result's provenance.
    ``announce``: called with one line saying what is about to run (no default stays silent).
    """
    started = time.perf_counter()
    spec = get_method(method)
    with_data = data is not None or files is not None
    settings = resolve_settings(settings_raw, with_data=with_data, door=door)
    options = spec.resolve(
        spec.seeded(options_raw, settings["seed"]), door
    )  # fail on a bad option before reading any data
    check_secure(spec, options, settings["secure"], door)
    dag: Graph | None = None
    if files is not None:
        frames = list(from_csv_files([str(f) for f in files]).clients)
        provenance: dict[str, Any] = {
            "source": "files",
            "files": [str(Path(f).resolve()) for f in files],
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
    if expect_fingerprint is not None and data_fingerprint(frames) != expect_fingerprint:
        raise OptionError(
            f"the data differs from the recorded run's (fingerprint {data_fingerprint(frames)} "
            f"vs {expect_fingerprint}): the files changed or other data was given"
        )
    if announce is not None:
        where = (
            f"{settings['network']}, {settings['samples']} rows split {settings['partition']} "
            f"into {settings['clients']} clients"
            if provenance["source"] == "network"
            else f"{len(frames)} clients' data"
        )
        announce(
            f"{method} on {where}; seed {settings['seed']}, backend {settings['backend']}"
            + (", secure" if settings["secure"] else "")
        )
    truth_label = None
    if truth is not None:
        dag = truth if isinstance(truth, Graph) else read_truth(truth, list(frames[0].columns))
        truth_label = "graph" if isinstance(truth, Graph) else str(Path(truth).resolve())
    elif dag is not None:
        truth_label = "network"
    result = run_method(
        method,
        frames,
        options,
        backend=settings["backend"],
        secure=settings["secure"],
        min_clients=settings["min_clients"],
        door=door,
        data=provenance,
    )
    result.config["run"]["seed"] = settings["seed"]
    result.config["truth"] = truth_label
    if dag is not None and result.graph is not None:
        result.metrics.update(score_graph(result, dag))
    result.wall_s = max(result.wall_s, 0.0) or time.perf_counter() - started
    return result


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
    settings = {k: run_settings.get(k) for k in ("seed", "backend", "min_clients", "secure")}
    files = None
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
        truth=truth,
        door="python",
        expect_fingerprint=args["fingerprint"],
    )
