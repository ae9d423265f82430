"""What signed SecAgg+ costs a secure run: the same FedPC run with sites that sign their SecAgg+
keys against a roster, and without.

    python experiments/bench_secagg_auth.py [--repeats 11] [--samples 10000] [--network alarm]

In one run of this script: 3 sites, each with its CSV of ``--network`` x ``--samples`` rows (IID)
and a real node config (``data-path``, ``site-key``, ``roster``), run FedPC with ``secure=true``
in process (the project's ServerApp, its relay and the in-process grid) ``--repeats`` times
each way, interleaved: signed (the project's ClientApp: every SecAgg+ stage signs or checks
signatures, :mod:`~fedcausal_flwr.federation.runtime.signed_secagg`) and unsigned (the same
sites and client factory, with every mod but the signing one). Both must give the same graph.
Printed: each way's median seconds per run (wall and CPU: everything runs in this process) and
per secure round, and the ratios signed / unsigned (target <= 1.2).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET = 1.2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--network", default="alarm")
    args = parser.parse_args()

    from flwr.clientapp import ClientApp

    from fedcausal_flwr import flwr_app
    from fedcausal_flwr.data.specs import sample_partition
    from fedcausal_flwr.federation.core.site_identity import make_federation_keys
    from fedcausal_flwr.federation.runtime.clientside import CLIENT_MODS
    from fedcausal_flwr.federation.runtime.localgrid import run_local
    from fedcausal_flwr.federation.runtime.signed_secagg import signed_secagg_mod
    from fedcausal_flwr.result import Result

    logging.getLogger("flwr").setLevel(logging.WARNING)  # SecAgg+'s lines for every round
    part, _ = sample_partition(args.network, args.samples, 3, "iid", 0)
    with tempfile.TemporaryDirectory(prefix="fedcausal-secagg-auth-") as tmp:
        work = Path(tmp)
        os.environ["FEDCAUSAL_RESULTS_DIR"] = str(work / "results")
        keys = make_federation_keys(work / "keys", ["a", "b", "c"])
        nodes = []
        for k, frame in enumerate(part.clients):
            path = work / f"site{k}.csv"
            frame.to_csv(path, index=False)
            nodes.append({"partition-id": k, "data-path": str(path), **keys[k]})
        apps = {
            "signed": flwr_app.client_app,
            "unsigned": ClientApp(  # the same mods but the signing one
                client_fn=flwr_app._client_fn,
                mods=[mod for mod in CLIENT_MODS if mod is not signed_secagg_mod],
            ),
        }
        config = {"num-clients": 3, "method": "fedpc", "secure": True}
        seconds: dict[str, list[float]] = {name: [] for name in apps}
        cpu_seconds: dict[str, list[float]] = {name: [] for name in apps}
        rounds: dict[str, list[float]] = {name: [] for name in apps}
        graphs = {}
        for repeat in range(args.repeats + 1):  # the first pair warms the caches, not counted
            for name, app in apps.items() if repeat % 2 else reversed(apps.items()):
                start, cpu = time.perf_counter(), time.process_time()
                with contextlib.redirect_stdout(io.StringIO()):  # the runs' progress lines
                    run_local(flwr_app.server_app, app, 3, {**config, "result-path": name}, nodes)
                elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
                result = Result.load(work / "results" / name)
                graphs[name] = result.graph
                if repeat:
                    secure = [float(e["seconds"]) for e in result.log if e.get("secure")]
                    seconds[name].append(elapsed)
                    cpu_seconds[name].append(cpu)
                    rounds[name].append(statistics.mean(secure))
        assert graphs["signed"] == graphs["unsigned"], "signed and unsigned graphs differ"
        n_secure = sum(1 for e in result.log if e.get("secure"))
        own = own_work(nodes, config, args.repeats)

    print(f"fedpc secure on {args.network} x {args.samples}, 3 sites in process, "
          f"{n_secure} secure rounds a run, {args.repeats} runs each way, interleaved")  # fmt: skip
    for name in apps:
        print(f"  {name:<9} median {statistics.median(seconds[name]):7.3f} s per run "
              f"({statistics.median(cpu_seconds[name]):.3f} CPU-s), "
              f"{statistics.median(rounds[name]) * 1e3:7.1f} ms per secure round "
              f"(runs: {', '.join(f'{s:.2f}' for s in seconds[name])})")  # fmt: skip
    ratio = statistics.median(seconds["signed"]) / statistics.median(seconds["unsigned"])
    per_round = statistics.median(rounds["signed"]) / statistics.median(rounds["unsigned"])
    cpu = statistics.median(cpu_seconds["signed"]) / statistics.median(cpu_seconds["unsigned"])
    unsigned_run = statistics.median(seconds["unsigned"])
    print(f"  the signing mod's own work (timed around it, without what it calls): {own * 1e3:.1f} "
          f"ms per run, {own / unsigned_run:.1%} of an unsigned run")  # fmt: skip
    print(f"signed / unsigned: {ratio:.3f} per run, {per_round:.3f} per secure round, "
          f"{cpu:.3f} in CPU time (target <= {TARGET}): "
          f"{'met' if ratio <= TARGET else 'NOT met'}")  # fmt: skip


def own_work(nodes: list, config: dict, repeats: int) -> float:
    """Median seconds per run spent in the signing mod itself (the time around it, less the
    time of the mods and client it calls): the part of the difference that is its work."""
    from flwr.clientapp import ClientApp

    from fedcausal_flwr import flwr_app
    from fedcausal_flwr.federation.runtime.clientside import CLIENT_MODS
    from fedcausal_flwr.federation.runtime.localgrid import run_local
    from fedcausal_flwr.federation.runtime.signed_secagg import signed_secagg_mod

    spent = [0.0]

    def timed(msg: Any, ctxt: Any, call_next: Any) -> Any:
        def inner(m: Any, c: Any) -> Any:
            begun = time.perf_counter()
            try:
                return call_next(m, c)
            finally:
                spent[0] -= time.perf_counter() - begun

        begun = time.perf_counter()
        try:
            return signed_secagg_mod(msg, ctxt, inner)
        finally:
            spent[0] += time.perf_counter() - begun

    mods = [timed if mod is signed_secagg_mod else mod for mod in CLIENT_MODS]
    app = ClientApp(client_fn=flwr_app._client_fn, mods=mods)
    runs = []
    for _ in range(repeats):
        spent[0] = 0.0
        with contextlib.redirect_stdout(io.StringIO()):
            run_local(flwr_app.server_app, app, 3, {**config, "result-path": "timed"}, nodes)
        runs.append(spent[0])
    return statistics.median(runs)


if __name__ == "__main__":
    main()
