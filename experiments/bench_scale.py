"""Exact FedPC (chi2) at scale: hundreds of variables, up to 1000 clients, in-process and on Ray.

Rows (``--rows`` picks some; default all):

* ``andes-10``, ``andes-100``, ``andes-1000``: andes (223 nodes) x 100k rows over 10, 100, 1000
  IID clients, in-process; ``andes-100-ray``: 100 clients on the Ray backend;
* ``pigs``, ``link``, ``munin``: 441, 724, 1041 nodes x 20k rows over 10 clients in-process, each
  also beside causal-learn's pooled PC (``stable=True``, chi2) on the same rows: seconds, the ratio
  federated / causal-learn, and whether its graph is ours.

Every row is then checked against our pooled PC-stable on the same rows (seconds; same graph).

Each row runs in its own process (so its memory is its own) with a time limit (``--limit``
seconds per phase: the federated run, our pooled PC, causal-learn's); a row past it is reported as
such, with the rounds or phases it finished. Printed per row: wall seconds, rounds, bytes up / down,
peak resident memory of the row's process tree during the federated run (Ray's workers included),
and CI tests; and what secure mode would send up instead (every table dense, as SecAgg+ needs).

``--edge-tests until-removed`` runs FedPC (and the pooled check) with that option: each depth
asked edge by edge until the edge is removed (the same CPDAG from fewer tests, in more rounds);
``--no-causallearn`` leaves out causal-learn's run (munin's takes many hours).

``--reference DIR`` first runs each row with the code checked out in ``DIR`` (an earlier commit:
``git worktree add ../before 52c26d3``), then with this code, neither profiled, and prints level
1's tests per second of each, measured alike (level 1's tests over the seconds from level 0's last
round to level 1's last round within the limit), and their ratio.

    python experiments/bench_scale.py [--rows andes-100 pigs] [--limit 3600]
    python experiments/bench_scale.py --rows munin --edge-tests until-removed --no-causallearn
    python experiments/bench_scale.py --rows munin --limit 480 --reference ../before
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROWS: dict[str, tuple[str, int, int, str]] = {
    # name: (network, rows, clients, backend)
    "andes-10": ("andes", 100_000, 10, "inprocess"),
    "andes-100": ("andes", 100_000, 100, "inprocess"),
    "andes-1000": ("andes", 100_000, 1000, "inprocess"),
    "andes-100-ray": ("andes", 100_000, 100, "ray"),
    "pigs": ("pigs", 20_000, 10, "inprocess"),
    "link": ("link", 20_000, 10, "inprocess"),
    "munin": ("munin", 20_000, 10, "inprocess"),
}
#: Rows also timed beside causal-learn's pooled PC (every row is checked against our pooled PC).
CAUSALLEARN_REFERENCE = {"pigs", "link", "munin"}


def emit(phase: str, **figures: object) -> None:
    """One JSON line on stdout for the parent (a row's child process)."""
    print(json.dumps({"phase": phase, **figures}), flush=True)


def level1_limit(adjacency, codes, cards) -> dict:
    """The first level-1 tests (at least 20,000, as PC lists them: a variable set's tests
    together) asked as their joint tables, counted over one client's rows by the package and by
    one np.bincount over the same cells built in advance; and the tests per table."""
    import numpy as np

    from fedcausal_flwr.discovery.skeleton import depth_rows
    from fedcausal_flwr.experiments.profiling import counting_limit
    from fedcausal_flwr.stats.set_tables import SetTables

    blocks, tests = [], 0
    for block in depth_rows(adjacency, 1, None, 2**16):
        blocks.append(block)
        tests += len(block)
        if tests >= 20_000:
            break
    sets = SetTables.of(np.concatenate(blocks))
    kernel, binned = counting_limit(codes, cards, sets.sets)
    return {"kernel_visits_s": kernel, "bincount_visits_s": binned,
            "tests_per_set": tests / len(sets.sets)}  # fmt: skip


def emit_profile(profile: cProfile.Profile) -> None:
    """The profile so far, by stage (own seconds), as one line for the parent."""
    from fedcausal_flwr.experiments.profiling import stage_totals

    profile.disable()
    emit("profile", stages=stage_totals(pstats.Stats(profile)))


def run_row(
    name: str,
    profile_after: float | None = None,
    edge_tests: str = "all",
    causallearn: bool = True,
) -> None:
    """One row, in this process, phase by phase (memory is measured by the parent)."""
    import numpy as np

    from fedcausal_flwr.data.networks import load_network
    from fedcausal_flwr.data.partition import split_iid
    from fedcausal_flwr.discovery.driver import drive
    from fedcausal_flwr.discovery.pc import pc
    from fedcausal_flwr.discovery.skeleton import skeleton_steps
    from fedcausal_flwr.federation.runtime.runners import run_method
    from fedcausal_flwr.stats.oracles import DiscreteOracle

    network, rows, clients, backend = ROWS[name]
    net = load_network(network)
    pooled = net.sample(rows, seed=0)
    parts = split_iid(pooled, clients, seed=0).clients
    # level 1's distinct tests, from the pooled level-0 skeleton: per adjacent pair x < y, the
    # sets {s} of adj(x) - y and adj(y) - x, each once
    codes = net.sample_codes(rows, seed=0).astype(np.int64)
    oracle = DiscreteOracle(codes, net.cards, net.variables, test="chi2")
    level0 = skeleton_steps(len(net.variables), 0.05, max_depth=0)  # no orientation
    adjacency = drive(level0, oracle).adjacency
    degree = adjacency.sum(axis=1)
    common = adjacency.astype(np.int64) @ adjacency.astype(np.int64)
    upper = np.triu(adjacency, 1)
    first, second = np.nonzero(upper)
    distinct = (degree[first] - 1) + (degree[second] - 1) - common[first, second]
    emit("plan", level1_tests=int(distinct.sum()))
    if name in CAUSALLEARN_REFERENCE:  # the big rows: level 1's counting limit on this machine
        emit(
            "counting_limit",
            **level1_limit(adjacency, codes[: rows // clients], np.asarray(net.cards)),
        )
    del codes, oracle
    profile = None
    if profile_after:  # the run's profile by stage, emitted before the parent's time limit
        profile = cProfile.Profile()
        signal.signal(signal.SIGALRM, lambda *_: emit_profile(profile))
        signal.alarm(int(profile_after))
        profile.enable()
    started = time.perf_counter()
    result = run_method(
        "fedpc", parts, {"test": "chi2", "edge_tests": edge_tests}, backend=backend,
        progress=lambda line: emit("round", line=line),
    )  # fmt: skip
    if profile is not None:
        signal.alarm(0)
        emit_profile(profile)
    emit(
        "federated", nodes=len(net.variables), rows=rows, clients=clients, backend=backend,
        wall_s=time.perf_counter() - started, rounds=result.rounds, bytes_up=result.bytes_up,
        bytes_down=result.bytes_down, tests=int(result.extra.get("tests", 0)),
        edges=int(result.graph.n_edges()),
        # secure mode sums every table densely through SecAgg+: 8 bytes a cell from each client
        dense_up=8 * clients * sum(b.get("dense_cells", 0) for b in result.extra["batches"]),
    )  # fmt: skip
    del parts, pooled
    codes = net.sample_codes(rows, seed=0).astype(np.int64)
    started = time.perf_counter()
    pooled_oracle = DiscreteOracle(codes, net.cards, net.variables, test="chi2")
    ours = pc(pooled_oracle, alpha=0.05, edge_tests=edge_tests)
    emit(
        "pooled", pooled_s=time.perf_counter() - started,
        pooled_same=bool(ours.graph == result.graph),
    )  # fmt: skip
    if name not in CAUSALLEARN_REFERENCE or not causallearn:
        return
    from causallearn.search.ConstraintBased.PC import pc as cl_pc

    from fedcausal_flwr.graphs.graph import Graph

    started = time.perf_counter()
    found = cl_pc(
        codes, 0.05, "chisq", stable=True, show_progress=False, node_names=list(net.variables)
    )
    seconds = time.perf_counter() - started
    theirs = Graph.from_causallearn(found.G.graph, list(net.variables), "CPDAG")
    emit(
        "causallearn", causallearn_s=seconds, causallearn_edges=int(theirs.n_edges()),
        causallearn_same=bool(theirs == result.graph),
    )  # fmt: skip


def measure(
    name: str, limit: float, edge_tests: str = "all", causallearn: bool = True,
    reference: Path | None = None, profile: bool = True,
) -> dict:  # fmt: skip
    """Run ``name`` in a child process, sampling its process tree's memory; its figures.

    ``limit`` holds per phase (federated run, pooled PC, causal-learn): a phase past it ends the
    row, which keeps what the earlier phases measured and says which phase did not finish.
    ``reference``: the row runs the code importable from that directory (its own child, which
    takes ``--one`` alone, unprofiled); ``profile=False`` times this code unprofiled too.
    """
    from fedcausal_flwr.experiments.process_memory import tree_rss

    command = [sys.executable, "-m", "fedcausal_flwr.experiments.bench_scale", "--one", name]
    env, folder = dict(os.environ), None
    if reference is not None:  # first on the path, and the working folder (``-m`` puts it first)
        env["PYTHONPATH"], folder = str(reference), str(reference)
    else:
        if profile:
            command += ["--profile-after", str(max(1, limit - 15))]
        command += ["--edge-tests", edge_tests, *(() if causallearn else ("--no-causallearn",))]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env, cwd=folder)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(x) for x in child.stdout], daemon=True)
    reader.start()
    figures: dict = {"row": name, "rounds_done": 0, "edge_tests": edge_tests}
    phase_started, peak = time.monotonic(), 0
    while True:
        while not lines.empty():
            line = lines.get()
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            phase = record.pop("phase")
            if phase == "round":
                figures["rounds_done"] += 1
                tally_depth(figures, record.get("line", ""))
                tally_level1(figures, record.get("line", ""), time.monotonic())
                found = re.search(r", ([\d,]+) CI tests", record.get("line", ""))
                if found and "level1_tests" in figures:
                    figures["tests_done"] = figures.get("tests_done", 0) + int(
                        found.group(1).replace(",", "")
                    )
                    figures["tests_s"] = time.monotonic() - figures["tests_since"]
                continue
            if phase in ("counting_limit", "profile"):  # measured beside the run, not a phase of it
                figures.update(record)
                continue
            if phase == "plan":  # the level-0 skeleton that sizes level 1: not the run's memory
                figures.update(record)
                figures["tests_since"] = time.monotonic()
                figures["plan_peak"], peak = peak, 0
                phase_started = time.monotonic()
                continue
            figures.update(record)
            figures[f"{phase}_peak"] = peak  # the tree's peak up to the end of this phase
            phase_started = time.monotonic()
        if child.poll() is not None and not reader.is_alive() and lines.empty():
            break
        peak = max(peak, tree_rss(child.pid))
        if time.monotonic() - phase_started > limit and child.poll() is None:
            child.kill()
            child.wait()
            figures["limit"] = limit
            break
        time.sleep(0.5)
    figures["peak"] = max(peak, figures.get("plan_peak", 0))
    figures["run_peak"] = peak  # from the federated run on
    if child.returncode not in (0, None) and "limit" not in figures:
        figures["failed"] = child.returncode
    return figures


