"""Edge confidence: does the federated bootstrap's edge frequency separate true from false edges?

    python experiments/edge_confidence.py [--network alarm] [--samples 10000] [--clients 10]
        [--bootstrap 50] [--samples-how subsample replace] [--seeds 0 1 2]

Per seed: the network's sample split IID over ``--clients`` clients, then exact FedPC (chi2) with
``bootstrap=B`` (each client resamples its own rows, B replicates in the same rounds as the run).
Over every pair of variables, three scores of "there is an edge" are compared with the true
skeleton by the area under the ROC curve (AUC: the chance that a true edge scores above a
non-edge): the bootstrap's edge frequency, the deciding p-value of the run itself (``edge_pvalues``:
the largest p over the pair's tests, smaller is surer) and the learned graph itself (0/1). The
direction AUC scores each true edge a -> b's learned frequency of a -> b against b -> a. Printed
per resampling (``subsample``: half of each client's rows without replacement, the default;
``replace``: the classic bootstrap) with the run's rounds and wall time next to a run without the
bootstrap.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np

from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.experiments.common import add_sample_arguments
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.graphs.truth import directed_matrix
from fedcausal_flwr.metrics import auc


def pair_scores(result, names: list[str]) -> dict[str, np.ndarray]:
    """Per pair (upper triangle, node order) the three edge scores of one run."""
    index = {name: i for i, name in enumerate(names)}
    p = len(names)
    freq, surety = np.zeros((p, p)), np.full((p, p), -1.0)
    for x, y, edge, _, _ in result.extra["bootstrap"]["edges"]:
        freq[index[x], index[y]] = freq[index[y], index[x]] = edge
    removed = result.evidence.removed() if result.evidence is not None else []
    for x, y, value, *_ in result.extra["edge_pvalues"]["kept"] + removed:
        surety[index[x], index[y]] = surety[index[y], index[x]] = -value
    upper = np.triu_indices(p, k=1)
    learned = result.graph.adjacency().astype(float)
    return {"bootstrap": freq[upper], "p-value": surety[upper], "graph": learned[upper]}


def direction_auc(result, truth: np.ndarray, names: list[str]) -> float:
    """True edges a -> b: the frequency of a -> b (positive) against that of b -> a (negative)."""
    index = {name: i for i, name in enumerate(names)}
    p = len(names)
    directed = np.zeros((p, p))
    for x, y, _, xy, yx in result.extra["bootstrap"]["edges"]:
        directed[index[x], index[y]], directed[index[y], index[x]] = xy, yx
    parents, children = np.nonzero(truth)
    right, wrong = directed[parents, children], directed[children, parents]
    scores = np.concatenate([right, wrong])
    return auc(scores, np.r_[np.ones(len(right), bool), np.zeros(len(wrong), bool)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sample_arguments(parser, network="alarm", clients=10, seed=False)
    parser.add_argument("--bootstrap", type=int, default=50)
    parser.add_argument(
        "--samples-how", nargs="+", default=["subsample", "replace"], dest="how",
        choices=["subsample", "replace"],
    )  # fmt: skip
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()

    net = load_network(args.network)
    names = list(net.variables)
    dag = directed_matrix(net.dag)
    skeleton = (dag | dag.T)[np.triu_indices(len(names), k=1)]
    print(
        f"{args.network} x {args.samples}, {args.clients} IID clients, exact FedPC (chi2), "
        f"bootstrap B = {args.bootstrap}; {int(skeleton.sum())} true edges among "
        f"{skeleton.size} pairs; AUC of each edge score against the true skeleton"
    )
    header = (
        f"{'resampling':<10} {'seed':>4} {'AUC boot':>8} {'AUC p':>6} {'AUC graph':>9} "
        f"{'AUC dir':>7} {'rounds':>6} {'wall s':>7} {'plain s':>7}"
    )
    print(header + "\n" + "-" * len(header), flush=True)
    for how in args.how:
        rows = []
        for seed in args.seeds:
            parts = split_iid(net.sample(args.samples, seed=seed), args.clients, seed=seed).clients
            start = time.perf_counter()
            plain = run_method("fedpc", parts, {"seed": seed})
            plain_s = time.perf_counter() - start
            start = time.perf_counter()
            options = {"seed": seed, "bootstrap": args.bootstrap, "bootstrap_sample": how}
            result = run_method("fedpc", parts, options)
            wall = time.perf_counter() - start
            scores = pair_scores(result, names)
            row = [auc(scores[k], skeleton) for k in ("bootstrap", "p-value", "graph")]
            row.append(direction_auc(result, dag, names))
            rows.append(row)
            print(
                f"{how:<10} {seed:>4} {row[0]:8.3f} {row[1]:6.3f} {row[2]:9.3f} {row[3]:7.3f} "
                f"{result.rounds:>6} {wall:7.1f} {plain_s:7.1f}  (plain run: {plain.rounds} "
                "rounds)",
                flush=True,
            )
        mean = np.mean(rows, axis=0)
        print(f"{how:<10} {'mean':>4} {mean[0]:8.3f} {mean[1]:6.3f} {mean[2]:9.3f} {mean[3]:7.3f}")


if __name__ == "__main__":
    main()
