"""FedECD's cost on ALARM with 30 clients and 15 bootstraps, in the in-process backend.

    python experiments/bench_fedecd.py [--network alarm] [--samples 10000] [--clients 30]
        [--bootstraps 15] [--seed 0]

Prints the wall time of the whole run (target: under 5 minutes on 2 cores), the time the clients
spent in the BDeu hill climbing (summed over clients; the in-process backend serves them one after
another, so the sum is a share of the wall time) and its share, the CI tests per phase-1 layer,
and the time of a layer-wise voting FedPC run on the same clients as a reference.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

from fedcausal_flwr.api import truth_for
from fedcausal_flwr.experiments.common import add_sample_arguments, iid_sites
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.metrics import graph_metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sample_arguments(parser, network="alarm", clients=30)
    parser.add_argument("--bootstraps", type=int, default=15)
    args = parser.parse_args()

    net, parts = iid_sites(args)
    started = time.perf_counter()
    result = run_method("fedecd", parts.clients, {"bootstraps": args.bootstraps, "seed": args.seed})
    wall = time.perf_counter() - started
    search = sum(result.extra["score_seconds"].values())
    print(
        f"FedECD on {args.network} x {args.samples}, K = {args.clients}, B = {args.bootstraps}: "
        f"{wall:.1f} s wall ({wall / 60:.2f} min; target < 5 min), {result.rounds} rounds"
    )
    print(f"  BDeu hill climbing: {search:.1f} s summed over clients = {search / wall:.0%} of wall")
    for layer in result.extra["layers"]:
        print(
            f"  layer {layer['depth']}: {layer['edges_before']} edges, {layer['lost_vote']} lost "
            f"the vote, {layer['restored']} restored, "
            f"{sum(layer['client_tests'].values())} CI tests over all clients"
        )
    metrics = graph_metrics(result.graph, net.dag)
    print(f"  Ar_F1 {metrics['arrow_f1']:.3f}, SHD {metrics['shd']} (against the true DAG)")

    started = time.perf_counter()
    vote = run_method("fedpc-vote", parts.clients, {"alpha": 0.01, "test": "g2", "max_depth": 3})
    reference = time.perf_counter() - started
    ref_metrics = graph_metrics(vote.graph, truth_for(vote.graph, net.dag))
    print(
        f"fedpc-vote on the same clients: {reference:.1f} s -> FedECD / fedpc-vote time ratio "
        f"{wall / reference:.1f} (Ar_F1 {ref_metrics['arrow_f1']:.3f} against the CPDAG)"
    )


if __name__ == "__main__":
    main()
