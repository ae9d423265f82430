"""RFCD (GES over BDeu, each family scored by its worst client) on ALARM x 10k with K clients.

    python experiments/rfcd_check.py [--network alarm] [--samples 10000] [--clients 1 3 10]
        [--seed 0] [--causallearn]

For each K (IID split, default options: causal-learn's BDeu with ESS 1 and structure prior 1,
each client's observed levels, maxP = p / 2) prints the rounds, bytes up / down, wall time, the
distinct families the clients scored, the GES moves (inserts + deletes) and the SHD and
adjacency / arrowhead F1 against the true CPDAG. Reference in the same run: the same GES engine
on the pooled rows without a federation (its wall time gives the ratio; with K = 1 the CPDAGs must
be equal). ``--causallearn`` also runs causal-learn's ``ges(X, "local_score_BDeu", maxP=p/2)`` on
the pooled rows (slow: minutes on ALARM) and reports its time and whether its CPDAG equals ours.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np

from fedcausal_flwr.api import make_partition
from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.discovery.ges import CausalLearnBDeu, ges
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.metrics import graph_metrics
from fedcausal_flwr.scoring import truth_for


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", default="alarm")
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 3, 10])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--causallearn", action="store_true")
    args = parser.parse_args()

    net = load_network(args.network)
    pooled = net.sample(args.samples, seed=args.seed)
    names = list(pooled.columns)
    codes = np.column_stack([pooled[c].cat.codes.to_numpy() for c in names]).astype(np.int64)
    p = len(names)

    started = time.perf_counter()
    local = ges(p, CausalLearnBDeu(codes), max_parents=p / 2)
    local_wall = time.perf_counter() - started
    local_graph = local.graph(names)
    truth = truth_for(local_graph, net.dag)
    m = graph_metrics(local_graph, truth)
    print(
        f"{args.network} x {args.samples} ({p} variables, {truth.n_edges()} true edges), "
        f"seed {args.seed}"
    )
    print(
        f"pooled GES (same engine, no federation): {local_wall:.2f} s, "
        f"{len(local.inserts)} + {len(local.deletes)} moves, {local.batches} batches, "
        f"{local.families_scored} families, SHD {m['shd']}, adj F1 {m['adj_f1']:.3f}, "
        f"arrow F1 {m['arrow_f1']:.3f}"
    )
    header = (
        f"{'K':>3} {'rounds':>6} {'bytes up':>10} {'bytes down':>10} {'wall s':>7} "
        f"{'x pooled':>8} {'families':>8} {'moves':>6} {'SHD':>4} {'adj F1':>6} {'arr F1':>6}"
    )
    print(header)
    for k in args.clients:
        parts = make_partition(pooled, k, "iid", seed=args.seed).clients
        started = time.perf_counter()
        result = run_method("rfcd", parts, {})
        wall = time.perf_counter() - started
        m = graph_metrics(result.graph, truth)
        moves = len(result.extra["inserts"]) + len(result.extra["deletes"])
        print(
            f"{k:>3} {result.rounds:>6} {result.bytes_up:>10} {result.bytes_down:>10} "
            f"{wall:>7.2f} {wall / local_wall:>8.1f} {result.extra['families_scored']:>8} "
            f"{moves:>6} {m['shd']:>4} {m['adj_f1']:>6.3f} {m['arrow_f1']:>6.3f}"
            + (f"  equal to pooled GES: {result.graph == local_graph}" if k == 1 else "")
        )

    if args.causallearn:
        from causallearn.search.ScoreBased.GES import ges as causallearn_ges

        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            record = causallearn_ges(codes, score_func="local_score_BDeu", maxP=p / 2)
        cl_wall = time.perf_counter() - started
        theirs = Graph.from_causallearn(record["G"].graph, names, "CPDAG")
        print(
            f"causal-learn ges(local_score_BDeu, maxP = p / 2) on the pooled rows: {cl_wall:.1f} s "
            f"(pooled GES here / causal-learn = {local_wall / cl_wall:.3f}); CPDAG equal to "
            f"ours: {theirs == local_graph}"
        )


if __name__ == "__main__":
    main()
