"""fedCI benchmarks: rounds over the Flower runtime, and per-test cost against python-fedci.

Usage:

* ``python experiments/bench_fedci.py [n] [k ...]``: for each number of clients k, simulates
  fedCI's site-effect data (5 mixed variables), runs ``fedci-pc`` through the Flower runtime
  (in-process backend) with site dummies, and compares its p-values with Fisher's method.
* ``python experiments/bench_fedci.py --vs-fedci [--venv DIR] [--sizes 3000 15000]``: the same
  mixed data (3 clients) written to CSV, and the same symmetric LRTs timed with this package and
  with python-fedci 0.2.4 (ridge 0, no site effect), each in its own subprocess, printing per-test
  time, tracemalloc peak and process peak RSS, and the p-values side by side. python-fedci (AGPL)
  is never imported here: it runs from a separate venv (see :data:`VENV_HELP`), and is skipped
  with a message when that venv is absent.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from fedcausal_flwr.citest import citest
from fedcausal_flwr.data.partition import split_site_effects
from fedcausal_flwr.data.schema import Schema
from fedcausal_flwr.data.synthetic import random_dag
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.strategies import fedci  # noqa: F401  (registers the methods)

TYPES = {
    "X1": "continuous",
    "X2": "binary",
    "X3": "ordinal",
    "X4": "categorical",
    "X5": "continuous",
}
# one test per response kind pair: continuous, binary, categorical and ordinal models
TESTS = [("X1", "X5", ["X2"]), ("X2", "X5", ["X1"]), ("X4", "X1", ["X2"]), ("X3", "X5", ["X1"])]
DEFAULT_VENV = Path(tempfile.gettempdir()) / "fedci_venv"
VENV_HELP = (
    "python -m venv {venv} && {venv}/bin/pip install --ignore-requires-python "
    '--only-binary=:all: python-fedci==0.2.4 "numpy>=2.4.6,<2.5"'
)

# Both drivers read the same CSVs, cast to each library's typed columns, warm up once, then time
# every test (untraced) and run it again under tracemalloc for its memory peak; one JSON line per
# test, then one with the process peak RSS (KiB on Linux).
_COMMON = """
import json, resource, sys, time, tracemalloc
paths, tests = sys.argv[1:-1], json.loads(sys.argv[-1])
def measure(run):
    run(*tests[0])  # warm-up (imports, caches)
    for x, y, s in tests:
        start = time.perf_counter()  # time without tracemalloc, which slows allocations
        p = run(x, y, s)
        wall = time.perf_counter() - start
        tracemalloc.start()  # a second call for the memory peak only
        run(x, y, s)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(json.dumps({"test": [x, y, s], "p": p, "seconds": wall, "traced": peak}))
    print(json.dumps({"maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""
_OURS = """
import pandas as pd
from fedcausal_flwr.citest import citest
frames = []
for path in paths:
    df = pd.read_csv(path)
    df["X2"] = df["X2"].astype(bool)
    df["X3"] = pd.Categorical(df["X3"], categories=[1, 2, 3], ordered=True)
    df["X4"] = pd.Categorical(df["X4"], categories=["A", "B", "C"])
    frames.append(df)
measure(lambda x, y, s: citest(frames, x, y, s).p_value)
"""
_THEIRS = """
import polars as pl
from fedci import Client, Server
casts = {"X1": pl.Float64, "X2": pl.Boolean, "X3": pl.Int64, "X4": pl.String, "X5": pl.Float64}
clients = [Client(f"site{k}", pl.read_csv(p).with_columns([pl.col(c).cast(t)
           for c, t in casts.items()])) for k, p in enumerate(paths)]
server = Server(clients, ridge_coefficient=0.0)
measure(lambda x, y, s: float(server.test(x, y, set(s)).p_value))
"""


def rounds_benchmark(n: int = 2000, ks: tuple[int, ...] = (4, 8, 12)) -> None:
    dag = random_dag(5, expected_degree=2.5, seed=7)
    for k in ks:
        part = split_site_effects(dag, n, k, seed=7, types=TYPES, n_levels=3)
        schema = Schema.infer(part.clients)
        start = time.perf_counter()
        res = run_method(
            "fedci-pc", part.clients, {"schema": schema.dumps(), "site_effect": "fixed"},
            backend="inprocess",
        )  # fmt: skip
        wall = time.perf_counter() - start
        tests = res.extra["ci_tests"]
        gaps_fisher = []
        for t in tests:
            fisher = citest(part.clients, t["x"], t["y"], t["given"], ci="fisher",
                            schema=schema)  # fmt: skip
            gaps_fisher.append(np.log10(fisher.p_value) - np.log10(t["p_value"]))
        print(
            f"k={k:2d} n={n}: {len(tests)} tests, {res.rounds} rounds "
            f"({len(res.extra['batches'])} batches), {wall:.1f} s, "
            f"{res.bytes_up:,} B up; log10 p(Fisher) - log10 p(fedCI): "
            f"median {np.median(gaps_fisher):+.3f}, max {np.max(gaps_fisher):+.3f}"
        )


def _drive(python: str, script: Path, paths: list[str]) -> tuple[list[dict], float]:
    proc = subprocess.run(
        [python, str(script), *paths, json.dumps(TESTS)],
        capture_output=True, text=True, check=False, timeout=3600,
    )  # fmt: skip
    if proc.returncode:
        raise RuntimeError(f"{script.name} failed:\n{proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return rows[:-1], rows[-1]["maxrss_kib"] / 1024


def versus_fedci(sizes: list[int], venv: Path) -> None:
    theirs_python = venv / "bin" / "python"
    have_theirs = theirs_python.exists()
    if not have_theirs:
        print(f"python-fedci venv not found at {venv}: comparing nothing, timing ours only.")
        print("Create it with:\n  " + VENV_HELP.format(venv=venv))
    dag = random_dag(5, expected_degree=2.5, seed=3)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ours_script, theirs_script = folder / "ours.py", folder / "theirs.py"
        ours_script.write_text(textwrap.dedent(_COMMON) + textwrap.dedent(_OURS))
        theirs_script.write_text(textwrap.dedent(_COMMON) + textwrap.dedent(_THEIRS))
        for n in sizes:
            part = split_site_effects(
                dag, n, 3, seed=3, types=TYPES, n_levels=3, site_sizes="equal"
            )
            paths = []
            for k, df in enumerate(part.clients):
                paths.append(str(folder / f"n{n}_site{k}.csv"))
                df.to_csv(paths[-1], index=False)
            ours, ours_rss = _drive(sys.executable, ours_script, paths)
            theirs, theirs_rss = (
                _drive(str(theirs_python), theirs_script, paths) if have_theirs else ([], 0.0)
            )
            print(f"\nn = {n} (3 clients); peak RSS ours {ours_rss:.0f} MiB"
                  + (f", python-fedci {theirs_rss:.0f} MiB" if have_theirs else ""))  # fmt: skip
            print(f"  {'test':18s} {'ours s':>8s} {'ours MiB':>9s} {'fedci s':>8s} "
                  f"{'fedci MiB':>9s} {'speed-up':>8s}  p ours / p fedci")  # fmt: skip
            for k, row in enumerate(ours):
                x, y, s = row["test"]
                name = f"{x}_||_{y}|{','.join(s)}"
                line = f"  {name:18s} {row['seconds']:8.3f} {row['traced'] / 2**20:9.1f}"
                if have_theirs:
                    other = theirs[k]
                    line += (f" {other['seconds']:8.3f} {other['traced'] / 2**20:9.1f} "
                             f"{other['seconds'] / row['seconds']:7.1f}x  "
                             f"{row['p']:.6g} / {other['p']:.6g}")  # fmt: skip
                print(line)
            if have_theirs:
                ratio = sum(t["seconds"] for t in theirs) / sum(r["seconds"] for r in ours)
                print(f"  total time ratio (python-fedci / ours): {ratio:.1f}x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=2000)
    parser.add_argument("k", nargs="*", type=int, default=[4, 8, 12])
    parser.add_argument("--vs-fedci", action="store_true", help="per-test cost vs python-fedci")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--sizes", nargs="+", type=int, default=[3000, 15000])
    args = parser.parse_args(argv)
    if args.vs_fedci:
        versus_fedci(args.sizes, args.venv)
    else:
        rounds_benchmark(args.n, tuple(args.k))


if __name__ == "__main__":
    main()
