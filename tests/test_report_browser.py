"""The study report rendered by a real browser: headless Chromium (Debian's ``chromium``; `.ci/run`
installs it when missing) takes a screenshot and serialises the page it parsed.

Chromium runs with every background service off and a host resolver that resolves nothing, so it
cannot reach the network; the page is a local file.
"""

import re
import shutil
import subprocess

import numpy as np
import pytest

from fedcausal_flwr.compare import compare

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
OFFLINE_FLAGS = (
    "--headless",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--hide-scrollbars",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)


def _browser() -> str:
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    pytest.skip(
        "no Chromium on this machine (Debian: apt-get install chromium; .ci/run installs it): "
        "the report was not rendered in a browser"
    )


def _chromium(browser: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    command = [browser, *OFFLINE_FLAGS, f"--user-data-dir={profile}", *args]
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    return subprocess.run(command, capture_output=True, text=True, timeout=180, env=env)


@pytest.mark.slow
def test_report_renders_in_headless_chromium(tmp_path):
    browser = _browser()
    out = tmp_path / "study"
    methods = ["fedpc", "pc-vote", "pooled"]
    study = compare(methods, ["asia"], [2, 4], samples=800, seeds=[0, 1], out=out,
                    progress=False)  # fmt: skip
    url = study.report.resolve().as_uri()
    shot = tmp_path / "shot.png"
    done = _chromium(browser, tmp_path, "--window-size=1280,2400", f"--screenshot={shot}", url)
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]

    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (2400, 1280)
    ink = (pixels < 0.9).any(axis=2)  # not (near-)white
    assert 0.02 < ink.mean() < 0.9, ink.mean()  # text, tables and plots, not a blank page
    colours = np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 50  # plots in colour, not one flat fill

    dom = _chromium(browser, tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = re.sub(r"<[^>]+>", " ", dom.stdout)
    for header in ("Settings", "Summary", "Learned graphs", "Rounds and bytes",
                   "What the server received", "method", "K = 2", "K = 4", "bytes up"):  # fmt: skip
        assert header in text, header
    for method in methods:
        assert re.search(rf"\b{re.escape(method)}\b", text), method
    assert dom.stdout.count("data:image/png;base64,") >= len(study.plots) - 1 + len(methods)
