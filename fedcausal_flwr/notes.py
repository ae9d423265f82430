"""Notes about the user's data, printed by the command line as one line each.

A note (a constant column kept as an isolated node) or a warning (columns a test cannot
separate) is a :class:`warnings.warn` of an :class:`InputNote` subclass where the fact is found,
so the Python API shows it the usual way and a test can catch it; the command line prints each
once as ``fedcausal-flwr: warning: <text>`` (:func:`one_line_notes`). Light on imports: the
command line's start does not load pandas for it.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator


class InputNote(UserWarning):
    """Something about the data the user should read, not an error."""


@contextlib.contextmanager
def one_line_notes(prog: str) -> Iterator[None]:
    """Print each :class:`InputNote` once as one line, ``<prog>: warning: <text>`` (or
    ``<prog>: note: ...`` for a note), without Python's file and line; other warnings as
    before. For the command line (a run's check runs before the backend and on the server)."""
    shown = warnings.showwarning
    printed: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None):
        if not issubclass(category, InputNote):
            shown(message, category, filename, lineno, file, line)
            return
        text = str(message)
        if text not in printed:
            printed.add(text)
            if not text.startswith("note: "):
                text = "warning: " + text
            print(f"{prog}: {text}", file=file or sys.stderr)

    with warnings.catch_warnings():
        # every command says its own notes (Python would show a text once per process)
        warnings.simplefilter("always", InputNote)
        warnings.showwarning = show
        yield
