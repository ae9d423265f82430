"""Module-level ``server_app`` / ``client_app`` for ``flwr run`` (deployment or simulation).

Referenced from ``pyproject.toml``::

    [tool.flwr.app.components]
    serverapp = "fedcausal_flwr.flwr_app:server_app"
    clientapp = "fedcausal_flwr.flwr_app:client_app"

The run config (``[tool.flwr.app.config]`` defaults, overridden with ``flwr run . <federation>
--run-config "method='fedlcs' options='target=either ratio=0.5'"``) holds the run settings of
:data:`APP_SETTINGS` and one typed key for the method: ``options``, a string of ``key=value``
assignments (whitespace-separated, quotes allowed) read with the method's declared options. A
SuperLink refuses run-config keys the app does not declare, which is why method options travel in
this one key: every option of every method reaches a SuperLink. Both apps validate the run config
before the first round (an unknown key or option, a wrong type or range is an error naming it).

Each SuperNode reads its own data from ``node_config["data-path"]`` (a CSV, read and checked as on
every entry point; ``data-sep`` sets the delimiter, else it is sniffed, and ``data-keep-index=true``
keeps an index-like first column) and needs a distinct ``node_config["partition-id"]``; a simulated
node without ``data-path`` generates its partition from the run config: the method's ``make_data``
if it has one, else ``samples`` rows of ``network`` (``seed``), split by ``partition`` into
``num-partitions`` parts (:func:`sample_network_partition`). ``num-clients = 0`` (the default) runs
with the SuperNodes that are connected (Flower's default local simulation has 2); a real deployment
should name how many sites it waits for. The ServerApp writes the
:class:`~fedcausal_flwr.result.Result` JSON to ``result-path`` when it is set.

The coordinator stays in its operator's folders (:mod:`.coordinator`): ``result-path`` is relative
to its results folder, ``truth`` is ``network`` or a file in its truth folder, and ``plugins`` are
imported only when the operator allows them; all three are checked before the first round. A site
with data (a ``data-path``) answers under its own policy (:mod:`.site_policy`: the node config's
policy keys or ``policy-file``), checks ``plugins`` against it before importing anything, and logs
every reply and refusal in its audit log.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from flwr.app import ConfigRecord, Context
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.data.frame_cache import FrameCache
from fedcausal_flwr.federation.core.coordinator import CoordinatorError, CoordinatorFolders
from fedcausal_flwr.federation.core.messages import ProtocolError, SitePolicyError
from fedcausal_flwr.federation.core.registry import (
    MethodSpec,
    UnknownMethodError,
    check_secure,
    get_method,
    import_plugins,
    simulation_data,
)
from fedcausal_flwr.federation.core.site_cache import cache_folder, cached_read
from fedcausal_flwr.federation.core.site_guard import SiteGuard
from fedcausal_flwr.federation.core.site_policy import (
    ALLOW_PLUGINS,
    PolicyConfigError,
    SitePolicy,
    plugin_problem,
)
from fedcausal_flwr.federation.runtime.clientside import CLIENT_MODS, partition_id_of
from fedcausal_flwr.options import Option, OptionError, OptionSet, parse_assignments, parse_bool
from fedcausal_flwr.settings import RUN_SETTINGS

logger = logging.getLogger(__name__)

#: The app's run settings: what ``[tool.flwr.app.config]`` declares (a test checks they agree).
#: Shared settings keep RUN_SETTINGS' defaults; a run config has no "none", so 0 stands for it.
APP_SETTINGS = OptionSet(
    (
        Option("method", "str", "fedpc", "the registered method to run"),
        Option(
            "options",
            "str",
            "",
            "the method's options as key=value assignments, e.g. 'alpha=0.01 max-depth=3'",
        ),
        Option(
            "plugins",
            "str",
            "",
            "comma-separated modules to import (they register more methods)",
        ),
        replace(
            RUN_SETTINGS["network"],
            default="asia",
            nullable=False,
            help="benchmark network (or er:d=...) the simulated sites sample; sites with a "
            "data-path read their CSV instead",
        ),
        RUN_SETTINGS["samples"],
        RUN_SETTINGS["partition"],
        RUN_SETTINGS["seed"],
        Option(
            "num_clients",
            "int",
            0,
            "SuperNodes to wait for; 0: every SuperNode connected once their number settles",
            minimum=0,
        ),
        Option(
            "min_clients",
            "int",
            0,
            "continue after dropouts while at least this many clients remain; 0: all",
            minimum=0,
        ),
        RUN_SETTINGS["secure"],
        RUN_SETTINGS["keep_evidence"],
        Option("result_path", "str", "", "write the result JSON here (on the SuperLink)"),
        Option(
            "truth",
            "str",
            "",
            "score against 'network' (the network's DAG) or a cause,effect CSV on the SuperLink",
        ),
        Option(
            "connect_timeout",
            "float",
            60.0,
            "seconds to wait for the SuperNodes",
            minimum=0.0,
            min_exclusive=True,
        ),
        Option(
            "round_timeout",
            "float",
            600.0,
            "seconds a round waits for replies; 0: no limit",
            minimum=0.0,
        ),
        Option(
            "max_rounds",
            "int",
            10_000,
            "stop a protocol still running after this many rounds",
            minimum=1,
        ),  # fmt: skip
    )
)
#: The ``[tool.flwr.app.config]`` table: every setting under its run-config name, with its default.
DEFAULT_RUN_CONFIG: dict[str, bool | float | int | str] = {
    option.name.replace("_", "-"): option.default for option in APP_SETTINGS
}

_CSV_CACHE: dict[tuple, pd.DataFrame] = {}
#: each site frame's shared columns (``share-columns``), released with the frame
_SHARED = FrameCache()
_SAMPLE_CACHE: dict[tuple, list[pd.DataFrame]] = {}


def resolve_run_config(
    run_config: Mapping[str, Any], check_plugins: Callable[[str], None] | None = None
) -> tuple[MethodSpec, dict, dict]:
    """``(method, settings, method options)`` of a run config, all validated.

    Imports the ``plugins`` first, so a plugin method is known, once ``check_plugins(plugins)``
    (the coordinator's or the site's rule) has let them through.
    """
    settings = APP_SETTINGS.resolve(dict(run_config), owner="run config", entry_point="config")
    if check_plugins is not None:
        check_plugins(settings["plugins"])
    import_plugins(settings["plugins"])
    spec = get_method(settings["method"])
    raw = parse_assignments(settings["options"], what="run config key options")
    options = spec.resolve(spec.seeded(raw, settings["seed"]), "config")
    check_secure(spec, options, settings["secure"], "config")
    return spec, settings, options


def sample_network_partition(
    settings: Mapping[str, Any], partition_id: int, num_partitions: int
) -> pd.DataFrame:
    """Default data of a simulated site: ``samples`` rows of ``network`` drawn with ``seed``,
    split by ``partition`` over ``num_partitions`` sites (cached per process)."""
    from fedcausal_flwr.data.specs import sample_partition

    key = (
        str(settings["network"]),
        int(settings["samples"]),
        str(settings.get("partition", "iid")),
        int(settings["seed"]),
        num_partitions,
    )
    if key not in _SAMPLE_CACHE:
        network, samples, partition, seed, _ = key
        part, _ = sample_partition(network, samples, num_partitions, partition, seed)
        _SAMPLE_CACHE[key] = part.clients
    return _SAMPLE_CACHE[key][partition_id]


def read_site_csv(
    path: str,
    sep: str | None = None,
    *,
    keep_index: bool = False,
    client: int = 0,
    allow_missing: bool = False,
    cache: Path | None = None,
) -> pd.DataFrame:
    """Site ``client``'s CSV, read and checked as every entry point reads client files
    (:func:`~fedcausal_flwr.data.csv_input.read_client_csv`: ``sep`` sniffed if ``None``),
    cached per process (simulation actors answer many messages) and, with a ``cache`` folder,
    between processes (:mod:`~fedcausal_flwr.federation.core.site_cache`: a deployment starts
    one per message)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"data-path {path!r} does not exist on this SuperNode")
    stat = os.stat(path)
    key = (os.path.abspath(path), sep, keep_index, allow_missing, stat.st_mtime_ns, stat.st_size)
    if key not in _CSV_CACHE:

        def read() -> pd.DataFrame:
            from fedcausal_flwr.data.csv_input import read_client_csv  # not on a cache hit

            return read_client_csv(
                path,
                client,
                sep=sep,
                keep_index=keep_index,
                entry_point="config",
                allow_missing=allow_missing,
            )

        _CSV_CACHE[key] = cached_read(cache, path, (sep, keep_index, allow_missing), read)
    return _CSV_CACHE[key]


