"""Shared test helpers (imported by test modules; not a test module itself)."""

import bz2
import gzip
import io
import lzma
import math
import os
import subprocess
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

#: ``run_method(..., backend="ray", **ONE_ACTOR)``: one Ray actor serves every client (each
#: actor is a Python process that starts Ray's worker and imports Flower and the package, ~4.5
#: CPU-s). For tests of a method on Ray, where the method, not the engine, is under test; the
#: engine's default of an actor per 2 cores is tested in test_federation_ray.py.
ONE_ACTOR = {"ray_num_cpus": float(os.cpu_count() or 1)}

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


def assert_no_hits(
    root: Path, files: Sequence[Path], find: Callable[[Path], list[str]], what: str
) -> None:
    """No file has a hit by ``find``; else fail listing ``what`` was found, as ``path, hit``
    (the path relative to ``root``)."""
    found = [f"{p.relative_to(root)}, {hit}" for p in files for hit in find(p)]
    assert not found, f"{what}:\n" + "\n".join(found)


def example_file(folder: Path, *lines: str) -> Path:
    """``example.py`` in ``folder``, holding ``lines``: a file for a line-scanning check."""
    path = folder / "example.py"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def uneven_clients(frame: pd.DataFrame, k: int, seed: int | None = None) -> list[pd.DataFrame]:
    """``frame`` split over ``k`` clients of Dirichlet(1) sizes, at least 30 rows each (seeded by
    ``seed``, by default ``k``); one client holds the whole frame."""
    from fedcausal_flwr.data.partition import split_sizes

    if k == 1:
        return [frame]
    return split_sizes(frame, alpha=1.0, k=k, seed=k if seed is None else seed, min_rows=30).clients


def compressed(data: bytes, how: str | None, zip_method: int = zipfile.ZIP_STORED) -> bytes:
    """``data`` as a ``gzip``, ``bz2``, ``xz`` or ``zip`` file (one member, ``site.csv``, written
    by ``zip_method``), unchanged for None."""
    if how is None:
        return data
    if how == "gzip":
        return gzip.compress(data)
    if how == "bz2":
        return bz2.compress(data)
    if how == "xz":
        return lzma.compress(data)
    assert how == "zip", how
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zip_method) as archive:
        archive.writestr("site.csv", data)
    return buffer.getvalue()


def run_cli(capsys, method: str, paths: list[str], *extra: str) -> tuple[int, str, str]:
    """``fedcausal-flwr run`` of ``method`` on the CSV files ``paths``, in process: the exit code
    and what it printed to stdout and stderr."""
    from fedcausal_flwr.cli import main

    code = main(["run", "--method", method, "--backend", "inprocess", "--data", *paths, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def cli_result(capsys, folder: Path, method: str, paths: list[str], *extra: str):
    """The :class:`~fedcausal_flwr.result.Result` a successful command-line run writes (its file
    goes to ``folder``)."""
    from fedcausal_flwr.result import Result

    out_file = folder / f"result-{len(list(folder.iterdir()))}.json"
    code, out, err = run_cli(capsys, method, paths, "--out", str(out_file), *extra)
    assert code == 0, out + err
    return Result.load(out_file)


def refused(capsys, method: str, paths: list[str], *extra: str) -> str:
    """The one-line error of a refused command-line run (exit code 2, no traceback)."""
    code, out, err = run_cli(capsys, method, paths, *extra)
    assert code == 2, out + err
    assert err.startswith("fedcausal-flwr: error: ") and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    return err.strip()


def mixed_site_frames(n_rows: int) -> list[pd.DataFrame]:
    """Three sites' frames with site effects from a random 5-variable DAG (seed 1) of
    continuous, binary, ordinal and categorical variables (3 levels): ``n_rows`` rows."""
    from fedcausal_flwr.data.partition import split_site_effects
    from fedcausal_flwr.data.synthetic import random_dag

    types = {"X1": "continuous", "X2": "binary", "X3": "ordinal", "X4": "categorical",
             "X5": "continuous"}  # fmt: skip
    dag = random_dag(5, expected_degree=2.5, seed=1)
    return split_site_effects(dag, n_rows, 3, seed=1, types=types, n_levels=3).clients


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


def slow_when(values: Sequence, is_slow: Callable[[object], bool], ids: Callable | None = None):
    """``values`` as parametrize cases, those for which ``is_slow`` holds marked slow (they run
    in `pytest -m slow`, after the suite: the larger grids' cases)."""
    return [
        pytest.param(
            v, id=None if ids is None else ids(v), marks=[pytest.mark.slow] if is_slow(v) else []
        )
        for v in values
    ]
