"""Command line: ``fedcausal-flwr run | networks | methods | compare | experiment``; a thin wrapper
over the Python API."""

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
    p.add_argument(
        "--ratio",
        type=float,
        default=None,
        help="voting methods: keep an edge with votes >= ratio * K (default 0.5)",
    )
    p.add_argument(
        "--orientation",
        default=None,
        choices=["maxp", "sepsets"],
        help="fedpc-vote: separating sets by largest client p-value, or voted sets",
    )
    p.add_argument(
        "--sep-depth",
        type=int,
        default=None,
        help="fedpc-vote: largest candidate separating set in the max-p round",
    )
    p.add_argument(
        "--algorithm",
        default=None,
        choices=["pc", "fci"],
        help="local / pooled: the search each client (or the server) runs",
    )
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


def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="sweep methods x networks x K x seeds (resumable); results.csv, summary, plots",
    )
    p.add_argument(
        "--methods",
        required=True,
        help="comma list of method specs, e.g. fedpc,fedpc:ci=sketch,pc-vote,pooled",
    )
    p.add_argument(
        "--networks",
        required=True,
        help="comma list: benchmark names or er:d=20[:degree=2][:cards=2-5]",
    )
    p.add_argument("--clients", required=True, help="K values, e.g. 5,10,20 or 2-4")
    p.add_argument("--samples", type=int, default=10_000)
    p.add_argument("--partition", default="iid", choices=["iid", "dirichlet", "heterogeneous"])
    p.add_argument(
        "--dirichlet-alpha",
        type=float,
        default=None,
        help="--partition dirichlet: concentration of the client sizes",
    )
    p.add_argument("--seeds", default="0", help="e.g. 0-4 or 0,3,7")
    p.add_argument("--backend", default="inprocess", choices=["ray", "inprocess"])
    p.add_argument("--jobs", type=int, default=1, help="parallel processes (each run independent)")
    p.add_argument("--out", default="results", help="output folder (runs/, results.csv, plots/)")
    p.add_argument("--alpha", type=float, default=None, help="every method's alpha")
    p.add_argument("--test", default=None, choices=["chi2", "g2", "fisherz"])
    p.add_argument("--max-depth", type=int, default=None)
    p.add_argument("--metrics", default="shd,adj_f1,arrow_f1", help="summarised and plotted")
    p.add_argument("--graph-run", default=None, help="run key whose graph is drawn vs the truth")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--retry-failed", action="store_true", help="re-run runs recorded as failed")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _compare(args: argparse.Namespace) -> int:
    from fedcausal_flwr.compare import compare

    options = {
        key: getattr(args, key)
        for key in ("alpha", "test", "max_depth")
        if getattr(args, key) is not None
    }
    partition_options = {}
    if args.dirichlet_alpha is not None:
        partition_options["dirichlet_alpha"] = args.dirichlet_alpha
    metrics = _split(args.metrics)
    study = compare(
        methods=_split(args.methods),
        networks=_split(args.networks),
        clients=args.clients,
        samples=args.samples,
        partition=args.partition,
        seeds=args.seeds,
        backend=args.backend,
        jobs=args.jobs,
        out=args.out,
        options=options,
        partition_options=partition_options,
        metrics=metrics,
        plots=not args.no_plots,
        graph_run=args.graph_run,
        retry_failed=args.retry_failed,
        progress=not args.quiet,
    )
    print(study.summary_text(metrics))
    print(
        f"\n{study.n_planned} runs planned: {study.n_run} run now, {study.n_skipped} already "
        f"done, {study.n_failed} failed now; results in {study.out / 'results.csv'}"
    )
    for path in study.plots:
        print(f"  plot: {path}")
    failed = study.frame[study.frame["status"] != "ok"] if not study.frame.empty else study.frame
    for row in failed.itertuples():
        print(f"  failed: {row.key}: {row.error}")
    return 1 if len(failed) else 0


def _add_experiment(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiment", help="run a named paper experiment (see --list)")
    p.add_argument("name", nargs="?", default=None, help="experiment name")
    p.add_argument("--list", action="store_true", help="list the named experiments")
    p.add_argument("--quick", action="store_true", help="a CI-sized variant (well under a minute)")
    p.add_argument("--full", action="store_true", help="the paper's full size (slow)")
    p.add_argument("--out", default=None, help="output folder (sweep experiments)")
    p.add_argument("--jobs", type=int, default=1)


def _experiment(args: argparse.Namespace) -> int:
    from fedcausal_flwr.experiments_registry import list_experiments, run_experiment

    if args.list or args.name is None:
        for exp in list_experiments():
            print(f"{exp.name:28s} v{exp.version}  {exp.description}")
        return 0
    return run_experiment(args.name, quick=args.quick, full=args.full, out=args.out,
                          jobs=args.jobs)  # fmt: skip


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
    _add_compare(sub)
    _add_experiment(sub)
    args = parser.parse_args(argv)
    handlers = {
        "run": _run,
        "networks": _networks,
        "methods": _methods,
        "compare": _compare,
        "experiment": _experiment,
    }
    try:
        return handlers[args.command](args)
    except (ValueError, KeyError, FileNotFoundError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"fedcausal-flwr: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
