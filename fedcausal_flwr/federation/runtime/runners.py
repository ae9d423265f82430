"""Run a method: ``run_protocol(strategy, client_factory, num_clients, backend=...) -> Result``.

Backends run the SAME ServerApp/ClientApp objects:

* ``"inprocess"`` - :class:`~fedcausal_flwr.federation.runtime.localgrid.LocalGrid`, synchronous, no
  Ray; the default for tests and sweeps (milliseconds per round; SecAgg+ works too).
* ``"ray"`` - Flower's simulation engine (``run_simulation``; why not ``flwr run``:
  :mod:`~fedcausal_flwr.federation.runtime.flower_internals`), quiet: telemetry
  off, loggers at ERROR, Ray's temp dir settable, 1-2 actors on a 2-core machine. Client data is
  spilled to files and loaded once per actor process, so messages do not carry it.

Deployment (SuperLink + SuperNodes + ``flwr run``) uses
``fedcausal_flwr.flwr_app``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
from flwr.app import Context

from fedcausal_flwr.data.frame_cache import one_run
from fedcausal_flwr.environment import NO_PHONING_OUT
from fedcausal_flwr.federation.core.disclosure import summed_actions
from fedcausal_flwr.federation.core.protocol import ProtocolStrategy
from fedcausal_flwr.federation.core.registry import MethodSpec, check_secure, get_method
from fedcausal_flwr.federation.core.site_guard import SiteGuard
from fedcausal_flwr.federation.runtime.clientside import BuiltClient
from fedcausal_flwr.federation.runtime.flower_internals import (
    ray_simulation,
    run_simulation_quietly,
)
from fedcausal_flwr.federation.runtime.localgrid import run_local
from fedcausal_flwr.federation.runtime.workflow import (
    RunSettings,
    SecureAggConfig,
    make_client_app,
    make_server_app,
)
from fedcausal_flwr.options import OptionError, spell
from fedcausal_flwr.result import Result, run_config

BACKENDS = ("inprocess", "ray")
QUIET_LOGGERS = ("flwr", "ray")
# len("/ray/session_2026-01-01_00-00-00_000000_1234567/sockets/plasma_store")
RAY_SOCKET_SUFFIX = 70

_PARTITION_CACHE: dict[str, pd.DataFrame] = {}


class PartitionedClients:
    """Client factory over one DataFrame per client: ``factory(partition_id, context)``.

    ``make_client(partition_id, data, context)`` builds the client for the message's Flower
    ``context`` (a :class:`~fedcausal_flwr.clients.base.ProtocolClient` class will do). In memory
    for the in-process backend; :meth:`spill` writes the partitions to files so a Ray message
    carries only their paths (each actor process loads a partition once and caches it).
    """

    def __init__(
        self,
        make_client: Callable[[int, pd.DataFrame, Context | None], BuiltClient],
        partitions: Sequence[pd.DataFrame] | None = None,
        *,
        files: Sequence[str] | None = None,
    ):
        if (partitions is None) == (files is None):
            raise ValueError("give exactly one of partitions or files")
        if partitions is not None:
            for k, part in enumerate(partitions):
                if not isinstance(part, pd.DataFrame):
                    raise TypeError(f"partition {k} is {type(part).__name__}, not a DataFrame")
        self.make_client = make_client
        self.partitions = None if partitions is None else list(partitions)
        self.files = None if files is None else [str(f) for f in files]

    def __len__(self) -> int:
        return len(self.partitions if self.partitions is not None else self.files)  # type: ignore[arg-type]

    def data(self, partition_id: int) -> pd.DataFrame:
        if not 0 <= partition_id < len(self):
            raise IndexError(f"no partition {partition_id}; there are {len(self)}")
        if self.partitions is not None:
            return self.partitions[partition_id]
        path = self.files[partition_id]  # type: ignore[index]
        if path not in _PARTITION_CACHE:
            _PARTITION_CACHE[path] = pd.read_pickle(path)
        return _PARTITION_CACHE[path]

    def __call__(self, partition_id: int, context: Context | None = None) -> BuiltClient:
        return self.make_client(partition_id, self.data(partition_id), context)

    def spill(self, directory: str | Path) -> PartitionedClients:
        """A copy whose partitions live in pickles under a fresh sub-directory of ``directory``."""
        if self.partitions is None:
            return self
        target = Path(directory) / f"partitions-{uuid.uuid4().hex[:12]}"
        target.mkdir(parents=True)
        files = []
        for k, part in enumerate(self.partitions):
            path = target / f"part-{k}.pkl"
            part.to_pickle(path)
            files.append(str(path))
        return PartitionedClients(self.make_client, files=files)


@contextmanager
def quiet_flower(ray_tmpdir: str | os.PathLike | None = None) -> Iterator[None]:
    """No phoning out (telemetry, update check, runtime installs off), Flower/Ray loggers at
    ERROR, Ray temp dir set; restored afterwards."""
    env = {**NO_PHONING_OUT, "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}
    if ray_tmpdir is not None:
        Path(ray_tmpdir).mkdir(parents=True, exist_ok=True)
        env["RAY_TMPDIR"] = str(ray_tmpdir)
    # Flower's Ray backend rewrites PYTHONPATH in os.environ on every run; put it back.
    saved_env = {k: os.environ.get(k) for k in [*env, "PYTHONPATH"]}
    saved_levels = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    os.environ.update(env)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)


def check_ray_tmpdir(path: str | os.PathLike) -> None:
    """Ray puts Unix sockets ~75 characters deep under its temp dir; the OS allows 107 bytes."""
    length = len(os.fsencode(os.path.abspath(path)))
    if length + RAY_SOCKET_SUFFIX > 107:
        raise ValueError(
            f"Ray temp dir {os.fspath(path)!r} is too long ({length} bytes): Ray's socket paths "
            f"under it would exceed 107 bytes; use a directory of at most "
            f"{107 - RAY_SOCKET_SUFFIX} bytes (set ray_tmpdir or RAY_TMPDIR)"
        )


def default_ray_num_cpus() -> float:
    """CPUs per Ray actor so that at most 2 actors run (more do not help on small machines)."""
    return max(1.0, (os.cpu_count() or 2) / 2)


def run_protocol(
    strategy: ProtocolStrategy,
    client_factory: Callable[[int, Context], BuiltClient],
    num_clients: int,
    *,
    backend: str = "inprocess",
    secure: bool = False,
    min_clients: int | None = None,
    connect_timeout: float = 30.0,
    round_timeout: float | None = None,
    max_rounds: int = 10_000,
    secure_config: SecureAggConfig | None = None,
    entry_point: str = "python",
    min_sites: int = 1,
    config: Mapping[str, Any] | None = None,
    ray_tmpdir: str | os.PathLike | None = None,
    ray_num_cpus: float | None = None,
    ray_address: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Result:
    """Run ``strategy`` against ``num_clients`` clients from ``client_factory``; the Result.

    ``min_clients`` (default: all) is how many clients must survive dropouts; ``min_sites`` how
    many the method declares it needs; ``entry_point`` whose spelling its errors use. ``config``
    is stored in ``Result.config`` for provenance. ``progress`` hears one line per round.
    ``ray_address`` (backend ``ray``): a running Ray cluster to connect to instead of starting
    one. A strategy object can be run only once.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    if not isinstance(strategy, ProtocolStrategy):
        raise TypeError(f"strategy must be a ProtocolStrategy, got {type(strategy).__name__}")
    if strategy.recorder.rounds:
        raise ValueError("this strategy object has already run; build a new one per run")
    settings = RunSettings(
        num_clients=num_clients,
        min_clients=min_clients,
        secure=secure,
        secure_config=secure_config,
        connect_timeout=connect_timeout,
        round_timeout=round_timeout,
        max_rounds=max_rounds,
        progress=progress,
        entry_point=entry_point,
        min_sites=min_sites,
    )
    server_app = make_server_app(strategy, settings)
    if ray_address is not None and backend != "ray":
        raise ValueError(f"ray_address {ray_address!r} needs backend 'ray', not {backend!r}")
    if backend == "inprocess":
        with quiet_flower():
            run_local(server_app, make_client_app(client_factory), num_clients)
    else:
        _run_ray(
            server_app, client_factory, num_clients, ray_tmpdir, ray_num_cpus, progress,
            ray_address,
        )  # fmt: skip
    return strategy.build_result(config)


