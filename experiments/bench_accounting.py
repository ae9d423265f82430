"""What the tight privacy accounting costs a private run: the server's checks and a site's.

    python experiments/bench_accounting.py [--network alarm] [--rows 10000 100000]
        [--clients 10] [--sites 3] [--epsilon 8] [--seeds 0 1 2]

A private FedPC/FedFCI run states the epsilon of its releases composed by their privacy loss
distributions (dp_accounting, :mod:`fedcausal_flwr.privacy.pld`) and checks each batch by them
before releasing it; a site with a budget checks each message by zCDP first and by the PLD only
where zCDP would refuse. Measured here, each beside its reference in the same run:

1. The server. Private FedPC (``dp=central``, ``--epsilon``, delta 1e-6, default budget: each
   depth half of what is left) in-process on the network's sample split IID over ``--clients``
   sites: the run's wall time, the time spent inside the PLD (calls counted; dp_accounting is
   imported before, its import timed on its own in a fresh interpreter: a process pays it once),
   and as the reference the exact run on the same data (what a user runs without privacy).
2. A site. The same data over ``--sites`` sites with data files, through Flower's ServerApp and
   ClientApp in one process (every message passes each site's guard and audit log), each site
   with ``dp-epsilon`` equal to the run's target (and ``dp-allow-central``), against the same run
   whose sites set no budget: wall times, and how many PLDs the run and its sites asked for
   (in one process the sites share the server's cache of PLDs, so their seconds show in 3.).
3. A stock deployment starts a process per message, so a check that needs the PLD pays the
   import and the composition there: measured in a fresh interpreter on site 0's last message
   (all its releases in the run).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import fedcausal_flwr
from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.experiments.profiling import CallClock
from fedcausal_flwr.stats import pld

DELTA = 1e-6


def server_part(frames, epsilon: float, seed: int) -> dict:
    start = time.perf_counter()
    fedcausal_flwr.run("fedpc", data=frames)
    exact = time.perf_counter() - start
    with CallClock(pld, "pld_epsilon") as clock:
        start = time.perf_counter()
        result = fedcausal_flwr.run(
            "fedpc", data=frames, dp="central", dp_epsilon=epsilon, dp_noise_seed=seed
        )
        wall = time.perf_counter() - start
    privacy = result.extra["privacy"]
    return {"exact": exact, "private": wall, "pld": clock.seconds, "calls": clock.calls,
            "batches": privacy["batches"], "epsilon": privacy["epsilon"]}  # fmt: skip


def site_part(frames, epsilon: float, seed: int, folder: Path) -> dict:
    from fedcausal_flwr import flwr_app
    from fedcausal_flwr.federation.core.site_identity import make_federation_keys
    from fedcausal_flwr.federation.core.site_policy import default_audit_log
    from fedcausal_flwr.federation.runtime.localgrid import run_local

    names = [f"site-{k}" for k in range(len(frames))]
    identities = make_federation_keys(folder / "keys", names)
    options = f"dp=central dp-epsilon={epsilon:g} dp-noise-seed={seed}"
    walls = {}
    plain = {"allow-plain-statistics": True}  # the server adds the noise: its sums are plain
    for label, policy in (("no budget", plain),
                          ("budget", {**plain, "dp-epsilon": epsilon,
                                      "dp-allow-central": True})):  # fmt: skip
        nodes = []
        for k, frame in enumerate(frames):
            path = folder / label.replace(" ", "-") / f"site{k}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            frame.to_csv(path, index=False)
            nodes.append({"partition-id": k, "data-path": str(path), **identities[k], **policy})
        config = {"num-clients": len(nodes), "method": "fedpc", "options": options,
                  "result-path": f"{label.replace(' ', '-')}.json"}  # fmt: skip
        quiet = contextlib.redirect_stdout(io.StringIO())  # the run's progress lines
        with CallClock(pld, "pld_epsilon") as clock, quiet:
            start = time.perf_counter()
            run_local(flwr_app.server_app, flwr_app.client_app, len(nodes), config, nodes)
            walls[label] = (time.perf_counter() - start, clock.seconds, clock.calls)
        log = default_audit_log(nodes[0]["data-path"])
    charges = [json.loads(line)["privacy"] for line in Path(log).read_text().splitlines()
               if '"privacy"' in line and '"sent"' in line]  # fmt: skip
    return {"walls": walls, "charges": charges}


def fresh_process_check(charges: list[dict], epsilon: float) -> tuple[float, float]:
    """Site 0's check of its last message in a fresh interpreter: (seconds to import the
    package's guard, seconds for the check itself, dp_accounting's import included)."""
    script = (
        "import json, sys, time\n"
        "start = time.perf_counter()\n"
        "from fedcausal_flwr.privacy.site_budget import counted_release\n"
        "from fedcausal_flwr.privacy.accounting import budget_epsilon\n"
        "imported = time.perf_counter() - start\n"
        "charges = json.loads(sys.stdin.read())\n"
        "start = time.perf_counter()\n"
        f"budget_epsilon([counted_release(c) for c in charges], {DELTA}, {epsilon} * (1 + 1e-9))\n"
        "print(imported, time.perf_counter() - start)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], input=json.dumps(charges), text=True,
                         capture_output=True, check=True)  # fmt: skip
    imported, checked = map(float, out.stdout.split())
    return imported, checked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", default="alarm")
    parser.add_argument("--rows", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--sites", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=8.0)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    args = parser.parse_args()
    net = load_network(args.network)
    imported = subprocess.run(
        [sys.executable, "-c", "import time; t = time.perf_counter(); "
         "import dp_accounting.pld.privacy_loss_distribution; print(time.perf_counter() - t)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    pld._pld_module()  # imported once here, as a process does on its first private run
    print(f"0. importing dp_accounting in a fresh interpreter: {float(imported.stdout):.3f} s")
    print(f"{args.network}, dp=central, epsilon {args.epsilon:g} at delta {DELTA:g}; seeds "
          f"{args.seeds}; wall seconds, mean over seeds")  # fmt: skip
    print("1. server | rows | exact run | private run | in the PLD | PLD / private run | "
          "PLD calls | batches")  # fmt: skip
    for rows in args.rows:
        got = [server_part(split_iid(net.sample(rows, seed=s), args.clients, seed=s).clients,
                           args.epsilon, s) for s in args.seeds]  # fmt: skip
        mean = {k: statistics.fmean(g[k] for g in got) for k in got[0]}
        print(f"server | {rows:,} | {mean['exact']:.3f} | {mean['private']:.3f} | "
              f"{mean['pld']:.3f} | {mean['pld'] / mean['private']:.3f} | "
              f"{mean['calls']:.1f} | {mean['batches']:.1f}")  # fmt: skip
    print(f"2. sites ({args.sites}, each with dp-epsilon {args.epsilon:g}) | rows | no budget | "
          "budget | budget / no budget | PLD calls (server and sites)")  # fmt: skip
    last = None
    rows = args.rows[0]
    for seed in args.seeds:
        frames = split_iid(net.sample(rows, seed=seed), args.sites, seed=seed).clients
        with tempfile.TemporaryDirectory() as folder:
            got = site_part(frames, args.epsilon, seed, Path(folder))
        (free, _, _), (budget, _, calls) = got["walls"]["no budget"], got["walls"]["budget"]
        print(f"sites | {rows:,} | {free:.3f} | {budget:.3f} | {budget / free:.3f} | "
              f"{calls}")  # fmt: skip
        last = got["charges"]
    imported, checked = fresh_process_check(last, args.epsilon)
    print(f"3. a fresh process: the guard imports in {imported:.3f} s; site 0's check of its "
          f"last message ({len(last)} releases) by the PLD takes {checked:.3f} s, "
          "dp_accounting's import included")  # fmt: skip


if __name__ == "__main__":
    main()
