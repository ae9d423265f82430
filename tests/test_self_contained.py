"""The repository reads nothing from outside itself: no text file points beside or above it.

Scans the text files git tracks (plus untracked, not-ignored ones, so new files count before their
first commit) under the project's folders; without git (e.g. in a copy of the tracked files) it
walks the same folders. The patterns are written so that this file does not match them.
"""

import re
from pathlib import Path

import pytest
from helpers import assert_no_hits, example_file, repository_files

REPO_ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("tests", "experiments", "fedcausal_flwr", "strategies", "clients", "docs", "README.md")

# name -> pattern; character classes such as [/] keep each pattern from matching its own source
OUTSIDE_REFERENCES = {
    "a folder beside the repository": re.compile(r"shared[/]data|\.\.[/]shared"),
    "__file__ climbing two or more levels": re.compile(
        r"__file__.*\.parents\[\s*(?:[2-9]|\d{2,})\s*\]"
    ),
    "an absolute machine path": re.compile(r"(?<![\w.~-])[/](?:work|root|home|Users|mnt)[/]"),
}


def scanned_files(root: Path) -> list[Path]:
    """Text-file candidates under :data:`SCANNED`."""
    return repository_files(root, SCANNED)


def outside_references(path: Path) -> list[str]:
    """``line N: what: text`` for every line of a text file that points outside the repository."""
    data = path.read_bytes()
    if b"\0" in data:
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return []
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in OUTSIDE_REFERENCES.items():
            if pattern.search(line):
                found.append(f"line {number}: {what}: {line.strip()[:120]}")
    return found


def test_no_text_file_points_outside_the_repository():
    files = scanned_files(REPO_ROOT)
    assert any(p.name == "test_self_contained.py" for p in files)  # the scan reaches tests/
    assert any(p.suffix == ".py" and "experiments" in p.parts for p in files)
    assert_no_hits(REPO_ROOT, files, outside_references, "references outside the repository")


@pytest.mark.parametrize(
    "line",
    [
        # split so that this file's own lines do not match
        "DATA = Path(__file__).resolve().pare" + 'nts[2] / "data"',
        "DATA = Path(__file__).pare" + "nts[ 3 ]",
        "see ../sha" + "red/data/sachs",
        "default ``../sha" + "red``",
        "open('/wo" + "rk/main/x.csv')",
        "cd /ro" + "ot/project",
    ],
)
def test_each_kind_of_outside_reference_is_caught(tmp_path, line):
    assert len(outside_references(example_file(tmp_path, "x = 1", line))) == 1


@pytest.mark.parametrize(
    "line",
    [
        "REPO_ROOT = Path(__file__).resolve().parents[1]",
        "net.parents[2]",
        "results/home/x.csv",
        "shared across clients",
    ],
)
def test_references_inside_the_repository_pass(tmp_path, line):
    assert outside_references(example_file(tmp_path, line)) == []
