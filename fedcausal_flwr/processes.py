"""The processes a run starts, found and ended by PID (Linux's /proc): below a PID, by an
environment variable they were started with, and ended with a grace period. Shared by local
deployments, ``federation down`` and the interrupt handler; Flower-free.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc; Linux)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # field 4 (ppid) follows the parenthesised command name
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def descendants(pid: int) -> list[int]:
    """All processes below ``pid``."""
    found, frontier = [], [pid]
    while frontier:
        kids = [c for p in frontier for c in _children(p)]
        found.extend(kids)
        frontier = kids
    return found


def process_environment(pid: int) -> dict[str, str]:
    """The environment a process was started with (from /proc; Linux), {} if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def processes_with_env(key: str, value: str) -> list[int]:
    """PIDs of live processes started with ``key=value`` in their environment (e.g. the detached
    local SuperLink that ``flwr run`` starts for Flower's default local simulation, found by the
    ``FLWR_HOME`` it inherited)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and process_environment(int(entry.name)).get(key) == value:
            found.append(int(entry.name))
    return sorted(found)


def end_processes(
    pids: Sequence[int], grace: float = 3.0, reap: Callable[[], object] | None = None
) -> list[int]:
    """SIGTERM ``pids`` and their descendants, SIGKILL what is left after ``grace`` seconds
    (descendants spawned meanwhile included); ``reap`` is called while waiting (e.g. to collect
    our own children's exit codes). Returns every PID signalled."""
    everything = [*pids, *(c for p in pids for c in descendants(p))]
    for pid in everything:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(alive(p) for p in everything):
        if reap is not None:
            reap()
        time.sleep(0.1)
    # SuperExec children may have been spawned after the first sweep: look again.
    everything += [c for p in pids for c in descendants(p)]
    for pid in everything:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # SIGKILL is delivered asynchronously: return once the kernel has ended them all
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(alive(p) for p in everything):
        if reap is not None:
            reap()
        time.sleep(0.02)
    return sorted(set(everything))


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[-1].startswith("Z"))
