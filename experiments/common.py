"""What several experiment scripts share: the arguments naming a benchmark sample and its IID
sites, and the mean (sd) cells of their tables. Not a script itself."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence

from fedcausal_flwr.data.networks import Network, load_network
from fedcausal_flwr.data.partition import Partition
from fedcausal_flwr.data.specs import make_partition


def add_sample_arguments(
    parser: argparse.ArgumentParser,
    *,
    network: str,
    clients: int,
    samples: int = 10_000,
    seed: bool = True,
) -> None:
    """``--network``, ``--samples`` and ``--clients`` (with these defaults): the benchmark network,
    the rows sampled from it and the IID sites they are split over; ``--seed`` (default 0) when
    ``seed``."""
    parser.add_argument("--network", default=network)
    parser.add_argument("--samples", type=int, default=samples)
    parser.add_argument("--clients", type=int, default=clients)
    if seed:
        parser.add_argument("--seed", type=int, default=0)


def iid_sites(args: argparse.Namespace) -> tuple[Network, Partition]:
    """The network of ``args`` and its ``--samples`` rows (seeded by ``--seed``) split IID over
    ``--clients`` sites with the same seed."""
    net = load_network(args.network)
    rows = net.sample(args.samples, seed=args.seed)
    return net, make_partition(rows, args.clients, "iid", args.seed)


def mean_sd(values: Sequence[float], form: str = "{mean:.3f} ({sd:.3f})") -> str:
    """The mean and the sample standard deviation of ``values`` (0 for a single value), written
    by ``form``."""
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return form.format(mean=statistics.fmean(values), sd=sd)
