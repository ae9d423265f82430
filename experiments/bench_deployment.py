"""Per-round latency of a real deployment on 127.0.0.1: the stock commands, Flower's own floor,
the warm executor beside Flower's SuperNode, and the tuned set-up.

    python experiments/bench_deployment.py [--runs 2] [--samples 3000] [--method fedpc] [--database]

Three sites (an IID split of ``--samples`` rows of asia, one CSV each), a SuperLink, one SuperNode
per site and ``flwr run`` (FedPC, exact chi2, alpha 0.05, by default), in one run of this script:

* stock: docs/deployment.md's commands, ``flower-supernode`` in its default ``subprocess`` isolation
  (Flower's own SuperExec starts a fresh ``flwr-clientapp`` process for every message; the
  SuperNode sleeps 3 s after an empty pull and waits for replies in 0.5 s steps);
* executor: Flower's own ``flower-supernode --isolation process`` (unchanged) plus a warm
  ``fedcausal-executor`` per site: nothing in Flower is changed;
* tuned: ``fedcausal-supernode --isolation process`` (the same SuperNode with those waits at
  0.2 s and 0.02 s) plus a warm ``fedcausal-executor`` per site, which its SuperNode wakes through
  a named pipe when a message arrives (``--wake-fifo``);
* floor: the stock commands running a ClientApp that does nothing (no numpy, pandas or this
  package; its ServerApp pulls replies as ours does), as many rounds: what a round costs in
  Flower alone on this machine, the least the stock commands can reach.

Each set-up runs the method ``--runs`` times on one deployment (the first run of each includes
installing the app bundle on every site). Printed per set-up: every round's seconds (from the
result's log: from sending a round's messages to having every reply), their mean and best, the
number of rounds, each run's seconds from ``flwr run`` to its result, whether the result equals
the in-process run on the same rows, and the CPU seconds per round that every process of the
deployment used (SuperLink, SuperNodes, executors, everything they started and ``flwr run``, from
``flwr run`` to its result: the cost a loaded machine stretches into waiting); then the means
against the targets (stock / floor <= 1.3x; tuned <= 1 s) and the ratio stock / tuned. The
SuperLink keeps its state in memory, as docs/deployment.md's command does; ``--database`` puts it
in an SQLite file instead (every pull is then a transaction on disk: slower rounds, more CPU). The
machine's load average is printed before and after: on a loaded machine every figure but the CPU
seconds grows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

import fedcausal_flwr
from fedcausal_flwr.data import load_network, split_iid
from fedcausal_flwr.federation.deployment.local_deployment import LocalDeployment
from fedcausal_flwr.processes import descendants

#: the targets: the stock commands within 1.3x Flower's floor measured in the same run, a tuned
#: round within 1 s
TARGET_STOCK_RATIO = 1.3
TARGET_TUNED_S = 1.0
REPO_ROOT = Path(__file__).resolve().parents[1]


def write_sites(workdir: Path, samples: int, seed: int) -> list[Path]:
    pooled = load_network("asia").sample(samples, seed=seed)
    paths = []
    for k, site in enumerate(split_iid(pooled, 3, seed=seed).clients):
        paths.append(workdir / f"site{k}.csv")
        site.to_csv(paths[-1], index=False)
    return paths


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds used so far by ``pids``, everything below them, and the children of this
    script it has waited for (the ``flwr run`` processes); Linux (/proc)."""
    ticks = 0
    for pid in {p for top in pids for p in (top, *descendants(top))}:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue  # ended meanwhile
        fields = stat[stat.rfind(")") + 2 :].split()
        ticks += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    own = os.times()
    return ticks / os.sysconf("SC_CLK_TCK") + own.children_user + own.children_system


#: Flower's floor: the stock commands with a ClientApp that does nothing (no pandas, no numpy, not
#: this package): what a round costs in Flower alone; its ServerApp pulls replies as ours does.
FLOOR_APP = """
import json
import os
import time

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

client_app = ClientApp()
server_app = ServerApp()


@client_app.query()
def reply(msg: Message, context: Context) -> Message:
    return Message(RecordDict({"reply": ConfigRecord({"ok": 1})}), reply_to=msg)


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    from fedcausal_flwr.federation.runtime.workflow import send_and_receive
    from fedcausal_flwr.federation.runtime.flower_internals import tune_grid_reply_pulls

    tune_grid_reply_pulls(grid)
    wanted, rounds = int(context.run_config["num-clients"]), int(context.run_config["rounds"])
    while len(nodes := sorted(grid.get_node_ids())) < wanted:
        time.sleep(0.05)
    seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        messages = [Message(RecordDict(), dst_node_id=n, message_type="query") for n in nodes]
        replies = send_and_receive(grid, messages, timeout=300, poll=0.05)
        assert len(replies) == len(nodes)
        seconds.append(time.perf_counter() - started)
    # result-path is relative to the coordinator's results folder (LocalDeployment.run reads it)
    folder = os.environ.get("FEDCAUSAL_RESULTS_DIR", ".")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, context.run_config["result-path"]), "w") as out:
        json.dump({"seconds": seconds}, out)
"""

FLOOR_PYPROJECT = """
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "floor-app"
version = "1.0.0"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "bench"

[tool.flwr.app.components]
serverapp = "floor_app:server_app"
clientapp = "floor_app:client_app"

[tool.flwr.app.config]
num-clients = 3
rounds = 4
result-path = ""
"""


def write_floor_app(folder: Path) -> Path:
    folder.mkdir()
    (folder / "floor_app.py").write_text(FLOOR_APP)
    (folder / "pyproject.toml").write_text(FLOOR_PYPROJECT)
    return folder


