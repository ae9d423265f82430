"""fedCI-IOD's Scenario 3 (Hahn et al., Tables III and IV): IOD on pooled, Fisher and fedCI
evidence against oracle IOD, best normalised SHD per (K, N) and Cohen's d against pooled.

Graphs (the paper's 30 PAGs are an R data file; we regenerate comparable ones, docs/choices.md,
IOD): a random DAG over five observed variables A..E plus one or two latent confounders whose PAG
has at least three tails and a collider with order >= 1; the split puts the four variables of
that collider's discriminating path in subset 1 and the remaining shared three plus the fifth
variable in subset 2 (3 shared, 2 exclusive; 42 feasible tests). Data: the simMixedDAG-style
generator (:func:`~fedcausal_flwr.data.partition.split_site_effects`): a CLIENT root with K levels
is a parent of the five observed variables, types drawn per (graph, seed) with >= 2 continuous,
4 levels, N rows; sites by CLIENT, even sites observe subset 1 and odd sites subset 2.

Methods (each IOD, ``original`` procedure, alpha 0.05): Pooled (the participants' rows in one
table, CLIENT as a covariate), Fisher (each site's own test, Fisher's method over the sites
observing the variables), fedCI (the federated LRT with site dummies). Score per run: the smallest
normalised SHD (entries / 20) between a method's list and oracle IOD's list; an empty list is
left out of the mean (as the paper) and counted in ``empty``. Cohen's d: mean / sd of the paired
differences method - pooled over runs where both lists are non-empty.

Usage: ``python experiments/fedci_iod.py [--quick] [--graphs G] [--seeds S] [--sites 4 8 12]
[--sizes 500 1000 2500 5000] [--jobs J] [--bench]``; ``--bench`` times one fedci-iod run (Flower
runtime, in-process) on Fig. 1's setting and on a 10-variable 3-site setting, with the candidate
counts of the three procedures, against IOD on in-process pooled evidence in the same run.

Speed without changing a row: oracle IOD is computed once per graph (it depends on the graph and
its split only); the runs of one graph go to one worker (``--jobs``), so the orientation and
validation memos of :mod:`~fedcausal_flwr.discovery.iod_candidates` stay warm; rows come back in
run order whatever ``--jobs`` is.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fedcausal_flwr.data.partition import split_site_effects
from fedcausal_flwr.data.schema import Schema
from fedcausal_flwr.data.synthetic import random_variable_types
from fedcausal_flwr.discovery.iod import iod
from fedcausal_flwr.discovery.iod_candidates import PROCEDURES, IODTooLargeError
from fedcausal_flwr.discovery.iod_evidence import SiteEvidence, datasets_of
from fedcausal_flwr.discovery.iod_metrics import best_normalised_shd
from fedcausal_flwr.graphs.graph import ARROW, TAIL, Graph
from fedcausal_flwr.graphs.pag_validity import triples_with_order
from fedcausal_flwr.graphs.truth import dag_to_mag, dag_to_pag
from fedcausal_flwr.stats.oracles import DSeparationOracle

OBSERVED = ["A", "B", "C", "D", "E"]
METHODS = {"Pooled": "pooled", "Fisher": "fisher", "fedCI": "fedci"}
#: Table III (best normalised SHD) and Table IV (Cohen's d vs pooled), K -> N -> value
PAPER_NSHD = {
    "Pooled": {4: [0.337, 0.286, 0.217, 0.174], 8: [0.348, 0.289, 0.224, 0.182],
               12: [0.344, 0.287, 0.213, 0.166]},
    "Fisher": {4: [0.353, 0.306, 0.230, 0.190], 8: [0.393, 0.334, 0.258, 0.216],
               12: [0.403, 0.344, 0.268, 0.208]},
    "fedCI": {4: [0.335, 0.287, 0.216, 0.175], 8: [0.346, 0.289, 0.224, 0.181],
              12: [0.341, 0.286, 0.212, 0.166]},
}  # fmt: skip
PAPER_D = {
    "Fisher": {4: [0.159, 0.162, 0.103, 0.171], 8: [0.378, 0.364, 0.223, 0.302],
               12: [0.455, 0.366, 0.427, 0.411]},
    "fedCI": {4: [-0.024, -0.053, -0.033, 0.090], 8: [-0.047, -0.026, 0.039, -0.056],
              12: [-0.097, -0.018, -0.053, -0.055]},
}  # fmt: skip
PAPER_N = [500, 1000, 2500, 5000]


def random_graph(rng: np.random.Generator) -> tuple[Graph, list[str], list[list[int]]] | None:
    """One candidate (DAG, latents, split) as the module docstring says, or None if the draw
    does not qualify."""
    n_latent = int(rng.integers(1, 3))
    names = [*OBSERVED, *(f"U{j}" for j in range(n_latent))]
    m = np.zeros((len(names), len(names)), dtype=np.int8)
    order = rng.permutation(5)
    for a in range(5):
        for b in range(a + 1, 5):
            if rng.random() < 0.5:
                i, j = order[a], order[b]
                m[i, j], m[j, i] = ARROW, TAIL
    for j in range(n_latent):
        for c in rng.choice(5, 2, replace=False):
            m[5 + j, c], m[c, 5 + j] = ARROW, TAIL
    dag = Graph(names, m, "DAG")
    latent = names[5:]
    pag = dag_to_pag(dag, latent)
    if int(np.count_nonzero(pag.marks == TAIL)) < 3:
        return None
    higher = [t for t in triples_with_order(dag_to_mag(dag, latent)) if t.order >= 1]
    paths = [t for t in higher if len({t.ends[0], t.x, t.z, t.y}) == 4]
    if not paths:
        return None
    t = paths[int(rng.integers(len(paths)))]
    first = sorted({t.ends[0], t.x, t.z, t.y})
    fifth = next(v for v in range(5) if v not in first)
    exclusive = first[int(rng.integers(4))]
    second = sorted([v for v in first if v != exclusive] + [fifth])
    return dag, latent, [first, second]


def graph_pool(n_graphs: int, seed: int) -> list[tuple[Graph, list[str], list[list[int]]]]:
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n_graphs:
        found = random_graph(rng)
        if found is not None:
            out.append(found)
    return out


def site_frames(dag: Graph, latent: list[str], split: list[list[int]], n: int, k: int,
                seed: int) -> list[pd.DataFrame]:  # fmt: skip
    """N rows, K sites by CLIENT; even sites observe subset 1, odd sites subset 2."""
    types = random_variable_types(OBSERVED, seed=seed, min_continuous=2)
    types |= {v: "continuous" for v in latent}
    part = split_site_effects(dag, n, k, seed=seed, types=types, affected=OBSERVED, n_levels=4)
    frames = []
    for i, df in enumerate(part.clients):
        cols = [OBSERVED[v] for v in split[i % 2]]
        frames.append(df[cols])
    return frames


def oracle_pags(graph, cap: int) -> list[Graph]:
    """Oracle IOD's list: a function of the graph and its split only (once per graph)."""
    dag, _, split = graph
    return iod(DSeparationOracle(dag, OBSERVED), split, max_candidates=cap).pags


