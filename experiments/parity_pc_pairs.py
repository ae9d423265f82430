"""FedPC against causal-learn's ``pc`` for every ``uc_rule`` / ``uc_priority`` pair causal-learn
accepts, on a sample of one of pgmpy's networks (default: barley, levels up to 67), in one run.

    python experiments/parity_pc_pairs.py [--network barley] [--rows 3000] [--clients 1 3 10]

The test suite checks every pair on generated DAGs and on water; this script does the same on a
network whose full grid is too slow for the suite (16 pairs x each K, ~10 s per run on barley).
The sample is drawn with seed 0 and read as text (observed levels only, as from a CSV); causal-learn
runs chi-square on the pooled codes, FedPC runs exact chi2 over ``--clients`` unequal clients.
Prints one line per (K, pair) and the count of equal graphs; exits 1 if any differs. Needs
causal-learn (a test extra).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

#: Every (uc_rule, uc_priority) pair causal-learn's ``pc`` accepts (definiteMaxP asserts 2-4).
ACCEPTED = [(rule, prio) for rule in (0, 1) for prio in (-1, 0, 1, 2, 3, 4)] + [
    (2, prio) for prio in (-1, 2, 3, 4)
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--network", default="barley")
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 3, 10])
    args = parser.parse_args(argv)

    from causallearn.search.ConstraintBased.PC import pc as causallearn_pc

    from fedcausal_flwr.data import load_network
    from fedcausal_flwr.data.partition import split_sizes
    from fedcausal_flwr.federation.runtime.runners import run_method
    from fedcausal_flwr.graphs import Graph

    frame = load_network(args.network).sample(args.rows, seed=0).astype(str)
    names = list(frame.columns)
    codes = np.column_stack(
        [pd.Categorical(frame[c], categories=sorted(frame[c].unique())).codes for c in frame]
    ).astype(np.int64)
    theirs = {}
    for rule, prio in ACCEPTED:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cg = causallearn_pc(
                codes, 0.05, "chisq", uc_rule=rule, uc_priority=prio, show_progress=False,
                node_names=names,
            )  # fmt: skip
        theirs[rule, prio] = Graph.from_causallearn(cg.G.graph, names, "CPDAG")
    equal = total = 0
    for k in args.clients:
        parts = [frame]
        if k > 1:
            parts = split_sizes(frame, alpha=1.0, k=k, seed=k, min_rows=30).clients
        for rule, prio in ACCEPTED:
            start = time.perf_counter()
            options = {"test": "chi2", "uc_rule": rule, "uc_priority": prio}
            ours = run_method("fedpc", parts, options).graph
            same = ours == theirs[rule, prio]
            equal, total = equal + same, total + 1
            print(
                f"K={k:<3} uc_rule={rule} uc_priority={prio:>2}: "
                f"{'equal' if same else 'DIFFERENT'} ({time.perf_counter() - start:.1f} s)",
                flush=True,
            )
    print(f"{args.network} x {args.rows}: {equal}/{total} (K, pair) runs equal causal-learn's pc")
    return 0 if equal == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