def measure_floor(workdir: Path, paths: list[Path], runs: int, rounds: int) -> dict:
    """Flower's stock commands (as the stock set-up) running the do-nothing app ``runs`` times."""
    app = write_floor_app(workdir / "floor-app")
    nodes = [{"partition-id": k, "data-path": str(p)} for k, p in enumerate(paths)]
    deployment = LocalDeployment(workdir / "floor", nodes, tls=False, auth=False)
    seconds: list[float] = []
    try:
        deployment.start()
        for _ in range(runs):
            out = deployment.run(
                app,
                {"num-clients": len(paths), "rounds": rounds},
                timeout=600,
                load=lambda path: json.loads(path.read_text()),
            )
            seconds += out["seconds"]
    finally:
        deployment.stop()
    return {"rounds": seconds}


def measure(
    setup: str,
    workdir: Path,
    paths: list[Path],
    app_dir: Path,
    method: str,
    runs: int,
    database: bool = False,
) -> dict:
    """Start a deployment of ``setup``, run ``method`` ``runs`` times, stop it; the figures.
    The sites let their own statistics leave them (FedPC's plain tables need it)."""
    nodes = [
        {"partition-id": k, "data-path": str(p), "allow-plain-statistics": True}
        for k, p in enumerate(paths)
    ]
    deployment = LocalDeployment(
        workdir / setup,
        nodes,
        tuned=setup == "tuned",
        warm_executor=setup in ("executor", "tuned"),
        tls=False,
        auth=False,
        database=workdir / f"{setup}-state.db" if database else None,
    )
    rounds: list[float] = []
    run_s: list[float] = []
    cpu_s: list[float] = []
    results = []
    try:
        deployment.start()
        started_pids = [proc.pid for proc in deployment.processes]
        for _ in range(runs):
            started, cpu = time.perf_counter(), cpu_seconds(started_pids)
            result = deployment.run(app_dir, {"method": method, "num-clients": 3}, timeout=600)
            run_s.append(time.perf_counter() - started)
            cpu_s.append(cpu_seconds(started_pids) - cpu)
            rounds += [entry["seconds"] for entry in result.log]
            results.append(result)
    finally:
        deployment.stop()
    return {
        "rounds": rounds,
        "run_s": run_s,
        "cpu_s": cpu_s,
        "start_s": deployment.timings.get("start_s", float("nan")),
        "results": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs per set-up (default 2)")
    parser.add_argument("--samples", type=int, default=3000, help="asia rows over 3 sites")
    parser.add_argument("--method", default="fedpc", help="a built-in method (default fedpc)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--database",
        action="store_true",
        help="the SuperLink keeps its state in an SQLite file (flower-superlink --database) "
        "instead of in memory (docs/deployment.md's command)",
    )
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench_deployment_"))
    try:
        paths = write_sites(workdir, args.samples, args.seed)
        app_dir = workdir / "fedcausal-app"  # a valid app name, whatever the checkout is called
        app_dir.mkdir()
        shutil.copy(REPO_ROOT / "pyproject.toml", app_dir / "pyproject.toml")
        local = fedcausal_flwr.run(args.method, data=[pd.read_csv(p) for p in paths])
        load_before = os.getloadavg()
        print(
            f"{args.method} on asia x {args.samples}, 3 sites on 127.0.0.1, {args.runs} runs per "
            f"set-up; SuperLink state {'in an SQLite file' if args.database else 'in memory'}; "
            f"{os.cpu_count()} CPUs, load average before: "
            + " ".join(f"{x:.1f}" for x in load_before)
        )
        figures = {}
        for setup in ("stock", "executor", "tuned"):
            figures[setup] = f = measure(
                setup, workdir, paths, app_dir, args.method, args.runs, args.database
            )
            same = all(r.graph == local.graph and r.rounds == local.rounds for r in f["results"])
            print(
                f"\n{setup}: start {f['start_s']:.1f} s; per round mean "
                f"{statistics.mean(f['rounds']):.2f} s, best {min(f['rounds']):.2f} s, "
                f"{len(f['rounds'])} rounds; runs "
                + ", ".join(f"{s:.1f} s" for s in f["run_s"])
                + f"; same result as in-process: {'yes' if same else 'NO'}"
            )
            print(
                f"  CPU seconds per round, all processes of the deployment (from flwr run to its "
                f"result, start-up of each run included): {sum(f['cpu_s']) / len(f['rounds']):.2f}"
            )
            print("  rounds: " + " ".join(f"{s:.2f}" for s in f["rounds"]))
        floor = measure_floor(
            workdir, paths, args.runs, rounds=len(figures["stock"]["rounds"]) // args.runs
        )
        print(
            f"\nfloor (the stock commands, a ClientApp that does nothing): per round mean "
            f"{statistics.mean(floor['rounds']):.2f} s, best {min(floor['rounds']):.2f} s; rounds: "
            + " ".join(f"{s:.2f}" for s in floor["rounds"])
        )
        stock = statistics.mean(figures["stock"]["rounds"])
        executor = statistics.mean(figures["executor"]["rounds"])
        tuned = statistics.mean(figures["tuned"]["rounds"])
        least = statistics.mean(floor["rounds"])
        ratio = stock / least
        print(
            f"\nmean round: stock {stock:.2f} s, Flower's floor {least:.2f} s: stock / floor = "
            f"{ratio:.2f}x (target <= {TARGET_STOCK_RATIO:g}x: "
            f"{'met' if ratio <= TARGET_STOCK_RATIO else 'MISSED'}); executor {executor:.2f} s; "
            f"tuned {tuned:.2f} s (target <= {TARGET_TUNED_S:g} s: "
            f"{'met' if tuned <= TARGET_TUNED_S else 'MISSED'}); stock / tuned = "
            f"{stock / tuned:.1f}x"
        )
        print("load average after: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