def one_run(graph, n: int, k: int, seed: int, cap: int,
            oracle: list[Graph] | None = None) -> list[dict]:  # fmt: skip
    """One row per method; ``oracle`` is :func:`oracle_pags` of the graph (computed if None)."""
    dag, latent, split = graph
    if oracle is None:
        oracle = oracle_pags(graph, cap)
    frames = site_frames(dag, latent, split, n, k, seed)
    schema = Schema.infer(frames)
    datasets = datasets_of(frames, schema.names)
    rows = []
    for method, evidence in METHODS.items():
        started = time.perf_counter()
        try:
            found = iod(SiteEvidence(frames, schema, evidence), datasets, max_candidates=cap)
        except IODTooLargeError:
            rows.append({"method": method, "best_nshd": np.nan, "empty": False, "too_large": True})
            continue
        pags = found.pags  # over the schema's order; SHD aligns names
        rows.append({
            "method": method,
            "best_nshd": best_normalised_shd(pags, oracle),
            "empty": not pags,
            "too_large": False,
            "n_pags": len(pags),
            "seconds": time.perf_counter() - started,
        })  # fmt: skip
    return rows


def cohens_d(frame: pd.DataFrame, method: str) -> float:
    wide = frame.pivot_table(index="run", columns="method", values="best_nshd")
    diff = (wide[method] - wide["Pooled"]).dropna()
    if len(diff) < 2 or diff.std(ddof=1) == 0:
        return float("nan") if len(diff) < 2 or diff.mean() != 0 else 0.0
    return float(diff.mean() / diff.std(ddof=1))


