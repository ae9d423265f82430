"""FedCDnv vs FedCDnv-vote vs FCI-base (Wang et al., ICML 2025) in the paper's settings.

    python -m fedcausal_flwr.experiments.fedcdnv
        [--parts default nodes clients networks sachs identical] [--seeds 10] [--quick]
        [--split random|structured] [--fraction 0.85] [--clients 6] [--out DIR] [--plot]
        [--data DIR]

(or ``python experiments/fedcdnv.py ...`` from a source checkout).

Parts (each prints the three methods side by side, mean ± sd over seeds, and the paper's numbers
where it gives any):

* ``default``: the paper's default synthetic setting (Table 4): an Erdos-Renyi DAG over 30 nodes
  (mean degree 2), 15% of the nodes latent (chosen among nodes with >= 2 children), 6 clients,
  each observing 85% of the observed variables (uniformly random subsets covering all of them;
  ``--split structured``: client i drops a contiguous block instead, which leaves pairs never
  observed together), client sizes n_k ~ U{100..2000}, variables with 2-3 states and Dirichlet(1)
  CPT columns; plus Table 2's FDRs of FedCDnv (all vs definite relations). With 6 clients
  seeing 85% each almost no pair is never observed together, so every pair is definite and
  FDR-dC = FDR-C, unlike the paper's Table 2 (its split is not described: docs/choices.md,
  FedCDnv); ``--fraction 0.6`` or ``--clients 2`` make the theory bite.
* ``nodes`` / ``clients``: the sweeps of Figs. 5 and 9 (|V| in 10..100, m in 2..30), the other
  settings at their defaults; ``nodes`` also prints Table 2 (FDR-C / -dC / -nC / -dnC) per |V|.
* ``networks``: child, insurance, alarm, child3, alarm3 with the same defaults (Fig. 6).
* ``sachs``: discrete Sachs (853 x 11), 6 IID clients, each observing a random 9 of the 11
  (Table 1), and the identical-sets case (Table 6) with fedpc-vote, FedC2SL's fedfci and the
  baselines FedCSL (``fedcsl``) and NOTEARS-ADMM (``notears-admm``) added.
  Truth: the 17-edge bnlearn DAG (no latents). Data and truth are shipped with the package
  (:mod:`fedcausal_flwr.data.reference`); ``--data DIR`` reads the two files from DIR instead
  (a missing file is an error).
* ``identical``: the default synthetic setting with identical variable sets, adding fedpc-vote
  and fedfci (Fig. 10).

Metrics against the true PAG over the union of the observed variables (latents removed):
pre/rec/F1-edge = adjacency precision / recall / F1; pre/rec/F1-orie = arrowhead precision /
recall / F1 (our reading of the paper's undefined orientation metric, docs/choices.md, FedCDnv);
"F1-orie MAG" scores the arrowheads against the true MAG instead (on Sachs, with no latents, the
MAG is the DAG; its PAG has no arrowhead, so only this column is comparable with the paper).
fedpc-vote's CPDAG is scored against the same PAG (an arrowhead claims the same non-ancestry in
both). FCI runs unlimited depth up to 30 nodes and depth 3 above (the paper gives no depth:
docs/choices.md, FedCDnv), for every method alike; G2 tests at alpha 0.05; in-process backend.
Results: ``results.csv`` in ``--out`` (default ``results/experiments/fedcdnv-v1-<parts>[-quick]``);
``--plot`` adds the clients sweep plots.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np
import pandas as pd

from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.partition import (
    drop_latents,
    split_iid,
    split_sizes,
    split_variable_subsets,
)
from fedcausal_flwr.data.reference import (
    SACHS_DISCRETE_FILE,
    SACHS_DISCRETE_TRUTH_FILE,
    read_edge_list,
    read_sachs_discrete,
    sachs_file,
)
from fedcausal_flwr.data.synthetic import (
    choose_latents,
    random_dag,
    random_discrete_network,
)
from fedcausal_flwr.experiments.common import mean_sd
from fedcausal_flwr.federation.core.registry import get_method
from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.graphs.truth import dag_to_mag, dag_to_pag
from fedcausal_flwr.metrics import adjacency_metrics, arrowhead_metrics
from fedcausal_flwr.strategies.tpss import SCORE_KEYS, score_result

SACHS_FILE, SACHS_TRUTH = SACHS_DISCRETE_FILE, SACHS_DISCRETE_TRUTH_FILE
OURS = ("fedcdnv", "fedcdnv-vote", "fci-base")
IDENTICAL_EXTRA = ("fedpc-vote", "fedfci", "fedcsl", "notears-admm")
#: ``--quick``'s cap on NOTEARS-ADMM, the slowest baseline by far (the authors' 200 ADMM
#: iterations take ~15 s a run on Sachs, most of a quick run); the tables say so
QUICK_OPTIONS = {"notears-admm": {"max_iter": 40}}
PAPER_NAMES = {"fedcdnv": "FedCDnv", "fedcdnv-vote": "FedCDnv-vote", "fci-base": "FCI-base"}
NODES = (10, 20, 30, 40, 50, 60, 80, 100)
CLIENTS = (2, 4, 6, 8, 10, 15, 20, 30)
NETWORKS = ("child", "insurance", "alarm", "child3", "alarm3")
# Table 1 (Sachs, each client 9 of 11) and Table 6 (identical sets): F1-edge, F1-orie
PAPER_SACHS = {
    "fedcdnv": (0.6967, 0.2861),
    "fedcdnv-vote": (0.5778, 0.2544),
    "fci-base": (0.5823, 0.2488),
}
PAPER_SACHS_IDENTICAL = {
    "fedcdnv": (0.68, 0.3030),
    "fedcdnv-vote": (0.6115, 0.2633),
    "fedpc-vote": (0.4928, None),  # Table 6's FedPC (Huang et al.'s layer-wise voting)
    "fedcsl": (0.3774, None),  # the baselines report no orientation
    "notears-admm": (0.4304, None),
}
# Table 2: |V| -> (FDR-C, FDR-dC, FDR-nC, FDR-dnC), FedCDnv
PAPER_TABLE2 = {
    10: (0.0, 0.0, 0.2549, 0.2270),
    20: (0.0724, 0.0766, 0.0475, 0.0476),
    30: (0.0743, 0.0681, 0.0169, 0.0144),
    40: (0.1162, 0.0935, 0.0688, 0.0671),
    50: (0.1122, 0.0892, 0.0264, 0.0263),
    60: (0.0974, 0.1079, 0.0202, 0.0196),
    80: (0.0929, 0.1043, 0.0325, 0.0309),
    100: (0.1380, 0.1351, 0.0099, 0.0092),
}
METRICS = (*SCORE_KEYS, "arrow_mag_f1")
FDRS = ("fdr_c", "fdr_dc", "fdr_nc", "fdr_dnc")


@dataclass(frozen=True)
class Setting:
    """One synthetic configuration (the paper's Table 4 defaults)."""

    nodes: int = 30
    degree: float = 2.0
    latent: float = 0.15
    clients: int = 6
    fraction: float = 0.85
    n_range: tuple[int, int] = (100, 2000)
    split: str = "random"
    identical: bool = False

    @property
    def max_depth(self) -> int | None:
        return None if self.nodes <= 30 else 3


@dataclass
class Case:
    """Client frames and the truth they are scored against."""

    frames: list[pd.DataFrame]
    truth: Graph  # PAG over the observed variables
    mag: Graph  # MAG over the observed variables (the DAG itself without latents)
    dag: Graph
    latent: list[str]
    max_depth: int | None
    never_together: int


def split_case(net, dag: Graph, latent: list[str], setting: Setting, seed: int) -> Case:
    """Rows for n_k ~ U{n_range}, latents dropped, then the variable subsets."""
    rng = np.random.default_rng(seed)
    lo, hi = setting.n_range
    sizes = rng.integers(lo, hi + 1, size=setting.clients).tolist()
    pooled = net.sample(int(sum(sizes)), seed=seed)
    part = drop_latents(split_sizes(pooled, sizes=sizes, seed=seed), latent)
    if not setting.identical:
        part = split_variable_subsets(
            part, fraction=setting.fraction, seed=seed, structured=setting.split == "structured"
        )
    return Case(
        frames=list(part.clients),
        truth=dag_to_pag(dag, latent),
        mag=dag_to_mag(dag, latent),
        dag=dag,
        latent=latent,
        max_depth=setting.max_depth,
        never_together=len(part.info["never_together"]),
    )


def synthetic_case(setting: Setting, seed: int) -> Case:
    dag = random_dag(setting.nodes, setting.degree, seed=seed)
    net = random_discrete_network(dag, card_range=(2, 3), seed=seed)
    latent = choose_latents(dag, setting.latent, seed=seed)
    return split_case(net, dag, latent, setting, seed)


def network_case(name: str, setting: Setting, seed: int) -> Case:
    net = load_network(name)
    latent = choose_latents(net.dag, setting.latent, seed=seed)
    return split_case(net, net.dag, latent, replace(setting, nodes=net.n_nodes), seed)


def load_sachs(directory: Path | None = None) -> tuple[pd.DataFrame, Graph]:
    """The discrete Sachs frame and the DAG over its columns: the packaged files, or those in
    ``directory``."""
    if directory is None:
        paths = [sachs_file(SACHS_FILE), sachs_file(SACHS_TRUTH)]
    else:
        paths = [directory / SACHS_FILE, directory / SACHS_TRUTH]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"Sachs data not found: {missing}. --data DIR needs {SACHS_FILE} (853 rows, space "
            f"separated, header) and {SACHS_TRUTH} (cause,effect)."
        )
    frame = read_sachs_discrete(paths[0])
    if frame.shape != (853, 11):
        raise ValueError(f"{paths[0]}: expected 853 rows x 11 columns, got {frame.shape}")
    return frame, read_edge_list(paths[1], list(frame.columns))


