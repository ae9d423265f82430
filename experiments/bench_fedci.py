"""fedCI benchmark: rounds, wall time and agreement with the pooled/Fisher tests on mixed data.

Usage: ``python experiments/bench_fedci.py [n] [k ...]``. For each number of clients k, simulates
fedCI's site-effect data (5 mixed variables), runs ``fedci-pc`` through the Flower runtime
(in-process backend) with site dummies, and compares its p-values with an in-process run on the
same clients (pooled-equal) and with Fisher's method over local tests.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from fedcausal_flwr.citest import citest
from fedcausal_flwr.data.partition import split_site_effects
from fedcausal_flwr.data.schema import Schema
from fedcausal_flwr.data.synthetic import random_dag
from fedcausal_flwr.federation.runners import run_method
from fedcausal_flwr.strategies import fedci  # noqa: F401  (registers the methods)

TYPES = {
    "X1": "continuous",
    "X2": "binary",
    "X3": "ordinal",
    "X4": "categorical",
    "X5": "continuous",
}


def main(n: int = 2000, ks: tuple[int, ...] = (4, 8, 12)) -> None:
    dag = random_dag(5, expected_degree=2.5, seed=7)
    for k in ks:
        part = split_site_effects(dag, n, k, seed=7, types=TYPES, n_levels=3)
        schema = Schema.infer(part.clients)
        start = time.perf_counter()
        res = run_method(
            "fedci-pc", part.clients, {"schema": schema.dumps(), "site_effect": "fixed"},
            backend="inprocess",
        )  # fmt: skip
        wall = time.perf_counter() - start
        tests = res.extra["ci_tests"]
        gaps_fisher = []
        for t in tests:
            fisher = citest(part.clients, t["x"], t["y"], t["given"], method="fisher",
                            schema=schema)  # fmt: skip
            gaps_fisher.append(np.log10(fisher.p_value) - np.log10(t["p_value"]))
        print(
            f"k={k:2d} n={n}: {len(tests)} tests, {res.rounds} rounds "
            f"({len(res.extra['batches'])} batches), {wall:.1f} s, "
            f"{res.bytes_up:,} B up; log10 p(Fisher) - log10 p(fedCI): "
            f"median {np.median(gaps_fisher):+.3f}, max {np.max(gaps_fisher):+.3f}"
        )


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(args[0] if args else 2000, tuple(args[1:]) or (4, 8, 12))