@dataclass(frozen=True)
class GraphTask:
    """Every run of a study on one graph: ``runs`` are ``(run, K, N, seed)`` in the serial
    order (one task per graph keeps the orientation memo warm within a worker)."""

    index: int
    graph: tuple
    runs: tuple[tuple[int, int, int, int], ...]
    cap: int


def graph_rows(task: GraphTask) -> list[dict]:
    """The rows of one :class:`GraphTask` (oracle IOD once, then each run)."""
    oracle = oracle_pags(task.graph, task.cap)
    rows = []
    for run, k, n, seed in task.runs:
        for row in one_run(task.graph, n, k, seed, task.cap, oracle):
            rows.append({"K": k, "N": n, "graph": task.index, "seed": seed, "run": run, **row})
    return rows


def study_tasks(args: argparse.Namespace) -> list[GraphTask]:
    """Run ids number (K, N, graph, seed) in that nesting order, whatever runs them."""
    pool = graph_pool(args.graphs, args.graph_seed)
    runs: dict[int, list[tuple[int, int, int, int]]] = {g: [] for g in range(len(pool))}
    run = 0
    for k in args.sites:
        for n in args.sizes:
            for g in range(len(pool)):
                for s in range(args.seeds):
                    runs[g].append((run, k, n, 10000 + s))
                    run += 1
    return [GraphTask(g, graph, tuple(runs[g]), args.max_candidates)
            for g, graph in enumerate(pool)]  # fmt: skip


def study(args: argparse.Namespace) -> pd.DataFrame:
    """Every run's rows ordered by run id (then method), the same for any ``args.jobs``."""
    tasks = study_tasks(args)
    jobs = getattr(args, "jobs", 1)
    rows: list[dict] = []
    if jobs <= 1:
        results: Iterable[list[dict]] = map(graph_rows, tasks)
        executor = None
    else:
        executor = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
        results = executor.map(graph_rows, tasks)
    try:
        for done, found in enumerate(results, 1):
            rows += found
            print(f"  done graph {done} of {len(tasks)}", flush=True)
    finally:
        if executor is not None:
            executor.shutdown(cancel_futures=True)
    rows.sort(key=lambda row: row["run"])  # stable: methods stay in METHODS order
    return pd.DataFrame(rows)


def paper_value(table: dict, method: str, k: int, n: int) -> str:
    if k in table.get(method, {}) and n in PAPER_N:
        return f"{table[method][k][PAPER_N.index(n)]:.3f}"
    return "-"


def report(frame: pd.DataFrame) -> str:
    lines = ["Table III: best normalised SHD (mean over non-empty runs) [paper]; empty lists"]
    lines.append(f"{'method':8} {'K':>3} {'N':>5}  {'ours':>6} {'paper':>6}  runs empty too_large")
    for (method, k, n), cell in frame.groupby(["method", "K", "N"], sort=False):
        ours, paper = cell["best_nshd"].mean(), paper_value(PAPER_NSHD, method, k, n)
        lines.append(f"{method:8} {k:>3} {n:>5}  {ours:6.3f} {paper:>6}"
                     f"  {len(cell):>4} {int(cell['empty'].sum()):>5} "
                     f"{int(cell['too_large'].sum()):>9}")  # fmt: skip
    lines.append("")
    lines.append("Table IV: Cohen's d against pooled (paired runs, both non-empty) [paper]")
    for method in ("Fisher", "fedCI"):
        for (k, n), cell in frame.groupby(["K", "N"]):
            d = cohens_d(cell, method)
            lines.append(
                f"{method:8} {k:>3} {n:>5}  {d:6.3f} {paper_value(PAPER_D, method, k, n):>6}"
            )
    return "\n".join(lines)


