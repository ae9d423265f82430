"""fedCI's CI-test study (shape of the paper's Fig. on type I error and power), small by default.

Data: a fixed mixed DAG ``X1 -> X2, X1 -> X3, X2 -> X3, X1 -> X4, X4 -> X5`` (X1 continuous, X2
binary, X3 continuous, X4 categorical, X5 ordinal) simulated by
:func:`~fedcausal_flwr.data.partition.split_site_effects`: a hidden site variable shifts every
variable's intercept and each site holds its own rows. Null tests (true independences):
``X2 _||_ X4 | X1`` and ``X5 _||_ X1 | X4``; alternative tests: ``X2 ~ X3 | X1`` and
``X5 ~ X4 | X1``. For every (sites, sample size) cell and replicate, each method tests all four;
the table reports the rejection rate at ``alpha`` over the null tests (type I error) and over the
alternative tests (power).

Methods: ``fedCI`` (federated LRT with fixed site effects, equal to the pooled LRT with site
dummies), ``pooled`` (all rows in one frame, no site term: what a naive pooled analysis does) and
``Fisher`` (each site's own LRT, combined by Fisher's method).

Usage: ``python experiments/fedci_citest_study.py [--quick] [--reps R] [--sites 2 4 8]
[--sizes 500 2000] [--alpha 0.05]``.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from fedcausal_flwr.citest import citest
from fedcausal_flwr.data.partition import split_site_effects
from fedcausal_flwr.data.schema import Schema
from fedcausal_flwr.graphs.graph import Graph

NAMES = ["X1", "X2", "X3", "X4", "X5"]
EDGES = [("X1", "X2"), ("X1", "X3"), ("X2", "X3"), ("X1", "X4"), ("X4", "X5")]
TYPES = {"X1": "continuous", "X2": "binary", "X3": "continuous", "X4": "categorical",
         "X5": "ordinal"}  # fmt: skip
NULL_TESTS = [("X2", "X4", ["X1"]), ("X5", "X1", ["X4"])]
ALT_TESTS = [("X2", "X3", ["X1"]), ("X5", "X4", ["X1"])]
METHODS = ("fedCI", "pooled", "Fisher")


def one_replicate(n: int, k: int, seed: int) -> list[dict]:
    """All methods on all tests for one simulated federation."""
    dag = Graph.from_edges(NAMES, EDGES)
    part = split_site_effects(dag, n, k, seed=seed, types=TYPES, n_levels=3, beta_range=(0.1, 0.3))
    clients = part.clients
    schema = Schema.infer(clients)
    pooled = pd.concat([schema.decode(schema.encode(df)) for df in clients], ignore_index=True)
    rows = []
    for truth, tests in (("null", NULL_TESTS), ("alt", ALT_TESTS)):
        for x, y, s in tests:
            runs = {
                "fedCI": (clients, {"site_effect": "fixed"}),
                "pooled": ([pooled], {}),
                "Fisher": (clients, {"method": "fisher"}),
            }
            for method, (data, options) in runs.items():
                p = citest(data, x, y, s, schema=schema, **options).p_value
                rows.append({"n": n, "sites": k, "truth": truth, "method": method, "p": p})
    return rows


def study(sites: list[int], sizes: list[int], reps: int, alpha: float) -> pd.DataFrame:
    rows = []
    for k in sites:
        for n in sizes:
            for r in range(reps):
                rows += one_replicate(n, k, seed=1000 * k + 7 * n + r)
    frame = pd.DataFrame(rows)
    frame["reject"] = frame["p"] < alpha
    table = frame.pivot_table(index=["sites", "n"], columns=["truth", "method"],
                              values="reject", aggfunc="mean")  # fmt: skip
    return table.rename(columns={"null": "type I error", "alt": "power"}, level=0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 replicates, one small cell grid")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--sites", nargs="+", type=int, default=[2, 4])
    parser.add_argument("--sizes", nargs="+", type=int, default=[500, 2000])
    parser.add_argument("--alpha", type=float, default=0.05)
    args = parser.parse_args(argv)
    if args.quick:
        args.reps, args.sites, args.sizes = 2, [2, 4], [400]
    start = time.perf_counter()
    table = study(args.sites, args.sizes, args.reps, args.alpha)
    with pd.option_context("display.width", 140, "display.float_format", "{:.3f}".format):
        print(f"rejection rate at alpha={args.alpha} ({args.reps} replicates x "
              f"{len(NULL_TESTS)} tests per cell)")  # fmt: skip
        print(table)
    print(f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
