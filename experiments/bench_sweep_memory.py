"""Memory and cores of a large `compare` sweep: does the memory stay flat as runs accumulate?

Runs ``compare`` over 3 networks x 4 K x 5 seeds x 6 methods (360 runs, ``--jobs 2``) into a
temporary folder while a thread samples the resident memory of the whole process tree (this
process and every worker) twice a second. The sweep runs network by network, K by K, seed by
seed, so later runs are larger; flatness is judged on equal work: within each (network, K) block
the peak over its last two seeds against the peak over its first two (the same runs on other
rows: a sweep that accumulates memory shows a ratio above 1 that grows with the block). Also
printed: the peak per network, the workers' CPU time against wall time x jobs (both cores busy:
near 1) and the wall time.

    python experiments/bench_sweep_memory.py [--samples 2000] [--jobs 2] [--networks ...]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time

from fedcausal_flwr.compare import compare
from fedcausal_flwr.experiments.process_memory import TreeSampler

METHODS = ["fedpc", "fedpc-vote", "pc-vote", "pc-cit-vote", "pooled", "local"]


class Sampler(TreeSampler):
    """Also keeps (network, K, seed, sample index) per finished run in ``marks``."""

    def __init__(self, every: float = 0.5):
        super().__init__(every)
        self.marks: list[tuple[str, int, int, int]] = []

    def run_done(self, record: dict) -> None:
        self.marks.append((record["network"], int(record["K"]), int(record["seed"]),
                           len(self.samples)))  # fmt: skip

    def peak(self, runs: list[int]) -> float:
        """Peak MB over the sampling windows of the given runs (positions in ``marks``)."""
        windows = [(self.marks[i - 1][3] if i else 0, self.marks[i][3]) for i in runs]
        return max(max(self.samples[lo : hi + 1] or [0]) for lo, hi in windows) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", nargs="+", default=["asia", "child", "insurance"])
    parser.add_argument("--clients", default="2,4,8,16")
    parser.add_argument("--seeds", default="0-4")
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()

    sampler = Sampler()
    sampler.start()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        study = compare(
            METHODS, args.networks, args.clients, samples=args.samples, seeds=args.seeds,
            jobs=args.jobs, out=out, plots=False, report=False, progress=False,
            on_run_done=sampler.run_done,
        )  # fmt: skip
    wall = time.perf_counter() - started
    sampler.stop.set()
    sampler.join()
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)

    n = len(sampler.marks)
    print(f"{n} runs ({study.n_failed} failed) of {len(METHODS)} methods x {args.networks} x "
          f"K {args.clients} x seeds {args.seeds}, {args.samples} rows, --jobs {args.jobs}: "
          f"{wall:.0f} s wall")  # fmt: skip
    print(
        f"{'network':<12} {'K':>3} {'peak MB, first 2 seeds':>23} {'last 2 seeds':>13} {'ratio':>6}"
    )
    blocks = dict.fromkeys((net, k) for net, k, _, _ in sampler.marks)
    ratios = []
    for net, k in blocks:
        runs = [i for i, (a, b, _, _) in enumerate(sampler.marks) if (a, b) == (net, k)]
        seeds = sorted({sampler.marks[i][2] for i in runs})
        first = sampler.peak([i for i in runs if sampler.marks[i][2] in seeds[:2]])
        last = sampler.peak([i for i in runs if sampler.marks[i][2] in seeds[-2:]])
        ratios.append(last / first)
        print(f"{net:<12} {k:>3} {first:23.0f} {last:13.0f} {last / first:6.2f}")
    print(f"largest ratio {max(ratios):.2f}, last block's {ratios[-1]:.2f} (flat: about 1)")
    busy = cpu / (wall * args.jobs)
    print(f"workers' CPU time / (wall x jobs): {busy:.2f} (both cores busy: ~1)")


if __name__ == "__main__":
    main()
