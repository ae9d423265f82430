"""Wide data from command to file: where the time and memory of a wide run go, end to end.

    python experiments/bench_wide_e2e.py [--columns 2000 5000] [--rows 60] [--keep DIR]

For each ``--columns`` count: two sites' CSV files of binary columns x ``--rows`` rows, half the
columns a copy of an earlier one 80% of the time (real dependence, so the graph is not just
chance), then ``fedcausal-flwr run --method fedpc --data s0.csv s1.csv --max-depth 0 --out r.json
--no-edges`` in its own process, as a user types it. Printed per size: the command's wall time
and peak memory (the child's maximum resident set), the run's own ``wall_s`` (its rounds) and
the ratio command / rounds (what surrounds the search), the result file's size and its share
that is evidence (separating sets and p-values keyed by "x|y"), the time ``json.load`` and
``Result.load`` take to read it back, the edges, and the reference in the same run: the
seconds the counting alone takes (every pair's table at both sites, as one matrix product),
the floor of depth 0.
Targets (issue 51): 2,000 columns under 10 s and 1 GB, read back under 2 s; 5,000 under 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from fedcausal_flwr.environment import NO_PHONING_OUT
from fedcausal_flwr.result import Result


def wide_sites(columns: int, rows: int, seed: int = 0) -> list[pd.DataFrame]:
    """Two sites' binary columns; every odd column copies the even one before it 80% of the time."""
    rng = np.random.default_rng(seed)
    sites = []
    for _ in range(2):
        values = rng.integers(0, 2, (rows, columns), dtype=np.int8)
        copies = rng.random((rows, columns // 2)) < 0.8
        odd = values[:, 1::2]
        odd[:] = np.where(copies[:, : odd.shape[1]], values[:, 0::2][:, : odd.shape[1]], odd)
        sites.append(pd.DataFrame(values, columns=[f"v{j}" for j in range(columns)]))
    return sites


def counting_floor(sites: list[pd.DataFrame]) -> float:
    """Seconds to count every pair's 2 x 2 table at each site: for binary columns the four cells
    of all pairs are one matrix product and the column sums (n11 = X'X, n10 = colsum - n11, ...),
    the fastest exact count there is, so what depth 0 cannot go below."""
    started = time.perf_counter()
    for frame in sites:
        x = frame.to_numpy(dtype=np.float32)
        both = x.T @ x
        ones = x.sum(axis=0)
        only_first = ones[:, None] - both
        neither = len(x) - ones[:, None] - ones[None, :] + both
        assert both.shape == only_first.shape == neither.shape
    return time.perf_counter() - started


def measure(columns: int, rows: int, folder: Path) -> dict[str, float]:
    sites = wide_sites(columns, rows)
    paths = []
    for k, frame in enumerate(sites):
        paths.append(folder / f"s{k}.csv")
        frame.to_csv(paths[-1], index=False)
    out = folder / "r.json"
    command = [sys.executable, "-m", "fedcausal_flwr.cli", "run", "--method", "fedpc", "--data",
               *map(str, paths), "--max-depth", "0", "--out", str(out), "--no-edges"]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    env = {**os.environ, **NO_PHONING_OUT}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    peak_mb = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) / 1024
    if done.returncode != 0:
        raise SystemExit(f"the run failed:\n{done.stderr[-2000:]}")
    size = out.stat().st_size
    text = out.read_text()
    started = time.perf_counter()
    raw = json.loads(text)
    json_s = time.perf_counter() - started
    started = time.perf_counter()
    result = Result.load(out)
    load_s = time.perf_counter() - started
    extra = raw.get("extra") or {}
    evidence = len(json.dumps(extra.get("sepsets") or {})) + len(
        json.dumps(extra.get("edge_pvalues") or {})
    )
    return {
        "columns": columns,
        "command_s": wall,
        "rounds_s": float(raw.get("wall_s") or 0.0),
        "peak_mb": peak_mb,
        "file_mb": size / 1e6,
        "evidence_share": evidence / size,
        "json_load_s": json_s,
        "result_load_s": load_s,
        "edges": result.graph.n_edges() if result.graph is not None else 0,
        "counting_s": counting_floor(sites),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--columns", type=int, nargs="+", default=[2000])
    parser.add_argument("--rows", type=int, default=60)
    parser.add_argument("--keep", type=Path, default=None, help="keep the files in DIR")
    args = parser.parse_args(argv)
    print("columns  command s  rounds s  command/rounds  peak MB  file MB  evidence  json.load s  "
          "Result.load s  edges  counting s  command/counting")  # fmt: skip
    for columns in args.columns:
        with tempfile.TemporaryDirectory() as scratch:
            folder = args.keep / str(columns) if args.keep else Path(scratch)
            folder.mkdir(parents=True, exist_ok=True)
            m = measure(columns, args.rows, folder)
        print(
            f"{m['columns']:7d}  {m['command_s']:9.1f}  {m['rounds_s']:8.1f}  "
            f"{m['command_s'] / max(m['rounds_s'], 1e-9):14.1f}  {m['peak_mb']:7.0f}  "
            f"{m['file_mb']:7.1f}  {m['evidence_share']:8.0%}  {m['json_load_s']:11.2f}  "
            f"{m['result_load_s']:13.2f}  {m['edges']:5d}  {m['counting_s']:10.2f}  "
            f"{m['command_s'] / max(m['counting_s'], 1e-9):16.0f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
