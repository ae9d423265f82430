"""The coordinator reads and writes only inside the folders its operator configured.

A deployment's ServerApp runs on the coordinator's machine with a run config written by whoever
submits the run (``flwr run``). Three run-config keys touch that machine, and each is confined
here, before the first round:

* ``result-path`` is a path relative to the results folder (:data:`RESULTS_ENV`; default
  ``$XDG_DATA_HOME/fedcausal-flwr/results``, else ``~/.local/share/fedcausal-flwr/results``).
  An absolute path, ``..`` or a symlink leading out of it is refused, and an existing file that is
  not a result this project wrote is never overwritten.
* ``truth`` is ``network`` (the run's benchmark network) or a ``cause,effect`` CSV inside the
  truth folder (:data:`TRUTH_ENV`; default ``.../fedcausal-flwr/truth``), read as a local file
  (a URL is refused: nothing is fetched).
* ``plugins`` are imported only if the operator names each module in :data:`PLUGINS_ENV`
  (comma-separated; default none), and each site's policy allows it too.

No error quotes a file's content: it names the file and what is wrong. Flower-free.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fedcausal_flwr.evidence import companion_path, is_evidence_file
from fedcausal_flwr.federation.core.site_policy import plugin_names

RESULTS_ENV = "FEDCAUSAL_RESULTS_DIR"
TRUTH_ENV = "FEDCAUSAL_TRUTH_DIR"
PLUGINS_ENV = "FEDCAUSAL_ALLOW_PLUGINS"
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class CoordinatorError(ValueError):
    """A run config asks the coordinator for something outside what its operator allows."""


def data_home(environ: Mapping[str, str] | None = None) -> Path:
    """The user's data directory: ``$XDG_DATA_HOME`` or ``~/.local/share``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "fedcausal-flwr"


@dataclass(frozen=True)
class CoordinatorFolders:
    """Where the coordinator may write results and read truth files, and the plugin modules
    it may import (see the module docstring)."""

    results: Path
    truth: Path
    plugins: frozenset[str] = frozenset()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> CoordinatorFolders:
        env = os.environ if environ is None else environ
        home = data_home(env)
        plugins = frozenset(p.strip() for p in env.get(PLUGINS_ENV, "").split(",") if p.strip())
        return cls(
            Path(env.get(RESULTS_ENV) or home / "results"),
            Path(env.get(TRUTH_ENV) or home / "truth"),
            plugins,
        )

    # ------------------------------------------------------------------ result-path
    def result_target(self, result_path: str) -> Path:
        """The file ``result-path`` names inside the results folder (checked, not created)."""
        if _URL.match(result_path):
            raise CoordinatorError(f"result-path {result_path!r} is a URL; give a file name")
        target = _inside(self.results, result_path, "result-path", RESULTS_ENV)
        if target.exists() or target.is_symlink():
            if not target.is_file() or not _written_by_us(target):
                raise CoordinatorError(
                    f"result-path {result_path!r}: a file that is not a fedcausal-flwr result "
                    "is there already; it is not overwritten (choose another name)"
                )
        # the evidence beside it (evidence.companion_path), in the same folder: only a link
        # could lead it out
        companion = companion_path(target)
        if companion.is_symlink() or (companion.exists() and not _evidence_by_us(companion)):
            raise CoordinatorError(
                f"result-path {result_path!r}: {companion.name} beside it is a link or a file "
                "no fedcausal-flwr result wrote; it is not overwritten (choose another name)"
            )
        return target

    def save(self, result, result_path: str) -> Path:
        """Write ``result`` at ``result-path`` (folders created inside the results folder only)."""
        target = self.result_target(result_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        # checked again after the folders exist: a symlink made meanwhile does not lead out
        target = self.result_target(result_path)
        return result.save(target)

    # ------------------------------------------------------------------ truth
    def truth_file(self, truth: str) -> Path:
        """The truth CSV ``truth`` names inside the truth folder (it must exist)."""
        if _URL.match(truth):
            raise CoordinatorError(
                f"truth {truth!r} is a URL; the coordinator fetches nothing (put the file in "
                f"truth folder, {TRUTH_ENV})"
            )
        path = _inside(self.truth, truth, "truth", TRUTH_ENV)
        if not path.is_file():
            raise CoordinatorError(
                f"truth {truth!r}: no such file in the coordinator's truth folder ({TRUTH_ENV})"
            )
        return path

    # ------------------------------------------------------------------ plugins
    def check_plugins(self, plugins: str) -> None:
        """Every plugin module of a run config must be allowed by the operator."""
        for name in plugin_names(plugins):
            if name not in self.plugins:
                allowed = ", ".join(sorted(self.plugins)) or "none"
                raise CoordinatorError(
                    f"plugins: the coordinator does not import module {name!r}; its operator "
                    f"allows {allowed} ({PLUGINS_ENV})"
                )


def _inside(root: Path, relative: str, key: str, env: str) -> Path:
    """``root / relative`` if it stays inside ``root`` once symlinks are resolved."""
    given = Path(relative)
    if not relative or given.is_absolute() or ".." in given.parts:
        raise CoordinatorError(
            f"{key} {relative!r} must be a relative path inside the coordinator's folder "
            f"(set by its operator: {env}), without '..'"
        )
    base = root.resolve()
    target = (base / given).resolve()
    if target != base and not target.is_relative_to(base):
        raise CoordinatorError(
            f"{key} {relative!r} leads out of the coordinator's folder (a symlink); refused"
        )
    return target


def _evidence_by_us(path: Path) -> bool:
    """Whether ``path`` is a regular file holding evidence this project wrote."""
    return path.is_file() and is_evidence_file(path)


def _written_by_us(path: Path) -> bool:
    """Whether ``path`` holds a result JSON this project wrote (its format keys)."""
    try:
        with path.open("rb") as handle:
            content = json.loads(handle.read())
    except (OSError, ValueError):
        return False
    return isinstance(content, dict) and {"format_version", "method", "ledger"} <= set(content)
