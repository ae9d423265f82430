"""Does FedECD depend on the column order? (Eq. (9)'s tie rule; docs/choices.md, FedECD.)

    python experiments/fedecd_order.py [--network child] [--clients 10] [--samples 10000]
        [--permutations 4] [--seed 0] [--tie-rule undirected] [--compat]

The benchmark files list variables almost in topological order, so any rule that favours the
lower (or higher) index as the parent moves Ar_F1 against the true DAG without learning anything.
This runs FedECD on the same clients with the original column order and with ``--permutations``
random orders (every client permuted alike), and prints Ar_F1 in the DAG view (against the true
DAG: sensitive to how score-equivalent edges are oriented) and in the CPDAG view (against the true
CPDAG: only what the data can decide), with the spread over orders. ``--tie-rule lower_parent``
(the paper's Eq. 9) and ``--compat`` (the authors' lower-triangle search quirk) show the
order-dependent variants.
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np

from fedcausal_flwr.experiments.common import add_sample_arguments, iid_sites
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.graphs.extension import pdag_to_dag
from fedcausal_flwr.graphs.truth import dag_to_cpdag
from fedcausal_flwr.metrics import graph_metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sample_arguments(parser, network="child", clients=10)
    parser.add_argument("--permutations", type=int, default=4)
    parser.add_argument("--tie-rule", default="undirected")
    parser.add_argument("--compat", action="store_true", help="lower_triangle_compat search")
    args = parser.parse_args()

    net, parts = iid_sites(args)
    options = {"seed": args.seed, "tie_rule": args.tie_rule, "lower_triangle_compat": args.compat}
    rng = np.random.default_rng(args.seed)
    orders = [list(net.variables)] + [
        list(rng.permutation(net.variables)) for _ in range(args.permutations)
    ]
    true_cpdag = dag_to_cpdag(net.dag)
    rows = []
    for k, order in enumerate(orders):
        result = run_method("fedecd", [frame[order] for frame in parts.clients], options)
        extension, _ = pdag_to_dag(result.graph)
        dag_view = graph_metrics(extension, net.dag)["arrow_f1"]
        cpdag_view = graph_metrics(dag_to_cpdag(extension), true_cpdag)["arrow_f1"]
        label = "original order" if k == 0 else f"permutation {k}"
        print(f"{label:16s} DAG-view Ar_F1 {dag_view:.3f}   CPDAG-view Ar_F1 {cpdag_view:.3f}")
        rows.append((dag_view, cpdag_view))
    permuted = rows[1:]
    if len(permuted) > 1:
        for name, col in (("DAG", 0), ("CPDAG", 1)):
            values = [r[col] for r in permuted]
            print(
                f"{name}-view over permutations: mean {statistics.mean(values):.3f} "
                f"sd {statistics.stdev(values):.3f} (original {rows[0][col]:.3f})"
            )


if __name__ == "__main__":
    main()