def tally_level1(figures: dict, line: str, now: float) -> None:
    """Level 1's tests and seconds as the parent sees its rounds end: from level 0's last round
    to level 1's last (an earlier commit's lines name no depth: its batch 0 is level 0)."""
    tests = re.search(r", ([\d,]+) CI tests", line)
    if tests is None:
        return
    depth = re.search(r", depth (\d+)", line)
    level = int(depth.group(1)) if depth else (0 if re.search(r"\bbatch 0\b", line) else 1)
    if level == 0:
        figures["level1_from"] = now
    elif level == 1 and "level1_from" in figures:
        figures["level1_done"] = figures.get("level1_done", 0) + int(
            tests.group(1).replace(",", "")
        )
        figures["level1_s"] = now - figures["level1_from"]


def reference_import_path(checkout: Path, into: Path) -> Path:
    """A directory from which a checkout's package imports as installed (its ``strategies``,
    ``clients`` and ``experiments`` folders sit beside the package in the repository)."""
    if not (checkout / "fedcausal_flwr" / "__init__.py").is_file():
        raise SystemExit(f"--reference {checkout}: not a checkout of fedcausal-flwr")
    package = into / "fedcausal_flwr"
    package.mkdir()
    for entry in (checkout / "fedcausal_flwr").iterdir():
        (package / entry.name).symlink_to(entry.resolve())
    for folder in ("strategies", "clients", "experiments"):
        if not (package / folder).exists():
            (package / folder).symlink_to((checkout / folder).resolve())
    found = subprocess.run(
        [sys.executable, "-c", "import fedcausal_flwr; print(fedcausal_flwr.__file__)"],
        capture_output=True, text=True, check=False, cwd=into,
        env={**os.environ, "PYTHONPATH": str(into)},
    ).stdout.strip()  # fmt: skip
    if Path(found).parent != package:  # (an installed copy must not stand in for it)
        raise SystemExit(f"--reference {checkout}: the package imports from {found or 'nowhere'}")
    return into