def site_data(context: Context, spec: MethodSpec, settings: Mapping[str, Any]) -> pd.DataFrame:
    """A SuperNode's data: its ``data-path`` CSV (``data-sep``, ``data-keep-index`` optional),
    else a simulated site's share of the run config's data."""
    node_config = context.node_config
    if "data-path" in node_config:
        sep = node_config.get("data-sep")
        return read_site_csv(
            str(node_config["data-path"]),
            None if sep is None else str(sep),
            keep_index=parse_bool(node_config.get("data-keep-index", False)),
            client=partition_id_of(context),
            allow_missing=settings.get("missing", "error") != "error",
            cache=cache_folder(node_config),
        )
    if "num-partitions" not in node_config:
        raise KeyError(
            f"node {context.node_id}: node_config needs 'data-path' (deployment) or "
            "'partition-id' and 'num-partitions' (simulation)"
        )
    return simulation_data(
        spec,
        settings,
        partition_id_of(context),
        int(node_config["num-partitions"]),
        default=sample_network_partition,
    )


server_app = ServerApp()

#: errors the ServerApp says in one line (naming the site and policy key, the option or the
#: folder): Flower's traceback of them would bury that line in the log stream
SAID_ERRORS = (CoordinatorError, SitePolicyError, OptionError)
#: set on an error once the ServerApp has printed it
_SAID = "_fedcausal_said"


