"""Every citation in a comment, docstring or Markdown file can be followed by a reader.

A reference must point at the paper (section, equation, table, algorithm line) or at a note the
repository ships (``docs/*.md``). Scans the ``.py`` and ``.md`` files git tracks (plus untracked,
not-ignored ones, so new files count before their first commit); without git (e.g. in a copy of
the tracked files) it walks the tree. Flagged: citation forms that point at material the
repository does not ship (the three patterns of :data:`UNFOLLOWABLE`: an id "seed-00" followed
by a digit, a bracketed upper-case REC marker, a word used as a citation), and a
``docs/<name>.md`` path that does not exist. Hash code spelling the same word is allowed: part
of an identifier (``hex...``, ``..._name``), an assignment, an attribute or a call, an f-string
field, and the whole of ``fedcausal_flwr/data/fingerprint.py``. The patterns are written so that
this file does not match them.
"""

import re
from pathlib import Path

import pytest
from helpers import assert_no_hits, example_file, repository_files

REPO_ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = (".py", ".md")
# files that use the word for a hash throughout (a data fingerprint)
HASH_FILES = {"fedcausal_flwr/data/fingerprint.py"}

# name -> pattern; character classes such as [-] keep each pattern from matching its own source
UNFOLLOWABLE = {
    "an id of an unshipped source": re.compile(r"seed[-]00\d", re.IGNORECASE),
    "a bracketed REC marker": re.compile(r"\[RE[C]\]"),
    # the word, unless it is hash code: part of an identifier, an assignment, an attribute or a
    # call, or an f-string field
    "a citation by that word": re.compile(
        r"(?<![\w.])dig[e]st(?!_|\s*=(?!=)|\.\w|\(|\})", re.IGNORECASE
    ),
}
DOCS_PATH = re.compile(r"(?<![\w/.-])docs[/][\w./-]*?\.md\b")


def scanned_files(root: Path) -> list[Path]:
    """The ``.py`` and ``.md`` files of the repository."""
    return repository_files(root, suffixes=SUFFIXES)


def unfollowable_citations(path: Path, root: Path = REPO_ROOT) -> list[str]:
    """``line N: what: text`` for every line that cites something a reader cannot follow."""
    try:
        relative = path.relative_to(root).as_posix()
    except ValueError:
        relative = path.name
    text = path.read_text(encoding="utf-8", errors="replace")
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in UNFOLLOWABLE.items():
            if relative in HASH_FILES and what == "a citation by that word":
                continue
            if pattern.search(line):
                found.append(f"line {number}: {what}: {line.strip()[:120]}")
        for match in DOCS_PATH.finditer(line):
            if not (root / match.group(0)).is_file():
                found.append(f"line {number}: missing note {match.group(0)}: {line.strip()[:120]}")
    return found


def test_every_citation_can_be_followed():
    files = scanned_files(REPO_ROOT)
    assert any(p.name == "test_citations.py" for p in files)  # the scan reaches tests/
    assert any(p.suffix == ".md" for p in files)
    assert_no_hits(REPO_ROOT, files, unfollowable_citations, "citations a reader cannot follow")


@pytest.mark.parametrize(
    "line",
    [
        # split so that this file's own lines do not match
        "# (see seed-0" + "03 notes, section 4.3)",
        '"""Defaults are the paper\'s values and the [R' + 'EC] ones."""',
        "stratum of a table; seed-0" + "01 notes, section 2.3.6)",
        "# ordinal cell probabilities (dig" + "est 2.1)",
        "Privacy caveat (Dig" + "est): the server can invert the sketch",
        "the dig" + "est's worked example",
        "(the dig" + "ests recommend it)",
        "(a choice where the paper is silent: docs/nowh" + "ere.md, FedCDnv)",
    ],
)
def test_each_kind_of_unfollowable_citation_is_caught(tmp_path, line):
    assert len(unfollowable_citations(example_file(tmp_path, "x = 1", line), tmp_path)) == 1


@pytest.mark.parametrize(
    "line",
    [
        "assert hashlib.sha256(data).hexdig" + "est() == listed[name]",
        "dig" + "est = hashlib.sha256()",
        "dig" + "est.update(frame.to_numpy().tobytes())",
        "hashlib.sha256(packed).dig" + "est()",
        'return f"{safe}__s{self.seed}__{dig' + 'est}"',
        "def test_level2_reproduces_the_dig" + "est_worked_examples():",
        "(a choice where the paper is silent: docs/choices.md, FedCDnv)",
        "FedC2SL paper, Sec. 4.2 / Eq. (7); seed = 3",
    ],
)
def test_hash_code_and_followable_citations_pass(tmp_path, line):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "choices.md").write_text("# Choices\n")
    assert unfollowable_citations(example_file(tmp_path, line), tmp_path) == []


def test_the_hash_file_is_exempt(tmp_path):
    path = tmp_path / "fedcausal_flwr" / "data" / "fingerprint.py"
    path.parent.mkdir(parents=True)
    path.write_text('"""Data fingerprints: a short dig' + 'est of the client data."""\n')
    assert unfollowable_citations(path, tmp_path) == []
