"""Wide data: FedPC when there are thousands of variables and few rows.

    python experiments/bench_wide.py [--columns 2000] [--rows 60] [--er 1000] [--limit 1800]

(a) ``--columns`` independent binary columns x ``--rows`` rows at each of 2 sites, exact FedPC
(chi2) in-process at ``--max-depth 0``: with so few rows about alpha of the pairs stay adjacent,
so the skeleton has tens of thousands of edges and as many colliders. End-to-end seconds around
``fedcausal_flwr.run`` (target < 10 s), edges and rounds; then the same
orientation (colliders and Meek) decided a middle node at a time against the triple-by-triple
loop with causal-learn's ancestor matrix rebuilt at every re-oriented edge (as causal-learn does)
on a ``--slice``-column slice, with the ratio and the equality of the CPDAGs.

(b) A random network ``er:d=--er`` x 5,000 rows over 5 clients, exact FedPC at the default depth:
seconds, rounds and tests, beside causal-learn's pooled PC on the same rows in a child process
with a time limit (``--limit`` seconds, default 30 minutes): its seconds or "over the limit".
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import argparse
import json
import subprocess
import sys
import time
import warnings

import numpy as np
import pandas as pd

import fedcausal_flwr
from fedcausal_flwr.graphs import causallearn_graph
from fedcausal_flwr.graphs.meek import orient_cpdag


def binary_sites(columns: int, rows: int, sites: int, seed: int) -> list[pd.DataFrame]:
    rng = np.random.default_rng(seed)
    names = [f"V{j:04d}" for j in range(columns)]
    return [
        pd.DataFrame(rng.integers(0, 2, size=(rows, columns)), columns=names) for _ in range(sites)
    ]


class EagerAncestry(causallearn_graph.CausalLearnAncestry):
    """The reference: the ancestor matrix rebuilt at once whenever asked (one rebuild per
    re-oriented edge), as causal-learn's ``reconstitute_dpath`` does."""

    def reconstitute(self, marks: np.ndarray) -> None:
        self._rebuild(marks)


def wide_run(columns: int, rows: int, seed: int) -> tuple[float, object]:
    frames = binary_sites(columns, rows, 2, seed)
    start = time.perf_counter()
    result = fedcausal_flwr.run("fedpc", data=frames, test="chi2", max_depth=0, seed=seed)
    return time.perf_counter() - start, result


def triple_by_triple(graph, sepsets) -> None:
    """The reference: causal-learn's collider loop, one triple at a time in its order, with its
    ancestor matrix rebuilt at every re-oriented edge, then its Meek."""
    from fedcausal_flwr.graphs.colliders import orient_triple_by_triple
    from fedcausal_flwr.graphs.meek import apply_meek

    ancestry = EagerAncestry.from_marks(graph.marks)
    orient_triple_by_triple(graph.marks, sepsets, "standard", "existing", ancestry)
    apply_meek(graph, "causallearn", ancestry)


def orientation_pair(columns: int, rows: int, seed: int) -> tuple[float, float, int, int]:
    """(our seconds, reference seconds, edges, unshielded triples) of PC's orientation on the
    skeleton and separating sets of pooled depth-0 PC over ``columns`` binary columns: ours
    decides each middle node's triples together (:func:`orient_cpdag`), the reference visits
    them one by one (:func:`triple_by_triple`); the CPDAGs must be equal."""
    from fedcausal_flwr.discovery.pc import pc, undirected_graph
    from fedcausal_flwr.graphs.colliders import pc_unshielded_triples
    from fedcausal_flwr.stats.oracles import DiscreteOracle

    pooled = pd.concat(binary_sites(columns, rows, 2, seed), ignore_index=True)
    codes = pooled.to_numpy(dtype=np.int64)
    oracle = DiscreteOracle(codes, [2] * columns, list(pooled.columns), test="chi2")
    found = pc(oracle, 0.05, max_depth=0)
    names = list(pooled.columns)
    sepsets = dict(found.skeleton.sepsets.items())
    ours = undirected_graph(names, found.skeleton.adjacency)
    start = time.perf_counter()
    orient_cpdag(ours, sepsets, "standard", "existing", "causallearn")
    ours_s = time.perf_counter() - start
    reference = undirected_graph(names, found.skeleton.adjacency)
    start = time.perf_counter()
    triple_by_triple(reference, sepsets)
    reference_s = time.perf_counter() - start
    if ours != reference:
        raise SystemExit("the middle-at-a-time and triple-by-triple orientations differ")
    skeleton = undirected_graph(names, found.skeleton.adjacency)
    return ours_s, reference_s, skeleton.n_edges(), len(pc_unshielded_triples(skeleton.marks))


