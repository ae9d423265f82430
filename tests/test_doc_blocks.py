"""Every code block of the README and the documentation site runs in a test, so no example can rot.

Each shell or Python block is classified by the comment on the line above it (a block without
one fails):

* ``<!-- doc-test: run -->`` (shell) and ``<!-- doc-test: python -->``: the page's blocks of
  these two kinds run as written, in the page's order, in one fresh folder (a page is a
  notebook: a later block may read what an earlier one wrote), Python blocks in one namespace.
  A ``fedcausal-flwr`` command runs in this process (its globs expanded as a shell would), any
  other command in ``bash``; the main job's commands take the small sizes of :data:`SMALL`. A
  page whose commands start Ray or Flower processes runs with the slow tests.
* ``<!-- doc-test: synopsis -->``: a list of commands with alternatives (``a|b``, ``[...]``):
  every subcommand and every ``--flag`` it shows must exist (the command's ``--help`` lists it);
* ``<!-- doc-test: covered by FILE[::TEST] [via MODULE] -->``: a deployment command, or the test
  command itself, which the named test (or ``.ci/run``) runs, through MODULE where it starts the
  processes; the test must exist and it (or MODULE) must name the commands.
"""

from __future__ import annotations

import contextlib
import glob
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fedcausal_flwr.cli import main
from fedcausal_flwr.environment import NO_PHONING_OUT
from fedcausal_flwr.federation.deployment.local_deployment import free_port
from fedcausal_flwr.processes import alive, end_processes, processes_with_env

REPO_ROOT = Path(__file__).resolve().parents[1]
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
MARK = re.compile(r"<!-- doc-test: (.+?) -->")
FENCE = re.compile(r"^\s*```(bash|sh|shell|console|python)\s*$")  # in a list item too
#: the small sizes the README's runnable commands run with (pattern -> replacement; the site's
#: pages are small as written)
SMALL = (
    (r"--samples \d+", "--samples 600"),
    (r"--clients [\d,]+", "--clients 2"),
    (r"--seeds [\d-]+", "--seeds 0"),
    (r"--jobs \d+", "--jobs 1"),
    (r"--networks alarm", "--networks asia"),
    (r"--run-config \"", '--run-config "samples=1500 '),
    (r" <federation>", ""),  # Flower's default local simulation
)
#: the pages that show the main job at its full size (it runs with :data:`SMALL`)
MAIN_JOB_PAGES = ("README.md", "docs/getting-started.md")
#: commands that start Ray or Flower processes: their page runs with the slow tests, and they
#: run in their own process (RAY_TMPDIR: the session's, tests/conftest.py)
SLOW = re.compile(r"--backend ray|^flwr |--ray-address")


def page_name(page: Path) -> str:
    return str(page.relative_to(REPO_ROOT))


def page_blocks(page: Path) -> list[tuple[int, str, str, str]]:
    """``(line, classification, language, text)`` of every shell or Python block of a page."""
    lines = page.read_text().splitlines()
    blocks = []
    for number, line in enumerate(lines):
        fence = FENCE.match(line)
        if not fence:
            continue
        end = next(k for k in range(number + 1, len(lines)) if lines[k].lstrip().startswith("```"))
        mark = MARK.search(lines[number - 1]) if number else None
        kind = mark.group(1) if mark else ""
        text = "\n".join(lines[number + 1 : end])
        blocks.append((number + 1, kind, fence.group(1), text))
    return blocks


BLOCKS = [(page, *block) for page in PAGES for block in page_blocks(page)]


