"""Network and partition specs, one spelling on every entry point.

A network is a benchmark name (``alarm``; see :func:`~fedcausal_flwr.data.networks.list_networks`)
or a random FedC2SL-style discrete Erdos-Renyi network ``er:d=20[:degree=2][:cards=2-5]`` whose
graph, CPTs and sample are all drawn with the run's seed. A partition is ``iid``,
``dirichlet[:alpha=1.0][:min_rows=10]`` (unequal client sizes) or ``heterogeneous`` (FedC2SL's
biased sub-populations). The Python API, ``fedcausal-flwr run``, ``compare`` and the simulated
sites of ``flwr run`` all read specs here, and ``fedcausal-flwr sample`` writes the same rows to
one CSV per site (:func:`write_sample`).
"""

from __future__ import annotations

import os
import shlex
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from fedcausal_flwr.data.networks import Network, list_networks, load_network
from fedcausal_flwr.options import REQUIRED, Option, OptionError, OptionSet, closest, parse_spec

if TYPE_CHECKING:
    from fedcausal_flwr.data.partition import Partition

# The splitting rules (data.partition, which imports scipy.stats) are imported where a sample is
# split: reading a spec, which every flwr run message does, needs none of them.

#: CPT concentration of random networks: each column Dirichlet(a), a ~ U(0.1, 1) (FedC2SL).
ER_CONCENTRATION = (0.1, 1.0)


def _card_range(value: Any) -> tuple[int, int]:
    """``"2-5"`` -> (2, 5), ``"3"`` or 3 -> (3, 3); a pair stays a pair."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        low, high = (int(v) for v in value)
    elif isinstance(value, int) and not isinstance(value, bool):
        low = high = value
    elif isinstance(value, str):
        lo, sep, hi = value.strip().partition("-")
        try:
            low, high = (int(lo), int(hi)) if sep else (int(lo), int(lo))
        except ValueError:
            raise ValueError(f"expected a range like 2-5, got {value!r}") from None
    else:
        raise ValueError(f"expected a range like 2-5, got {value!r}")
    if not 2 <= low <= high:
        raise ValueError(f"expected 2 <= lo <= hi, got {low}-{high}")
    return low, high


ER_OPTIONS = OptionSet(
    (
        Option("d", "int", REQUIRED, "number of nodes", minimum=2),
        Option("degree", "float", 2.0, "expected mean degree", minimum=0.0, min_exclusive=True),
        Option(
            "cards",
            "str",
            (2, 5),
            "states per variable, drawn uniformly from lo-hi",
            convert=_card_range,
        ),  # fmt: skip
    )
)
PARTITION_OPTIONS: dict[str, OptionSet] = {
    "iid": OptionSet(),
    "dirichlet": OptionSet(
        (
            Option(
                "alpha",
                "float",
                1.0,
                "Dirichlet concentration of the client sizes",
                minimum=0.0,
                min_exclusive=True,
            ),  # fmt: skip
            Option("min_rows", "int", 10, "rows every client gets at least", minimum=1),
        )
    ),
    "heterogeneous": OptionSet(),
}
PARTITIONS = tuple(PARTITION_OPTIONS)


def parse_network(spec: str) -> tuple[str, dict[str, Any]]:
    """``(name, typed options)`` of a network spec; an unknown name or option is an error."""
    name, raw = parse_spec(spec, what="network")
    key = name.lower()
    if key == "er":
        return "er", ER_OPTIONS.resolve(raw, owner=f"network {spec!r}", entry_point="spec")
    if raw:
        raise OptionError(f"network {spec!r}: only random 'er:d=...' networks take options")
    known = list_networks()
    if key not in known:
        hint = closest(key, [*known, "er"])
        raise OptionError(
            f"unknown network {name!r}"
            + (f" (did you mean {hint!r}?)" if hint else "")
            + f"; benchmark networks: {', '.join(known)}; or a random one: er:d=<nodes>"
            "[:degree=<mean degree>][:cards=<lo>-<hi>]"
        )
    return key, {}


def network_for(spec: str, seed: int) -> Network:
    """The :class:`Network` behind a spec (a random one depends on ``seed``)."""
    name, options = parse_network(spec)
    if name != "er":
        return load_network(name)
    check_network_size(spec, options["d"])
    return _random_network(options["d"], options["degree"], tuple(options["cards"]), int(seed))


def check_network_size(spec: str, d: int) -> None:
    """A random network is drawn through dense d x d matrices (8 bytes a cell): refuse one that
    would take more than half this machine's memory, saying how large it may be."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX system: no check
        return
    need = 8 * d * d
    if need > memory / 2:
        largest = int((memory / 2 / 8) ** 0.5)
        raise OptionError(
            f"network {spec!r}: {d:,} nodes need dense {d:,} x {d:,} matrices "
            f"({need / 2**30:.1f} GiB) while the network is drawn; this machine has "
            f"{memory / 2**30:.1f} GiB: use at most d={largest:,}"
        )


