"""Files a command writes, checked before it works; writes that fail anyway, told in one line.

Why: a run may take hours, so an ``--out`` it cannot write (a folder, a read-only folder, a path
under a file) must stop it before the first round, in one line naming the option as the user
typed it, and not after the run in a traceback. A write can still fail later (disk full, quota,
``ulimit -f``, permissions changed meanwhile): then the finished work is still shown, one line
says what was not written and why, and the exit code is :data:`WRITE_FAILED`. Writes go through
a temporary file, so a failed or interrupted one leaves the earlier file as it was, never half
a file. Input files that cannot be read are named with the reason, and a closed stdout
(``fedcausal-flwr run ... | head -2``) ends the command quietly (:func:`stdout_closed`).
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from fedcausal_flwr.options import OptionError

if TYPE_CHECKING:
    from fedcausal_flwr.graphs import Graph

#: exit code of a command whose work was done and shown but whose file could not be written
#: (usage errors found before any work are 2, as for every other bad option)
WRITE_FAILED = 1
#: exit code when stdout was closed early (the shell's 128 + SIGPIPE)
STDOUT_CLOSED = 141

_REASONS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large: over the file size limit, ulimit -f",
    errno.EISDIR: "it is a folder",
    errno.ENOTDIR: "a part of its path is a file, not a folder",
    errno.ENOENT: "no such file or folder",
    errno.ENAMETOOLONG: "file name too long",
}
#: errors that come once a file is open and partly written: what was written is removed
_MID_WRITE = (errno.EFBIG, errno.ENOSPC, errno.EDQUOT)


def reason(err: OSError) -> str:
    """Why ``err`` happened, in words: no errno number, no Python repr."""
    if err.errno in _REASONS:
        return _REASONS[err.errno]
    text = err.strerror or str(err) or type(err).__name__
    return text[:1].lower() + text[1:]


def file_error(err: OSError) -> str:
    """One line for a file that could not be read or written: ``<file>: <reason>``."""
    name = err.filename2 if err.errno == errno.EISDIR and err.filename2 else err.filename
    return f"{name}: {reason(err)}" if name is not None else reason(err)


class OutputError(OSError):
    """A file that could not be written: names the path and why (``errno`` as the cause's).

    ``result``: what was not written (a :class:`~fedcausal_flwr.result.Result` when
    ``Result.save`` fails), so a caller in Python keeps it: ``except OutputError as err:
    err.result.save(elsewhere)``.
    """

    def __init__(self, path: str | os.PathLike, cause: OSError, *, result: Any = None) -> None:
        super().__init__(cause.errno, reason(cause), str(path))
        self.path = Path(path)
        self.result = result

    def __str__(self) -> str:
        return f"{self.path} was not written: {self.strerror}"

    def __reduce__(self) -> tuple:  # OSError's own would call __init__ with errno, strerror
        return _rebuild_output_error, (self.errno, self.strerror, str(self.path), self.result)


def _rebuild_output_error(code: int, text: str, path: str, result: Any) -> OutputError:
    return OutputError(path, OSError(code, text), result=result)


def write_text(path: str | os.PathLike, text: str) -> Path:
    """``text`` to ``path`` through a temporary file in its folder (made if missing), replaced
    in one step: a failed or interrupted write leaves the earlier file as it was. A device or a
    pipe (``/dev/stdout``) is written as it is, and a symbolic link's target is replaced.
    A failure is an :class:`OutputError` naming ``path``."""
    content = text.encode("utf-8")
    return write_with(path, lambda handle: handle.write(content))


def write_graph(graph: Graph, path: str | os.PathLike, fmt: str) -> Path:
    """Write ``graph`` to ``path`` in ``fmt`` (one of
    :data:`~fedcausal_flwr.graphs.export.EXPORT_FORMATS`), in one step: a failed write (an
    :class:`OutputError`) leaves no half file."""
    from fedcausal_flwr.graphs.export import graph_text

    return write_text(path, graph_text(graph, fmt))


def write_with(path: str | os.PathLike, writer: Callable[[BinaryIO], object]) -> Path:
    """What ``writer`` writes to an open binary file, to ``path`` as :func:`write_text` writes
    text (streamed: a large file is never held in memory whole)."""
    return write_together([(path, writer)])[0]


def write_together(
    files: Sequence[tuple[str | os.PathLike, Callable[[BinaryIO], object]]],
    name: str | os.PathLike | None = None,
) -> list[Path]:
    """Each ``(path, writer)`` as :func:`write_with` writes one, all or none: every file goes to a
    temporary file first, then each replaces its target, and a failure puts back what the
    earlier ones replaced (a result and its evidence companion never part). A failure is an
    :class:`OutputError` naming ``name`` (default: the file that failed)."""
    paths = [Path(path) for path, _ in files]
    staged: list[tuple[Path, Path, Path]] = []  # (temporary file, target, path as given)
    aside: dict[Path, Path] = {}  # target -> a second name of its earlier file
    placed: list[Path] = []
    current = paths[0]
    try:
        for path, (_, writer) in zip(paths, files, strict=True):
            current = path
            if _exists(path) and not path.is_file() and not path.is_dir():
                with path.open("wb") as handle:  # a device or a pipe: written as it is
                    writer(handle)
                continue
            target = Path(os.path.realpath(path)) if path.is_symlink() else path
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
            except FileExistsError:  # a file where a folder of the path should be
                raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(path)) from None
            temp = target.with_name(f".{target.name}.tmp{os.getpid()}")
            staged.append((temp, target, path))
            with temp.open("wb") as handle:
                writer(handle)
        for temp, target, path in staged:
            current = path
            if len(staged) > 1 and target.is_file():  # kept by a second name until all are in
                earlier = target.with_name(f".{target.name}.was{os.getpid()}")
                earlier.unlink(missing_ok=True)
                try:
                    os.link(target, earlier)
                except OSError:  # a file system without hard links
                    shutil.copyfile(target, earlier)
                aside[target] = earlier
            os.replace(temp, target)
            placed.append(target)
    except OSError as err:
        for target in reversed(placed):  # back as they were
            try:
                if target in aside:
                    os.replace(aside.pop(target), target)
                else:
                    target.unlink(missing_ok=True)
            except OSError:
                pass
        raise OutputError(Path(name) if name is not None else current, err) from err
    finally:
        for temp, _, _ in staged:
            temp.unlink(missing_ok=True)
        for earlier in aside.values():
            earlier.unlink(missing_ok=True)
    return paths


def is_regular_target(path: str | os.PathLike) -> bool:
    """Whether ``path`` is (or would be) a regular file, not a device or a pipe."""
    path = Path(path)
    return not _exists(path) or path.is_file()


def _nearest_existing(folder: Path) -> Path:
    """The folder itself or the nearest ancestor that exists (the rest would be made)."""
    while not _exists(folder) and folder.parent != folder:
        folder = folder.parent
    return folder


def _exists(path: Path) -> bool:
    try:
        path.stat()
    except OSError:
        return False
    return True


def _folder_problem(folder: Path) -> str | None:
    """Why files cannot be made in ``folder`` (made first if missing), or None."""
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        read_only = hasattr(os, "statvfs") and os.statvfs(existing).f_flag & os.ST_RDONLY
        why = "read-only file system" if read_only else "permission denied"
        return f"cannot write in the folder {existing} ({why})"
    try:  # what access(2) cannot tell (root on /proc, ACLs, a network file system): try it
        handle, probe = tempfile.mkstemp(prefix=".fedcausal-probe-", dir=existing)
    except OSError as err:
        return f"cannot write in the folder {existing} ({reason(err)})"
    os.close(handle)
    os.unlink(probe)
    return None


def check_file(path: str | os.PathLike, where: str, *, example: str | None = None) -> Path:
    """Refuse, before any work, an output file that could not be written: ``path`` is a folder,
    its folder cannot be made or written, or it exists and is read-only. ``where``: the option
    as typed (``--out result.json``), the start of the one-line :class:`OptionError`;
    ``example``: a file name to suggest when ``path`` is a folder."""
    target = Path(path)
    if target.is_dir():
        hint = f"; give a file name, e.g. {target / example}" if example else ""
        raise OptionError(f"{where}: {target} is a folder, not a file{hint}")
    if _exists(target) and not target.is_file():  # a device or a pipe: written as it is
        if not os.access(target, os.W_OK):
            raise OptionError(f"{where}: {target} cannot be written (permission denied)")
        return target
    problem = _folder_problem(target.parent)
    if problem is None and _exists(target) and not os.access(target, os.W_OK):
        problem = f"{target} is read-only (permission denied)"
    if problem is not None:
        raise OptionError(f"{where}: {problem}")
    return target


def check_folder(path: str | os.PathLike, where: str) -> Path:
    """Refuse, before any work, an output folder that is a file or that cannot be made or
    written; ``where`` as for :func:`check_file`."""
    target = Path(path)
    if _exists(target) and not target.is_dir():
        raise OptionError(f"{where}: {target} is a file, not a folder")
    problem = _folder_problem(target)
    if problem is not None:
        raise OptionError(f"{where}: {problem}")
    return target


def check_federation(args: Any) -> None:
    """What a ``federation`` subcommand writes, checked before it starts anything: ``up
    --workdir`` (when given), ``credentials --out`` and ``keys --out`` are folders, ``roster
    --out`` is a file."""
    command = args.federation_command
    if command == "up" and args.workdir is not None:
        check_folder(args.workdir, f"--workdir {args.workdir}")
    elif command in ("credentials", "keys"):
        check_folder(args.out, f"--out {args.out}")
    elif command == "roster":
        check_file(args.out, f"--out {args.out}")


class FailedWrites:
    """The writes of a command that failed after its work: each told in one line once the
    work's output is shown (:meth:`report`), so a full disk never hides a finished result."""

    def __init__(self) -> None:
        self.lines: dict[str, str] = {}

    def __contains__(self, where: str) -> bool:
        return where in self.lines

    @contextmanager
    def attempt(
        self, where: str, what: str, path: str | os.PathLike | None = None, note: str = ""
    ) -> Iterator[None]:
        """Run a write; an :class:`OSError` is recorded as ``<where>: <what> was not written
        (<reason>)<note>`` and the block is left. ``path``: a file the block writes in place,
        removed when a full disk or ``ulimit -f`` cut it short."""
        try:
            yield
        except OSError as err:
            if path is not None and err.errno in _MID_WRITE and Path(path).is_file():
                Path(path).unlink(missing_ok=True)
            self.lines[where] = f"{where}: {what} was not written ({reason(err)}){note}"

    def report(self, prog: str = "fedcausal-flwr") -> int:
        """Print each failure on stderr; :data:`WRITE_FAILED` if there was one, else 0."""
        sys.stdout.flush()  # after the work's output where both go to one terminal or file
        for line in self.lines.values():
            print(f"{prog}: error: {line}", file=sys.stderr)
        return WRITE_FAILED if self.lines else 0


def unreadable_input(
    err: OSError, files: Sequence[str | os.PathLike], entry_point: str
) -> Exception:
    """The one-line error for a client's CSV file the reader could not open (permission denied,
    a folder, ...): an ``InputError`` naming the client and its file, as every other problem
    with a client's file is named; another file's error is named by its path."""
    from fedcausal_flwr.data.inputs import InputError

    if err.filename is not None:
        for k, name in enumerate(files):
            if Path(name) == Path(err.filename):
                return InputError(
                    f"cannot be read ({reason(err)})",
                    client=k,
                    file=Path(name).name,
                    entry_point=entry_point,
                )
    return OptionError(f"cannot read {file_error(err)}")


def expected(err: BaseException) -> bool:
    """Whether the command line answers ``err`` with one line (:func:`error_text`), exit code 2:
    a bad option or input, or a file that could not be read or written (an ``OSError`` naming
    it); a closed stdout or a lost connection is not one."""
    if isinstance(err, OSError):
        return err.filename is not None or type(err) is FileNotFoundError
    return isinstance(err, (ValueError, KeyError))


def error_text(err: BaseException, entry_point: str = "cli") -> str:
    """The one line the command line prints for an error it expects: a bad option, bad input
    (its fix spelled for ``entry_point``), a file that could not be read or written."""
    from fedcausal_flwr.data.inputs import InputError

    if isinstance(err, InputError):
        return err.render(entry_point)
    if isinstance(err, KeyError) and err.args:
        return str(err.args[0])
    if isinstance(err, OSError) and err.filename is not None:
        return file_error(err)
    return str(err)


@contextmanager
def reading_inputs(files: Sequence[str | os.PathLike], entry_point: str) -> Iterator[None]:
    """Within it, an :class:`OSError` opening one of ``files`` is :func:`unreadable_input`."""
    try:
        yield
    except OSError as err:
        raise unreadable_input(err, files, entry_point) from None


def stdout_closed() -> int:
    """After a :class:`BrokenPipeError` on stdout (its reader ended, as ``head`` does): point
    stdout at the null device so Python's last flush at exit finds no closed pipe (no "Exception
    ignored" message; the way Python's documentation of SIGPIPE shows), and return
    :data:`STDOUT_CLOSED`."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a test's capture: nothing to do
        return STDOUT_CLOSED
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return STDOUT_CLOSED
