"""Resident memory of a process tree (from /proc), for the benchmarks that run workers or Ray."""

from __future__ import annotations

import os
import threading
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants (workers and Ray actors included)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            rss[int(entry.name)] = int(fields[21]) * PAGE
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


class TreeSampler(threading.Thread):
    """Samples this process tree's resident bytes every ``every`` seconds until ``stop`` is set."""

    def __init__(self, every: float = 0.5):
        super().__init__(daemon=True)
        self.every = every
        self.samples: list[int] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append(tree_rss(os.getpid()))
            self.stop.wait(self.every)

    @property
    def peak(self) -> int:
        return max(self.samples, default=0)
