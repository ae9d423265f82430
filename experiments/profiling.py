"""Where a run's time goes: a profile's own seconds grouped by stage (shared by the benchmarks),
the seconds spent in one function, and the counting limit of a batch of level-1 tables on this
machine."""

from __future__ import annotations

import pstats
import time
from types import ModuleType

import numpy as np

#: stage of a profiled function, by where it is defined (first match)
STAGES = (
    ("input check + fingerprint", ("data/inputs.py", "data/columns.py", "data/dependence.py",
                                   "data/fingerprint.py", "federation/core/input_checks.py")),
    ("encoding the columns", ("clients/fedpc.py",)),
    ("counting the tables", ("stats/tables.py",)),
    ("server: tests and PC", ("discovery/", "stats/", "strategies/")),
    ("Flower and messages", ("flwr/", "federation/", "clients/", "google/protobuf", "grpc")),
    ("numpy / pandas / Python built-ins", ("numpy/", "pandas/", "{", "<", "~")),
)  # fmt: skip


class CallClock:
    """Seconds spent in ``module.name`` (and how many calls) while installed: its callers look
    it up in the module at call time, so replacing the attribute reaches them all."""

    def __init__(self, module: ModuleType, name: str) -> None:
        self.seconds, self.calls = 0.0, 0
        self._module, self._name = module, name
        self._original = getattr(module, name)

    def __enter__(self) -> CallClock:
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return self._original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls += 1

        setattr(self._module, self._name, timed)
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(self._module, self._name, self._original)


def stage_of(filename: str) -> str:
    path = filename.replace("\\", "/")
    for stage, parts in STAGES:
        if any(part in path if not part.startswith(("{", "<", "~")) else path.startswith(part)
               for part in parts):  # fmt: skip
            return stage
    return "other"


def stage_totals(stats: pstats.Stats) -> list[tuple[str, float]]:
    """Own seconds per stage, largest first. A large count or test runs in worker threads, which
    the profile does not see: the main thread's wait for them is its own stage."""
    totals: dict[str, float] = {}
    for (filename, _, name), (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        threads = "acquire" in name and "_thread.lock" in name
        stage = "worker threads (counting, testing)" if threads else stage_of(filename)
        totals[stage] = totals.get(stage, 0.0) + own
    return sorted(totals.items(), key=lambda item: -item[1])


def counting_limit(
    codes: np.ndarray, cards: np.ndarray, sets: np.ndarray, repeats: int = 1
) -> tuple[float, float]:
    """Table-row visits per second (rows x tables) of the package's count of the tables of
    ``sets`` (rows ``[a, b, c]``, the queries a level-1 batch asks) over ``codes`` (n, p), and of
    one ``np.bincount`` over the same cells built in advance (the limit of counting a table at a
    time on this machine); each the best of ``repeats``."""
    from fedcausal_flwr.stats.tables import count_tables, make_layout

    codes_t = np.ascontiguousarray(codes.T)
    layout = make_layout(sets, cards)
    counted = min(_seconds(lambda: count_tables(codes_t, layout)) for _ in range(repeats))
    sizes = np.diff(layout.offsets)
    cells = np.empty((len(sets), codes.shape[0]), dtype=np.int64)
    for start in range(0, len(sets), 256):  # built once, outside the timing
        part = sets[start : start + 256]
        a, b, c = codes_t[part[:, 0]], codes_t[part[:, 1]], codes_t[part[:, 2]]
        cells[start : start + 256] = (c * cards[part[:, 0], None] + a) * cards[part[:, 1], None] + b
        cells[start : start + 256] += layout.offsets[:-1][start : start + 256, None]
    flat = cells.ravel()
    total = int(sizes.sum())
    binned = min(_seconds(lambda: np.bincount(flat, minlength=total)) for _ in range(repeats))
    visits = codes.shape[0] * len(sets)
    return visits / counted, visits / binned


def _seconds(work) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started
