"""Peak memory of exact FedPC / FedFCI on barley (levels up to 67), in-process, against the
``pooled`` reference on the same rows, in one run.

    python experiments/bench_barley_memory.py [--rows 3000] [--clients 10] [--algorithm pc]

Each run is a fresh child process (so its peak RSS is its own): ``--rows`` rows of pgmpy's barley
are drawn with seed 0 and split over ``--clients`` unequal clients. Printed per method: peak RSS
(MB), wall seconds, rounds, bytes clients sent and received, how many rounds carried sparse
tables, and whether the graph equals the pooled reference; then the ratio FedPC / pooled for
memory and time. The target for PC at 10 clients is a peak below 5 GB.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import time
import warnings


def _run(method: str, rows: int, clients: int, algorithm: str, out) -> None:
    warnings.simplefilter("ignore")
    from fedcausal_flwr.data import load_network
    from fedcausal_flwr.data.partition import split_sizes
    from fedcausal_flwr.federation.runtime.runners import run_method

    frame = load_network("barley").sample(rows, seed=0).astype(str)
    parts = (
        [frame]
        if clients == 1
        else split_sizes(frame, alpha=1.0, k=clients, seed=clients, min_rows=30).clients
    )
    options = {"algorithm": algorithm} if method == "pooled" else {}
    name = method if method == "pooled" else ("fedpc" if algorithm == "pc" else "fedfci")
    start = time.perf_counter()
    result = run_method(name, parts, options)
    seconds = time.perf_counter() - start
    ledger = result.ledger or []
    out.send(
        {
            "graph": result.graph.marks.tolist(),
            "seconds": seconds,
            "rounds": result.rounds,
            "up": int(result.bytes_up),
            "down": int(result.bytes_down),
            "sparse_rounds": sum(e.get("kind") == "sparse_tables" for e in ledger),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
    )


def measure(method: str, rows: int, clients: int, algorithm: str) -> dict:
    receive, send = mp.Pipe(duplex=False)
    child = mp.get_context("spawn").Process(
        target=_run, args=(method, rows, clients, algorithm, send)
    )
    child.start()
    value = receive.recv()
    child.join()
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--algorithm", choices=("pc", "fci"), default="pc")
    args = parser.parse_args()
    fed = "fedpc" if args.algorithm == "pc" else "fedfci"
    found = {m: measure(m, args.rows, args.clients, args.algorithm) for m in (fed, "pooled")}
    print(f"barley x {args.rows} rows, {args.clients} clients, {args.algorithm.upper()}, exact")
    print(f"{'method':8} {'peak MB':>9} {'seconds':>8} {'rounds':>6} {'sparse':>6} "
          f"{'up MB':>9} {'down MB':>9} same-as-pooled")  # fmt: skip
    for method, r in found.items():
        same = r["graph"] == found["pooled"]["graph"]
        print(
            f"{method:8} {r['peak_mb']:9.0f} {r['seconds']:8.1f} {r['rounds']:6d} "
            f"{r['sparse_rounds']:6d} {r['up'] / 2**20:9.1f} {r['down'] / 2**20:9.1f} {same}"
        )
    ratio_mem = found[fed]["peak_mb"] / found["pooled"]["peak_mb"]
    ratio_time = found[fed]["seconds"] / found["pooled"]["seconds"]
    print(f"{fed} / pooled: memory x{ratio_mem:.2f}, time x{ratio_time:.2f}")
    print(json.dumps({m: {k: v for k, v in r.items() if k != "graph"} for m, r in found.items()}))


if __name__ == "__main__":
    main()
