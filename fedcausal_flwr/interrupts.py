"""Ctrl-C and SIGTERM for every command: one line on stderr, exit 130 / 143, no process left.

Python's default prints a long ``KeyboardInterrupt`` traceback, and during a Ray simulation it
hangs: Flower's engine then waits in ``ThreadPoolExecutor.__exit__`` for worker threads that stop
only on an event the interrupted thread never sets. So :class:`Interrupts` records the signal and
raises :class:`Interrupted` where unwinding is safe (what ``finally`` blocks clean up, they clean
up), leaves at once where it is not (a Ray simulation), and leaves anyway, after ending this
process's children, if unwinding has not finished within ``grace`` seconds.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, TextIO

from fedcausal_flwr.processes import descendants, end_processes

#: the shell's convention: 128 + the signal's number
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
#: seconds the orderly path has before the process leaves without it
GRACE_S = 2.5
#: seconds between a worker's looks at its parent (the fallback of the parent-death signal)
PARENT_POLL_S = 0.5
#: prctl(2)'s option: the signal a process gets when its parent ends (Linux)
PR_SET_PDEATHSIG = 1

_ACTIVE: list[Interrupts] = []


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; a ``KeyboardInterrupt`` so ``except Exception`` lets it pass."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(signal.Signals(self.signum), 128 + self.signum)


def children() -> set[int]:
    """Every process below this one (from /proc)."""
    return set(descendants(os.getpid()))


def end_children(grace: float = 1.0, spare: Collection[int] = ()) -> list[int]:
    """End every process below this one but ``spare`` (worker processes, Ray's services and
    workers): what a run started must not outlive it. Returns the PIDs signalled."""

    found = sorted(children() - set(spare))
    if not found:
        return []

    def reap() -> None:  # our own children are zombies until waited for
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass

    return end_processes(found, grace=grace, reap=reap)


def end_with_parent(parent: int | None = None) -> None:
    """In a worker process: end when its parent ends, whatever ended it.

    A parent killed with SIGKILL cannot end its children, and a process pool's worker would
    wait forever on a queue whose other end it holds itself (so would the pool's resource tracker,
    which waits for every worker to close its pipe). So the kernel sends this process SIGTERM when
    its parent ends (``prctl(PR_SET_PDEATHSIG)``, Linux), and a thread leaves at once when the
    parent changed (every platform, and a process that handles SIGTERM) or when the process that
    asked multiprocessing for this one ended (its sentinel pipe closed: under a fork server the
    parent is the server, which lives as long as any worker does). ``parent``: the PID the
    parent must have (a parent that ended before the signal was asked for is seen here);
    ``None``: the parent it has now.
    """
    import multiprocessing

    expected = os.getppid() if parent is None else parent
    _parent_death_signal(signal.SIGTERM)
    if os.getppid() != expected:  # the parent ended before the kernel was told
        os._exit(EXIT_CODES[signal.SIGTERM])
    owner = multiprocessing.parent_process()
    sentinel = None if owner is None else owner.sentinel
    threading.Thread(
        target=_watch_parent, args=(expected, sentinel), name="parent-watch", daemon=True
    ).start()


def _parent_death_signal(signum: int) -> bool:
    """Ask the kernel for ``signum`` when the parent ends; False where it cannot (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int, sentinel: int | None) -> None:
    from multiprocessing.connection import wait

    while os.getppid() == parent:
        if sentinel is None:
            time.sleep(PARENT_POLL_S)
        elif wait([sentinel], timeout=PARENT_POLL_S):  # closed: the owner ended
            break
    os._exit(EXIT_CODES[signal.SIGTERM])