def sachs_case(frame: pd.DataFrame, dag: Graph, seed: int, identical: bool) -> Case:
    part = split_iid(frame, 6, seed=seed)
    if not identical:
        part = split_variable_subsets(part, fraction=9 / 11, seed=seed)
    return Case(list(part.clients), dag_to_pag(dag, []), dag_to_mag(dag, []), dag, [], None, 0)


def score(method: str, result, case: Case) -> dict[str, float]:
    """Against the true PAG; ``arrow_mag_*``: arrowheads against the true MAG (the DAG when
    nothing is latent, e.g. Sachs, whose PAG has no arrowhead at all)."""
    mag = arrowhead_metrics(result.graph, case.mag)
    extra = {f"arrow_mag_{k}": mag[k] for k in ("precision", "recall", "f1")}
    if method in OURS:
        scores = score_result(result, case.truth)
        scores["definite_pairs"] = sum(
            result.extra["status_counts"][k] for k in ("definite_causal", "definite_noncausal")
        )
        scores["level1_removed"] = sum(d["level"] == 1 for d in result.extra["decisions"])
        return {**scores, **extra}
    truth = case.truth
    adj, arr = adjacency_metrics(result.graph, truth), arrowhead_metrics(result.graph, truth)
    return {
        **{f"adj_{k}": adj[k] for k in ("precision", "recall", "f1")},
        **{f"arrow_{k}": arr[k] for k in ("precision", "recall", "f1")},
        **extra,
        "n_edges": result.graph.n_edges(),
    }


