"""Wide data from command to file: where the time and memory of a wide run go, end to end.

    python experiments/bench_wide_e2e.py [--columns 2000 5000] [--rows 60] [--keep DIR]

For each ``--columns`` count: two sites' CSV files of binary columns x ``--rows`` rows, half the
columns a copy of an earlier one 80% of the time (real dependence, so the graph is not just
chance), then ``fedcausal-flwr run --method fedpc --data s0.csv s1.csv --max-depth 0 --out r.json
--no-edges`` in its own process, as a user types it. Printed per size: the command's wall time
and peak memory (the child's maximum resident set), the run's own ``wall_s`` (its rounds) and
the ratio command / rounds (what surrounds the search), the result file's size and its evidence
companion's (``r.evidence.npz``: every removed pair's p-value, depth and separating sets), the
time ``json.load`` and ``Result.load`` (companion included) take to read it back, the edges, and
the reference in the same run: the seconds the counting alone takes (every pair's table at both
sites, as one matrix product), the floor of depth 0. Then where the command's time goes: the
same command again under ``cProfile``, its seconds by stage (imports, reading and checking the
input, the rounds, building the result, writing it) as shares of that profiled run.
Targets (issue 51): 2,000 columns under 10 s and 1 GB, read back under 2 s; 5,000 under 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from fedcausal_flwr.environment import NO_PHONING_OUT
from fedcausal_flwr.evidence import companion_path
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
    companion = companion_path(out)
    text = out.read_text()
    started = time.perf_counter()
    raw = json.loads(text)
    json_s = time.perf_counter() - started
    started = time.perf_counter()
    result = Result.load(out)
    load_s = time.perf_counter() - started
    return {
        "columns": columns,
        "command_s": wall,
        "rounds_s": float(raw.get("wall_s") or 0.0),
        "peak_mb": peak_mb,
        "file_mb": size / 1e6,
        "companion_mb": companion.stat().st_size / 1e6 if companion.exists() else 0.0,
        "json_load_s": json_s,
        "result_load_s": load_s,
        "edges": result.graph.n_edges() if result.graph is not None else 0,
        "counting_s": counting_floor(sites),
        "stages": stage_profile(command, env, folder),
    }


#: The stages of a run, by the function whose cumulative time is the stage's.
STAGES = (
    ("imports", "api.py", "<module>"),
    ("input check", "api.py", "check_frames"),
    ("rounds", "localgrid.py", "run_local"),
    ("result", "protocol.py", "build_result"),
    ("writing", "interrupts.py", "save_result"),
)


def stage_profile(command: list[str], env: dict[str, str], folder: Path) -> dict[str, float]:
    """The command again under cProfile: each stage's share of the profiled run."""
    profile = folder / "run.prof"
    out = folder / "profiled.json"
    profiled = [sys.executable, "-m", "cProfile", "-o", str(profile), *command[1:]]
    profiled[profiled.index("--out") + 1] = str(out)
    subprocess.run(profiled, capture_output=True, text=True, env=env, check=True)
    stats = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    total = max(ct for (_, _, name), (_, _, _, ct, _) in stats.items() if name == "<module>")
    shares: dict[str, float] = {}
    for stage, file, function in STAGES:
        seconds = [
            ct for (path, _, name), (_, _, _, ct, _) in stats.items()
            if name == function and path.endswith(file)
        ]  # fmt: skip
        shares[stage] = max(seconds, default=0.0) / total
    shares["other"] = max(0.0, 1.0 - sum(shares.values()))
    return shares


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--columns", type=int, nargs="+", default=[2000])
    parser.add_argument("--rows", type=int, default=60)
    parser.add_argument("--keep", type=Path, default=None, help="keep the files in DIR")
    args = parser.parse_args(argv)
    print("columns  command s  rounds s  command/rounds  peak MB  file MB  companion MB  "
          "json.load s  Result.load s  edges  counting s  command/counting")  # fmt: skip
    for columns in args.columns:
        with tempfile.TemporaryDirectory() as scratch:
            folder = args.keep / str(columns) if args.keep else Path(scratch)
            folder.mkdir(parents=True, exist_ok=True)
            m = measure(columns, args.rows, folder)
        print(
            f"{m['columns']:7d}  {m['command_s']:9.1f}  {m['rounds_s']:8.1f}  "
            f"{m['command_s'] / max(m['rounds_s'], 1e-9):14.1f}  {m['peak_mb']:7.0f}  "
            f"{m['file_mb']:7.1f}  {m['companion_mb']:12.1f}  {m['json_load_s']:11.2f}  "
            f"{m['result_load_s']:13.2f}  {m['edges']:5d}  {m['counting_s']:10.2f}  "
            f"{m['command_s'] / max(m['counting_s'], 1e-9):16.0f}",
            flush=True,
        )
        stages = ", ".join(f"{k} {v:.0%}" for k, v in m["stages"].items())
        print(f"         where the time goes (shares of a profiled run): {stages}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
