"""What every built-in method returns on fixed data, written as JSON: the guard of a refactor.

Runs each built-in method in-process on small fixed data sets and records, per run, the learned
graph (its edges with their marks), the rounds, the bytes each way, the ledger (what each client
disclosed per round) and the round log's actions. Two snapshots taken from two commits are
compared with ``--compare``: a refactor that changes no behaviour shows no difference.

    python experiments/method_snapshot.py --out before.json
    python experiments/method_snapshot.py --out after.json --compare before.json
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Any

import fedcausal_flwr

try:
    from fedcausal_flwr.federation.core.registry import builtin_methods
except ImportError:  # a checkout from before federation/ was split in three folders
    from fedcausal_flwr.federation.registry import builtin_methods  # type: ignore[no-redef]

#: (label, run keywords): the data every method is run on
DATA: tuple[tuple[str, dict[str, Any]], ...] = (
    ("asia-2000x3", {"network": "asia", "samples": 2000, "clients": 3}),
    ("child-3000x4", {"network": "child", "samples": 3000, "clients": 4}),
)
#: the methods whose tests fit a model per test (minutes on child): a smaller second network
SMALL_DATA: tuple[tuple[str, dict[str, Any]], ...] = (
    DATA[0],
    ("survey-2000x3", {"network": "survey", "samples": 2000, "clients": 3}),
)
SLOW_METHODS = ("fedci-pc", "fedci-fci", "fedci-iod", "iod-fisher", "iod-pooled", "notears-admm")
#: the methods for sites with different variable sets, run on such sites too
OVERLAP_METHODS = ("fedcdnv", "fedcdnv-vote", "fci-base", "fedci-iod", "iod-fisher", "iod-pooled")


def overlapping_sites() -> list:
    """ASIA x 3,000 rows over three sites, two of them without one column each."""
    from fedcausal_flwr.data.networks import load_network
    from fedcausal_flwr.data.partition import split_iid

    frames = split_iid(load_network("asia").sample(3000, seed=0), 3, seed=0).clients
    return [frames[0].drop(columns=["smoke"]), frames[1].drop(columns=["bronc"]), frames[2]]


def gaussian_sites(binary: bool = False) -> list:
    """Three sites of a linear Gaussian chain A -> B -> C -> D with E -> C (1,000 rows each);
    ``binary``: D thresholded (mixed data)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    frames = []
    for _ in range(3):
        a, e = rng.normal(size=(2, 1000))
        b = 0.8 * a + rng.normal(size=1000)
        c = 0.7 * b - 0.6 * e + rng.normal(size=1000)
        d = 0.9 * c + rng.normal(size=1000)
        frame = pd.DataFrame({"A": a, "B": b, "C": c, "D": d, "E": e})
        if binary:
            frame["D"] = (d > 0).astype(int)
        frames.append(frame)
    return frames


#: runs with options and data beyond each method's defaults: (method, label, run keywords)
VARIANTS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("fedpc", "asia sketch", {**DATA[0][1], "ci": "sketch"}),
    ("fedpc", "child g2 depth 2", {**DATA[1][1], "test": "g2", "max_depth": 2}),
    ("fedpc", "asia secure", {**DATA[0][1], "secure": True}),
    ("fedfci", "child stable pds", {**DATA[1][1], "possible_dsep": "stable"}),
    ("fedpc", "asia bootstrap 3", {**DATA[0][1], "bootstrap": 3}),
    ("fedpc-vote", "asia bootstrap 2", {**DATA[0][1], "bootstrap": 2}),
    ("pooled", "asia fci", {**DATA[0][1], "algorithm": "fci"}),
)
#: runs on data made here (Gaussian, mixed): (method, label, options, data maker)
MADE: tuple[tuple[str, str, dict[str, Any], Any], ...] = (
    ("fedpc", "gaussian fisherz", {"test": "fisherz"}, lambda: gaussian_sites()),
    ("fedci-pc", "gaussian", {}, lambda: gaussian_sites()),
    ("fedci-pc", "mixed", {}, lambda: gaussian_sites(binary=True)),
    ("fedci-fci", "mixed fisher", {"ci": "fisher"}, lambda: gaussian_sites(binary=True)),
    ("notears-admm", "gaussian", {"max_iter": 20}, lambda: gaussian_sites()),
)