def show_beside_reference(ours: dict, theirs: dict, checkout: Path) -> None:
    """Level 1's tests per second of this code and the reference's, and their ratio."""
    commit = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, check=False,
    ).stdout.strip() or "not a git checkout"  # fmt: skip
    rates = []
    for label, figures in (("reference", theirs), ("this code", ours)):
        done, seconds = figures.get("level1_done", 0), figures.get("level1_s", 0.0)
        rate = done / seconds if seconds else float("nan")
        rates.append(rate)
        print(f"{'':14} level 1, {label}: {done:,} tests in {seconds:.1f} s "
              f"({rate:,.0f} tests/s)", flush=True)  # fmt: skip
    print(f"{'':14} level 1's tests/s, this code / the reference ({checkout}, {commit}): "
          f"{rates[1] / rates[0]:.2f}", flush=True)  # fmt: skip


def tally_depth(figures: dict, line: str) -> None:
    """Rounds, CI tests and the rounds' own seconds per PC depth, from a round's progress line."""
    depth = re.search(r", depth (\d+)", line)
    seconds = re.search(r"\) ([\d.]+) s$", line)
    if depth is None or seconds is None:
        return
    tests = re.search(r", ([\d,]+) CI tests", line)
    tally = figures.setdefault("depths", {}).setdefault(int(depth.group(1)), [0, 0, 0.0])
    tally[0] += 1
    tally[1] += int(tests.group(1).replace(",", "")) if tests else 0
    tally[2] += float(seconds.group(1))


