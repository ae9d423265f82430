"""Run settings, declared once for every entry point (Python API, ``run``, ``compare``,
``flwr run``).

Method options belong to a method (:mod:`fedcausal_flwr.options`, declared next to each strategy);
run settings say what data a run sees and how it runs: the benchmark network and how its sample is
split, the seed, the backend, dropout tolerance and secure aggregation. Their defaults are the same
on every entry point.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedcausal_flwr.options import Option, OptionError, OptionSet, spell

BACKENDS = ("inprocess", "ray")
#: Settings that only make sense when the data is sampled from a network (not with ``--data``).
NETWORK_SETTINGS = ("network", "samples", "clients", "partition")


def _network(value: Any) -> str:
    from fedcausal_flwr.data.specs import parse_network

    if not isinstance(value, str):
        raise ValueError(f"expected a network name or er:d=..., got {value!r}")
    parse_network(value)  # an unknown name or a bad er: spec is an error now, not mid-run
    return value.strip()


def _partition(value: Any) -> str:
    from fedcausal_flwr.data.specs import parse_partition

    if not isinstance(value, str):
        raise ValueError(f"expected a partition spec, got {value!r}")
    parse_partition(value)
    return value.strip()


RUN_SETTINGS = OptionSet(
    (
        Option(
            "network",
            "str",
            None,
            "benchmark network (see `fedcausal-flwr networks`) or a random one, "
            "er:d=<nodes>[:degree=2][:cards=2-5]",
            nullable=True,
            convert=_network,
        ),
        Option("samples", "int", 10_000, "rows drawn from the network", minimum=1),
        Option("clients", "int", 10, "clients the sampled rows are split into", minimum=1),
        Option(
            "partition",
            "str",
            "iid",
            "how the sample is split: iid, dirichlet[:alpha=1.0][:min_rows=10] (unequal sizes) "
            "or heterogeneous (FedC2SL's biased sub-populations)",
            convert=_partition,
        ),
        Option(
            "seed",
            "int",
            0,
            "seed of the sample, the split and the method's own randomness",
            minimum=0,
        ),
        Option(
            "backend",
            "str",
            "inprocess",
            "inprocess: the same Flower ServerApp/ClientApp on a synchronous in-process grid "
            "(fast, deterministic); ray: Flower's simulation engine",
            choices=BACKENDS,
        ),
        Option(
            "ray_address",
            "str",
            None,
            "a running Ray cluster to use with backend ray (host:port of its head, as `ray start "
            "--head` prints; Ray's RAY_ADDRESS convention); the clients' data travels to the "
            "cluster's workers with the client app",
            nullable=True,
            null_meaning="a fresh Ray instance on this machine (or RAY_ADDRESS if set)",
        ),
        Option(
            "min_clients",
            "int",
            None,
            "continue after dropouts while at least this many clients remain",
            minimum=1,
            nullable=True,
            null_meaning="all clients",
        ),
        Option(
            "secure",
            "bool",
            False,
            "sum the method's statistics through Flower's SecAgg+ (exact integer sums)",
        ),
        Option(
            "keep_evidence",
            "bool",
            True,
            "keep a PC/FCI search's per-pair evidence (every removed pair's p-value, depth and "
            "separating sets) as arrays, saved beside the result as <name>.evidence.npz; false "
            "keeps only what grows with the graph (each edge's p-value stays in the result)",
        ),
    )
)


def resolve_settings(
    raw: Mapping[str, Any], *, with_data: bool, entry_point: str = "python"
) -> dict[str, Any]:
    """The run settings from what a user typed; network settings next to data are an error.

    ``with_data``: the user gave client data (frames or CSV files), so ``network``, ``samples``,
    ``clients`` and ``partition`` do not apply; without data a network is required.
    """
    given = {k: v for k, v in raw.items() if v is not None}
    if with_data:
        clash = [k for k in NETWORK_SETTINGS if k in given]
        if clash:
            data = "--data" if entry_point == "cli" else "data"
            raise OptionError(
                f"{', '.join(spell(k, entry_point) for k in clash)} "
                f"{'does' if len(clash) == 1 else 'do'} not apply with {data}: the clients are "
                f"the data given (one {'file' if entry_point == 'cli' else 'frame'} per client)"
            )
    elif "network" not in given:
        data = "--data" if entry_point == "cli" else "data="
        raise OptionError(
            f"give {spell('network', entry_point)} (a benchmark network or er:d=...) or {data} "
            "(one client per file)"
        )
    settings = RUN_SETTINGS.resolve(given, owner="run", entry_point=entry_point)
    if settings["ray_address"] is not None and settings["backend"] != "ray":
        raise OptionError(
            f"{spell('ray_address', entry_point)} {settings['ray_address']} needs "
            f"{spell('backend', entry_point)} ray (it names the Ray cluster to run on); got "
            f"{spell('backend', entry_point)} {settings['backend']}"
        )
    return settings