def _run_ray(
    server_app,
    client_factory,
    num_clients: int,
    ray_tmpdir,
    ray_num_cpus: float | None,
    progress: Callable[[str], None] | None = None,
    ray_address: str | None = None,
) -> None:
    backend_config: dict[str, Any] = {
        "client_resources": {"num_cpus": ray_num_cpus or default_ray_num_cpus(), "num_gpus": 0.0},
        "init_args": {
            "logging_level": "ERROR",
            "log_to_driver": False,
            "include_dashboard": False,
        },
    }
    # an existing cluster (given, or Ray's RAY_ADDRESS convention) may span machines
    cluster = ray_address or os.environ.get("RAY_ADDRESS") or None
    if ray_address is not None:
        backend_config["init_args"]["address"] = ray_address
    elif cluster is None:  # a private instance: its services listen on the loopback only
        backend_config["init_args"]["_node_ip_address"] = "127.0.0.1"
        # Flower's actors carry a runtime env (its PYTHONPATH), so the plain workers Ray starts
        # ahead for the driver never serve one: not started (2 processes, ~1.4 CPU-s a run)
        backend_config["init_args"]["_system_config"] = {
            "enable_worker_prestart": False,
            "prestart_worker_first_driver": False,
        }
    tmp_root = Path(ray_tmpdir or os.environ.get("RAY_TMPDIR") or tempfile.gettempdir())
    check_ray_tmpdir(tmp_root)
    tmp_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tmp_root, prefix="fedcausal-") as spill_dir:
        if hasattr(client_factory, "spill") and cluster is None:  # no file system to share
            client_factory = client_factory.spill(spill_dir)
        if progress is not None:  # Ray takes seconds to start before the first round
            where = f"connecting to Ray at {cluster}" if cluster else "starting Ray"
            progress(f"{where} ...")
        # ray_simulation: an interrupt must not unwind this thread (it would hang Flower's
        # engine), and the command's SIGTERM handler stays (see flower_internals)
        with quiet_flower(ray_tmpdir), ray_simulation([spill_dir]):
            # Flower's deprecated in-process entry point (why:
            # federation/runtime/flower_internals.py); the ServerApp runs in a thread of this
            # process, so the strategy holds the result.
            run_simulation_quietly(
                server_app=server_app,
                client_app=make_client_app(client_factory),
                num_supernodes=num_clients,
                backend_config=backend_config,
            )