class SaidErrorFilter(logging.Filter):
    """Drops the record in which Flower logs the traceback of an exception the ServerApp already
    said in one line (``ServerApp raised an exception``). The exception still reaches Flower, so
    the run ends as failed (``flwr ls``: ``finished:failed``, exit code 201)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not getattr(error, _SAID, False)


def keep_tracebacks_of_unsaid_errors() -> None:
    """Install :class:`SaidErrorFilter` on Flower's logger, once per process."""
    flower = logging.getLogger("flwr")
    if not any(isinstance(f, SaidErrorFilter) for f in flower.filters):
        flower.addFilter(SaidErrorFilter())


#: how each site's refusal ends (:func:`~fedcausal_flwr.federation.core.site_guard.public_error`)
_FULL_REASON = "; the site's audit log has the full reason"


def merged_refusals(message: str) -> str:
    """Sites refusing for the same reason said once: ``sites 0, 1, 2: each refuses action
    'tables': its policy has allow-plain-statistics = false; ...`` instead of three times
    (``message``: the sites' one-line refusals joined; anything else comes back as it is)."""
    parts = message.split(_FULL_REASON)
    if len(parts) < 2 or parts[-1]:
        return message
    sites: dict[str, list[str]] = {}
    for part in parts[:-1]:
        match = re.fullmatch(r"site (\d+) (.+)", part.removeprefix("; "), flags=re.DOTALL)
        if match is None:
            return message
        sites.setdefault(match[2], []).append(match[1])
    said = "; ".join(
        f"site {ids[0]} {why}" if len(ids) == 1 else f"sites {', '.join(ids)}: each {why}"
        for why, ids in sites.items()
    )
    return said + (
        _FULL_REASON if len(parts) == 2 else "; each site's audit log has the full reason"
    )


@server_app.main()
def _server_main(grid: Grid, context: Context) -> None:
    try:
        _serve(grid, context)
    except SAID_ERRORS as err:
        said = merged_refusals(str(err)) if isinstance(err, SitePolicyError) else str(err)
        print(f"fedcausal-flwr: error: {said}", flush=True)  # the one line the submitter reads
        setattr(err, _SAID, True)
        keep_tracebacks_of_unsaid_errors()
        raise


def _serve(grid: Grid, context: Context) -> None:
    # the server side's modules are imported here, not at module level: the ClientApp process
    # loads this module too, and imports only what a client needs (see _client_fn)
    from fedcausal_flwr.federation.core.disclosure import summed_actions
    from fedcausal_flwr.federation.runtime.workflow import RunSettings, run_strategy
    from fedcausal_flwr.result import run_config

    folders = CoordinatorFolders.from_environment()
    spec, settings, options = resolve_run_config(context.run_config, folders.check_plugins)
    # everything the run config asks of the coordinator's disk, checked before the first round
    if settings["result_path"]:
        folders.result_target(settings["result_path"])
    truth = settings["truth"]
    truth_file = folders.truth_file(truth) if truth and truth != "network" else None
    strategy = spec.new_strategy(options)
    wanted = settings["num_clients"]
    print(
        f"fedcausal-flwr: {spec.name} with "
        + (f"{wanted} SuperNodes" if wanted else "every connected SuperNode (num-clients=0)")
        + f"; options: {settings['options'] or 'defaults'}",
        flush=True,
    )
    run_settings = RunSettings(
        num_clients=wanted or None,
        min_clients=settings["min_clients"] or None,
        secure=settings["secure"],
        connect_timeout=settings["connect_timeout"],
        round_timeout=settings["round_timeout"] or None,
        max_rounds=settings["max_rounds"],
        progress=lambda line: print(f"fedcausal-flwr: {line}", flush=True),
        entry_point="config",
        min_sites=spec.min_sites,
    )
    run_strategy(grid, context, strategy, run_settings)
    recorded = {
        k: settings[k]
        for k in ("seed", "num_clients", "min_clients", "secure", "keep_evidence",
                  "connect_timeout", "round_timeout", "max_rounds", "plugins")
    }  # fmt: skip
    source = {"source": "sites", "network": settings["network"], "samples": settings["samples"],
              "partition": settings["partition"]}  # fmt: skip
    result = strategy.build_result(
        config=run_config(
            spec.name,
            options,
            {"backend": "flwr", **recorded},
            source,
            summed_actions=summed_actions(spec.disclosures),
        )
    )
    if not settings["keep_evidence"]:
        result.evidence = None
    if settings["result_path"]:  # saved before scoring: a truth that fails loses no result
        path = folders.save(result, settings["result_path"])
        logger.info("result written to %s", path)
    if truth:
        score(result, truth, settings["network"], settings["seed"], truth_file)
        if settings["result_path"]:
            folders.save(result, settings["result_path"])
    print(result.summary(), flush=True)


