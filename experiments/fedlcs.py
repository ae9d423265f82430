"""FedLCS vs baselines on discrete benchmark networks (Yu et al. 2025, Fig. 8 setting).

    python experiments/fedlcs.py [--networks insurance alarm win95pts andes pigs]
        [--samples 5000] [--clients 3 5 10 15] [--alpha 0.05] [--max-targets 40] [--jobs 2]
        [--quick]

Per network and number of clients N (IID split of ``--samples`` rows, seed ``--seed``), targets =
every node with at least one parent or child (a seeded sample of ``--max-targets`` on larger
networks). Methods, all at alpha, ratio 0.4, max layer 6, chi2 tests:

* ``fedlcs``: one federated run for all targets together (shared PC-set cache, batched rounds)
  with the default options (``sep_rule=votes``, ``sep_stop=after_found``); ``fedlcs[max_p]`` (the
  paper's max-p separating set) and one row per other ``--sep-rules`` rule, and
  ``fedlcs[first_found]`` per other ``--sep-stops`` rule (``first_found`` stops a pair's
  separating-set search at the first level where a set was chosen);
* ``lcs-avg`` / ``lcs-best`` (``fedlcs-local-avg`` / ``-best`` of the registered method
  ``fedlcs-local``, :func:`~fedcausal_flwr.strategies.fedlcs.lcs_local_summary`): the same
  search run by each client alone on its rows; avg = mean over clients of the per-client target
  means; best = the client with the highest mean F1, chosen with the truth (an oracle; the
  paper's X-Best, Sec. 6.1.2, is not specific: docs/choices.md, FedLCS);
* ``lcs-pooled`` (registered): the same search on the pooled rows (LCS-All, NOT private); the
  union of the clients' rows is the same sample for every N, so it runs once per network, as its
  own block (N ``all``);
* ``fedpc-vote``: global layer-wise voting FedPC (ratio 0.4, max-p orientation); the target's
  incident edges are read off its global graph; ``--global fedpc-vote notears-admm`` adds the
  paper's other global baseline, NOTEARS-ADMM (discrete columns mapped by FedC2SL's frequency
  midpoints; about 200 ADMM rounds, slow on large networks).

Metrics per target (:func:`~fedcausal_flwr.metrics.local_metrics`): arrowhead F1 and local SHD,
averaged over targets. ``time_s`` is wall time for all targets (per client for -avg); ``tests``
counts CI tests computed by the clients (summed; per client for -avg). The first block runs
FedLCS for ONE target at a time on ALARM with 5 clients (HR and ``--compare-targets`` - 1 more,
with the median) against global ``fedpc-vote`` and exact ``fedpc`` runs.

The runs of one (network, N) block are independent jobs; ``--jobs 2`` runs two at a time in
worker processes (rows print in the same order either way). On pigs both baselines stop at layer
3 (``GLOBAL_LAYER_CAPS``, ``LOCAL_LAYER_CAPS``: why, measured, is written there); FedLCS and
lcs-pooled run to ``--max-layer``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import functools
import multiprocessing
import os
import time
import types

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np

from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.discovery.lcs_payload import full_graph
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.graphs.graph import NONE, Graph
from fedcausal_flwr.metrics import local_metrics
from fedcausal_flwr.strategies.fedlcs import lcs_local_summary


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
#: fedlcs-local's (lcs-avg / lcs-best) largest layer per network where layer 6 does not finish:
#: on pigs' 500-row clients (N = 10) a spurious independence removes one of hub 434's 41 true
#: neighbours at every layer, so PCsimple never stops it and scans C(39, l) subsets per candidate:
#: 3.3 million tests at layer 4, 23 million at 5, 130 million at 6 for that one variable on one
#: client. FedLCS itself runs to layer 6 (its vote keeps the hub's neighbours; a layer removes
#: nothing and the variable stops).
LOCAL_LAYER_CAPS = {"pigs": 3}


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
    parser.add_argument("--no-global", action="store_true", help="skip the global runs")
    parser.add_argument(
        "--global-max-layer",
        type=int,
        default=None,
        help="fedpc-vote's largest conditioning set (default: --max-layer, and 3 on pigs, whose "
        "hubs would need about 27 million level-5 and 157 million level-6 tests per client)",
    )
    parser.add_argument(
        "--local-max-layer",
        type=int,
        default=None,
        help="fedlcs-local's (lcs-avg, lcs-best) largest layer (default: --max-layer, and 3 on "
        "pigs, where a hub's PCsimple on 500-row clients never stops: 130 million layer-6 tests)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs of a (network, N) block at once, each in its own worker process",
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
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: must be at least 1")
    if args.quick:
        args.networks, args.clients, args.max_targets = ["alarm"], [3, 5], 10
        args.compare_targets = min(args.compare_targets, 5)

    targets_vs_global(args.samples, 5, args.alpha, args.seed, args.compare_targets)
    header = (
        f"{'network':<10} {'N':>3} {'method':<22} {'F1':>6} {'SHD':>6} {'time_s':>8} {'tests':>9} "
        f"{'rounds':>6} {'adjF1':>6}"
    )
    print("\n" + header + "\n" + "-" * len(header))
    with job_pool(args.jobs) as pool:
        for name in args.networks:
            # lcs-pooled searches the union of the clients' rows, the same sample for every N:
            # once per network, as its own block (N "all")
            pooled_jobs = [("lcs-pooled", edge) for edge in args.edge_rules]
            for k, jobs in [("all", pooled_jobs)] + [(k, block_jobs(args)) for k in args.clients]:
                started = time.perf_counter()
                # the longest runs first (global, then local, then FedLCS): the two workers end
                # closer together; rows print in the block's order
                order = sorted(range(len(jobs)), key=lambda i: LONGEST_FIRST.index(jobs[i][0]))
                done = pool.map(run_job, [(name, k, jobs[i], args) for i in order])
                by_job = dict(zip(order, done, strict=True))
                for i in range(len(jobs)):
                    for row in by_job[i]:
                        print_row(name, k, row)
                print(f"{name:<10} {k:>3} (all rows: {time.perf_counter() - started:.0f} s wall, "
                      f"{args.jobs} job(s))", flush=True)  # fmt: skip


#: Job kinds from the slowest to the fastest (measured on pigs), the order a block starts them in.
LONGEST_FIRST = ("global", "lcs-pooled", "fedlcs-local", "fedlcs")


def block_jobs(args) -> list[tuple]:
    """The runs of one (network, N) block, each an independent job: every fedlcs variant,
    fedlcs-local (lcs-avg and lcs-best) and every global baseline."""
    jobs: list[tuple] = []
    variants = [("after_found", rule) for rule in args.sep_rules]
    variants += [(stop, "votes") for stop in args.sep_stops if stop != "after_found"]
    for edge in args.edge_rules:
        jobs += [("fedlcs", edge, stop, rule) for stop, rule in variants]
        jobs.append(("fedlcs-local", edge))
    global_methods = [] if args.no_global else args.global_methods
    return jobs + [("global", method) for method in global_methods]


@functools.lru_cache(maxsize=2)
def network_setting(name: str, samples: int, seed: int, max_targets: int):
    """The network, its targets and the pooled sample (cached: a worker runs many jobs)."""
    net = load_network(name)
    return net, pick_targets(net, max_targets, seed), net.sample(samples, seed=seed)


def run_job(task: tuple) -> list[tuple]:
    """One job of a block (see :func:`block_jobs`), in this process or a pool worker; its rows."""
    name, k, job, args = task
    net, targets, pooled = network_setting(name, args.samples, args.seed, args.max_targets)
    options = {"target": ",".join(targets), "alpha": args.alpha, "max_depth": args.max_layer}
    if job[0] == "lcs-pooled":
        union, secs = timed("lcs-pooled", [pooled], {**options, "edge_rule": job[1]})
        scores = score_targets(union, targets, net)
        label = "lcs-pooled" + edge_label(job[1])
        return [(label, scores, secs, union.extra["tests"], union.rounds)]
    parts = split_iid(pooled, k, seed=args.seed).clients
    if job[0] == "fedlcs":
        _, edge, stop, rule = job
        chosen = {**options, "edge_rule": edge, "sep_stop": stop, "sep_rule": rule}
        fed, secs = timed("fedlcs", parts, chosen)
        label = "fedlcs" + edge_label(edge)
        label += "".join(f"[{v}]" for v, d in ((stop, "after_found"), (rule, "votes")) if v != d)
        return [(label, score_targets(fed, targets, net), secs, fed.extra["tests"], fed.rounds)]
    if job[0] == "fedlcs-local":
        edge = job[1]
        cap = LOCAL_LAYER_CAPS.get(name, args.max_layer)
        layer = min(args.max_layer, cap) if args.local_max_layer is None else args.local_max_layer
        chosen = {**options, "edge_rule": edge, "max_depth": layer}
        local, secs = timed("fedlcs-local", parts, chosen)
        summary, rounds = lcs_local_summary(local, net.dag), local.rounds
        tests = local.extra["tests"] // k
        return [
            ("lcs-avg" + edge_label(edge), summary["fedlcs-local-avg"], secs / k, tests, rounds),
            ("lcs-best" + edge_label(edge), summary["fedlcs-local-best"], float("nan"), 0, rounds),
        ]
    method = job[1]
    glob, secs = timed(method, parts, global_options(method, args, name))
    tests = fedpc_tests(glob) if method == "fedpc-vote" else 0
    return [(method, score({t: glob.graph for t in targets}, net.dag), secs, tests, glob.rounds)]


@contextlib.contextmanager
def job_pool(jobs: int):
    """Something with an ordered ``map``: this process for one job, else ``jobs`` spawned
    workers (not forked: the parent has Flower's gRPC threads)."""
    if jobs == 1:
        yield types.SimpleNamespace(map=map)
        return
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        yield pool


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


if __name__ == "__main__":
    main()
