"""A named pipe from a tuned SuperNode to its warm executor: "a message has arrived".

A SuperNode in ``--isolation process`` has no way to tell its executor that a task is waiting:
the executor asks its Runtime API (an HTTP request on each side) every ``--poll-interval``
seconds, which at 20 looks a second costs a site's two processes about 0.08 of a core while
nothing happens. With ``--wake-fifo PATH`` on both, ``fedcausal-supernode`` writes a byte to the
pipe once it has stored a message, and ``fedcausal-executor`` (which creates the pipe, mode 0600,
and removes it when it stops) claims the task at once; it still looks every ``--poll-interval``
seconds, so a lost wake-up only delays a task. A byte says nothing but "look now": whoever could
write to the pipe could only make the executor ask its SuperNode once more.
"""

from __future__ import annotations

import os
import select
import stat
from pathlib import Path


class WakeFifo:
    """The executor's end: creates the pipe (or takes an existing one) and waits on it."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.created = False
        try:
            os.mkfifo(self.path, 0o600)
            self.created = True
        except FileExistsError:
            if not stat.S_ISFIFO(os.stat(self.path).st_mode):
                raise ValueError("it exists and is not a named pipe") from None
        # read-write: the pipe always has a writer (this end), so an absent SuperNode is not
        # an end of file that would wake select() at once, over and over
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK)
        except OSError:
            if self.created:
                self.path.unlink(missing_ok=True)
            raise

    def wait(self, timeout: float) -> bool:
        """Sleep until a wake-up or ``timeout`` seconds; whether one came (all are consumed)."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            while os.read(self.fd, 4096):
                pass
        except BlockingIOError:
            pass
        return True

    def close(self) -> None:
        os.close(self.fd)
        if self.created:
            self.path.unlink(missing_ok=True)


def wake(path: str | os.PathLike) -> None:
    """The SuperNode's end: one byte into the pipe at ``path``, if an executor holds it open.
    Nothing happens when there is no pipe, no reader, or the pipe is full (a wake-up is
    pending then anyway); anything at ``path`` but a named pipe is left untouched. It never
    raises."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:  # no pipe, or nobody reading it (ENXIO): the executor polls anyway
        return
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, b"\x01")
    except OSError:  # full (a wake-up is pending), or the reader just left: nothing to do, and
        pass  # nothing may stop the SuperNode's loop that calls this
    finally:
        os.close(fd)
