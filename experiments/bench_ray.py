"""The Ray backend's overhead beside a bare Flower 1.42 Ray simulation, in one run.

For each number of clients (default 10 and 100), in this order:

* **bare Flower**: a ServerApp (Message API) that sends a tiny query to every node and waits for
  the replies, ``--rounds`` times, with a ClientApp that echoes it; the same entry point
  (``flwr.simulation.run_simulation``) and backend settings as ours;
* **ours**: exact FedPC (chi2) on ALARM x ``--samples`` rows on the Ray backend, and the same run
  in-process (its rounds' seconds are the work a Ray round has to carry).

Columns: ``first`` = seconds from the call until the first round has ended (Ray start-up, actors,
the first round), ``before`` / ``after`` = seconds of the call before the first round starts and
after the last one ends (set-up, shut-down), ``round`` = median seconds of the later rounds; for
ours also the in-process median round and the target ratio ``round / (bare round + in-process
round)`` (target <= 1.5), and the peak resident memory of the process tree per simulated client.

    python experiments/bench_ray.py [--clients 10 100] [--samples 10000] [--rounds 6]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.experiments.process_memory import TreeSampler
from fedcausal_flwr.federation.runtime.runners import default_ray_num_cpus, quiet_flower, run_method

RAY_TMP = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths must fit 107 bytes


def bare_flower(clients: int, rounds: int) -> tuple[float, list[float], float]:
    """(call seconds, [round start, round end, ...] offsets, ...) of a bare Message-API run."""
    from flwr.app import ConfigRecord, Context, Message, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    marks: list[float] = []
    server, client = ServerApp(), ClientApp()

    @client.query()
    def echo(msg: Message, context: Context) -> Message:
        return Message(RecordDict({"r": ConfigRecord({"x": 1})}), reply_to=msg)

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        while len(grid.get_node_ids()) < clients:
            time.sleep(0.05)
        nodes = sorted(grid.get_node_ids())
        for _ in range(rounds):
            marks.append(time.perf_counter())
            msgs = [Message(RecordDict({"q": ConfigRecord({"x": 1})}), dst_node_id=n,
                            message_type="query") for n in nodes]  # fmt: skip
            pending = set(grid.push_messages(msgs))
            while pending:
                for reply in grid.pull_messages(list(pending)):
                    pending.discard(reply.metadata.reply_to_message_id)
                time.sleep(0.01)
            marks.append(time.perf_counter())

    init = {"logging_level": "ERROR", "log_to_driver": False, "include_dashboard": False,
            "_node_ip_address": "127.0.0.1"}  # as our Ray backend starts it  # fmt: skip
    config = {"client_resources": {"num_cpus": default_ray_num_cpus(), "num_gpus": 0.0},
              "init_args": init}  # fmt: skip
    started = time.perf_counter()
    with quiet_flower(RAY_TMP):
        run_simulation(server_app=server, client_app=client, num_supernodes=clients,
                       backend_config=config)  # fmt: skip
    ended = time.perf_counter()
    return started, marks, ended


def figures(started: float, marks: list[float], ended: float) -> tuple[float, ...]:
    """(first, before, after, median later round) from round start/end marks: ``before`` the
    first round starts and ``after`` the last ends (together: outside the rounds)."""
    first = marks[1] - started
    later = [marks[i + 1] - marks[i] for i in range(2, len(marks), 2)]
    return first, marks[0] - started, ended - marks[-1], statistics.median(later)


def ours(parts, backend: str) -> tuple[float, list[float], float, object]:
    marks: list[float] = []
    started = time.perf_counter()

    def progress(line: str) -> None:  # "round N: ..." once a round has ended
        if line.startswith("round "):
            marks.append(time.perf_counter())

    result = run_method("fedpc", parts, {"test": "chi2"}, backend=backend, progress=progress,
                        ray_tmpdir=RAY_TMP if backend == "ray" else None)  # fmt: skip
    ended = time.perf_counter()
    seconds = [entry["seconds"] for entry in result.log]
    pairs = []
    for end, length in zip(marks, seconds, strict=True):
        pairs += [end - length, end]
    return started, pairs, ended, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    pooled = load_network("alarm").sample(args.samples, seed=0)
    header = (f"{'clients':>7} {'run':<12} {'first':>7} {'before':>7} {'after':>6} {'round':>7} "
              f"{'in-proc':>8} {'ratio':>6} {'MB/client':>10} {'graph':>6}")  # fmt: skip
    print(f"Ray overhead, ALARM x {args.samples:,}, exact FedPC (chi2); seconds")
    print(header + "\n" + "-" * len(header))
    for k in args.clients:
        parts = split_iid(pooled, k, seed=0).clients
        b_first, b_before, b_after, b_round = figures(*bare_flower(k, args.rounds))
        print(f"{k:7d} {'bare Flower':<12} {b_first:7.2f} {b_before:7.2f} {b_after:6.2f} "
              f"{b_round:7.3f}", flush=True)  # fmt: skip
        _, inproc_marks, _, inproc = ours(parts, "inprocess")
        in_round = statistics.median(
            inproc_marks[i + 1] - inproc_marks[i] for i in range(2, len(inproc_marks), 2)
        )
        memory = TreeSampler(every=0.25)
        memory.start()
        started, marks, ended, result = ours(parts, "ray")
        memory.stop.set()
        memory.join()
        first, before, after, round_s = figures(started, marks, ended)
        ratio = round_s / (b_round + in_round)
        same = "same" if result.graph == inproc.graph else "DIFF"
        print(f"{k:7d} {'ours':<12} {first:7.2f} {before:7.2f} {after:6.2f} {round_s:7.3f} "
              f"{in_round:8.3f} {ratio:6.2f} {memory.peak / 1e6 / k:10.1f} {same:>6}",
              flush=True)  # fmt: skip
        extra = (before + after) - (b_before + b_after)
        print(
            f"{'':7} first - bare first {first - b_first:+.2f} s (target <= 2); outside the "
            f"rounds {before + after:.2f} s, {extra:+.2f} s beside bare Flower's "
            f"{b_before + b_after:.2f} s (target < 1 s); ratio {ratio:.2f} (target <= 1.5)"
        )


if __name__ == "__main__":
    main()
