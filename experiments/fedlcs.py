"""FedLCS vs baselines on discrete benchmark networks (Yu et al. 2025, Fig. 8 setting).

    python experiments/fedlcs.py [--networks insurance alarm win95pts andes pigs]
        [--samples 5000] [--clients 3 5 10 15] [--alpha 0.05] [--max-targets 40] [--quick]

Per network and number of clients N (IID split of ``--samples`` rows, seed ``--seed``), targets =
every node with at least one parent or child (a seeded sample of ``--max-targets`` on larger
networks). Methods, all at alpha, ratio 0.4, max layer 6, chi2 tests:

* ``fedlcs``: one federated run for all targets together (shared PC-set cache, batched rounds);
* ``lcs-avg`` / ``lcs-best``: the same search run by each client alone on its rows
  (:func:`~fedcausal_flwr.strategies.fedlcs.local_structure`); avg = mean over clients of the
  per-client target means; best = max F1 and min SHD over clients, chosen independently with the
  truth (an oracle, digest A16);
* ``lcs-pooled``: the same search on the pooled rows (LCS-All, not private);
* ``fedpc-vote``: global layer-wise voting FedPC (ratio 0.4, max-p orientation); the target's
  incident edges are read off its global graph.

Metrics per target (:func:`~fedcausal_flwr.metrics.local_metrics`): arrowhead F1 and local SHD,
averaged over targets. ``time_s`` is wall time for all targets; ``tests`` counts CI tests computed
by the clients (summed). The first block compares ONE target on ALARM with a global run.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np  # noqa: E402

from fedcausal_flwr.data.networks import load_network  # noqa: E402
from fedcausal_flwr.data.partition import split_iid  # noqa: E402
from fedcausal_flwr.federation.runners import run_method  # noqa: E402
from fedcausal_flwr.graphs.graph import Graph  # noqa: E402
from fedcausal_flwr.metrics import local_metrics  # noqa: E402
from fedcausal_flwr.stats.oracles import DiscreteOracle  # noqa: E402
from fedcausal_flwr.strategies.fedlcs import LCSOptions, full_graph, local_structure  # noqa: E402


def codes_of(frame, variables) -> np.ndarray:
    return np.column_stack([frame[v].cat.codes.to_numpy() for v in variables]).astype(np.int64)


def fedpc_tests(result) -> int:
    per_layer = sum(sum(layer["client_tests"].values()) for layer in result.extra["layers"])
    return per_layer + result.extra["orientation_tests"] * len(result.extra["layers"][0]["clients"])


def structure_graph(structure, names) -> Graph:
    return full_graph(structure.graph(names), names)


def score(graphs: dict[str, Graph], truth: Graph) -> dict[str, float]:
    rows = [local_metrics(g, truth, t) for t, g in graphs.items()]
    return {
        "f1": float(np.mean([r["f1"] for r in rows])),
        "shd": float(np.mean([r["shd"] for r in rows])),
    }


def pick_targets(net, max_targets: int, seed: int) -> list[str]:
    adjacency = net.dag.adjacency()
    names = [v for i, v in enumerate(net.variables) if adjacency[i].any()]
    if len(names) > max_targets:
        rng = np.random.default_rng(seed)
        names = sorted(rng.choice(names, size=max_targets, replace=False).tolist(), key=names.index)
    return names


def one_target_vs_global(samples: int, clients: int, alpha: float, seed: int) -> None:
    net = load_network("alarm")
    parts = split_iid(net.sample(samples, seed=seed), clients, seed=seed).clients
    target = "HR"
    started = time.perf_counter()
    lcs = run_method("fedlcs", parts, {"target": target, "alpha": alpha}, backend="inprocess")
    lcs_s = time.perf_counter() - started
    started = time.perf_counter()
    glob = run_method("fedpc-vote", parts, {"alpha": alpha, "ratio": 0.4}, backend="inprocess")
    glob_s = time.perf_counter() - started
    print(f"ALARM x {samples}, {clients} clients, target {target}:")
    print(f"  fedlcs      tests {lcs.extra['tests']:>8}  time {lcs_s:7.2f} s  rounds {lcs.rounds}")
    print(f"  fedpc-vote  tests {fedpc_tests(glob):>8}  time {glob_s:7.2f} s  rounds {glob.rounds}")
    truth = net.dag
    print(f"  fedlcs {local_metrics(full_graph(lcs.graph, net.variables), truth, target)}")
    print(f"  fedpc-vote {local_metrics(glob.graph, truth, target)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--networks", nargs="+", default=["insurance", "alarm", "win95pts", "andes", "pigs"]
    )
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--clients", type=int, nargs="+", default=[3, 5, 10, 15])
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--max-targets", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-global", action="store_true", help="skip the global fedpc-vote run")
    parser.add_argument(
        "--quick", action="store_true", help="CI-sized: alarm, N = 3, 5, 10 targets"
    )
    args = parser.parse_args()
    if args.quick:
        args.networks, args.clients, args.max_targets = ["alarm"], [3, 5], 10

    one_target_vs_global(args.samples, 5, args.alpha, args.seed)
    options = LCSOptions(alpha=args.alpha)
    header = (
        f"{'network':<10} {'N':>3} {'method':<11} {'F1':>6} {'SHD':>6} {'time_s':>8} {'tests':>9}"
    )
    print("\n" + header + "\n" + "-" * len(header))
    for name in args.networks:
        net = load_network(name)
        names = list(net.variables)
        targets = pick_targets(net, args.max_targets, args.seed)
        index = [names.index(t) for t in targets]
        pooled = net.sample(args.samples, seed=args.seed)
        for k in args.clients:
            parts = split_iid(pooled, k, seed=args.seed).clients
            rows = []
            started = time.perf_counter()
            fed = run_method(
                "fedlcs",
                parts,
                {"target": ",".join(targets), "alpha": args.alpha},
                backend="inprocess",
            )
            fed_s = time.perf_counter() - started
            graphs = {
                t: full_graph(Graph.from_json(fed.extra["targets"][t]["graph"]), names)
                for t in targets
            }
            rows.append(("fedlcs", score(graphs, net.dag), fed_s, fed.extra["tests"]))

            per_client, local_s, local_tests = [], 0.0, 0
            for part in parts:
                oracle = DiscreteOracle(codes_of(part, names), net.cards, names, test="chi2")
                started = time.perf_counter()
                found, _ = local_structure(oracle, index, options)
                local_s += time.perf_counter() - started
                local_tests += oracle.n_computed
                per_client.append(
                    score({names[t]: structure_graph(s, names) for t, s in found.items()}, net.dag)
                )
            rows.append(
                (
                    "lcs-avg",
                    {m: float(np.mean([c[m] for c in per_client])) for m in ("f1", "shd")},
                    local_s / k,
                    local_tests // k,
                )
            )
            rows.append(
                (
                    "lcs-best",
                    {
                        "f1": max(c["f1"] for c in per_client),
                        "shd": min(c["shd"] for c in per_client),
                    },
                    float("nan"),
                    0,
                )
            )

            oracle = DiscreteOracle(codes_of(pooled, names), net.cards, names, test="chi2")
            started = time.perf_counter()
            found, _ = local_structure(oracle, index, options)
            rows.append(
                (
                    "lcs-pooled",
                    score({names[t]: structure_graph(s, names) for t, s in found.items()}, net.dag),
                    time.perf_counter() - started,
                    oracle.n_computed,
                )
            )
            if not args.no_global:
                started = time.perf_counter()
                glob = run_method(
                    "fedpc-vote", parts, {"alpha": args.alpha, "ratio": 0.4}, backend="inprocess"
                )
                glob_s = time.perf_counter() - started
                rows.append(
                    (
                        "fedpc-vote",
                        score({t: glob.graph for t in targets}, net.dag),
                        glob_s,
                        fedpc_tests(glob),
                    )
                )
            for method, s, secs, tests in rows:
                print(
                    f"{name:<10} {k:>3} {method:<11} {s['f1']:6.3f} {s['shd']:6.2f} "
                    f"{secs:8.2f} {tests:>9}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
