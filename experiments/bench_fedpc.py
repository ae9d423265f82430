"""FedPC runtime cost: in-process rounds against pooled causal-learn, and Ray start-up/round times.

    python experiments/bench_fedpc.py [--network alarm] [--samples 10000] [--repeats 3] [--quick]

(a) In-process backend: FedPC (exact CI, Pearson chi2, alpha 0.05) over ``--clients`` (default 10)
IID clients of ALARM x 10k (fixed seed). After one untimed warm-up run, best of ``--repeats`` of
both the Result's ``wall_s`` (first round to last) and the time around ``fedcausal_flwr.run``;
causal-learn 0.1.4.8's ``pc(pooled, alpha, "chisq", stable=True)`` on the same pooled rows, best of
the same N; the ratio FedPC / causal-learn (target <= 0.2); rounds, PC levels, bytes up/down; and
whether FedPC's CPDAG equals our pooled PC's and causal-learn's (nodes named X000, X001, ...).

(a2) Where an in-process run's time goes: the input check and fingerprint measured inside the
timed runs (every call of the hello report, which reads the columns once, checks them and hashes
them), as a share of the run (target <= 5%); then a profile of ``--repeats`` runs with each
function's own time grouped by stage (check, encoding, counting, server tests and PC, Flower and
messages, other); and counting's throughput in table-row visits per second (rows x tables) on
the level-1 queries of the pooled rows, all of them (a variable triple's three queries read one
joint table) and one per triple (the kernel alone), beside one ``np.bincount`` over the latter's
cell indices built in advance (the limit of counting a table at a time on this machine).

(b) Ray backend (``flwr.simulation``): the same run at 10 and 50 clients (``--quick``: 10 only),
one run each. From ``Result.log``: ``pre-run`` = time around ``run`` minus ``wall_s`` (before the
first round starts), ``hello`` = the first round's seconds (Ray actors start, clients load their
partitions), start-up = pre-run + hello; per-round = median (and max) seconds of the later
``tables`` rounds, next to the in-process median for the same rounds.
"""

from __future__ import annotations

import os
import shutil
import tempfile

# Read by Flower at import time: set before anything imports flwr.
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
RAY_TMP = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths must fit 107 bytes
os.environ["RAY_TMPDIR"] = RAY_TMP

import argparse  # noqa: E402
import cProfile  # noqa: E402
import itertools  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from causallearn.search.ConstraintBased.PC import pc as causallearn_pc  # noqa: E402

import fedcausal_flwr  # noqa: E402
from fedcausal_flwr.data import (  # noqa: E402
    Schema,
    inputs,
    load_network,
    split_iid,
)
from fedcausal_flwr.discovery.pc import pc  # noqa: E402
from fedcausal_flwr.experiments.profiling import (  # noqa: E402
    CallClock,
    counting_limit,
    stage_totals,
)
from fedcausal_flwr.graphs import Graph  # noqa: E402
from fedcausal_flwr.result import Result  # noqa: E402
from fedcausal_flwr.stats.contingency import count_tables, make_layout  # noqa: E402
from fedcausal_flwr.stats.oracles import DiscreteOracle  # noqa: E402


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def profile_table(pooled: pd.DataFrame, args: argparse.Namespace) -> list[tuple[str, float]]:
    """Own seconds per stage over ``args.repeats`` profiled in-process runs."""
    profile = cProfile.Profile()
    for _ in range(args.repeats):
        partition = split_iid(pooled, args.clients, seed=args.seed)
        profile.enable()
        fedcausal_flwr.run("fedpc", data=partition, seed=args.seed, ci="exact", test="chi2",
                           alpha=args.alpha)  # fmt: skip
        profile.disable()
    return stage_totals(pstats.Stats(profile))


def counting_throughput(
    codes: np.ndarray, cards: list[int], repeats: int
) -> tuple[float, float, float]:
    """Table-row visits (rows x tables) per second of ``count_tables`` on the level-1 queries of
    ``codes``: every query ``x _||_ y | z`` (each variable triple in its three roles, read from
    one joint table), then one query per triple (the kernel itself); and of one ``np.bincount``
    over the one-per-triple cell indices built in advance."""
    p = codes.shape[1]
    every = [(x, y, (z,)) for x, y in itertools.combinations(range(p), 2)
             for z in range(p) if z not in (x, y)]  # fmt: skip
    layout = make_layout(every, cards)
    codes_t = np.ascontiguousarray(codes.T)
    seconds = min(timed(lambda: count_tables(codes_t, layout))[0] for _ in range(repeats))
    distinct = np.array(list(itertools.combinations(range(p), 3)), dtype=np.int64)
    kernel, binned = counting_limit(codes, np.asarray(cards), distinct, repeats)
    return codes.shape[0] * len(every) / seconds, kernel, binned


def run_fedpc(pooled: pd.DataFrame, clients: int, seed: int, alpha: float, backend: str):
    """(seconds around ``fedcausal_flwr.run``, Result) for exact FedPC on an IID split."""
    partition = split_iid(pooled, clients, seed=seed)
    return timed(
        lambda: fedcausal_flwr.run(
            "fedpc",
            data=partition,
            backend=backend,
            seed=seed,
            ci="exact",
            test="chi2",
            alpha=alpha,
        )
    )


def round_seconds(result: Result, action: str = "tables") -> list[float]:
    return [float(e["seconds"]) for e in result.log if e["action"] == action]