def show_depths(figures: dict) -> None:
    """Each depth's rounds, tests and seconds; in a finished run, level 1's distinct PC-stable
    tests decided per second."""
    for depth, (rounds, tests, seconds) in sorted(figures.get("depths", {}).items()):
        extra = ""
        if depth == 1 and figures.get("level1_tests") and seconds and "wall_s" in figures:
            extra = (f"; level 1's {figures['level1_tests']:,} distinct PC-stable tests decided "
                     f"at {figures['level1_tests'] / seconds:,.0f} a second")  # fmt: skip
        print(f"{'':14} depth {depth}: {rounds:,} rounds, {tests:,} tests, {seconds:,.1f} s "
              f"({tests / max(seconds, 1e-9):,.0f} tests/s){extra}", flush=True)  # fmt: skip


def show(figures: dict) -> None:
    name = figures["row"]
    if "wall_s" not in figures:
        why = (f"not finished within {figures['limit']:.0f} s" if "limit" in figures
               else f"failed (exit code {figures.get('failed')})")  # fmt: skip
        print(f"{name:<14} {why} after {figures['rounds_done']} rounds "
              f"(peak {figures['run_peak'] / 1e9:.2f} GB from the federated run on; "
              f"{figures.get('plan_peak', 0) / 1e9:.2f} GB sizing level 1 before it)",
              flush=True)  # fmt: skip
        if figures.get("tests_done"):
            rate = figures["tests_done"] / figures["tests_s"]
            print(
                f"{'':14} {figures['tests_done']:,} tests answered in {figures['tests_s']:.0f} s "
                f"({rate:,.0f} tests/s); level 1 holds {figures['level1_tests']:,} distinct "
                f"tests: about {figures['level1_tests'] / rate / 3600:.1f} h at this rate",
                flush=True,
            )
        show_depths(figures)
        show_where_the_time_goes(figures)
        return
    print(f"{name:<14} {figures['nodes']:>5} {figures['clients']:>5} {figures['wall_s']:8.1f} "
          f"{figures['rounds']:>6} {figures['bytes_up'] / 1e9:9.3f} "
          f"{figures['bytes_down'] / 1e9:9.3f} {figures['federated_peak'] / 1e9:8.2f} "
          f"{figures['tests']:>9}", flush=True)  # fmt: skip
    print(
        f"{'':14} secure mode (dense tables through SecAgg+): {figures['dense_up'] / 1e9:.3f} "
        f"GB up, {figures['dense_up'] / figures['bytes_up']:.1f} x this run's",
        flush=True,
    )
    pooled = (f"pooled PC {figures['pooled_s']:.1f} s (same graph: {figures['pooled_same']})"
              if "pooled_s" in figures else "pooled PC did not finish")  # fmt: skip
    if name not in CAUSALLEARN_REFERENCE:
        print(f"{'':14} {pooled}; peak of the row {figures['peak'] / 1e9:.2f} GB", flush=True)
        show_depths(figures)
        return
    if "causallearn_s" in figures:
        ratio = figures["wall_s"] / figures["causallearn_s"]
        reference = (f"causal-learn {figures['causallearn_s']:.1f} s "
                     f"({figures['causallearn_edges']} edges, ours {figures['edges']}, "
                     f"same graph: {figures['causallearn_same']}); "
                     f"federated / causal-learn {ratio:.2f}")  # fmt: skip
    elif "limit" in figures:
        reference = (
            f"causal-learn not finished within {figures['limit']:.0f} s "
            f"(federated / causal-learn < {figures['wall_s'] / figures['limit']:.2f})"
        )
    elif "failed" in figures:
        reference = f"causal-learn failed (exit code {figures['failed']})"
    else:
        reference = "causal-learn not run (--no-causallearn)"
    print(f"{'':14} {pooled}; {reference}; peak of the row {figures['peak'] / 1e9:.2f} GB",
          flush=True)  # fmt: skip
    show_depths(figures)
    show_where_the_time_goes(figures)