class BoundClientMaker:
    """``make_client(partition_id, data, options)`` with ``options`` bound (picklable for Ray);
    with ``guard`` (a method's :meth:`~.registry.MethodSpec.guard`), each client is built with
    it, for its own site: it answers only what its method declares."""

    def __init__(
        self,
        make_client: Callable[..., BuiltClient],
        options: Mapping[str, Any],
        guard: SiteGuard | None = None,
    ):
        self.make_client = make_client
        self.options = dict(options)
        self.guard = guard

    def __call__(
        self, partition_id: int, data: pd.DataFrame, context: Context | None = None
    ) -> BuiltClient:
        guard = None if self.guard is None else dataclasses.replace(self.guard, site=partition_id)
        return self.make_client(partition_id, data, self.options, context=context, guard=guard)


def run_method(
    name: str,
    partitions: Sequence[pd.DataFrame],
    options: Mapping[str, Any] | None = None,
    *,
    secure: bool = False,
    entry_point: str = "python",
    **run_kwargs: Any,
) -> Result:
    """Run the registered method ``name`` on in-memory partitions (one DataFrame per client).

    ``options`` are the method's options as typed on ``entry_point`` (validated before the first
    round; see :mod:`fedcausal_flwr.options`). Other keywords go to :func:`run_prepared`
    (``backend``, ``min_clients``, ``data``: where the partitions came from) and
    :func:`run_protocol`.
    """
    spec = get_method(name)
    opts = spec.resolve(options, entry_point)
    check_secure(spec, opts, secure, entry_point)
    return run_prepared(
        spec, spec.new_strategy(opts), partitions, opts, secure=secure, entry_point=entry_point,
        **run_kwargs,
    )  # fmt: skip


@one_run
def run_prepared(
    spec: MethodSpec,
    strategy: ProtocolStrategy,
    partitions: Sequence[pd.DataFrame],
    opts: Mapping[str, Any],
    *,
    backend: str = "inprocess",
    secure: bool = False,
    min_clients: int | None = None,
    entry_point: str = "python",
    data: Mapping[str, Any] | None = None,
    **run_kwargs: Any,
) -> Result:
    """Run ``strategy``, made by ``spec`` from its resolved options ``opts`` (checked for a
    secure run), on in-memory partitions: the runner of :func:`run_method` and of every entry
    point, which makes the strategy once (it checks the data with it first)."""
    if min_clients is not None and not 1 <= min_clients <= len(partitions):
        raise OptionError(
            f"{spell('min_clients', entry_point)} {min_clients}: must be between 1 and the number "
            f"of clients ({len(partitions)})"
        )
    maker = BoundClientMaker(spec.make_client, spec.own_options(opts), spec.guard(0))
    factory = PartitionedClients(maker, partitions)
    settings = {"backend": backend, "secure": bool(secure), "min_clients": min_clients}
    data = dict(data or {"source": "frames"})
    config = run_config(
        spec.name, opts, settings, data, summed_actions=summed_actions(spec.disclosures)
    )
    return run_protocol(
        strategy,
        factory,
        len(partitions),
        backend=backend,
        secure=secure,
        min_clients=min_clients,
        entry_point=entry_point,
        min_sites=spec.min_sites,
        config=config,
        **run_kwargs,
    )
