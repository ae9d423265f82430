"""What differential privacy costs FedPC and fedCI: F1 and SHD against epsilon (``dp=central``
and ``dp=distributed``).

    python experiments/dp.py [--networks alarm sachs] [--rows 10000 100000] [--clients 10]
        [--epsilons 0.5 1 2 4 8 16] [--distributed-epsilons 8] [--seeds 0 1 2 3 4]
        [--batches N] [--plot dp.png] [--glm-rows 10000 100000] [--glm-epsilons 4 16 64 256]
        [--glm-distributed-epsilons 64] [--glm-seeds ...] [--parts tables glm] [--quick]

Per network, row count and seed: the network's sample split IID over ``--clients`` sites; the
exact run (FedPC, chi2, alpha 0.05) uncapped, as a user would run it without privacy (and, with
``--batches N``, capped at ``max_depth = N - 1``, the depth a private run then stops at); and, per
epsilon, the private run (``dp=central``, ``dp_delta=1e-6``; by default each skeleton depth spends
half of the budget left and the search is not capped, with ``--batches N`` the budget is split
evenly over N depths; noise seeded by the seed so the table can be re-run), and, per
``--distributed-epsilons`` value, the run with distributed noise (``dp=distributed`` through
SecAgg+: each site adds its share from its own randomness, so these rows differ run to run by their
noise, not by their setting). Printed per setting: mean (sd) over seeds of the adjacency and
arrowhead F1 and the SHD against the true DAG's CPDAG (the common scoring view of FedPC's CPDAGs);
the adjacency F1 as a share of the uncapped exact run's (what a user gives up), and against the
graph of the exact run capped as the private run is (uncapped by default: what the noise alone
costs); the epsilon the run states (its releases composed by their privacy loss distributions,
dp_accounting: :mod:`fedcausal_flwr.privacy.pld`) and, for reference, the loose zCDP statement of
the same releases; and whether epsilon = inf gave that exact run's graph.

fedCI (``--glm-rows``; none: skipped): mixed data (a random DAG over 8 variables, 2 continuous,
2 binary, 2 ordinal and 2 categorical with 3 levels, no site effect) split over ``--clients``
sites; per seed the exact fedci-pc run uncapped and capped at the private runs' depth (fedCI splits
its budget evenly over 2 depths by default), and per ``--glm-epsilons`` value fedci-pc with
``dp=central`` (default ``dp_clip`` and ``dp_rounds``), per ``--glm-distributed-epsilons`` value
with ``dp=distributed``; printed: adjacency F1 against the true DAG's skeleton, as a share of the
uncapped exact run's, against the capped exact run, and the epsilon stated (zCDP: fedCI's lattice
releases have no PLD here).

The plot (``--plot``): adjacency F1 against epsilon, one panel per method, one line per setting
(distributed noise: crosses), the uncapped exact runs dashed, the capped ones dotted.
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import fedcausal_flwr
from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.experiments.common import mean_sd
from fedcausal_flwr.metrics import adjacency_metrics
from fedcausal_flwr.privacy.pld import pld_epsilon

DELTA = 1e-6
SCORING_VIEW = "CPDAG of the true DAG (adjacency F1, arrowhead F1, standard SHD)"


def run_setting(
    network: str, rows: int, clients: int, epsilons, seeds, batches: int | None, distributed=()
) -> dict:
    """Every seed of one (network, rows): the exact run and the private runs by epsilon."""
    net = load_network(network)
    out: dict = {"exact": [], "uncapped": [], "private": {e: [] for e in epsilons},
                 "inf_equal": [], "distributed": {e: [] for e in distributed}}  # fmt: skip
    for seed in seeds:
        sites = split_iid(net.sample(rows, seed=seed), clients, seed=seed).clients
        options = {"test": "chi2", "alpha": 0.05}
        uncapped = fedcausal_flwr.run("fedpc", data=sites, truth=net.dag, **options)
        out["uncapped"].append(uncapped.metrics)
        exact = uncapped
        if batches is not None:
            exact = fedcausal_flwr.run("fedpc", data=sites, truth=net.dag,
                                       max_depth=batches - 1, **options)  # fmt: skip
            out["exact"].append(exact.metrics)
        private = dict(options, dp="central", dp_delta=DELTA, dp_batches=batches)
        free = fedcausal_flwr.run("fedpc", data=sites, dp_epsilon="inf", **private)
        out["inf_equal"].append(free.graph == exact.graph)
        shared = dict(options, dp="distributed", dp_delta=DELTA, dp_batches=batches)
        runs = [("private", e, dict(private, dp_noise_seed=seed)) for e in epsilons]
        runs += [("distributed", e, dict(shared, secure=True)) for e in distributed]
        for kind, epsilon, keywords in runs:
            result = fedcausal_flwr.run("fedpc", data=sites, truth=net.dag, dp_epsilon=epsilon,
                                        **keywords)  # fmt: skip
            against_exact = adjacency_metrics(result.graph, exact.graph)["f1"]
            privacy = result.extra["privacy"]
            assert privacy["epsilon"] == pld_epsilon(privacy["releases"], DELTA)
            out[kind][epsilon].append({**result.metrics, "vs_exact": against_exact,
                                       "spent": privacy["epsilon"],
                                       "zcdp": privacy["zcdp_epsilon"]})  # fmt: skip
    return out


GLM_TYPES = {"X1": "continuous", "X2": "binary", "X3": "ordinal", "X4": "categorical",
             "X5": "continuous", "X6": "binary", "X7": "ordinal", "X8": "categorical"}  # fmt: skip


def run_glm(rows: int, clients: int, epsilons, distributed, seeds, batches: int) -> tuple:
    """fedci-pc on mixed data: the exact runs (uncapped, capped) and the private runs by
    epsilon, one line each; returns the plot's curve (epsilon, mean adjacency F1), the
    distributed points, and the exact runs' mean F1 (uncapped, capped)."""
    from fedcausal_flwr.data.partition import split_site_effects
    from fedcausal_flwr.data.schema import Schema
    from fedcausal_flwr.data.synthetic import random_dag
    from fedcausal_flwr.federation.runtime.runners import run_method

    got: dict = {"uncapped": [], "capped": [], **{(k, e): [] for k in ("central", "distributed")
                                                for e in (epsilons if k == "central"
                                                          else distributed)}}  # fmt: skip
    for seed in seeds:
        dag = random_dag(len(GLM_TYPES), expected_degree=2.0, seed=seed)
        part = split_site_effects(dag, rows, clients, seed=seed, types=GLM_TYPES, affected=(),
                                  site_sizes="equal", n_levels=3)  # fmt: skip
        options = {"schema": Schema.infer(part.clients).dumps(), "alpha": 0.05}
        uncapped = run_method("fedci-pc", part.clients, options)
        capped = run_method("fedci-pc", part.clients, {**options, "max_depth": batches - 1})
        got["uncapped"].append({"adj_f1": adjacency_metrics(uncapped.graph, dag)["f1"]})
        got["capped"].append({"adj_f1": adjacency_metrics(capped.graph, dag)["f1"]})
        runs = [("central", e, {"dp": "central", "dp_noise_seed": seed}) for e in epsilons]
        runs += [("distributed", e, {"dp": "distributed"}) for e in distributed]
        for kind, epsilon, mode in runs:
            result = run_method("fedci-pc", part.clients, {**options, **mode,
                                "dp_epsilon": epsilon, "dp_batches": batches, "dp_delta": DELTA},
                                secure=kind == "distributed")  # fmt: skip
            got[(kind, epsilon)].append({
                "adj_f1": adjacency_metrics(result.graph, dag)["f1"],
                "vs_exact": adjacency_metrics(result.graph, capped.graph)["f1"],
                "spent": result.extra["privacy"]["epsilon"],
            })  # fmt: skip
    top = statistics.fmean(m["adj_f1"] for m in got["uncapped"])
    for label in ("uncapped", "capped"):
        f1 = [m["adj_f1"] for m in got[label]]
        print(f"fedci-pc {rows} exact, {label} | {mean_sd(f1)} | "
              f"{statistics.fmean(f1) / top:.3f} | - | -")  # fmt: skip
    means = {}
    private = [(key, runs) for key, runs in got.items() if isinstance(key, tuple)]
    for (kind, epsilon), runs in private:
        mean = statistics.fmean(m["adj_f1"] for m in runs)
        means[(kind, epsilon)] = mean
        label = f"{epsilon:g}" + (" distributed" if kind == "distributed" else "")
        print(f"fedci-pc {rows} {label} | {mean_sd([m['adj_f1'] for m in runs])} | "
              f"{mean / top:.3f} | {mean_sd([m['vs_exact'] for m in runs])} | "
              f"{max(m['spent'] for m in runs):.3f}")  # fmt: skip
    curve = [means[("central", e)] for e in epsilons]
    points = [(e, means[("distributed", e)]) for e in distributed]
    capped_mean = statistics.fmean(m["adj_f1"] for m in got["capped"])
    return curve, top, capped_mean, points