def run_case(
    case: Case, methods: Sequence[str], labels: dict, overrides: Mapping[str, dict] | None = None
) -> list[dict]:
    """Each method once on ``case``; ``overrides``: a method's own options on top."""
    rows = []
    for method in methods:
        shared = {"test": "g2", "alpha": 0.05, "max_depth": case.max_depth}
        declared = get_method(method).options  # NOTEARS-ADMM runs no CI test
        options = {k: v for k, v in shared.items() if k in declared}
        options.update((overrides or {}).get(method, {}))
        started = time.perf_counter()
        result = run_method(method, case.frames, options, backend="inprocess")
        rows.append(
            {
                **labels,
                "method": method,
                "seconds": time.perf_counter() - started,
                "never_together": case.never_together,
                **score(method, result, case),
            }
        )
    return rows


def mean_sd_of_present(values: Sequence[float]) -> str:
    """Mean ± sd of the values that are not NaN; ``-`` when none is."""
    values = [v for v in values if v == v]
    return mean_sd(values, "{mean:.3f}±{sd:.3f}") if values else "-"


def print_block(frame: pd.DataFrame, title: str, paper: dict | None = None) -> None:
    """One row per method: mean ± sd of every metric, the paper's F1s when given."""
    print(f"\n{title}")
    names = ["pre-edge", "rec-edge", "F1-edge", "pre-orie", "rec-orie", "F1-orie", "F1-orie MAG"]
    header = f"{'method':<14}" + "".join(f"{n:>14}" for n in names) + f"{'edges':>8}{'s/run':>7}"
    if paper:
        header += "   paper F1-edge / F1-orie"
    print(header)
    for method, rows in frame.groupby("method", sort=False):
        cells = "".join(f"{mean_sd_of_present(rows[m].tolist()):>14}" for m in METRICS)
        line = f"{method:<14}{cells}{rows['n_edges'].mean():>8.1f}{rows['seconds'].mean():>7.2f}"
        if paper and method in paper:
            edge, orie = paper[method]
            line += f"   {edge:.4f} / {'-' if orie is None else f'{orie:.4f}'}"
        print(line)