def commands(text: str) -> list[str]:
    """The block's commands: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        command = line.split("  #", 1)[0].strip()
        if command and not command.startswith("#"):
            out.append(command)
    return out


def blocks_of(wanted) -> dict:
    """``parametrize`` arguments for the blocks whose classification ``wanted(kind)`` accepts."""
    chosen = [block for block in BLOCKS if wanted(block[2])]
    return {
        "argnames": "page, line, kind, language, text",
        "argvalues": chosen,
        "ids": [f"{page_name(page)}:{line}" for page, line, *_ in chosen],
    }


def test_every_code_block_is_classified():
    unmarked = [f"{page_name(p)}:{line}" for p, line, kind, _, _ in BLOCKS if not kind]
    assert not unmarked, f"code blocks without a doc-test comment: {unmarked}"
    for page, line, kind, language, _ in BLOCKS:
        where = f"{page_name(page)}:{line}"
        if language == "python":
            assert kind == "python" or kind.startswith("covered by "), where
        else:
            assert kind in ("run", "synopsis") or kind.startswith("covered by "), where


@pytest.mark.parametrize(**blocks_of(lambda kind: kind.startswith("covered by")))
def test_covered_blocks_name_a_test_that_runs_them(page, line, kind, language, text):
    target, _, via = kind.removeprefix("covered by ").partition(" via ")
    path, _, name = target.strip().partition("::")
    source = (REPO_ROOT / path).read_text()
    helper = (REPO_ROOT / via.strip()).read_text() if via else ""
    where = f"{page_name(page)}:{line}"
    if name:
        assert re.search(rf"def {re.escape(name)}\(", source), f"{where}: no test {target}"
    if language == "python":  # the named test runs the code
        return
    for command in commands(text):
        words = [w for w in shlex.split(command) if "=" not in w.split("-")[0]]  # no VAR=value
        executable = words[0]
        wanted = "pytest" if command.startswith("pip ") and "pytest" in command else executable
        if executable.startswith("python") and "-m" in words:  # the module a test starts
            wanted = words[words.index("-m") + 1]
        if executable == "export":  # a variable the test sets or checks
            wanted = shlex.split(command)[1].split("=")[0]
        if path == ".ci/run":
            assert command in source, f"{where}: .ci/run does not run {command!r}"
        elif executable == "fedcausal-flwr":
            assert words[1] in source, f"{where}: {target} runs no {command}"
        else:
            assert wanted in source + helper, f"{where}: {target} does not start {wanted}"


@pytest.mark.parametrize(**blocks_of(lambda kind: kind == "synopsis"))
def test_synopsis_blocks_name_only_existing_commands_and_flags(page, line, kind, language, text):
    for command in commands(text):
        words = command.split()
        assert words[0] == "fedcausal-flwr", command
        sub = [w for w in words[1:3] if re.fullmatch(r"[a-z]+", w)]
        argv = [*sub, "--help"]
        if sub[:1] == ["run"]:  # run's flags depend on the method
            method = re.search(r"--method (\S+)", command)
            argv = ["run", "--method", method.group(1) if method else "fedpc", "--help"]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            try:
                code = main(argv)
            except SystemExit as ended:  # argparse's --help
                code = ended.code
        assert code in (0, None), (command, printed.getvalue()[-2000:])
        shown = printed.getvalue()
        for flag in set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", command)) - {"--help"}:
            assert flag in shown, f"{page_name(page)}:{line}: {' '.join(sub)} has no {flag}"


def small(command: str) -> str:
    for pattern, replacement in SMALL:
        command = re.sub(pattern, replacement, command)
    return command


def runnable_pages(slow: bool) -> dict:
    """``parametrize`` arguments: the pages with blocks to run, those that start processes
    (``slow``) or those that do not."""
    chosen = []
    for page in PAGES:
        blocks = [b for b in page_blocks(page) if b[1] in ("run", "python")]
        starts = any(SLOW.search(c) for _, k, _, t in blocks if k == "run" for c in commands(t))
        if blocks and starts == slow:
            chosen.append(page)
    return {"argnames": "page", "argvalues": chosen, "ids": [page_name(p) for p in chosen]}


def run_page(page: Path, folder: Path, env: dict[str, str]) -> None:
    """A page's runnable blocks in order in ``folder``: Python in one namespace, commands in
    this process (``fedcausal-flwr``) or in bash."""
    namespace: dict[str, object] = {"__name__": "__doc_page__"}
    for line, kind, _, text in page_blocks(page):
        where = f"{page_name(page)}:{line}"
        if kind == "python":
            exec(compile(text, where, "exec"), namespace)
        elif kind == "run":
            for command in commands(text):
                shrunk = small(command) if page_name(page) in MAIN_JOB_PAGES else command
                run_command(shrunk, where, folder, env)


def run_command(command: str, where: str, folder: Path, env: dict[str, str]) -> None:
    """One shell command as a user types it (the install before `&&` is the one pytest runs
    in); ``flwr run`` must also leave its result and no failed ServerApp."""
    if command.startswith("pip ") and " && " in command:
        command = command.split(" && ", 1)[1]
    words = shlex.split(command)
    if (
        words[0] == "fedcausal-flwr"
        and not re.search(r"[|&;<>]", command)
        and not SLOW.search(command)
    ):
        argv = [m for w in words[1:] for m in (sorted(glob.glob(w)) or [w])]  # the shell's globs
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        output = out.getvalue() + err.getvalue()
        assert code == 0, f"{where}: {command}\n{output[-3000:]}"
        return
    home = env["FLWR_HOME"]
    try:
        done = subprocess.run(["bash", "-c", command], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
    finally:
        ended = end_processes(processes_with_env("FLWR_HOME", home))
    assert not [p for p in ended if alive(p)]
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{where}: {command}\n{output[-3000:]}"
    assert "Traceback" not in output, f"{where}: {command}\n{output[-3000:]}"
    if command.startswith("flwr run"):  # flwr run exits 0 even when the ServerApp fails
        assert "ServerApp raised an exception" not in output, output[-3000:]
        assert "fedcausal-flwr: error" not in output, output[-3000:]
        if "result-path=" in command:
            name = re.search(r"result-path='([^']+)'", command).group(1)
            assert (Path(env["FEDCAUSAL_RESULTS_DIR"]) / name).is_file(), output[-3000:]


@contextlib.contextmanager
def page_folder(tmp_path: Path):
    """A fresh folder holding the app's manifest, as the current directory; `fedcausal-flwr`
    and `flwr` from the interpreter's own scripts."""
    (tmp_path / "pyproject.toml").write_text((REPO_ROOT / "pyproject.toml").read_text())
    scripts = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        **NO_PHONING_OUT,
        "PATH": scripts + os.pathsep + os.environ.get("PATH", ""),
        "FLWR_HOME": str(tmp_path / "flwr_home"),
        "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(free_port()),
        "FLWR_LOCAL_CONTROL_API_PORT": str(free_port()),
        "FEDCAUSAL_RESULTS_DIR": str(tmp_path / "coordinator-results"),
        "MPLBACKEND": "Agg",
    }
    before = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield env
    finally:
        os.chdir(before)


@pytest.mark.parametrize(**runnable_pages(slow=False))
def test_a_pages_blocks_run_in_order(page, tmp_path):
    with page_folder(tmp_path) as env:
        run_page(page, tmp_path, env)


@pytest.mark.slow
@pytest.mark.parametrize(**runnable_pages(slow=True))
def test_a_pages_blocks_that_start_processes_run_in_order(page, tmp_path):
    with page_folder(tmp_path) as env:
        run_page(page, tmp_path, env)