def print_runs(label: str, runs: list[dict], uncapped: float) -> float:
    """One table row of private runs (mean (sd) over seeds; their mean adjacency F1 over the
    uncapped exact runs' mean); returns their mean adjacency F1."""
    columns = [mean_sd([m[key] for m in runs]) for key in ("adj_f1", "arrow_f1", "shd")]
    mean = statistics.fmean(m["adj_f1"] for m in runs)
    spent = [f"{max(m[key] for m in runs):.3f}" for key in ("spent", "zcdp")]
    print(" | ".join([label, *columns, f"{mean / uncapped:.3f}",
                      mean_sd([m["vs_exact"] for m in runs]), *spent]))  # fmt: skip
    return mean


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", nargs="+", default=["alarm", "sachs"])
    parser.add_argument("--rows", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.5, 1, 2, 4, 8, 16])
    parser.add_argument("--distributed-epsilons", nargs="*", type=float, default=[8])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--batches", type=int, default=None,
                        help="split the budget evenly over this many depths (the search stops at "
                        "depth N - 1; fedCI: default 2); default: each depth spends half of what "
                        "is left")  # fmt: skip
    parser.add_argument("--plot", help="write the F1-against-epsilon plot here (PNG)")
    parser.add_argument("--glm-rows", nargs="*", type=int, default=[10_000, 100_000])
    parser.add_argument("--glm-epsilons", nargs="+", type=float, default=[4, 16, 64, 256])
    parser.add_argument("--glm-distributed-epsilons", nargs="*", type=float, default=[64])
    parser.add_argument("--glm-seeds", nargs="+", type=int, default=None,
                        help="fedCI's seeds (default: --seeds)")  # fmt: skip
    parser.add_argument("--parts", nargs="+", choices=("tables", "glm"), default=["tables", "glm"],
                        help="FedPC's tables, fedCI's GLM blocks, or both")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="asia, 5,000 rows, 2 seeds")
    args = parser.parse_args()
    if args.quick:
        args.networks, args.rows, args.seeds, args.epsilons = ["asia"], [5000], [0, 1], [1, 8]
        args.glm_rows, args.glm_epsilons, args.glm_distributed_epsilons = [3000], [16], [16]
    split = ("each depth half of the budget left, no depth cap" if args.batches is None else
             f"budget over {args.batches} skeleton depths; capped exact runs stop at depth "
             f"{args.batches - 1}")  # fmt: skip
    print(f"scoring view: {SCORING_VIEW}; delta = {DELTA:g}; {args.clients} sites; {split}")
    header = (
        "network rows epsilon | adj F1 | arrow F1 | SHD | adj F1 / uncapped exact's | "
        "adj F1 vs exact (capped alike) | stated eps (PLD) | zCDP eps (loose, for reference)"
    )
    print(header)
    curves = {}
    for network in args.networks if "tables" in args.parts else []:
        for rows in args.rows:
            got = run_setting(network, rows, args.clients, args.epsilons, args.seeds, args.batches,
                              args.distributed_epsilons)  # fmt: skip
            exact, uncapped = got["exact"], got["uncapped"]
            top = statistics.fmean(m["adj_f1"] for m in uncapped)
            references = [("exact, uncapped", uncapped)] + ([("exact, capped", exact)] if exact
                                                            else [])  # fmt: skip
            for label, runs in references:
                print(
                    f"{network} {rows} {label} | {mean_sd([m['adj_f1'] for m in runs])} | "
                    f"{mean_sd([m['arrow_f1'] for m in runs])} | "
                    f"{mean_sd([m['shd'] for m in runs])} | "
                    f"{statistics.fmean(m['adj_f1'] for m in runs) / top:.3f} | - | - | -"
                )
            print(f"(epsilon = inf gave the exact graph: {sum(got['inf_equal'])}/"
                  f"{len(got['inf_equal'])})")  # fmt: skip
            curve = [print_runs(f"{network} {rows} {epsilon:g}", got["private"][epsilon], top)
                     for epsilon in args.epsilons]  # fmt: skip
            points = [
                (epsilon, print_runs(f"{network} {rows} {epsilon:g} distributed",
                                     got["distributed"][epsilon], top))
                for epsilon in args.distributed_epsilons
            ]  # fmt: skip
            capped = statistics.fmean(m["adj_f1"] for m in exact) if exact else None
            curves[(network, rows)] = (curve, top, capped, points)
    glm_curves = {}
    if args.glm_rows and "glm" in args.parts:
        print("fedci-pc on mixed data (8 variables; adjacency F1 against the true DAG's skeleton, "
              "as a share of the uncapped exact run's and against the exact run capped alike; "
              "epsilon stated in zCDP)")  # fmt: skip
        print("method rows epsilon | adj F1 | adj F1 / uncapped exact's | adj F1 vs capped exact "
              "| stated eps (zCDP)")  # fmt: skip
        for rows in args.glm_rows:
            glm_curves[("mixed, 8 variables", rows)] = run_glm(
                rows, args.clients, args.glm_epsilons, args.glm_distributed_epsilons,
                args.glm_seeds or args.seeds, args.batches or 2,
            )  # fmt: skip
    if args.plot and (curves or glm_curves):
        panels = [("FedPC", "the true CPDAG", args.epsilons, curves),
                  ("fedci-pc", "the true skeleton", args.glm_epsilons, glm_curves)]  # fmt: skip
        draw([panel for panel in panels if panel[3]], args.plot)


def draw(panels: list[tuple], path: str) -> None:
    """One panel per method: (method, what its F1 is against, epsilons, curves)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 4.6), squeeze=False)
    for ax, (method, against, epsilons, curves) in zip(axes[0], panels, strict=True):
        for (data, rows), (curve, uncapped, capped, points) in curves.items():
            line = ax.plot(epsilons, curve, marker="o", label=f"{data}, {rows:,} rows")[0]
            ax.axhline(uncapped, color=line.get_color(), linestyle="--", linewidth=0.8)
            if capped is not None:
                ax.axhline(capped, color=line.get_color(), linestyle=":", linewidth=0.8)
            if points:
                ax.plot(*zip(*points, strict=True), linestyle="none", marker="x", markersize=9,
                        color=line.get_color())  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_xlabel("epsilon (delta = 1e-6, one row at one site)")
        ax.set_ylabel(f"adjacency F1 against {against}")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{method}: central DP (o), distributed (x); exact runs: dashed uncapped, "
                     f"dotted capped alike\nview: adjacency F1 against {against}",
                     fontsize=9)  # fmt: skip
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