CAUSALLEARN_CHILD = """
import json, sys, time
import numpy as np
from causallearn.search.ConstraintBased.PC import pc
codes = np.load(sys.argv[1])
start = time.perf_counter()
pc(codes, 0.05, "chisq", stable=True, show_progress=False)
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def causallearn_seconds(codes: np.ndarray, limit: float, folder: str) -> float | None:
    """causal-learn's pooled PC on ``codes`` in a child process; None past ``limit`` seconds."""
    path = os.path.join(folder, "codes.npy")
    np.save(path, codes)
    child = subprocess.Popen(
        [sys.executable, "-c", CAUSALLEARN_CHILD, path], stdout=subprocess.PIPE, text=True
    )
    try:
        out, _ = child.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        return None
    return float(json.loads(out.strip().splitlines()[-1])["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--columns", type=int, default=2000)
    parser.add_argument("--rows", type=int, default=60, help="rows per site in (a)")
    parser.add_argument("--slice", type=int, default=200, help="columns of the orientation pair")
    parser.add_argument("--er", type=int, default=1000, help="nodes of the network in (b); 0: skip")
    parser.add_argument("--limit", type=float, default=1800.0, help="causal-learn's seconds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore", FutureWarning)

    seconds, result = wide_run(args.columns, args.rows, args.seed)
    print(
        f"(a) {args.columns} binary columns x {args.rows} rows x 2 sites, fedpc chi2, "
        f"--max-depth 0: {seconds:.2f} s around run (target < 10 s); "
        f"{result.graph.n_edges()} edges, {result.rounds} rounds"
    )
    ours, reference, edges, triples = orientation_pair(args.slice, args.rows, args.seed)
    print(
        f"    orientation on {args.slice} columns ({edges} edges, {triples} unshielded "
        f"triples): {ours:.3f} s a middle node at a time, {reference:.3f} s triple by triple "
        f"with causal-learn's rebuild at each re-oriented edge (ratio {ours / reference:.3f}); "
        "same CPDAG"
    )
    if not args.er:
        return
    import tempfile

    from fedcausal_flwr.data.schema import Schema
    from fedcausal_flwr.data.specs import sample_partition

    partition, _ = sample_partition(f"er:d={args.er}", 5000, 5, "iid", args.seed)
    start = time.perf_counter()
    result = fedcausal_flwr.run("fedpc", data=partition, test="chi2", seed=args.seed)
    ours = time.perf_counter() - start
    pooled = pd.concat(list(partition.clients), ignore_index=True)
    codes = Schema.infer([pooled]).encode(pooled).astype(np.int64)
    with tempfile.TemporaryDirectory() as folder:
        theirs = causallearn_seconds(codes, args.limit, folder)
    shown = f"{theirs:.1f} s" if theirs is not None else f"over the limit of {args.limit:.0f} s"
    ratio = f" (ratio {ours / theirs:.3f})" if theirs else ""
    print(
        f"(b) er:d={args.er} x 5000 rows over 5 clients, fedpc chi2, default depth: {ours:.1f} s, "
        f"{result.rounds} rounds, {result.extra['tests']} tests; causal-learn's pooled PC: "
        f"{shown}{ratio}"
    )


if __name__ == "__main__":
    main()