@cache
def _random_network(d: int, degree: float, cards: tuple[int, int], seed: int) -> Network:
    from fedcausal_flwr.data.synthetic import random_dag, random_discrete_network

    dag = random_dag(d, expected_degree=degree, seed=seed, method="er")
    return random_discrete_network(
        dag,
        card_range=cards,
        seed=seed,
        concentration=ER_CONCENTRATION,
        name=f"er-d{d}-seed{seed}",
    )


def parse_partition(spec: str) -> tuple[str, dict[str, Any]]:
    """``(rule, typed options)`` of a partition spec."""
    name, raw = parse_spec(spec, what="partition")
    if name not in PARTITION_OPTIONS:
        hint = closest(name, PARTITIONS)
        raise OptionError(
            f"unknown partition {name!r}"
            + (f" (did you mean {hint!r}?)" if hint else "")
            + f"; expected one of {', '.join(PARTITIONS)} (dirichlet[:alpha=1.0][:min_rows=10])"
        )
    return name, PARTITION_OPTIONS[name].resolve(
        raw, owner=f"partition {spec!r}", entry_point="spec"
    )


def make_partition(
    pooled: pd.DataFrame, clients: int, spec: str = "iid", seed: int = 0
) -> Partition:
    """Split a pooled frame into ``clients`` parts by a partition spec."""
    from fedcausal_flwr.data.partition import split_heterogeneous, split_iid, split_sizes

    rule, options = parse_partition(spec)
    if rule == "iid":
        return split_iid(pooled, clients, seed=seed)
    if rule == "dirichlet":
        return split_sizes(
            pooled, k=clients, alpha=options["alpha"], seed=seed, min_rows=options["min_rows"]
        )
    return split_heterogeneous(pooled, clients, seed=seed)


def sample_partition(
    network: str, samples: int, clients: int, partition: str, seed: int
) -> tuple[Partition, Network]:
    """``samples`` rows of ``network`` drawn with ``seed``, split by ``partition``: the data every
    entry point derives from a network (so competing methods see the same clients)."""
    net = network_for(network, seed)
    pooled = net.sample(samples, seed=seed)
    return make_partition(pooled, clients, partition, seed), net


def write_sample(
    network: str,
    samples: int,
    clients: int,
    partition: str,
    seed: int,
    out: str | Path,
    *,
    force: bool = False,
    entry_point: str = "python",
) -> list[str]:
    """Write the rows a run with these settings draws (:func:`sample_partition`) as one CSV per
    site and the network's DAG as ``truth.csv``, so ``run --data ... --truth ...`` sees what
    ``run --network`` sees; returns the lines that say what was written."""
    from fedcausal_flwr.data.csv_input import write_site_files

    part, net = sample_partition(network, samples, clients, partition, seed)
    sites, truth, removed = write_site_files(
        part.clients,
        net.edges,
        out,
        force=force,
        entry_point=entry_point,
        source=f"network {network!r}",
    )
    folder = shlex.quote(str(out).rstrip("/") or "/")
    lines = [
        f"{network}: {samples} rows split {partition} into {clients} sites (seed {seed}) in {out}",
        *(
            f"  {path.name}: {len(frame)} rows"
            for path, frame in zip(sites, part.clients, strict=True)
        ),
        f"  {truth.name}: the network's {len(net.edges)} edges (cause,effect)",
        *(f"  removed {path.name} (left from an earlier sample)" for path in removed),
    ]
    if entry_point == "cli":
        lines.append(
            f"run a method on them: fedcausal-flwr run --method NAME --data {folder}/site*.csv "
            f"--truth {folder}/truth.csv"
        )
    return lines