def bench() -> None:
    """One fedci-iod run on Fig. 1's setting and on a 10-variable 3-site setting."""
    from fedcausal_flwr.federation.runtime.runners import run_method

    fig1 = Graph.from_edges(
        [*OBSERVED, "U_AC", "U_AD"],
        [("U_AC", "A"), ("U_AC", "C"), ("U_AD", "A"), ("U_AD", "D"), ("B", "C"), ("C", "D"),
         ("C", "E"), ("D", "E")],
    )  # fmt: skip
    names10 = [f"X{i}" for i in range(10)]
    rng = np.random.default_rng(2)
    edges10 = [
        (names10[i], names10[j]) for i in range(10) for j in range(i + 1, 10) if rng.random() < 0.25
    ] + [("U0", "X1"), ("U0", "X7"), ("U1", "X3"), ("U1", "X8")]
    dag10 = Graph.from_edges([*names10, "U0", "U1"], edges10)
    sets10 = [names10[:7], names10[3:], [*names10[:3], *names10[6:]]]
    settings = [
        ("Fig. 1 (2 sites)", fig1, ["U_AC", "U_AD"],
         [["A", "B", "C", "E"], ["A", "C", "D", "E"]], 20000),
        ("10 variables, 3 sites", dag10, ["U0", "U1"], sets10, 20000),
    ]  # fmt: skip
    for label, dag, latent, sets, n in settings:
        observed = [v for v in dag.names if v not in latent]
        types = random_variable_types(observed, seed=1, min_continuous=2)
        types |= {v: "continuous" for v in latent}
        part = split_site_effects(dag, n, len(sets), seed=1, types=types, affected=observed,
                                  n_levels=3)  # fmt: skip
        frames = [df[cols] for df, cols in zip(part.clients, sets, strict=True)]
        schema = Schema.infer(frames)
        started = time.perf_counter()
        try:
            result = run_method("fedci-iod", frames, {"schema": schema.dumps()},
                                backend="inprocess")  # fmt: skip
        except IODTooLargeError as err:
            print(f"{label}: {err}")
            continue
        fed_s = time.perf_counter() - started
        started = time.perf_counter()
        pooled = SiteEvidence(frames, schema, "pooled")
        iod(pooled, datasets_of(frames, schema.names))
        ref_s = time.perf_counter() - started
        print(f"{label}: fedci-iod {fed_s:.1f} s ({result.rounds} rounds, "
              f"{result.extra['tests']} tests, {result.extra['n_pags']} PAGs); IOD on in-process "
              f"pooled evidence {ref_s:.1f} s; ratio {fed_s / ref_s:.2f}")  # fmt: skip
        oracle = DSeparationOracle(dag, list(schema.names))
        datasets = datasets_of(frames, schema.names)
        for proc in PROCEDURES:
            started = time.perf_counter()
            res = iod(pooled, datasets, procedure=proc)
            ores = iod(oracle, datasets, procedure=proc)
            print(f"  {proc:16} candidates {res.candidates:>6} (oracle {ores.candidates:>6}), "
                  f"PAGs {len(res.pags)} (oracle {len(ores.pags)}), "
                  f"{time.perf_counter() - started:.1f} s")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 graphs, K=4, N=500 and 1000")
    parser.add_argument("--graphs", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--graph-seed", type=int, default=2024)
    parser.add_argument("--sites", nargs="+", type=int, default=[4, 8, 12])
    parser.add_argument("--sizes", nargs="+", type=int, default=PAPER_N)
    parser.add_argument("--max-candidates", type=int, default=50_000)
    parser.add_argument("--bench", action="store_true", help="time one fedci-iod run instead")
    parser.add_argument(
        "--jobs", type=int, default=1, help="worker processes, one graph each at a time"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.bench:
        bench()
        return
    if args.quick:
        args.graphs, args.seeds, args.sites, args.sizes = 2, 1, [4], [500, 1000]
    started = time.perf_counter()
    frame = study(args)
    runs = args.graphs * args.seeds
    print(f"{runs} run(s) per (method, K, N) cell; wall time {time.perf_counter() - started:.0f} s")
    print(report(frame))


if __name__ == "__main__":
    main()
