"""A study's runs: what each run is (:class:`RunSpec`), the plan of a sweep's runs, the data a run
sees, and one run executed into its record (a failed one too), for :mod:`fedcausal_flwr.compare`.

Every run is a function of ``(network, samples, clients, partition, seed)`` for its data, derived
exactly as :func:`fedcausal_flwr.api.run` derives it
(:func:`~fedcausal_flwr.data.specs.sample_partition`), so competing methods see the same client
data; each record carries the data's fingerprint (``data_hash``) to prove it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fedcausal_flwr.data.fingerprint import data_fingerprint
from fedcausal_flwr.data.partition import Partition
from fedcausal_flwr.data.specs import parse_network, parse_partition, sample_partition
from fedcausal_flwr.federation.core.registry import get_method
from fedcausal_flwr.options import parse_spec
from fedcausal_flwr.scoring import scoring_view, summary_rows
from fedcausal_flwr.study_files import json_default

RECORD_VERSION = 2


def parse_int_list(text: str | Iterable[int], what: str = "values") -> list[int]:
    """``"0-4"`` -> [0..4], ``"2,4,8"`` -> [2, 4, 8], ``"0-2,7"`` -> [0, 1, 2, 7]; order kept."""
    if not isinstance(text, str):
        return [int(v) for v in text]
    values: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, sep, hi = part.partition("-")
        try:
            if sep and lo:
                start, stop = int(lo), int(hi)
                if stop < start:
                    raise ValueError
                values.extend(range(start, stop + 1))
            else:
                values.append(int(part))
        except ValueError:
            raise ValueError(f"cannot read {what} {text!r}: use e.g. 0-4 or 2,4,8") from None
    if not values:
        raise ValueError(f"no {what} in {text!r}")
    return list(dict.fromkeys(values))


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep; ``options`` are the method options as typed (common ones merged in)."""

    method: str
    network: str
    samples: int
    clients: int
    partition: str
    seed: int
    options: tuple[tuple[str, Any], ...] = ()
    backend: str = "inprocess"

    @property
    def registered_method(self) -> str:
        return parse_spec(self.method, what="method spec")[0]

    @property
    def run_options(self) -> dict[str, Any]:
        """The options as typed: the sweep's common ones, then the method spec's own."""
        return {**dict(self.options), **parse_spec(self.method, what="method spec")[1]}

    def effective_options(self) -> dict[str, Any]:
        """Every option of the run, typed, defaults included (the method's seed is the run's)."""
        spec = get_method(self.registered_method)
        return spec.resolve(spec.seeded(self.run_options, self.seed), "spec")

    @property
    def key(self) -> str:
        """File-name-safe identity: method/network/n/K/partition/seed plus a hash of the options."""
        identity = json.dumps(sorted(self.effective_options().items()), default=str)
        digest = hashlib.sha256(identity.encode()).hexdigest()[:10]
        name = f"{self.method}__{self.network}__n{self.samples}__K{self.clients}__{self.partition}"
        safe = "".join(c if c.isalnum() or c in "-_.=" else "-" for c in name)
        return f"{safe}__s{self.seed}__{digest}"