def sweep_worker_init(parent: int | None) -> None:
    """A sweep's worker starts here (``compare``'s pool initializer): Ctrl-C reaches the whole
    process group and the main process alone answers it (it ends the workers), so no worker
    prints a traceback; and the worker ends with its parent (:func:`end_with_parent`), so a
    killed sweep leaves no process behind, nor the pool's resource tracker (it ends once every
    worker has closed its pipe). In this light module, so a new worker is guarded before it
    imports what its runs need (seconds on a busy machine)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    end_with_parent(parent)
    # the sweep's workers share the cores: each counts and tests in one thread (BLAS too)
    os.environ["OMP_NUM_THREADS"] = "1"


def ray_simulation_running() -> bool:
    """Whether a Ray simulation runs (checked in a signal handler: imports nothing new)."""
    internals = sys.modules.get("fedcausal_flwr.federation.runtime.flower_internals")
    return bool(internals is not None and internals.ray_simulation_running())


def remove_ray_leftovers() -> None:
    """Remove what a Ray simulation left at once would have removed (its spilled client data)."""
    internals = sys.modules.get("fedcausal_flwr.federation.runtime.flower_internals")
    for folder in [] if internals is None else internals.ray_simulation_leftovers():
        shutil.rmtree(folder, ignore_errors=True)


def on_interrupt(describe: Callable[[], str]) -> None:
    """Say what the line printed on an interrupt is (e.g. what was kept), from here on; without
    an active :class:`Interrupts` (the Python API), nothing happens."""
    if _ACTIVE:
        _ACTIVE[-1].describe = describe


class Interrupts:
    """Within ``with Interrupts() as guard:``, SIGINT and SIGTERM end the block with
    :class:`Interrupted`; the exception is swallowed after the one line ``describe()`` returns is
    printed and the children are ended, and ``guard.exit_code`` is 130 or 143.

    ``unsafe``: called in the signal handler; when it returns true (by default: while a Ray
    simulation runs) the process leaves at once instead of unwinding, after ``cleanup()`` (what the
    unwinding would have removed). A second signal, or ``grace`` seconds without the block
    ending, leave at once too: it wraps a whole command, whose process then ends.
    """

    def __init__(
        self,
        describe: Callable[[], str] = lambda: "fedcausal-flwr: interrupted; nothing saved",
        *,
        grace: float = GRACE_S,
        unsafe: Callable[[], bool] | None = ray_simulation_running,
        cleanup: Callable[[], None] | None = remove_ray_leftovers,
        stream: TextIO | None = None,
    ) -> None:
        self.describe = describe
        self.grace = grace
        self.unsafe = unsafe
        self.cleanup = cleanup
        self.stream = stream
        self.signum: int | None = None
        self._said = False
        self._lock = threading.Lock()
        self._previous: dict[int, Any] = {}
        self._unraisable: Callable[[Any], None] = sys.unraisablehook

    @property
    def exit_code(self) -> int:
        """130 after SIGINT, 143 after SIGTERM, 0 without a signal."""
        return 0 if self.signum is None else Interrupted(self.signum).exit_code

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for signum in EXIT_CODES:
                self._previous[signum] = signal.signal(signum, self._handle)
        _ACTIVE.append(self)
        self._unraisable = sys.unraisablehook
        sys.unraisablehook = self._quiet_unraisable
        return self

    def _quiet_unraisable(self, unraisable: Any) -> None:
        """No "Exception ignored" traceback for an interrupt raised inside a ``__del__``."""
        if not isinstance(unraisable.exc_value, Interrupted):
            self._unraisable(unraisable)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> bool:
        try:  # a second signal meanwhile still leaves at once
            if self.signum is None and not isinstance(error, KeyboardInterrupt):
                return False
            if self.signum is None:  # a KeyboardInterrupt raised in code, not by a signal here
                self.signum = signal.SIGINT
            else:
                end_children()
            self.say()
            if error is None:  # the handler raised where Python ignores it (e.g. in a __del__)
                raise SystemExit(self.exit_code)
            return True  # an Interrupted, or what it caused (e.g. a pool broken by SIGTERM)
        finally:
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)
            if self in _ACTIVE:
                _ACTIVE.remove(self)
            sys.unraisablehook = self._unraisable

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:  # a second signal: no more waiting
            self.leave()
        self.signum = signum
        threading.Thread(target=self._watchdog, name="interrupt-watchdog", daemon=True).start()
        if self.unsafe is not None and self.unsafe():
            self.leave()
        raise Interrupted(signum)

    def _watchdog(self) -> None:
        time.sleep(self.grace)
        self.leave()  # still here (a daemon thread dies with the process otherwise)

    def say(self) -> None:
        """Print the line once, whoever gets here first."""
        with self._lock:
            if self._said:
                return
            self._said = True
        try:
            line = self.describe()
        except Exception as err:
            line = f"fedcausal-flwr: interrupted ({type(err).__name__} while describing)"
        stream = self.stream or sys.stderr
        print(line, file=stream, flush=True)

    def leave(self) -> None:
        """Print the line, end the children and exit now, without unwinding (``os._exit``).

        The children get SIGKILL and no wait: a Ray driver exits by itself (code 1) as soon as
        it sees its Ray processes die, and other threads would log their failures meanwhile;
        so output is silenced first and the exit follows the signals at once."""
        self.say()
        try:
            if self.cleanup is not None:
                self.cleanup()
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            for pid in children():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        finally:
            os._exit(self.exit_code or EXIT_CODES[signal.SIGINT])


def save_result(result: Any, out: str | Path) -> Path:
    """``result`` to ``out`` through a temporary file (``Result.save``): an interrupt never
    leaves half a file; a failed write is an ``OutputError``."""
    return result.save(out)


class RunState:
    """Where a ``run`` is, from its progress lines (passed on to ``show``), for the one line an
    interrupt prints."""

    def __init__(self, show: Callable[[str], None] | None, out: str | None = None) -> None:
        self.show, self.out = show, out
        self.started = False
        self.ray = False
        self.done = 0  # rounds finished
        self.current = 0  # a round still running, from its heartbeat
        self.saved: Path | None = None
        self.unsaved: OSError | None = None  # why save_first could not write (told later)
        self._saved_scoring: str | None = None  # what scoring sets, as it was when saved

    def __call__(self, line: str) -> None:
        found = re.match(r"round (\d+)(:| still running)", line)
        if found and found[2] == ":":
            self.done = max(self.done, int(found[1]))
        elif found:
            self.current = int(found[1])
        elif line.startswith(("starting Ray", "connecting to Ray")):
            self.ray = True
        if self.show is not None:
            self.show(line)

    def announce(self, line: str) -> None:
        """What is about to run, on stdout: from here on an interrupt stops a run."""
        self.started = True
        print(f"running {line}", flush=True)

    def save_first(self, result: Any) -> None:
        """The finished result to ``out`` before it is scored (a scoring failure loses no run)."""
        if self.out:
            try:
                self.saved = save_result(result, self.out)
                self._saved_scoring = _scored_state(result)
            except OSError as err:  # the run goes on to its summary; the CLI says why after it
                self.unsaved = err

    def saved_as_is(self, result: Any) -> bool:
        """Whether the file ``save_first`` wrote already holds ``result``: nothing scored it
        since (scoring sets its metrics and view, and nothing else changes a finished result),
        so writing it again (seconds for a wide graph) would write the same file."""
        return self.saved is not None and self._saved_scoring == _scored_state(result)

    def interrupted(self) -> str:
        if self.saved is not None:
            return f"fedcausal-flwr: interrupted after the run; its result is in {self.saved}"
        if not self.started:
            return "fedcausal-flwr: interrupted before the run started; nothing saved"
        where = f"in round {max(self.done + 1, self.current)}"
        if self.ray and not self.done and not self.current:
            where = "while starting Ray (round 1)"
        return f"fedcausal-flwr: interrupted {where}; nothing saved"


def _scored_state(result: Any) -> str:
    """:func:`~fedcausal_flwr.scoring.scored_state` (imported when a run is saved: scoring's
    imports are not needed to stop one)."""
    from fedcausal_flwr.scoring import scored_state

    return scored_state(result)


def sweep_interrupted(out: str | os.PathLike) -> str:
    """The line for an interrupted ``compare``: its finished runs are kept, a re-run resumes."""
    kept = len(list((Path(out) / "runs").glob("*.json")))
    return (
        f"compare: interrupted; {kept} finished run{'s' * (kept != 1)} kept in {out}, run again "
        "to resume"
    )