def score(result, truth: str, network: str, seed: int = 0, truth_file=None) -> None:
    """Add metrics: ``truth="network"`` scores against the configured network's DAG; otherwise
    ``truth_file`` (the coordinator's checked path of ``truth``) is a ``cause,effect`` CSV, read
    without quoting its content in any error."""
    if not truth or result.graph is None:
        return
    from fedcausal_flwr.data.specs import network_for
    from fedcausal_flwr.scoring import read_truth, score_result

    if truth == "network":
        dag = network_for(network, seed).dag
    else:
        dag = read_truth(truth_file or truth, result.variables, quote=False)
    result.config["truth"] = truth
    score_result(result, dag)


#: the node-state record where a site keeps what its hello accepted for the run
BINDING_RECORD = "fedcausal.site"


class NodeStateStore:
    """A site's run binding (:mod:`~fedcausal_flwr.federation.core.run_binding`) in the node's
    own ``Context.state``, which the SuperNode keeps between the run's messages and the server
    never sees."""

    def __init__(self, context: Context):
        self.state = context.state

    def load(self) -> str | None:
        record = self.state.config_records.get(BINDING_RECORD)
        return None if record is None else str(record.get("binding", ""))

    def save(self, text: str) -> None:
        self.state.config_records[BINDING_RECORD] = ConfigRecord({"binding": text})


def shared_columns(data: pd.DataFrame, share: frozenset[str], site: int) -> pd.DataFrame:
    """The columns of a site's file that its policy ``share-columns`` lets enter a run (the
    others never reach a client); a shared column the file lacks is the site's own error.
    Kept per frame: a simulated site answers many messages, and its caches follow the frame."""
    missing = sorted(share - {str(c) for c in data.columns})
    if missing:
        raise ProtocolError(
            site,
            f"site {site}'s policy share-columns names column {missing[0]!r}, which its "
            "data file does not have",
        )
    kept = [c for c in data.columns if str(c) in share]
    return _SHARED.get(data, tuple(sorted(share)), lambda: data.loc[:, kept])


def _client_fn(context: Context):
    partition_id = partition_id_of(context)
    run = str(getattr(context, "run_id", ""))
    try:
        policy = SitePolicy.of_node(context.node_config)
    except PolicyConfigError as err:
        raise ProtocolError(
            partition_id,
            f"site {partition_id}'s policy: {err}",
            kind="the site's policy is invalid",
        ) from None

    def check_plugins(plugins: str) -> None:  # before anything of the run config is imported
        problem = plugin_problem(policy, plugins, partition_id)
        if problem:
            method = str(context.run_config.get("method", ""))
            SiteGuard(method, {}, policy=policy, site=partition_id, run=run).refuse(
                ALLOW_PLUGINS, problem, action="", round_=None, secure=False
            )

    try:
        spec, settings, options = resolve_run_config(context.run_config, check_plugins)
    except ProtocolError:  # the site's own refusal (a plugin its policy does not allow)
        raise
    except (OptionError, UnknownMethodError, ValueError) as err:
        # the same run config at every site: stopping the run, not a dropout
        raise ProtocolError(
            partition_id, f"the run config: {err}", kind="the run config is invalid"
        ) from None
    try:
        data = site_data(context, spec, {**settings, **options})
    except (OSError, LookupError, ValueError, TypeError) as err:
        # a site's configuration or data problem stops the run; it is not a dropout
        raise ProtocolError(
            partition_id,
            f"cannot load this site's data: {err}",
            kind="the site cannot load its data",
        ) from err
    withheld: frozenset[str] = frozenset()
    if policy is not None and policy.share_columns is not None:
        withheld = frozenset(str(c) for c in data.columns) - policy.share_columns
        data = shared_columns(data, policy.share_columns, partition_id)
    store = NodeStateStore(context) if policy is not None else None
    guard = spec.guard(
        partition_id, policy, secure_run=settings["secure"], run=run, store=store,
        options=options, withheld=withheld,
    )  # fmt: skip
    return spec.client(partition_id, data, options, guard, context).to_client()


client_app = ClientApp(client_fn=_client_fn, mods=list(CLIENT_MODS))