def plan_runs(
    methods: Sequence[str],
    networks: Sequence[str],
    clients: Sequence[int],
    samples: int,
    partition: str = "iid",
    seeds: Sequence[int] = (0,),
    backend: str = "inprocess",
    options: dict[str, Any] | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[RunSpec]:
    """Every combination, ordered so that all methods of one (network, K, seed) are adjacent.

    ``options`` apply to every method that declares them; for a method that does not, ``warn``
    is told (a method spec's own options must all be declared: an unknown one is an error).
    Everything is validated here, before the first run.
    """
    for network in networks:
        parse_network(network)
    parse_partition(partition)
    common = dict(options or {})
    plan: list[tuple[str, tuple[tuple[str, Any], ...]]] = []
    for method in methods:
        name, own = parse_spec(method, what="method spec")
        spec = get_method(name)
        applied = {k: v for k, v in common.items() if k in spec.options}
        skipped = sorted(set(common) - set(applied))
        if skipped and warn is not None:
            warn(
                f"{', '.join('--' + k.replace('_', '-') for k in skipped)} "
                f"{'does' if len(skipped) == 1 else 'do'} not apply to {name} (it has no such "
                "option); it runs without"
            )
        spec.resolve({**applied, **own}, "spec")  # a bad option fails now, not mid-sweep
        plan.append((method, tuple(sorted(applied.items()))))
    return [
        RunSpec(m, net, int(samples), int(k), partition, int(s), opts, backend)
        for net in networks
        for k in clients
        for s in seeds
        for m, opts in plan
    ]


def run_data(spec: RunSpec) -> tuple[Partition, Any]:
    """The client data and true DAG of a run, derived as :func:`api.run` does for a network."""
    part, net = sample_partition(
        spec.network, spec.samples, spec.clients, spec.partition, spec.seed
    )
    return part, net.dag


def partition_hash(part: Partition | Sequence[pd.DataFrame]) -> str:
    """The data fingerprint of a run's clients (equal iff the client data are equal)."""
    frames = part.clients if isinstance(part, Partition) else list(part)
    return data_fingerprint(frames)


# ============================================================================ one run
def execute_run(spec: RunSpec) -> dict[str, Any]:
    """Run one spec and return its record; an exception becomes ``status="failed"``."""
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    record = failed_record(spec, "")
    started = time.perf_counter()
    finished: list[Any] = []  # the result, kept before scoring: a scoring failure loses no run
    try:
        from fedcausal_flwr.api import execute

        part, dag = run_data(spec)
        record["data_hash"] = partition_hash(part)
        source = {
            "source": "network",
            "network": spec.network,
            "samples": spec.samples,
            "partition": spec.partition,
        }
        result = execute(
            spec.registered_method,
            # a record is the run's result without its per-pair evidence (re-run one with
            # `run --config runs/<key>.json --keep-evidence true --out r.json` to keep it)
            {"seed": spec.seed, "backend": spec.backend, "keep_evidence": False},
            spec.run_options,
            data=part,
            truth=dag,
            entry_point="spec",
            source=source,
            on_result=finished.append,
        )
        record["derived"] = summary_rows(result, dag)
        record["view"] = scoring_view(result)  # what the common metric columns mean
        record.update(
            status="ok",
            metrics=result.metrics,
            rounds=result.rounds,
            bytes_up=result.bytes_up,
            bytes_down=result.bytes_down,
            wall_s=result.wall_s,
            result=result.to_json(),
        )
    except Exception as err:
        record["error"] = f"{type(err).__name__}: {err}"
        record["wall_s"] = time.perf_counter() - started
        if finished:  # the run ended, scoring it failed: the record keeps the result
            record["error"] = f"scoring failed: {record['error']}"
            record.update(result=finished[0].to_json(), rounds=finished[0].rounds)
    return json.loads(json.dumps(record, default=json_default))


def failed_record(spec: RunSpec, error: str) -> dict[str, Any]:
    """A run's record before (or without) a result: ``status="failed"`` with ``error``."""
    return {
        "record_version": RECORD_VERSION,
        "key": spec.key,
        "method": spec.method,
        "run_method": spec.registered_method,
        "network": spec.network,
        "n": spec.samples,
        "K": spec.clients,
        "partition": spec.partition,
        "seed": spec.seed,
        "options": dict(sorted(spec.run_options.items())),
        "backend": spec.backend,
        "status": "failed",
        "error": error,
        "data_hash": "",
        "metrics": {},
        "derived": {},
        "rounds": 0,
        "bytes_up": 0,
        "bytes_down": 0,
        "wall_s": 0.0,
        "result": None,
    }


def execute_failed(spec: RunSpec, err: BaseException) -> dict[str, Any]:
    """The record of a run whose worker failed outside :func:`execute_run` (e.g. it died)."""
    return failed_record(spec, f"worker failed: {type(err).__name__}: {err}")
