"""Pooled PC speed: our batched PC-stable against causal-learn's ``pc``, same data, same run.

    python experiments/bench_pc.py [--networks alarm hepar2] [--repeats N] [--quick]

For each network, ``--samples`` rows (default 10k) are drawn with a fixed seed. For the G2 and the
Pearson chi2 test we time ``DiscreteOracle`` + ``pc`` (ours) and causal-learn 0.1.4.8's
``pc(data, alpha, "gsq"/"chisq", stable=True, show_progress=False)``, each best of N runs (N = 3
for alarm, 1 for hepar2 unless ``--repeats`` is given; every run starts with an empty cache).
Printed per test: both times, the ratio ours / causal-learn (target <= 0.5), the number of CI tests
our oracle computed, the number of skeleton levels and oracle batches (one federated round
each), and whether the two CPDAGs are identical. Nodes are named X000, X001, ... in both
libraries so that any name-based ordering inside causal-learn matches the column order.
``--quick``: alarm only, one run each.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable

import numpy as np
from causallearn.search.ConstraintBased.PC import pc as causallearn_pc

from fedcausal_flwr.data import load_network
from fedcausal_flwr.discovery.pc import PCResult, pc
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.stats.oracles import DiscreteOracle

DEFAULT_REPEATS = {"alarm": 3, "hepar2": 1}
CAUSALLEARN_TEST = {"g2": "gsq", "chi2": "chisq"}


def best_of(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    """Shortest wall time over ``repeats`` calls, and the last call's return value."""
    times, value = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return min(times), value


def run_ours(
    codes: np.ndarray, cards: np.ndarray, names: list[str], test: str, alpha: float
) -> tuple[PCResult, DiscreteOracle]:
    oracle = DiscreteOracle(codes, cards, names, test=test)
    return pc(oracle, alpha), oracle


def run_causallearn(codes: np.ndarray, names: list[str], test: str, alpha: float) -> Graph:
    cg = causallearn_pc(
        codes,
        alpha,
        CAUSALLEARN_TEST[test],
        stable=True,
        show_progress=False,
        node_names=names,
    )
    return Graph.from_causallearn(cg.G.graph, names, "CPDAG")


def bench_network(name: str, samples: int, seed: int, alpha: float, repeats: int) -> list[dict]:
    net = load_network(name)
    codes = net.sample_codes(samples, seed=seed).astype(np.int64)
    names = [f"X{i:03d}" for i in range(net.n_nodes)]
    rows = []
    for test in ("g2", "chi2"):
        ours_s, (result, oracle) = best_of(
            lambda test=test: run_ours(codes, net.cards, names, test, alpha), repeats
        )
        cl_s, cl_graph = best_of(
            lambda test=test: run_causallearn(codes, names, test, alpha), repeats
        )
        rows.append(
            {
                "network": f"{name} ({net.n_nodes} nodes)",
                "test": test,
                "ours_s": ours_s,
                "cl_s": cl_s,
                "ratio": ours_s / cl_s,
                "tests": oracle.n_computed,
                "levels": len(result.skeleton.depths),
                "batches": oracle.n_batches,
                "edges": result.graph.n_edges(),
                "equal": result.graph == cl_graph,
                "repeats": repeats,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", nargs="+", default=["alarm", "hepar2"])
    parser.add_argument(
        "--repeats", type=int, default=None, help="best of N (default 3 for alarm, 1 otherwise)"
    )
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--quick", action="store_true", help="alarm only, one run each")
    args = parser.parse_args()
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be at least 1")
    networks = ["alarm"] if args.quick else args.networks

    warnings.simplefilter("ignore", FutureWarning)
    warnings.simplefilter("ignore", DeprecationWarning)
    rows = []
    for name in networks:
        repeats = 1 if args.quick else args.repeats or DEFAULT_REPEATS.get(name, 1)
        rows.extend(bench_network(name, args.samples, args.seed, args.alpha, repeats))

    print(
        f"pooled PC-stable, n = {args.samples} (seed {args.seed}), alpha = {args.alpha}; "
        "times are best of N runs; ratio = ours / causal-learn (target <= 0.5)"
    )
    header = (
        f"{'network':<22} {'test':<5} {'N':>2} {'ours s':>8} {'c-l s':>8} {'ratio':>6} "
        f"{'tests':>7} {'levels':>6} {'batches':>7} {'edges':>5}  same CPDAG"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['network']:<22} {r['test']:<5} {r['repeats']:>2} {r['ours_s']:8.2f} "
            f"{r['cl_s']:8.2f} {r['ratio']:6.3f} {r['tests']:7d} {r['levels']:6d} "
            f"{r['batches']:7d} {r['edges']:5d}  {'yes' if r['equal'] else 'NO'}"
        )


if __name__ == "__main__":
    main()
