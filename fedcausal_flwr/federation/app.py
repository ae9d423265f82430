"""Module-level ``server_app`` / ``client_app`` for ``flwr run`` (deployment or simulation).

Referenced from ``pyproject.toml``::

    [tool.flwr.app.components]
    serverapp = "fedcausal_flwr.federation.app:server_app"
    clientapp = "fedcausal_flwr.federation.app:client_app"

Everything comes from the run config (``[tool.flwr.app.config]`` defaults, overridden with
``flwr run . <federation> --run-config "method='fedpc' alpha=0.05"``): ``method`` picks a registered
method (see :mod:`~fedcausal_flwr.federation.registry`), and the whole run config, with ``-`` in
keys replaced by ``_``, is passed to it as ``options``. Each SuperNode reads its own data from
``node_config["data-path"]`` (a CSV; ``data-sep`` optional) and needs a distinct
``node_config["partition-id"]``; a simulated node without ``data-path`` generates its partition
from the run config: the method's ``make_data`` if it has one, else ``samples`` rows of the
benchmark ``network`` (``seed``), split IID (:func:`sample_network_partition`). The
ServerApp writes the :class:`~fedcausal_flwr.result.Result` JSON to ``result-path`` (on the
SuperLink's machine) when it is set.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import pandas as pd
from flwr.app import Context
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.federation.apps import partition_id_of, run_strategy, secure_sum_mod
from fedcausal_flwr.federation.messages import ProtocolError
from fedcausal_flwr.federation.registry import get_method, import_plugins, simulation_data

logger = logging.getLogger(__name__)

#: Defaults of the run config (mirrored in pyproject's [tool.flwr.app.config]).
DEFAULT_RUN_CONFIG: dict[str, bool | float | int | str] = {
    "method": "fedpc",
    "plugins": "",
    "network": "asia",
    "samples": 5000,
    "seed": 0,
    "alpha": 0.05,
    "ci": "exact",
    "test": "chi2",
    "num-clients": 3,
    "min-clients": 0,
    "secure": False,
    "result-path": "",
    "truth": "",
    "connect-timeout": 60.0,
    "round-timeout": 600.0,
    "max-rounds": 10000,
}

_CSV_CACHE: dict[tuple, pd.DataFrame] = {}
_SAMPLE_CACHE: dict[tuple, list[pd.DataFrame]] = {}


def sample_network_partition(
    options: Mapping[str, Any], partition_id: int, num_partitions: int
) -> pd.DataFrame:
    """Default data of a simulated site: ``samples`` rows drawn from the benchmark ``network``
    with ``seed``, split IID over ``num_partitions`` sites (cached per process)."""
    from fedcausal_flwr.data.networks import load_network
    from fedcausal_flwr.data.partition import split_iid
    from fedcausal_flwr.data.sampling import sample_frame

    key = (str(options["network"]), int(options["samples"]), int(options["seed"]), num_partitions)
    if key not in _SAMPLE_CACHE:
        network, samples, seed, _ = key
        pooled = sample_frame(load_network(network), samples, seed=seed)
        _SAMPLE_CACHE[key] = split_iid(pooled, num_partitions, seed=seed).clients
    return _SAMPLE_CACHE[key][partition_id]


def run_options(run_config: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with the run config; keys with ``-`` become ``_`` (``min_clients``)."""
    merged = {**DEFAULT_RUN_CONFIG, **dict(run_config)}
    return {key.replace("-", "_"): value for key, value in merged.items()}


def read_site_csv(path: str, sep: str = ",") -> pd.DataFrame:
    """A site's CSV, cached per process (simulation actors answer many messages)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"data-path {path!r} does not exist on this SuperNode")
    stat = os.stat(path)
    key = (os.path.abspath(path), sep, stat.st_mtime_ns, stat.st_size)
    if key not in _CSV_CACHE:
        _CSV_CACHE[key] = pd.read_csv(path, sep=sep)
    return _CSV_CACHE[key]


def site_data(context: Context, spec, options: Mapping[str, Any]) -> pd.DataFrame:
    node_config = context.node_config
    if "data-path" in node_config:
        return read_site_csv(str(node_config["data-path"]), str(node_config.get("data-sep", ",")))
    if "num-partitions" not in node_config:
        raise KeyError(
            f"node {context.node_id}: node_config needs 'data-path' (deployment) or "
            "'partition-id' and 'num-partitions' (simulation)"
        )
    return simulation_data(
        spec,
        options,
        partition_id_of(context),
        int(node_config["num-partitions"]),
        default=sample_network_partition,
    )


server_app = ServerApp()


@server_app.main()
def _server_main(grid: Grid, context: Context) -> None:
    options = run_options(context.run_config)
    import_plugins(options["plugins"])
    spec = get_method(str(options["method"]))
    strategy = spec.make_strategy(options)
    run_strategy(
        grid,
        context,
        strategy,
        num_clients=int(options["num_clients"]),
        min_clients=int(options["min_clients"]) or None,
        secure=bool(options["secure"]),
        connect_timeout=float(options["connect_timeout"]),
        round_timeout=float(options["round_timeout"]) or None,
        max_rounds=int(options["max_rounds"]),
    )
    result = strategy.build_result(config=options)
    score(result, str(options["truth"]), str(options["network"]))
    if options["result_path"]:
        path = result.save(str(options["result_path"]))
        logger.info("result written to %s", path)
    print(result.summary(), flush=True)


def score(result, truth: str, network: str) -> None:
    """Add metrics: ``truth="network"`` scores against the configured benchmark network's DAG,
    any other non-empty value is a ``cause,effect`` CSV on the SuperLink's machine."""
    if not truth or result.graph is None:
        return
    from fedcausal_flwr.api import read_truth, score_graph
    from fedcausal_flwr.data.networks import load_network

    dag = load_network(network).dag if truth == "network" else read_truth(truth, result.variables)
    result.metrics.update(score_graph(result, dag))


def _client_fn(context: Context):
    options = run_options(context.run_config)
    import_plugins(options["plugins"])
    spec = get_method(str(options["method"]))
    partition_id = partition_id_of(context)
    try:
        data = site_data(context, spec, options)
    except (OSError, LookupError, ValueError, TypeError) as err:
        # a site's configuration or data problem stops the run; it is not a dropout
        raise ProtocolError(partition_id, f"cannot load this site's data: {err}") from err
    client = spec.make_client(partition_id, data, options)
    if client.context is None:
        client.context = context
    return client.to_client()


client_app = ClientApp(client_fn=_client_fn, mods=[secure_sum_mod])