def data_of(method: str) -> list[tuple[str, dict[str, Any]]]:
    """The data ``method`` is run on."""
    out = list(SMALL_DATA if method in SLOW_METHODS else DATA)
    if method in OVERLAP_METHODS:
        out.append(("asia-overlap-3000x3", {"data": overlapping_sites()}))
    return out


#: options a method needs (FedLCS's target) or that keep its run short
QUICK: dict[str, dict[str, Any]] = {
    "notears-admm": {"max_iter": 20},
    "fedlcs": {"target": "all"},
    "fedlcs-local": {"target": "all"},
    "lcs-pooled": {"target": "all"},
}


#: methods whose replies carry a client's own timing (``score_seconds``): their bytes up vary by a
#: few bytes from run to run with the float's printed length
TIMED_REPLIES = ("fedecd", "fedcsl")
TIMING_SLACK = 64


def differing(method: str, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The fields of one run that differ (bytes up within the timing slack where replies carry
    a timing)."""
    out = []
    for field in sorted(set(before) | set(after)):
        old, new = before.get(field), after.get(field)
        if field == "bytes_up" and method in TIMED_REPLIES and None not in (old, new):
            if abs(old - new) <= TIMING_SLACK:
                continue
        if old != new:
            out.append(field)
    return out


def plain(value: Any) -> Any:
    """JSON-ready, with sets and tuples as sorted lists and floats as their repr."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v) for v in value), key=str)
    if isinstance(value, float):
        return repr(value)
    if hasattr(value, "item"):
        return plain(value.item())
    return value if isinstance(value, (str, int, bool, type(None))) else str(value)


def snapshot_of(method: str, data: dict[str, Any], quick: bool = True) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        options = QUICK.get(method, {}) if quick else {}
        result = fedcausal_flwr.run(method, seed=0, **data, **options)
    graph = result.graph
    edges = sorted(str(e) for e in graph.edges()) if hasattr(graph, "edges") else str(graph)
    return {
        "edges": edges,
        "rounds": result.rounds,
        "bytes_up": result.bytes_up,
        "bytes_down": result.bytes_down,
        "ledger": plain(result.ledger),
        "actions": [entry.get("action") for entry in result.log],
        "metrics": plain({k: v for k, v in result.metrics.items() if not k.endswith("_s")}),
        "extra_keys": sorted(result.extra),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to write the snapshot (JSON)")
    parser.add_argument("--compare", help="an earlier snapshot to compare with")
    parser.add_argument("--methods", nargs="*", help="only these methods")
    args = parser.parse_args()
    methods = args.methods or sorted(builtin_methods())
    snapshot: dict[str, Any] = {}
    for method in methods:
        for label, data in data_of(method):
            key = f"{method} on {label}"
            try:
                snapshot[key] = snapshot_of(method, data)
            except Exception as error:  # a refusal is behaviour too
                snapshot[key] = {"error": f"{type(error).__name__}: {error}"}
            print(key, "error" if "error" in snapshot[key] else "ok", flush=True)
    runs = [(m, label, kw) for m, label, kw in VARIANTS]
    runs += [(m, label, {**options, "data": make()}) for m, label, options, make in MADE]
    for method, label, data in runs:
        if args.methods and method not in args.methods:
            continue
        key = f"{method} on {label}"
        try:
            snapshot[key] = snapshot_of(method, data, quick=False)
        except Exception as error:
            snapshot[key] = {"error": f"{type(error).__name__}: {error}"}
        print(key, "error" if "error" in snapshot[key] else "ok", flush=True)
    with open(args.out, "w") as file:
        json.dump(snapshot, file, indent=1, sort_keys=True)
    if not args.compare:
        return 0
    with open(args.compare) as file:
        before = json.load(file)
    differ = []
    # with --methods, only the runs taken (the others were not asked for)
    keys = set(snapshot) if args.methods else set(before) | set(snapshot)
    for key in sorted(keys):
        fields = differing(key.split(" on ")[0], before.get(key, {}), snapshot.get(key, {}))
        if fields:
            differ.append(key)
            print(f"DIFFERS: {key}: {', '.join(fields)}")
    print(f"{len(snapshot)} runs, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
