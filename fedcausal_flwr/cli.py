"""Command line: ``fedcausal-flwr run | networks | methods | compare | experiment | citest``; a thin
wrapper over the Python API."""

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
        default=None,
        choices=["exact", "secure", "sketch", "fedci", "fisher"],
        help="fedpc/fedfci: exact sums (default), SecAgg+ sums, the FedC2SL sketch, fedCI's "
        "GLM tests on mixed data, or Fisher's combination of local tests",
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
    p.add_argument(
        "--target", default=None, help="fedlcs: the target variable (a name, 'A,B' or 'all')"
    )
    p.add_argument(
        "--site-effect",
        default=None,
        choices=["none", "fixed", "private"],
        help="fedci-pc / fedci-fci: how client (site) effects enter the GLMs",
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

    options = {"test": args.test, "alpha": args.alpha, "sketch_length": args.sketch_length}
    for key in (
        "ci",
        "max_depth",
        "ratio",
        "orientation",
        "sep_depth",
        "algorithm",
        "target",
        "site_effect",
    ):
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


def _add_citest(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "citest", help="one federated CI test X _||_ Y | Z on mixed data (fedCI's GLM LRT)"
    )
    p.add_argument("--data", nargs="+", required=True, metavar="CSV", help="one CSV per client")
    p.add_argument("--x", required=True)
    p.add_argument("--y", required=True)
    p.add_argument("--given", nargs="*", default=[], metavar="Z")
    p.add_argument("--site-effect", default="none", choices=["none", "fixed", "private"])
    p.add_argument("--method", default="fedci", choices=["fedci", "fisher"])
    p.add_argument("--ridge", type=float, default=0.0)
    for kind in ("ordinal", "categorical", "continuous", "binary"):
        p.add_argument(
            f"--{kind}",
            nargs="+",
            default=[],
            metavar="COL",
            help=f"read these columns as {kind} (overrides the dtype; ordinal/binary levels are "
            "the sorted union of observed values)",
        )
    p.add_argument("--schema", default=None, metavar="JSON", help="explicit schema file")


def citest_schema(frames: list, overrides: dict[str, list[str]]):
    """The schema of CSV frames: dtypes (see :mod:`fedcausal_flwr.data.schema`), then overrides."""
    import pandas as pd

    from fedcausal_flwr.data.schema import Schema, VariableSpec

    schema = Schema.infer(frames)
    specs = {s.name: s for s in schema.variables}
    claimed: dict[str, str] = {}
    for kind, columns in overrides.items():
        for col in columns:
            if col not in specs:
                raise KeyError(f"--{kind} {col}: no such column in any --data file")
            if col in claimed:
                raise ValueError(f"column {col!r} is given as both {claimed[col]} and {kind}")
            claimed[col] = kind
            if kind == "continuous":
                specs[col] = VariableSpec(col, "continuous")
                continue
            values = pd.concat([f[col] for f in frames if col in f.columns]).dropna().unique()
            try:
                levels = tuple(sorted(values.tolist()))
            except TypeError as err:
                raise ValueError(
                    f"--{kind} {col}: values {values.tolist()} cannot be ordered"
                ) from err
            specs[col] = VariableSpec(col, kind, levels)
    return Schema(tuple(specs[name] for name in schema.names))


def _citest(args: argparse.Namespace) -> int:
    import pandas as pd

    from fedcausal_flwr.citest import citest
    from fedcausal_flwr.data.schema import Schema

    frames = [pd.read_csv(path) for path in args.data]
    overrides = {k: getattr(args, k) for k in ("ordinal", "categorical", "continuous", "binary")}
    for col in overrides["continuous"]:
        for k, frame in enumerate(frames):
            if col in frame.columns:
                if not pd.api.types.is_numeric_dtype(frame[col]):
                    raise ValueError(f"{args.data[k]}: --continuous column {col!r} is not numeric")
                frame[col] = frame[col].astype(float)
    if args.schema:
        with open(args.schema) as fh:
            schema = Schema.from_json(fh.read())
    else:
        schema = citest_schema(frames, overrides)
    res = citest(frames, args.x, args.y, args.given, site_effect=args.site_effect,
                 method=args.method, schema=schema, ridge=args.ridge)  # fmt: skip
    given = ", ".join(res.given) or "-"
    print(f"test: {res.x} _||_ {res.y} | {given}  ({args.method}, site effect {args.site_effect})")
    for name in (res.x, res.y, *res.given):
        print(f"  {name}: {schema[name].kind}")
    print(f"p-value: {res.p_value:.6g}")
    if args.method == "fedci":
        print(f"  {res.x} ~ {res.y} + Z: LRT statistic {res.statistic_x:.6g}, df {res.df_x}, "
              f"p {res.p_x:.6g}")  # fmt: skip
        print(f"  {res.y} ~ {res.x} + Z: LRT statistic {res.statistic_y:.6g}, df {res.df_y}, "
              f"p {res.p_y:.6g}")  # fmt: skip
        print("  (statistics equal the pooled-data LRT's)")
    else:
        print(f"  Fisher statistic {res.statistic_x:.6g}, df {res.df_x}")
    used = [args.data[k] for k in res.clients]
    skipped = [path for k, path in enumerate(args.data) if k not in res.clients]
    print(f"clients: {len(used)} of {len(args.data)} took part, n = {res.n}: {', '.join(used)}")
    if skipped:
        print(f"  without all variables (skipped): {', '.join(skipped)}")
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
    _add_compare(sub)
    _add_experiment(sub)
    _add_citest(sub)
    args = parser.parse_args(argv)
    handlers = {
        "run": _run,
        "networks": _networks,
        "methods": _methods,
        "compare": _compare,
        "experiment": _experiment,
        "citest": _citest,
    }
    try:
        return handlers[args.command](args)
    except (ValueError, KeyError, FileNotFoundError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"fedcausal-flwr: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
