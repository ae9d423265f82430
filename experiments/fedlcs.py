"""FedLCS vs baselines on discrete benchmark networks (Yu et al. 2025, Fig. 8 setting).

    python experiments/fedlcs.py [--networks insurance alarm win95pts andes pigs]
        [--samples 5000] [--clients 3 5 10 15] [--alpha 0.05] [--max-targets 40] [--quick]

Per network and number of clients N (IID split of ``--samples`` rows, seed ``--seed``), targets =
every node with at least one parent or child (a seeded sample of ``--max-targets`` on larger
networks). Methods, all at alpha, ratio 0.4, max layer 6, chi2 tests:

* ``fedlcs``: one federated run for all targets together (shared PC-set cache, batched rounds)
  with the default options (``sep_rule=votes``, ``sep_stop=after_found``); ``fedlcs[max_p]`` (the
  paper's max-p separating set) and one row per other ``--sep-rules`` rule, and
  ``fedlcs[first_found]`` per other ``--sep-stops`` rule (``first_found`` stops a pair's
  separating-set search at the first level where a set was chosen);
* ``lcs-avg`` / ``lcs-best`` (``fedlcs-local-avg`` / ``-best`` of the registered method
  ``fedlcs-local``, :func:`~fedcausal_flwr.strategies.lcs_baselines.lcs_local_summary`): the same
  search run by each client alone on its rows; avg = mean over clients of the per-client target
  means; best = the client with the highest mean F1, chosen with the truth (an oracle; the
  paper's X-Best, Sec. 6.1.2, is not specific: docs/choices.md, FedLCS);
* ``lcs-pooled`` (registered): the same search on the pooled rows (LCS-All, NOT private); the
  union of the clients' rows is the same sample for every N, so it runs once per network (N
  ``all``);
* ``fedpc-vote``: global layer-wise voting FedPC (ratio 0.4, max-p orientation); the target's
  incident edges are read off its global graph; ``--global fedpc-vote notears-admm`` adds the
  paper's other global baseline, NOTEARS-ADMM (discrete columns mapped by FedC2SL's frequency
  midpoints; about 200 ADMM rounds, slow on large networks).

Metrics per target (:func:`~fedcausal_flwr.metrics.local_metrics`): arrowhead F1 and local SHD,
averaged over targets. ``time_s`` is wall time for all targets (per client for -avg); ``tests``
counts CI tests computed by the clients (summed; per client for -avg). The first block runs
FedLCS for ONE target at a time on ALARM with 5 clients (HR and ``--compare-targets`` - 1 more,
with the median) against global ``fedpc-vote`` and exact ``fedpc`` runs.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np  # noqa: E402

from fedcausal_flwr.data.networks import load_network  # noqa: E402
from fedcausal_flwr.data.partition import split_iid  # noqa: E402
from fedcausal_flwr.discovery.lcs import full_graph  # noqa: E402
from fedcausal_flwr.federation.runners import run_method  # noqa: E402
from fedcausal_flwr.graphs.graph import NONE, Graph  # noqa: E402
from fedcausal_flwr.metrics import local_metrics  # noqa: E402
from fedcausal_flwr.strategies.lcs_baselines import lcs_local_summary  # noqa: E402


def fedpc_tests(result) -> int:
    per_layer = sum(sum(layer["client_tests"].values()) for layer in result.extra["layers"])
    return per_layer + result.extra["orientation_tests"] * len(result.extra["layers"][0]["clients"])


def timed(method: str, parts, options: dict):
    started = time.perf_counter()
    result = run_method(method, parts, options, backend="inprocess")
    return result, time.perf_counter() - started


def score_targets(result, targets: list[str], net) -> dict[str, float]:
    """Per-target graphs of a ``fedlcs`` / ``lcs-pooled`` result, scored against the truth."""
    names = list(net.variables)
    graphs = {
        t: full_graph(Graph.from_json(result.extra["targets"][t]["graph"]), names) for t in targets
    }
    return score(graphs, net.dag)


def score(graphs: dict[str, Graph], truth: Graph) -> dict[str, float]:
    """Mean arrowhead F1, local SHD and skeleton F1 (the target's learned vs true neighbours)."""
    rows = [local_metrics(g, truth, t) for t, g in graphs.items()]
    return {
        "f1": float(np.mean([r["f1"] for r in rows])),
        "shd": float(np.mean([r["shd"] for r in rows])),
        "adj_f1": float(np.mean([neighbour_f1(g, truth, t) for t, g in graphs.items()])),
    }


def neighbour_f1(learned: Graph, truth: Graph, target: str) -> float:
    """F1 of the target's learned neighbours (any edge) against its true parents and children."""
    t = truth.index(target)
    found = learned.marks[learned.index(target)] != NONE
    true = truth.marks[t] != NONE
    hits = int(np.count_nonzero(found & true))
    if not found.any() or not true.any():
        return float(found.any() == true.any())
    precision, recall = hits / np.count_nonzero(found), hits / np.count_nonzero(true)
    return 0.0 if hits == 0 else 2 * precision * recall / (precision + recall)


def pick_targets(net, max_targets: int, seed: int) -> list[str]:
    adjacency = net.dag.adjacency()
    names = [v for i, v in enumerate(net.variables) if adjacency[i].any()]
    if len(names) > max_targets:
        rng = np.random.default_rng(seed)
        names = sorted(rng.choice(names, size=max_targets, replace=False).tolist(), key=names.index)
    return names


#: fedpc-vote's largest layer per network where layer 6 does not fit: on pigs, after layer 4 hubs
#: with 41 true neighbours keep every edge, so each client would run about 27 million level-5 and
#: 157 million level-6 tests (counted from its level-4 skeleton); past 24 GB, it was killed
GLOBAL_LAYER_CAPS = {"pigs": 3}


def global_options(method: str, args, network: str) -> dict:
    """Options of a global baseline (the FedLCS paper compares FedPC and NOTEARS-ADMM, Fig. 10)."""
    if method == "notears-admm":
        return {}
    cap = GLOBAL_LAYER_CAPS.get(network, args.max_layer)
    layer = min(args.max_layer, cap) if args.global_max_layer is None else args.global_max_layer
    return {"alpha": args.alpha, "ratio": 0.4, "max_depth": layer}


def targets_vs_global(samples: int, clients: int, alpha: float, seed: int, n_targets: int) -> None:
    """FedLCS for ONE target at a time (HR and more) vs one global run, CI tests and wall time.

    FedLCS and fedpc-vote count tests computed by the clients (summed over clients). Exact
    FedC2SL ``fedpc`` computes every distinct server-side test once from secure-summed client
    tables: ``tests`` distinct tests, i.e. ``tests x clients`` per-client tables computed.
    """
    net = load_network("alarm")
    parts = split_iid(net.sample(samples, seed=seed), clients, seed=seed).clients
    targets = ["HR"] + [t for t in pick_targets(net, n_targets, seed) if t != "HR"][: n_targets - 1]
    print(f"ALARM x {samples}, {clients} clients, one FedLCS run per target:")
    counts, times = [], []
    for target in targets:
        started = time.perf_counter()
        lcs = run_method("fedlcs", parts, {"target": target, "alpha": alpha}, backend="inprocess")
        times.append(time.perf_counter() - started)
        counts.append(lcs.extra["tests"])
        scores = local_metrics(full_graph(lcs.graph, net.variables), net.dag, target)
        print(
            f"  fedlcs {target:<14} tests {counts[-1]:>7}  time {times[-1]:6.2f} s  "
            f"rounds {lcs.rounds:>3}  F1 {scores['f1']:.3f}  SHD {scores['shd']}"
        )
    print(
        f"  fedlcs median over {len(targets)} targets: tests {int(np.median(counts))}, "
        f"time {np.median(times):.2f} s (max {max(counts)} tests, {max(times):.2f} s)"
    )
    started = time.perf_counter()
    glob = run_method("fedpc-vote", parts, {"alpha": alpha, "ratio": 0.4}, backend="inprocess")
    glob_s = time.perf_counter() - started
    print(
        f"  fedpc-vote (global)  tests {fedpc_tests(glob):>7}  time {glob_s:6.2f} s  "
        f"rounds {glob.rounds}"
    )
    started = time.perf_counter()
    exact = run_method("fedpc", parts, {"alpha": alpha}, backend="inprocess")
    exact_s = time.perf_counter() - started
    distinct = exact.extra["tests"]
    print(
        f"  fedpc (global, exact FedC2SL)  distinct tests {distinct}, per-client tables "
        f"{distinct * clients}  time {exact_s:6.2f} s  rounds {exact.rounds}"
    )


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
    parser.add_argument(
        "--max-layer",
        type=int,
        default=6,
        help="FLSke's maximum layer (the paper's 6); hub-heavy networks (pigs: PC sets of ~40) "
        "need millions of layer-6 tests per variable",
    )
    parser.add_argument("--no-global", action="store_true", help="skip the global runs")
    parser.add_argument(
        "--global",
        dest="global_methods",
        nargs="+",
        default=["fedpc-vote"],
        choices=["fedpc-vote", "notears-admm"],
        help="global federated baselines whose graph gives each target's local structure (the "
        "paper's: FedPC and NOTEARS-ADMM; notears-admm runs about 200 ADMM rounds, slow on "
        "large networks)",
    )
    parser.add_argument(
        "--global-max-layer",
        type=int,
        default=None,
        help="fedpc-vote's largest conditioning set (default: --max-layer, and 3 on pigs, whose "
        "hubs would need about 27 million level-5 and 157 million level-6 tests per client)",
    )
    parser.add_argument(
        "--compare-targets", type=int, default=10, help="targets in the one-target vs global block"
    )
    parser.add_argument(
        "--sep-stops",
        nargs="+",
        default=["after_found"],
        help="fedlcs rows, one per separating-set stop rule (LCSOptions.sep_stop)",
    )
    parser.add_argument(
        "--sep-rules",
        nargs="+",
        default=["votes", "max_p"],
        help="fedlcs rows, one per separating-set rule (LCSOptions.sep_rule; votes is the default, "
        "max_p the paper's) with the default stop rule after_found",
    )
    parser.add_argument(
        "--edge-rules",
        nargs="+",
        default=["and"],
        choices=["and", "or"],
        help="fedlcs and LCS baseline rows, one set per edge rule (LCSOptions.edge_rule)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="CI-sized: alarm, N = 3, 5, 10 targets (5 in the one-target block)",
    )
    args = parser.parse_args()
    if args.quick:
        args.networks, args.clients, args.max_targets = ["alarm"], [3, 5], 10
        args.compare_targets = min(args.compare_targets, 5)

    targets_vs_global(args.samples, 5, args.alpha, args.seed, args.compare_targets)
    header = (
        f"{'network':<10} {'N':>3} {'method':<22} {'F1':>6} {'SHD':>6} {'time_s':>8} {'tests':>9} "
        f"{'rounds':>6} {'adjF1':>6}"
    )
    print("\n" + header + "\n" + "-" * len(header))
    for name in args.networks:
        net = load_network(name)
        targets = pick_targets(net, args.max_targets, args.seed)
        options = {"target": ",".join(targets), "alpha": args.alpha, "max_depth": args.max_layer}
        pooled = net.sample(args.samples, seed=args.seed)
        # lcs-pooled searches the union of the clients' rows, the same sample for every N: once
        for edge in args.edge_rules:
            label = "lcs-pooled" + edge_label(edge)
            union, secs = timed("lcs-pooled", [pooled], {**options, "edge_rule": edge})
            scores = score_targets(union, targets, net)
            row = (label, scores, secs, union.extra["tests"], union.rounds)
            print_row(name, "all", row)
        for k in args.clients:
            parts = split_iid(pooled, k, seed=args.seed).clients
            started = time.perf_counter()

            def show(row: tuple, name: str = name, k: int = k) -> None:  # each row when measured
                print_row(name, k, row)

            for edge in args.edge_rules:
                lcs_rows(parts, {**options, "edge_rule": edge}, args, net, targets, show)
            for method in [] if args.no_global else args.global_methods:
                glob, secs = timed(method, parts, global_options(method, args, name))
                tests = fedpc_tests(glob) if method == "fedpc-vote" else 0
                scores = score({t: glob.graph for t in targets}, net.dag)
                show((method, scores, secs, tests, glob.rounds))
            print(f"{name:<10} {k:>3} (all rows: {time.perf_counter() - started:.0f} s wall)")


def edge_label(edge_rule: str) -> str:
    """A row label's suffix for a non-default edge rule."""
    return "" if edge_rule == "and" else f"[{edge_rule}]"


def print_row(network: str, clients: int | str, row: tuple) -> None:
    method, s, secs, tests, rounds = row
    print(
        f"{network:<10} {clients:>3} {method:<22} {s['f1']:6.3f} {s['shd']:6.2f} "
        f"{secs:8.2f} {tests:>9} {rounds:>6} {s.get('adj_f1', float('nan')):6.3f}",
        flush=True,
    )


def lcs_rows(parts, options: dict, args, net, targets: list[str], show) -> None:
    """fedlcs (one row per separating-set variant), lcs-avg and lcs-best rows, each passed to
    ``show`` when measured."""
    k = len(parts)
    edge = edge_label(options["edge_rule"])
    variants = [("after_found", rule) for rule in args.sep_rules]
    variants += [(stop, "votes") for stop in args.sep_stops if stop != "after_found"]
    for stop, rule in variants:
        label = (
            "fedlcs"
            + edge
            + "".join(f"[{v}]" for v, d in ((stop, "after_found"), (rule, "votes")) if v != d)
        )
        fed, secs = timed("fedlcs", parts, {**options, "sep_stop": stop, "sep_rule": rule})
        show((label, score_targets(fed, targets, net), secs, fed.extra["tests"], fed.rounds))
    local, secs = timed("fedlcs-local", parts, options)
    summary = lcs_local_summary(local, net.dag)
    tests = local.extra["tests"] // k
    show(("lcs-avg" + edge, summary["fedlcs-local-avg"], secs / k, tests, local.rounds))
    show(("lcs-best" + edge, summary["fedlcs-local-best"], float("nan"), 0, local.rounds))


if __name__ == "__main__":
    main()
