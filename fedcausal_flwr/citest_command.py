"""``fedcausal-flwr citest``: one federated CI test on CSV files from the command line (its
parser and handler, beside the one-call API of :mod:`fedcausal_flwr.citest`)."""

from __future__ import annotations

import argparse

from fedcausal_flwr import outputs
from fedcausal_flwr.result import pvalue_text


def add_citest_parser(sub: argparse._SubParsersAction) -> None:
    """The ``citest`` command."""
    p = sub.add_parser(
        "citest", help="one federated CI test X _||_ Y | Z on mixed data (fedCI's GLM LRT)"
    )
    p.add_argument("--data", nargs="+", required=True, metavar="CSV", help="one CSV per client")
    p.add_argument("--x", required=True)
    p.add_argument("--y", required=True)
    p.add_argument("--given", nargs="*", default=[], metavar="Z")
    p.add_argument("--site-effect", default="none", choices=["none", "fixed", "private"])
    p.add_argument(
        "--ci",
        default="fedci",
        choices=["fedci", "fisher"],
        help="fedCI's federated likelihood-ratio test, or Fisher's combination of local tests "
        "(the same spelling as `run --method fedci-pc --ci fisher`)",
    )
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
    p.add_argument("--sep", default=None, metavar="SEP", help="the files' delimiter (else sniffed)")
    p.add_argument(
        "--keep-index", action="store_true", help="keep an index-like first column as a variable"
    )


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


def citest_command(args: argparse.Namespace) -> int:
    """Run ``fedcausal-flwr citest`` and print the test."""
    import pandas as pd

    from fedcausal_flwr.citest import citest
    from fedcausal_flwr.data.csv_input import read_client_files
    from fedcausal_flwr.data.schema import Schema

    with outputs.reading_inputs(args.data, "cli"):  # permission denied: one line naming it
        frames = read_client_files(args.data, sep=args.sep, keep_index=args.keep_index,
                                   entry_point="cli")  # fmt: skip
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
                 ci=args.ci, schema=schema, ridge=args.ridge)  # fmt: skip
    given = ", ".join(res.given) or "-"
    print(f"test: {res.x} _||_ {res.y} | {given}  ({args.ci}, site effect {args.site_effect})")
    for name in (res.x, res.y, *res.given):
        print(f"  {name}: {schema[name].kind}")
    print(f"p-value: {pvalue_text(res.p_value, digits=6)}")
    if args.ci == "fedci":
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
