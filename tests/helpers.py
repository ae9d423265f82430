"""Shared test helpers (imported by test modules; not a test module itself)."""

import math
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

SKIPPED_PARTS = {".git", "__pycache__", ".pytest_cache", ".ruff_cache", ".venv", "build", "dist"}


def repository_files(
    root: Path, within: Sequence[str] = (), suffixes: Sequence[str] = ()
) -> list[Path]:
    """The repository's files (under ``within``, with one of ``suffixes``; all if empty): what
    git tracks plus untracked, not-ignored files (so new files count before their first commit);
    without git (e.g. in a copy of the tracked files) every file under the same folders."""
    if (root / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *within],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout.decode()
        paths = [root / name for name in listed.split("\0") if name]
    else:
        paths = []
        for top in [root / name for name in within] or [root]:
            paths += [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
    return [
        p
        for p in paths
        if p.is_file()
        and (not suffixes or p.suffix in suffixes)
        and not SKIPPED_PARTS & set(p.relative_to(root).parts)
    ]


def padded_names(p: int) -> list[str]:
    """Names whose string order equals index order (causal-learn sorts some node lists by name)."""
    return [f"X{i:03d}" for i in range(p)]


def codes_of(df: pd.DataFrame) -> np.ndarray:
    return df.to_numpy(dtype=np.int64)


def assert_self_contained_html(text: str) -> None:
    """A page that opens offline: no script, no external source, stylesheet or link target
    other than its own anchors; images inline."""
    import re

    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert "<script" not in text.lower()
    assert not re.search(r"""(?:src|href)\s*=\s*['"](?!data:|#)""", text), "external reference"
    assert "@import" not in text and "url(" not in text


def assert_experiment_folder(folder: Path, name: str, *texts: str) -> str:
    """A named experiment's folder: its console log, what ran, and a self-contained report that
    carries the experiment's name and ``texts`` (from the console output). Returns the page."""
    import json

    meta = json.loads((folder / "experiment.json").read_text())
    assert meta["name"] == name and meta["exit_code"] == 0 and meta["command"].endswith("--quick")
    log = (folder / "log.txt").read_text()
    page = (folder / "report.html").read_text()
    assert_self_contained_html(page)
    assert f"Experiment {name}" in page and "Console output" in page
    for text in texts:
        assert text in log and text in page, text
    return page


# ---------------------------------------------------------------- discrete data and tests
def random_discrete_bn(rng, n_vars, n_rows, *, edge_prob=0.35, max_parents=3, alpha=0.4):
    """Codes sampled from a random discrete BN (topological order 0..p-1), plus global cards.

    Small Dirichlet concentration gives rare levels; a few variables get an extra global level that
    is never sampled (an unobserved level).
    """
    cards = rng.integers(2, 5, n_vars)
    codes = np.empty((n_rows, n_vars), dtype=np.int64)
    for j in range(n_vars):
        candidates = np.flatnonzero(rng.random(j) < edge_prob)
        parents = rng.permutation(candidates)[:max_parents]
        n_configs = math.prod(int(cards[v]) for v in parents)
        cpt = rng.dirichlet(np.full(cards[j], alpha), size=n_configs)
        config = np.zeros(n_rows, dtype=np.int64)
        for v in parents:
            config = config * cards[v] + codes[:, v]
        cumulative = cpt.cumsum(axis=1)[config]
        codes[:, j] = (rng.random(n_rows)[:, None] > cumulative[:, :-1]).sum(axis=1)
    global_cards = cards + (rng.random(n_vars) < 0.3)
    return codes, global_cards


def random_queries(rng, n_vars, n_queries, max_s):
    out = []
    for _ in range(n_queries):
        k = int(rng.integers(0, max_s + 1))
        v = rng.choice(n_vars, k + 2, replace=False)
        out.append((int(v[0]), int(v[1]), tuple(int(s) for s in v[2:])))
    return out


def causallearn_pvalues(codes, queries, method):
    from causallearn.utils.cit import CIT  # a test-only reference, imported where used

    cit = CIT(codes, method)
    return np.array([cit(x, y, list(s)) for x, y, s in queries])
