"""Every shell block of the README runs in a test, so no example can rot.

Each block is classified by the comment on the line above it (a block without one fails):

* ``<!-- readme-test: run -->``: run here as written, with small sizes (:data:`SMALL`), in a fresh
  folder; ``flwr run`` examples on Flower's default local simulation;
* ``<!-- readme-test: synopsis -->``: a list of commands with alternatives (``a|b``, ``[...]``):
  every subcommand and every ``--flag`` it shows must exist (the command's ``--help`` lists it);
* ``<!-- readme-test: covered by FILE::TEST [via MODULE] -->``: a deployment command or the test
  command itself, which the named test (or ``.ci/run``) runs, through MODULE where it starts the
  processes; the test must exist and it (or MODULE) must name the commands.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fedcausal_flwr.environment import NO_PHONING_OUT
from fedcausal_flwr.federation.deployment.local_deployment import (
    _alive,
    end_processes,
    free_port,
    processes_with_env,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"<!-- readme-test: (.+?) -->")
#: the small sizes the runnable examples run with (pattern -> replacement)
SMALL = (
    (r"--samples \d+", "--samples 600"),
    (r"--clients [\d,]+", "--clients 2"),
    (r"--seeds [\d-]+", "--seeds 0"),
    (r"--jobs \d+", "--jobs 1"),
    (r"--networks alarm", "--networks asia"),
    (r"--run-config \"", '--run-config "samples=1500 '),
    (r" <federation>", ""),  # Flower's default local simulation
)


def readme_blocks() -> list[tuple[int, str, str]]:
    """``(line, classification, text)`` of every shell block of the README."""
    lines = (REPO_ROOT / "README.md").read_text().splitlines()
    blocks = []
    for number, line in enumerate(lines):
        if not re.match(r"^```(bash|sh|shell|console)\s*$", line):
            continue
        end = next(k for k in range(number + 1, len(lines)) if lines[k].startswith("```"))
        mark = MARK.search(lines[number - 1]) if number else None
        kind = mark.group(1) if mark else ""
        blocks.append((number + 1, kind, "\n".join(lines[number + 1 : end])))
    return blocks


def commands(text: str) -> list[str]:
    """The block's commands: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        command = line.split("  #", 1)[0].strip()
        if command and not command.startswith("#"):
            out.append(command)
    return out


BLOCKS = readme_blocks()


def test_every_shell_block_is_classified():
    unmarked = [line for line, kind, _ in BLOCKS if not kind]
    assert not unmarked, f"README shell blocks at lines {unmarked} have no readme-test comment"
    assert all(k in ("run", "synopsis") or k.startswith("covered by ") for _, k, _ in BLOCKS)


def blocks_of(wanted) -> dict:
    """``parametrize`` arguments for the blocks whose classification ``wanted(kind)`` accepts,
    each named by its README line."""
    chosen = [(line, text) for line, kind, text in BLOCKS if wanted(kind)]
    return {"argnames": "line, text", "argvalues": chosen, "ids": [f"line{n}" for n, _ in chosen]}


@pytest.mark.parametrize(**blocks_of(lambda kind: kind.startswith("covered by")))
def test_covered_blocks_name_a_test_that_runs_them(line, text):
    kind = next(k for n, k, _ in BLOCKS if n == line)
    target, _, via = kind.removeprefix("covered by ").partition(" via ")
    path, _, name = target.strip().partition("::")
    source = (REPO_ROOT / path).read_text()
    helper = (REPO_ROOT / via.strip()).read_text() if via else ""
    if name:
        assert re.search(rf"def {re.escape(name)}\(", source), f"line {line}: no test {target}"
    for command in commands(text):
        executable = shlex.split(command)[0]
        wanted = "pytest" if executable == "pip" else executable
        if path == ".ci/run":
            assert command in source, f"line {line}: .ci/run does not run {command!r}"
        elif executable == "fedcausal-flwr":
            assert shlex.split(command)[1] in source, f"line {line}: {target} runs no {command}"
        else:
            assert wanted in source + helper, f"line {line}: {target} does not start {wanted}"


@pytest.mark.parametrize(**blocks_of(lambda kind: kind == "synopsis"))
def test_synopsis_blocks_name_only_existing_commands_and_flags(line, text):
    for command in commands(text):
        words = command.split()
        assert words[0] == "fedcausal-flwr", command
        sub = [w for w in words[1:3] if re.fullmatch(r"[a-z]+", w)]
        argv = [sys.executable, "-m", "fedcausal_flwr.cli", *sub, "--help"]
        if sub[:1] == ["run"]:  # run's flags depend on the method
            method = re.search(r"--method (\S+)", command)
            argv = [sys.executable, "-m", "fedcausal_flwr.cli", "run", "--method",
                    method.group(1) if method else "fedpc", "--help"]  # fmt: skip
        shown = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert shown.returncode == 0, (command, shown.stderr[-2000:])
        for flag in set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", command)) - {"--help"}:
            assert flag in shown.stdout, f"README line {line}: {' '.join(sub)} has no {flag}"


def small(command: str) -> str:
    for pattern, replacement in SMALL:
        command = re.sub(pattern, replacement, command)
    return command


@pytest.mark.slow
@pytest.mark.parametrize(**blocks_of(lambda kind: kind == "run"))
def test_runnable_blocks_run(line, text, tmp_path):
    """Each command as written (small sizes; the install before `&&` is the one pytest runs
    in), in a fresh folder holding the app's manifest; `fedcausal-flwr` and `flwr` from the
    interpreter's own scripts."""
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    home = tmp_path / "flwr_home"
    scripts = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        **NO_PHONING_OUT,
        "PATH": scripts + os.pathsep + os.environ.get("PATH", ""),
        "FLWR_HOME": str(home),
        "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(free_port()),
        "FLWR_LOCAL_CONTROL_API_PORT": str(free_port()),
        "FEDCAUSAL_RESULTS_DIR": str(tmp_path / "coordinator-results"),
    }
    for command in commands(text):
        command = small(command.split(" && ", 1)[1] if command.startswith("pip ") else command)
        try:
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=300)  # fmt: skip
        finally:
            ended = end_processes(processes_with_env("FLWR_HOME", str(home)))
        assert not [p for p in ended if _alive(p)]
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"README line {line}: {command}\n{output[-3000:]}"
        assert "Traceback" not in output, f"README line {line}: {command}\n{output[-3000:]}"
        if command.startswith("flwr run"):  # flwr run exits 0 even when the ServerApp fails
            assert "ServerApp raised an exception" not in output, output[-3000:]
            assert "fedcausal-flwr: error" not in output, output[-3000:]
            if "result-path=" in command:
                name = re.search(r"result-path='([^']+)'", command).group(1)
                assert (tmp_path / "coordinator-results" / name).is_file(), output[-3000:]