def show_where_the_time_goes(figures: dict) -> None:
    """The counting limit beside the run's rate, and the run's profile by stage."""
    if "bincount_visits_s" in figures:
        rows = ROWS[figures["row"]][1]
        sets = figures["level1_tests"] / figures["tests_per_set"]
        at_limit = sets * rows / figures["bincount_visits_s"]
        kernel, binned = figures["kernel_visits_s"], figures["bincount_visits_s"]
        print(f"{'':14} counting limit: level 1's first tables ({figures['tests_per_set']:.2f} "
              f"tests a table) counted at {kernel / 1e6:,.0f} M table-row visits/s, one "
              f"np.bincount over their cells {binned / 1e6:,.0f} M/s (ratio "
              f"{kernel / binned:.2f}); level 1 at that limit: {at_limit / 3600:.2f} h",
              flush=True)  # fmt: skip
        if figures.get("tests_done") and figures.get("edge_tests", "all") == "all":
            rate = figures["tests_done"] / figures["tests_s"]
            print(f"{'':14} the run's level 1 at its rate / at the counting limit: "
                  f"{figures['level1_tests'] / rate / at_limit:.1f}", flush=True)  # fmt: skip
    if "stages" in figures:
        whole = sum(seconds for _, seconds in figures["stages"])
        print(f"{'':14} profile of the run by stage (own seconds, cProfile slows all):")
        for stage, seconds in figures["stages"]:
            print(f"{'':16} {stage:36s} {seconds:8.1f} s {seconds / whole:6.1%}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--limit", type=float, default=3600.0, help="seconds per row")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a row's child process
    parser.add_argument("--profile-after", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--edge-tests", default="all", choices=("all", "until-removed"))
    parser.add_argument("--no-causallearn", action="store_true")
    parser.add_argument("--reference", type=Path, default=None, metavar="DIR")
    args = parser.parse_args()
    if args.one is not None:
        run_row(args.one, args.profile_after, args.edge_tests, not args.no_causallearn)
        return
    if args.reference is not None and args.edge_tests != "all":
        parser.error("--reference compares the default engine: leave out --edge-tests")
    header = (f"{'row':<14} {'nodes':>5} {'K':>5} {'wall_s':>8} {'rounds':>6} {'GB up':>9} "
              f"{'GB down':>9} {'peak GB':>8} {'tests':>9}")  # fmt: skip
    print(f"exact FedPC (chi2, alpha 0.05, edge_tests {args.edge_tests}), IID clients; peak = "
          "resident memory of the row's process tree")  # fmt: skip
    print(header + "\n" + "-" * len(header))
    for name in args.rows:
        if args.reference is None:
            show(measure(name, args.limit, args.edge_tests, not args.no_causallearn))
            continue
        with tempfile.TemporaryDirectory() as folder:
            path = reference_import_path(args.reference, Path(folder))
            print(f"{name}: the reference ({args.reference}) first", flush=True)
            theirs = measure(name, args.limit, reference=path)
            show(theirs)
        print(f"{name}: this code", flush=True)
        ours = measure(name, args.limit, args.edge_tests, not args.no_causallearn, profile=False)
        show(ours)
        show_beside_reference(ours, theirs, args.reference)


if __name__ == "__main__":
    main()
