"""Progress lines of a run on stderr, once it has taken a while, so a slow run is told from a
hung one; in a module of its own so the command line stays short (``cli.ProgressLines`` is this
class)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressLines:
    """Round-by-round progress once a run has taken ``after_s`` seconds (quick runs stay quiet;
    a slow run is then told from a hung one). A line ending in ``...`` announces a slow start
    (``starting Ray ...``) and is shown at once.

    ``stream``: where the lines go (default ``sys.stderr``); ``enabled``: ``None`` shows them
    only when that stream is a terminal, so a log file or a pipe gets no progress.
    """

    def __init__(
        self, after_s: float = 2.0, *, stream: TextIO | None = None, enabled: bool | None = None
    ) -> None:
        self.started = time.monotonic()
        self.after_s = after_s
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(self.stream) if enabled is None else enabled

    def __call__(self, line: str) -> None:
        if not self.enabled:
            return
        if line.endswith("...") or time.monotonic() - self.started >= self.after_s:
            print(f"  {line}", file=self.stream, flush=True)


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty()) if callable(isatty) else False
