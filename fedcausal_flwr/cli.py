"""Command line: ``fedcausal-flwr run | networks | methods``; a thin wrapper over the Python API."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run one federated method and print a summary")
    p.add_argument("--method", default="fedpc", help="registered method (see `methods`)")
    p.add_argument(
        "--ci",
        default="exact",
        choices=["exact", "secure", "sketch"],
        help="federated CI test: exact sums, SecAgg+ sums, or the FedC2SL sketch",
    )
    p.add_argument("--test", default="chi2", choices=["chi2", "g2", "fisherz"])
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--max-depth", type=int, default=None, help="largest conditioning set")
    p.add_argument("--sketch-length", type=int, default=50)
    p.add_argument("--ratio", type=float, default=None,
                   help="voting methods: keep an edge with votes >= ratio * K (default 0.5)")
    p.add_argument("--orientation", default=None, choices=["maxp", "sepsets"],
                   help="fedpc-vote: separating sets by largest client p-value, or voted sets")
    p.add_argument("--sep-depth", type=int, default=None,
                   help="fedpc-vote: largest candidate separating set in the max-p round")
    p.add_argument("--algorithm", default=None, choices=["pc", "fci"],
                   help="local / pooled: the search each client (or the server) runs")
    p.add_argument("--network", default="alarm", help="benchmark network (see `networks`)")
    p.add_argument("--samples", type=int, default=10_000)
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--partition", default="iid", choices=["iid", "dirichlet", "heterogeneous"])
    p.add_argument(
        "--data",
        nargs="+",
        default=None,
        metavar="CSV",
        help="one CSV per client (instead of --network)",
    )
    p.add_argument("--truth", default=None, metavar="CSV", help="cause,effect edges for metrics")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="ray", choices=["ray", "inprocess"])
    p.add_argument("--secure", action="store_true", help="SecAgg+ for every summed statistic")
    p.add_argument(
        "--min-clients",
        type=int,
        default=None,
        help="continue after dropouts while at least this many clients remain",
    )
    p.add_argument("--out", default=None, help="write the result JSON here")


def _run(args: argparse.Namespace) -> int:
    from fedcausal_flwr.api import run
    from fedcausal_flwr.data.partition import from_csv_files

    options = {
        "ci": args.ci,
        "test": args.test,
        "alpha": args.alpha,
        "sketch_length": args.sketch_length,
    }
    for key in ("max_depth", "ratio", "orientation", "sep_depth", "algorithm"):
        if getattr(args, key) is not None:
            options[key] = getattr(args, key)
    data = from_csv_files(args.data) if args.data else None
    result = run(
        args.method,
        data=data,
        network=None if data is not None else args.network,
        samples=args.samples,
        clients=args.clients,
        partition=args.partition,
        backend=args.backend,
        seed=args.seed,
        truth=args.truth,
        min_clients=args.min_clients,
        secure=True if args.secure else None,
        **options,
    )
    print(result.summary())
    if result.dropped_clients:
        for d in result.dropped_clients:
            print(
                f"  dropped client {d.get('client')} at round {d.get('round')}: {d.get('reason')}"
            )
    if args.out:
        path = result.save(args.out)
        print(f"  result written to {path}")
    return 0


def _networks(args: argparse.Namespace) -> int:
    from fedcausal_flwr.data import list_networks, load_network

    for name in list_networks():
        if args.describe:
            print(load_network(name))
        else:
            print(name)
    return 0


def _methods(args: argparse.Namespace) -> int:
    from fedcausal_flwr.federation.registry import get_method, known_methods

    for name in known_methods():
        print(f"{name:16s} {get_method(name).description}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    parser = argparse.ArgumentParser(prog="fedcausal-flwr", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run(sub)
    nets = sub.add_parser("networks", help="list the embedded benchmark networks")
    nets.add_argument(
        "--describe", action="store_true", help="also parse and print node/edge counts"
    )
    sub.add_parser("methods", help="list the registered methods")
    args = parser.parse_args(argv)
    handlers = {"run": _run, "networks": _networks, "methods": _methods}
    try:
        return handlers[args.command](args)
    except (ValueError, KeyError, FileNotFoundError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"fedcausal-flwr: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