def print_fdr(frame: pd.DataFrame, key: str, paper: dict[int, tuple]) -> None:
    """Table 2: FedCDnv's FDR of all vs definite relations, ours / paper."""
    ours = frame[frame["method"] == "fedcdnv"]
    print(
        f"\nTable 2, FedCDnv: FDR of all / definite relations (ours mean ± sd  | paper), by {key}"
    )
    print(f"{key:>6}" + "".join(f"{n:>26}" for n in ("FDR-C", "FDR-dC", "FDR-nC", "FDR-dnC")))
    for value, rows in ours.groupby(key, sort=True):
        ref = paper.get(int(value))
        cells = "".join(
            f"{mean_sd_of_present(rows[m].tolist()):>16} | "
            f"{'-' if ref is None else f'{ref[k]:.4f}':>6}"
            for k, m in enumerate(FDRS)
        )
        defs = rows["definite_pairs"].mean()
        print(
            f"{value:>6}{cells}   ({defs:.0f} definite pairs, {rows['never_together'].mean():.1f} "
            "pairs never together)"
        )


def sweep_table(frame: pd.DataFrame, key: str, metric: str) -> None:
    values = sorted(frame[key].unique())
    print(f"\n{metric} by {key} (mean over seeds)")
    print(f"{'method':<14}" + "".join(f"{v:>9}" for v in values))
    for method, rows in frame.groupby("method", sort=False):
        cells = "".join(f"{rows[rows[key] == v][metric].mean():>9.3f}" for v in values)
        print(f"{method:<14}{cells}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = ("default", "nodes", "clients", "networks", "sachs", "identical")
    parser.add_argument("--parts", nargs="+", default=["default", "sachs"], choices=parts)
    parser.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1")
    parser.add_argument("--quick", action="store_true", help="2 seeds, short sweeps")
    parser.add_argument("--split", choices=("random", "structured"), default="random")
    parser.add_argument("--fraction", type=float, default=0.85, help="delta = |O_k| / |O|")
    parser.add_argument("--clients", type=int, default=6, help="m outside the clients sweep")
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help=f"folder holding {SACHS_FILE} and {SACHS_TRUTH} (default: the packaged files)",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--plot", action="store_true", help="plots of the clients sweep")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be positive")
    seeds = range(2 if args.quick else args.seeds)
    nodes = (10, 20, 30) if args.quick else NODES
    clients = (2, 6, 10) if args.quick else CLIENTS
    networks = ("child", "alarm") if args.quick else NETWORKS
    label = "+".join(p for p in parts if p in args.parts)
    out = args.out or Path("results/experiments") / (
        f"fedcdnv-v1-{label}{'-quick' if args.quick else ''}"
    )
    if not 0 < args.fraction <= 1 or args.clients < 1:
        parser.error("--fraction must be in (0, 1] and --clients positive")
    base = Setting(split=args.split, fraction=args.fraction, clients=args.clients)
    print(
        f"FedCDnv experiment: seeds {list(seeds)}, G2 alpha 0.05, band [0.001, 0.5], split "
        f"{args.split}; defaults: ER |V|={base.nodes}, degree {base.degree}, "
        f"{base.latent:.0%} latent, {base.clients} clients x {base.fraction:.0%} of the "
        f"variables, n_k ~ U{{{base.n_range[0]}..{base.n_range[1]}}}, 2-3 states, Dirichlet(1) "
        "CPTs; metrics against the true PAG over the observed variables",
        flush=True,
    )
    rows: list[dict] = []

    overrides = QUICK_OPTIONS if args.quick else {}
    if {"sachs", "identical"} & set(args.parts):  # the parts that run IDENTICAL_EXTRA
        for method, options in overrides.items():
            defaults = {option.name: option.default for option in get_method(method).options}
            told = ", ".join(
                f"{k.replace('_', '-')}={v} (default {defaults[k]})" for k, v in options.items()
            )
            print(f"--quick: {method} runs with {told}", flush=True)

    def collect(part: str, label: str, setting: Setting, methods=OURS, **extra) -> pd.DataFrame:
        got = []
        for seed in seeds:
            case = synthetic_case(setting, seed)
            labels = {"part": part, "network": label, "seed": seed, **extra}
            got += run_case(case, methods, labels, overrides)
        rows.extend(got)
        return pd.DataFrame(got)

    if "default" in args.parts:
        frame = collect("default", f"er{base.nodes}", base, nodes=base.nodes, K=base.clients)
        print_block(frame, f"== default setting ({len(seeds)} seeds)")
        print_fdr(frame, "nodes", PAPER_TABLE2)
    if "nodes" in args.parts:
        frames = [
            collect("nodes", f"er{n}", replace(base, nodes=n), nodes=n, K=base.clients)
            for n in nodes
        ]
        frame = pd.concat(frames)
        sweep_table(frame, "nodes", "adj_f1")
        sweep_table(frame, "nodes", "arrow_f1")
        print_fdr(frame, "nodes", PAPER_TABLE2)
    if "clients" in args.parts:
        frames = [
            collect("clients", f"er{base.nodes}", replace(base, clients=k), nodes=base.nodes, K=k)
            for k in clients
        ]
        frame = pd.concat(frames)
        sweep_table(frame, "K", "adj_f1")
        sweep_table(frame, "K", "arrow_f1")
        if args.plot:
            from fedcausal_flwr.plots import plot_metric_vs_clients

            frame = frame.assign(status="ok")
            low, high = base.n_range
            title = (
                f"FedCDnv clients sweep, scored against the true PAG: ER d = {base.nodes}, "
                f"degree {base.degree:g}, {base.latent:.0%} latent; each client sees "
                f"{base.fraction:.0%} of the variables ({base.split} split) and "
                f"{low:,}-{high:,} rows; {len(seeds)} seeds"
            )
            for metric in ("adj_f1", "arrow_f1"):
                path = plot_metric_vs_clients(
                    frame, metric, out / "plots" / f"{metric}_vs_K.png", title=title
                )
                print(f"plot: {path}")
    if "networks" in args.parts:
        for name in networks:
            got = []
            for seed in seeds:
                case = network_case(name, base, seed)
                got += run_case(case, OURS, {"part": "networks", "network": name, "seed": seed})
            rows.extend(got)
            print_block(pd.DataFrame(got), f"== {name} ({len(seeds)} seeds)")
    if "identical" in args.parts:
        setting = replace(base, identical=True)
        frame = collect("identical", "er30", setting, (*OURS, *IDENTICAL_EXTRA), nodes=30)
        print_block(frame, "== default setting, identical variable sets")
    if "sachs" in args.parts:
        data, dag = load_sachs(args.data)
        for identical, paper in ((False, PAPER_SACHS), (True, PAPER_SACHS_IDENTICAL)):
            methods = (*OURS, *IDENTICAL_EXTRA) if identical else OURS
            got = []
            for seed in seeds:
                case = sachs_case(data, dag, seed, identical)
                labels = {"part": "sachs-identical" if identical else "sachs", "seed": seed}
                got += run_case(case, methods, {**labels, "network": "sachs"}, overrides)
            rows.extend(got)
            what = "identical variable sets (Table 6)" if identical else "9 of 11 each (Table 1)"
            title = (
                f"== Sachs, 6 IID clients, {what}; the true PAG has no arrowhead, so the "
                "paper's F1-orie compares with F1-orie MAG (= the DAG)"
            )
            print_block(pd.DataFrame(got), title, paper)
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out / "results.csv", index=False)
    print(f"\nresults: {out / 'results.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
