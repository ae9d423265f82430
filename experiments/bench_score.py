"""BDeu hill climbing on a skeleton: our numpy search against pgmpy's HillClimbSearch, same data.

    python experiments/bench_score.py [--quick] [--network alarm] [--extra 30] [--seed 0]

For each sample size and two skeletons (the true one, and the true one plus ``--extra`` random
pairs) it times, on the same Categorical data and global state names:

* pgmpy: ``pgmpy.causal_discovery.HillClimbSearch(scoring_method=BDeu(df,
  equivalent_sample_size=10, state_names=...), expert_knowledge=ExpertKnowledge(search_space=
  allowed ordered pairs), tabu_length=0, return_type="dag", show_progress=False)`` (its greedy
  search; pgmpy's tabu list only blocks undoing recent moves, its stop rule is still "first
  non-improving step", so tabu_length=0 loses nothing), one run with a fresh score cache;
* ours, greedy (``tabu_length=0, max_barren=0``: same stop rule as pgmpy), and ours in the
  reference's tabu mode (tabu 100, 15 barren iterations), median of 3 runs, each with a fresh
  ``BDeuScorer`` (its construction is timed too).

Scores are all computed by our scorer with the structure prior off (pgmpy's BDeu has none). The
greedy DAGs may differ: equivalent moves tie up to rounding and pgmpy breaks ties in Python
``set`` order (varies with PYTHONHASHSEED). pgmpy 1.1.2's BDeu is also off when the child has a
state that is never observed and the family has parents (it subtracts lnG(ess/(q r)) for cells
it never added); the "unobserved states" column says how often that applies.

Decision rule (FedECD issue): use pgmpy if it is within 2x of a vectorised implementation,
otherwise ours. The last block estimates FedECD's Phase 2 cost (30 clients x 15 bootstraps at
n = 333, reference tabu mode with the prior) for both.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np

from fedcausal_flwr.data import codes_to_frame, load_network, sample_codes
from fedcausal_flwr.discovery.score import BDeuScorer, hill_climb
from fedcausal_flwr.graphs.truth import directed_matrix


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def median_time(fn, repeats: int):
    runs = [timed(fn) for _ in range(repeats)]
    return statistics.median(t for t, _ in runs), runs[-1][1]


def dense_skeleton(true_adj: np.ndarray, extra: int, seed: int) -> np.ndarray:
    """The true skeleton plus ``extra`` random non-adjacent pairs."""
    rng = np.random.default_rng(seed)
    rows, cols = np.nonzero(np.triu(~true_adj, 1))
    pick = rng.choice(rows.size, size=min(extra, rows.size), replace=False)
    out = true_adj.copy()
    out[rows[pick], cols[pick]] = True
    out[cols[pick], rows[pick]] = True
    return out


def pgmpy_hill_climb(df, names, states, allowed: np.ndarray) -> np.ndarray:
    from pgmpy.causal_discovery import ExpertKnowledge, HillClimbSearch
    from pgmpy.structure_score import BDeu

    score = BDeu(df, equivalent_sample_size=10, state_names=states)
    space = [(names[i], names[j]) for i, j in zip(*np.nonzero(allowed), strict=True)]
    search = HillClimbSearch(
        scoring_method=score,
        expert_knowledge=ExpertKnowledge(search_space=space),
        tabu_length=0,
        return_type="dag",
        show_progress=False,
    ).fit(df)
    index = {v: i for i, v in enumerate(names)}
    dag = np.zeros(allowed.shape, dtype=bool)
    for u, v in search.causal_graph_.edges():
        dag[index[u], index[v]] = True
    return dag


def ours(codes, cards, allowed, *, greedy: bool, prior: bool = False):
    scorer = BDeuScorer(codes, cards, 10.0, structure_prior=prior)
    if greedy:
        return hill_climb(scorer, allowed, tabu_length=0, max_barren=0)
    return hill_climb(scorer, allowed)


def compare(net, n: int, seed: int, skeletons: dict[str, np.ndarray], repeats: int) -> list[float]:
    codes = sample_codes(net, n, seed=seed)
    df = codes_to_frame(net, codes)
    states = {v: list(net.states[v]) for v in net.variables}
    unobserved = unobserved_states(codes, net.cards)
    judge = BDeuScorer(codes, net.cards, 10.0, structure_prior=False)
    true_dag = directed_matrix(net.dag)
    cards = net.cards
    ratios = []
    for label, allowed in skeletons.items():
        t_pg, dag_pg = timed(lambda a=allowed: pgmpy_hill_climb(df, net.variables, states, a))
        t_gr, res_gr = median_time(lambda a=allowed: ours(codes, cards, a, greedy=True), repeats)
        t_tb, res_tb = median_time(lambda a=allowed: ours(codes, cards, a, greedy=False), repeats)
        ratios.append(t_gr / t_pg)
        print(
            f"n={n:>6} {label:<14} pairs={int(allowed.sum()) // 2:>3} "
            f"unobs.states={unobserved:>2} | "
            f"pgmpy {t_pg:7.3f}s {judge.score_dag(dag_pg):12.2f} | "
            f"greedy {t_gr:6.3f}s {res_gr.score:12.2f} | "
            f"tabu {t_tb:6.3f}s {res_tb.score:12.2f} ({res_tb.iterations:>3} it) | "
            f"true {judge.score_dag(true_dag):12.2f} | "
            f"greedy/pgmpy {t_gr / t_pg:6.4f}  tabu/pgmpy {t_tb / t_pg:6.4f}"
        )
    return ratios


def unobserved_states(codes: np.ndarray, cards) -> int:
    """Variables with a state that never occurs in ``codes``."""
    return int(sum(np.unique(codes[:, j]).size < c for j, c in enumerate(cards)))


def phase2_cost(net, n_searches: int, pgmpy_searches: int, seed: int) -> tuple[float, float, int]:
    """Seconds per search for FedECD's Phase 2 setting (bootstraps of 333-row client blocks)."""
    rng = np.random.default_rng(seed)
    pooled = sample_codes(net, 30 * 333, seed=seed)
    allowed = net.dag.adjacency()
    boots = []
    for k in range(n_searches):
        block = pooled[(k // 15) * 333 : (k // 15 + 1) * 333]
        boots.append(block[rng.integers(0, 333, size=333)])
    start = time.perf_counter()
    for codes in boots:
        hill_climb(BDeuScorer(codes, net.cards, 10.0, structure_prior=True), allowed)
    ours_each = (time.perf_counter() - start) / len(boots)
    states = {v: list(net.states[v]) for v in net.variables}
    start = time.perf_counter()
    for codes in boots[:pgmpy_searches]:
        pgmpy_hill_climb(codes_to_frame(net, codes), net.variables, states, allowed)
    pgmpy_each = (time.perf_counter() - start) / pgmpy_searches
    with_unobserved = sum(unobserved_states(codes, net.cards) > 0 for codes in boots)
    return ours_each, pgmpy_each, with_unobserved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n in (333, 2000), fewer searches")
    parser.add_argument("--network", default="alarm")
    parser.add_argument("--extra", type=int, default=30, help="random extra pairs, dense case")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore", FutureWarning)

    net = load_network(args.network)
    true_adj = net.dag.adjacency()
    skeletons = {
        "true skeleton": true_adj,
        f"true+{args.extra} pairs": dense_skeleton(true_adj, args.extra, args.seed),
    }
    sizes = (333, 2000) if args.quick else (333, 2000, 10000)
    repeats = 1 if args.quick else 3
    print(f"{net}; BDeu ess 10, scores without the structure prior, times in seconds")
    ratios = []
    for n in sizes:
        ratios += compare(net, n, args.seed + n, skeletons, repeats)

    n_searches, pgmpy_searches = (30, 2) if args.quick else (450, 5)
    ours_each, pgmpy_each, with_unobserved = phase2_cost(net, n_searches, pgmpy_searches, args.seed)
    print(
        f"\nFedECD Phase 2 (tabu 100 / 15 barren, prior on, true skeleton, n=333 bootstraps): "
        f"ours {ours_each * 1e3:.1f} ms/search over {n_searches} searches -> 450 searches "
        f"{450 * ours_each:.1f} s; pgmpy greedy {pgmpy_each:.2f} s/search over {pgmpy_searches} "
        f"-> 450 searches ~{450 * pgmpy_each / 60:.1f} min; {with_unobserved}/{n_searches} "
        f"bootstraps miss a state of some variable (pgmpy's BDeu is off for those families)"
    )
    worst = max(ratios)
    print(
        f"\nDecision: ours/pgmpy time ratio (greedy, like-for-like) ranges "
        f"{min(ratios):.4f}..{worst:.4f}, i.e. pgmpy is {1 / worst:.0f}x or more slower. "
        f"Rule 'use pgmpy if within 2x of ours' -> "
        f"{'USE PGMPY' if worst >= 0.5 else 'USE OURS (pgmpy is not within 2x)'}"
    )


if __name__ == "__main__":
    main()
