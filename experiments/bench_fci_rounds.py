"""Rounds of federated FCI: the sequential Possible-D-Sep phase with and without speculative
batches, same data, same run.

    python experiments/bench_fci_rounds.py [--network hepar2] [--rows 10000] [--clients 10]
                                           [--rules zhang]

FedFCI (exact chi2) runs twice in-process on the same unequal clients: once with
``SPECULATIVE_TESTS = 0`` (one round per Possible-D-Sep (edge side, subset size), the schedule as
causal-learn asks it) and once with the default speculation (a batch also asks the tests the
schedule would ask next). Printed: rounds, CI tests asked, bytes up/down, seconds, the ratio of
rounds (target <= 0.2 for hepar2 at 10 clients) and whether the two PAGs are identical.
"""

from __future__ import annotations

import argparse
import time
import warnings

import fedcausal_flwr.discovery.possible_dsep as possible_dsep
from fedcausal_flwr.data import load_network
from fedcausal_flwr.data.partition import split_sizes
from fedcausal_flwr.federation.runtime.runners import run_method


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", default="hepar2")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--rules", choices=("zhang", "causallearn"), default="zhang")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    frame = load_network(args.network).sample(args.rows, seed=0).astype(str)
    clients = split_sizes(frame, alpha=1.0, k=args.clients, seed=args.clients, min_rows=30).clients
    default = possible_dsep.SPECULATIVE_TESTS
    found = {}
    for label, speculate in (("one batch per size", 0), ("speculative", default)):
        possible_dsep.SPECULATIVE_TESTS = speculate
        start = time.perf_counter()
        result = run_method("fedfci", clients, {"fci_rules": args.rules})
        found[label] = (result, time.perf_counter() - start)
    possible_dsep.SPECULATIVE_TESTS = default
    print(f"FedFCI on {args.network} x {args.rows}, {args.clients} clients, rules={args.rules}")
    print(f"{'schedule':20} {'rounds':>6} {'tests':>8} {'up MB':>9} {'down MB':>9} {'seconds':>8}")
    for label, (r, seconds) in found.items():
        print(
            f"{label:20} {r.rounds:6d} {r.extra['tests']:8d} {r.bytes_up / 2**20:9.1f} "
            f"{r.bytes_down / 2**20:9.1f} {seconds:8.1f}"
        )
    (before, _), (after, _) = found.values()
    print(f"rounds after / before: {after.rounds / before.rounds:.3f} (target <= 0.2)")
    print(f"same PAG: {before.graph == after.graph}")


if __name__ == "__main__":
    main()