def fmt_bytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", default="alarm")
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=10, help="clients of the in-process run")
    parser.add_argument("--ray-clients", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--repeats", type=int, default=3, help="best of N for part (a)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--quick", action="store_true", help="Ray at 10 clients only")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    ray_clients = [10] if args.quick else args.ray_clients
    warnings.simplefilter("ignore", FutureWarning)
    warnings.simplefilter("ignore", DeprecationWarning)

    net = load_network(args.network)
    names = [f"X{i:03d}" for i in range(net.n_nodes)]
    pooled = net.sample(args.samples, seed=args.seed)
    pooled.columns = names
    codes = Schema.infer([pooled]).encode(pooled).astype(np.int64)

    # ---------------------------------------------------------------- (a) in-process
    run_fedpc(pooled, args.clients, args.seed, args.alpha, "inprocess")  # warm-up
    run_fedpc(pooled, args.clients, args.seed, args.alpha, "inprocess")  # warm: imports, caches
    # the hello report: column read, checks, fingerprint
    with CallClock(inputs, "_frame_report") as checks:
        fed_runs = [
            run_fedpc(pooled, args.clients, args.seed, args.alpha, "inprocess")
            for _ in range(args.repeats)
        ]
    result = fed_runs[-1][1]
    fed_wall = min(r.wall_s for _, r in fed_runs)
    fed_total = min(t for t, _ in fed_runs)
    cl_times = []
    for _ in range(args.repeats):
        cl_s, cg = timed(
            lambda: causallearn_pc(
                codes, args.alpha, "chisq", stable=True, show_progress=False, node_names=names
            )
        )
        cl_times.append(cl_s)
    cl_graph = Graph.from_causallearn(cg.G.graph, names, "CPDAG")
    ours_pooled = pc(DiscreteOracle(codes, net.cards, names, test="chi2"), args.alpha).graph
    inprocess_rounds = round_seconds(result)

    print(
        f"(a) FedPC in-process, exact chi2, alpha {args.alpha}: {net.name} ({net.n_nodes} nodes) "
        f"x {args.samples}, {args.clients} IID clients, seed {args.seed}; best of {args.repeats}"
    )
    print(f"    FedPC Result.wall_s                 {fed_wall:8.2f} s")
    print(f"    FedPC time around run()             {fed_total:8.2f} s")
    print(f"    causal-learn pc (pooled, chisq)     {min(cl_times):8.2f} s")
    print(
        f"    ratio FedPC / causal-learn          {fed_wall / min(cl_times):8.3f} (wall_s), "
        f"{fed_total / min(cl_times):.3f} (around run); target <= 0.2"
    )
    print(
        f"    rounds {result.rounds} (hello + {len(inprocess_rounds)} tables), "
        f"depths searched {result.extra['depths_searched']}, tests {result.extra['tests']}, "
        f"bytes up {fmt_bytes(result.bytes_up)}, down {fmt_bytes(result.bytes_down)}"
    )
    print(
        f"    CPDAG == our pooled PC: {'yes' if result.graph == ours_pooled else 'NO'}; "
        f"== causal-learn pooled PC: {'yes' if result.graph == cl_graph else 'NO'}"
    )

    # ---------------------------------------------------------------- (a2) where the time goes
    runs_s = sum(t for t, _ in fed_runs)
    print()
    print(f"(a2) Where the time goes ({args.repeats} in-process runs, the same as above)")
    print(
        f"    input check + fingerprint          {checks.seconds / args.repeats * 1000:8.1f} ms "
        f"per run ({checks.calls // args.repeats} reports), {checks.seconds / runs_s:.1%} of "
        f"the run; target <= 5%"
    )
    print(f"    profile, own seconds per stage over {args.repeats} runs (cProfile slows all):")
    table = profile_table(pooled, args)
    whole = sum(seconds for _, seconds in table)
    for stage, seconds in table:
        print(f"      {stage:34s} {seconds:7.3f} s  {seconds / whole:6.1%}")
    shared_rate, kernel_rate, numpy_rate = counting_throughput(codes, list(net.cards), args.repeats)
    print(
        f"    counting: {shared_rate / 1e6:8.1f} M table-row visits/s on every level-1 query "
        f"(a variable triple's three queries read one joint table); {kernel_rate / 1e6:.1f} M/s "
        f"on one query per triple, against np.bincount on those cells built in advance "
        f"{numpy_rate / 1e6:.1f} M/s (ratio {kernel_rate / numpy_rate:.2f})"
    )

    # ---------------------------------------------------------------- (b) Ray
    print()
    print("(b) FedPC on the Ray backend (flwr.simulation), one run per row; seconds")
    header = (
        f"{'clients':>7} {'around run':>10} {'wall_s':>7} {'pre-run':>7} {'hello':>6} "
        f"{'start-up':>8} {'round med':>9} {'round max':>9} {'in-proc med':>11} "
        f"{'rounds':>6}  same CPDAG"
    )
    print(header)
    print("-" * len(header))
    try:
        for k in ray_clients:
            total, ray_result = run_fedpc(pooled, k, args.seed, args.alpha, "ray")
            _, inproc = run_fedpc(pooled, k, args.seed, args.alpha, "inprocess")
            pre = total - ray_result.wall_s
            (hello,) = round_seconds(ray_result, "hello")
            later = round_seconds(ray_result)
            print(
                f"{k:7d} {total:10.2f} {ray_result.wall_s:7.2f} {pre:7.2f} {hello:6.2f} "
                f"{pre + hello:8.2f} {statistics.median(later):9.3f} {max(later):9.3f} "
                f"{statistics.median(round_seconds(inproc)):11.3f} {ray_result.rounds:6d}  "
                f"{'yes' if ray_result.graph == ours_pooled else 'NO'}"
            )
    finally:
        shutil.rmtree(RAY_TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
