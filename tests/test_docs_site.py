"""The documentation site builds offline with warnings as errors (a broken link, a missing page,
an unknown anchor or API object fails), fetches nothing when opened, and every method has its
page; its code blocks run in ``test_doc_blocks.py``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fedcausal_flwr.environment import NO_PHONING_OUT
from fedcausal_flwr.federation.core.registry import builtin_methods

REPO_ROOT = Path(__file__).resolve().parents[1]
#: the module's tests share one pytest worker (pyproject's `--dist loadgroup`), so the site is
#: built once (apart, each worker built it: about 8 s each); a build is slow (`pytest -m slow`)
pytestmark = [pytest.mark.xdist_group("docs-site"), pytest.mark.slow]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, **NO_PHONING_OUT, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return out, built.stdout + built.stderr + f"\nexit {built.returncode}"


def test_the_site_builds_offline_without_a_warning(site):
    out, log = site
    assert log.endswith("exit 0"), log[-3000:]
    assert not [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))], log
    assert (out / "index.html").is_file() and (out / "reference.html").is_file()


def test_the_site_fetches_nothing_when_opened(site):
    """No web fonts, scripts or styles from elsewhere: the pages open from the file system."""
    out, _ = site
    for page in out.rglob("*.html"):
        fetched = re.findall(r"<(?:script|link|img)[^>]+(?:src|href)=\"(https?://[^\"]+)\"",
                             page.read_text())  # fmt: skip
        assert not fetched, f"{page.name} fetches {fetched}"


def test_every_method_has_a_page_with_its_declarations(site):
    """Each registered method's declaration (options, what its sites send) is on a method
    page, inserted from the registry, never restated by hand."""
    out, _ = site
    pages = "".join(p.read_text() for p in (out / "methods").glob("*.html"))
    for name in builtin_methods():
        assert f'id="{name}"' in pages, f"no method page declares {name}"


def test_the_api_reference_shows_the_facades_parameters(site):
    out, _ = site
    reference = (out / "reference.html").read_text()
    for name in ("**method_options", "backend", "truth"):
        assert f"<code>{name}</code>" in reference, name
