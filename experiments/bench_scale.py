"""Exact FedPC (chi2) at scale: hundreds of variables, up to 1000 clients, in-process and on Ray.

Rows (``--rows`` picks some; default all):

* ``andes-10``, ``andes-100``, ``andes-1000``: andes (223 nodes) x 100k rows over 10, 100, 1000
  IID clients, in-process; ``andes-100-ray``: 100 clients on the Ray backend;
* ``pigs``, ``link``, ``munin``: 441, 724, 1041 nodes x 20k rows over 10 clients in-process, each
  beside our pooled PC-stable and causal-learn's pooled PC (``stable=True``, chi2) on the same rows:
  seconds, the ratio federated / causal-learn, and whether the three graphs are equal.

Each row runs in its own process (so its memory is its own) with a time limit (``--limit``
seconds); a row past it is reported as such, with the rounds it finished. Printed per row: wall
seconds, rounds, bytes up / down, peak resident memory of the row's process tree (Ray's workers
included), and CI tests.

    python experiments/bench_scale.py [--rows andes-100 pigs] [--limit 3600]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

ROWS: dict[str, tuple[str, int, int, str]] = {
    # name: (network, rows, clients, backend)
    "andes-10": ("andes", 100_000, 10, "inprocess"),
    "andes-100": ("andes", 100_000, 100, "inprocess"),
    "andes-1000": ("andes", 100_000, 1000, "inprocess"),
    "andes-100-ray": ("andes", 100_000, 100, "ray"),
    "pigs": ("pigs", 20_000, 10, "inprocess"),
    "link": ("link", 20_000, 10, "inprocess"),
    "munin": ("munin", 20_000, 10, "inprocess"),
}
POOLED_REFERENCE = {"pigs", "link", "munin"}


def run_row(name: str) -> dict:
    """One row, in this process; returns its figures (memory is measured by the parent)."""
    import numpy as np

    from fedcausal_flwr.data.networks import load_network
    from fedcausal_flwr.data.partition import split_iid
    from fedcausal_flwr.discovery.pc import pc
    from fedcausal_flwr.federation.runners import run_method
    from fedcausal_flwr.stats.oracles import DiscreteOracle

    network, rows, clients, backend = ROWS[name]
    net = load_network(network)
    pooled = net.sample(rows, seed=0)
    parts = split_iid(pooled, clients, seed=0).clients
    started = time.perf_counter()
    result = run_method("fedpc", parts, {"test": "chi2"}, backend=backend)
    figures = {
        "row": name, "nodes": len(net.variables), "rows": rows, "clients": clients,
        "backend": backend, "wall_s": time.perf_counter() - started, "rounds": result.rounds,
        "bytes_up": result.bytes_up, "bytes_down": result.bytes_down,
        "tests": int(result.extra.get("tests", 0)),
    }  # fmt: skip
    if name in POOLED_REFERENCE:
        codes = net.sample_codes(rows, seed=0).astype(np.int64)
        started = time.perf_counter()
        oracle = DiscreteOracle(codes, net.cards, net.variables, test="chi2")
        ours = pc(oracle, alpha=0.05)
        figures["pooled_s"] = time.perf_counter() - started
        figures["pooled_same"] = bool(np.array_equal(ours.marks, result.graph.marks))
        from causallearn.search.ConstraintBased.PC import pc as cl_pc

        started = time.perf_counter()
        found = cl_pc(codes, alpha=0.05, indep_test="chisq", stable=True, show_progress=False)
        figures["causallearn_s"] = time.perf_counter() - started
        endpoints = np.asarray(found.G.graph)
        figures["causallearn_edges"] = int(np.count_nonzero(np.triu(endpoints != 0)))
        figures["ours_edges"] = int(result.graph.n_edges())
    return figures


def measure(name: str, limit: float) -> dict:
    """Run ``name`` in a child process, sampling its process tree's memory; its figures."""
    from fedcausal_flwr.experiments.process_memory import tree_rss

    child = subprocess.Popen(
        [sys.executable, "-m", "fedcausal_flwr.experiments.bench_scale", "--one", name],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    started, peak = time.monotonic(), 0
    while child.poll() is None:
        peak = max(peak, tree_rss(child.pid))
        if time.monotonic() - started > limit:
            child.kill()
            child.wait()
            return {"row": name, "limit": limit, "peak": peak}
        time.sleep(0.5)
    out = child.stdout.read() if child.stdout else ""
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if child.returncode != 0 or not lines:
        return {"row": name, "failed": child.returncode, "peak": peak}
    return {**json.loads(lines[-1]), "peak": peak}


def show(figures: dict) -> None:
    name = figures["row"]
    if "limit" in figures:
        print(f"{name:<14} not finished within {figures['limit']:.0f} s "
              f"(peak {figures['peak'] / 1e9:.2f} GB)", flush=True)  # fmt: skip
        return
    if "failed" in figures:
        print(f"{name:<14} failed (exit code {figures['failed']})", flush=True)
        return
    print(f"{name:<14} {figures['nodes']:>5} {figures['clients']:>5} {figures['wall_s']:8.1f} "
          f"{figures['rounds']:>6} {figures['bytes_up'] / 1e9:9.3f} "
          f"{figures['bytes_down'] / 1e9:9.3f} {figures['peak'] / 1e9:8.2f} "
          f"{figures['tests']:>9}", flush=True)  # fmt: skip
    if "pooled_s" in figures:
        ratio = figures["wall_s"] / figures["causallearn_s"]
        print(f"{'':14} pooled PC {figures['pooled_s']:.1f} s (same graph: "
              f"{figures['pooled_same']}); causal-learn {figures['causallearn_s']:.1f} s "
              f"({figures['causallearn_edges']} edges, ours {figures['ours_edges']}); "
              f"federated / causal-learn {ratio:.2f}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--limit", type=float, default=3600.0, help="seconds per row")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a row's child process
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(run_row(args.one)), flush=True)
        return
    header = (f"{'row':<14} {'nodes':>5} {'K':>5} {'wall_s':>8} {'rounds':>6} {'GB up':>9} "
              f"{'GB down':>9} {'peak GB':>8} {'tests':>9}")  # fmt: skip
    print("exact FedPC (chi2, alpha 0.05), IID clients; peak = resident memory of the row's "
          "process tree")  # fmt: skip
    print(header + "\n" + "-" * len(header))
    for name in args.rows:
        show(measure(name, args.limit))


if __name__ == "__main__":
    main()
