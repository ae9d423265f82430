"""The documentation's figures, drawn by the code they document.

Runs the README's main job (ALARM, 5 000 rows over 5, 10 and 20 clients, 2 seeds) and a compare
of fedpc, fedpc-vote and fedecd on ALARM, copies their plots and learned-graph drawings into
``docs/figures/``, runs the tutorial's compare for its figure, builds the documentation site, and
takes screenshots at 1280 px of the main job's ``report.html``, of the second compare's learned
graphs and of the tutorial's page in headless Chromium with the network off
(``--no-screenshots`` without Chromium).

    python experiments/docs_figures.py [--out docs/figures] [--work DIR] [--no-screenshots]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from fedcausal_flwr.compare import compare

REPO_ROOT = Path(__file__).resolve().parents[1]
#: the screenshots' width: a laptop's browser window at 100% zoom
WIDTH = 1280
OFFLINE_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
    "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND",
)  # fmt: skip


def screenshot(page: Path, shot: Path, height: int, work: Path) -> None:
    """``page`` rendered by headless Chromium at WIDTH x ``height`` px into ``shot``."""
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
    if browser is None:
        raise SystemExit("no Chromium: install it, or run with --no-screenshots")
    profile = work / "chromium-profile"
    size = f"--window-size={WIDTH},{height}"
    command = [browser, *OFFLINE_FLAGS, f"--user-data-dir={profile}", size,
               f"--screenshot={shot}", page.as_uri()]  # fmt: skip
    env = {"HOME": str(work), "PATH": "/usr/bin:/bin"}
    subprocess.run(command, check=True, capture_output=True, timeout=180, env=env)


def section_page(report: Path, section: str, work: Path) -> Path:
    """One section of a ``report.html`` (``<section id=...>``) as a page of its own, with the
    report's head (its style): a screenshot then starts at that section."""
    text = report.read_text()
    start = text.index(f"<section id='{section}'>")
    end = text.index("</section>", start) + len("</section>")
    head = text[: text.index("<body>") + len("<body>")]
    page = work / f"{report.parent.name}-{section}.html"
    page.write_text(f"{head}{text[start:end]}</body></html>")
    return page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "figures")
    parser.add_argument("--work", type=Path, default=None, help="keep the runs here")
    parser.add_argument("--no-screenshots", action="store_true")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="docs-figures-"))
    out = args.out
    out.mkdir(parents=True, exist_ok=True)

    main_job = work / "main-job"
    compare(["fedpc", "fedpc-vote", "pc-vote", "pc-cit-vote", "pooled"], ["alarm"], [5, 10, 20],
            samples=5000, seeds=[0, 1], jobs=2, out=main_job)  # fmt: skip
    shutil.copy(main_job / "plots" / "arrow_f1_vs_K.png", out / "alarm_arrow_f1_vs_K.png")
    shutil.copy(main_job / "plots" / "graph_vs_truth.png", out / "alarm_graph_vs_truth.png")

    voting = work / "voting"
    compare(["fedpc", "fedpc-vote", "fedecd"], ["alarm"], [10], samples=5000, seeds=[0],
            jobs=2, out=voting)  # fmt: skip

    tutorial = work / "tutorial"
    compare(["fedpc", "pc-vote", "pooled"], ["child"], [3, 10], samples=2000, seeds=[0],
            out=tutorial)  # fmt: skip
    shutil.copy(tutorial / "plots" / "arrow_f1_vs_K.png", out / "tutorial_arrow_f1_vs_K.png")

    if not args.no_screenshots:
        screenshot(main_job / "report.html", out / "report.png", 1000, work)
        graphs = section_page(voting / "report.html", "graphs", work)
        screenshot(graphs, out / "report-alarm.png", 2400, work)
        site = work / "site"
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                        str(site)], cwd=REPO_ROOT, env=env, check=True)  # fmt: skip
        screenshot(site / "tutorial.html", out / "site-tutorial.png", 1400, work)
    print(f"figures in {out}; runs in {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
