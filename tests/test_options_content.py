"""Options that may name a file take content, never a path, from a run config.

A run config reaches every site and the coordinator, and each resolves the method's options
itself: a path there (``options='knowledge=/etc/shadow'``) would make every machine read a file of
its own and quote its first line in the error. So from a run config ``knowledge`` takes statements
and ``schema`` Schema JSON only, refused otherwise without touching the file system and without
quoting the value; the user's own entry points (command line, Python, ``compare`` specs) still
read a local file and pass its content on.
"""

from __future__ import annotations

import builtins
import io
import os
import pathlib
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from test_site_policy import run_app, write_sites

import fedcausal_flwr
from fedcausal_flwr.cli import main
from fedcausal_flwr.data.specs import sample_partition
from fedcausal_flwr.federation.core.registry import get_method
from fedcausal_flwr.flwr_app import resolve_run_config
from fedcausal_flwr.graphs.knowledge import Knowledge
from fedcausal_flwr.options import Option, OptionError, OptionSet
from fedcausal_flwr.result import Result

SECRET = "root:$6$SECRET-HASH-LINE:19000:0:99999:7:::"
#: a file that reads as knowledge: statements naming variables the run has
KNOWLEDGE_LIKE = "forbidden asia -> smoke\ntier asia smoke\n"
#: asia's background knowledge as a file (comments and all) and as a run config's statements
ASIA_FILE = """# what the clinic knows
tier asia smoke          # exposures first
tier tub lung bronc
forbidden xray -- dysp
required smoke -> lung
"""
ASIA_INLINE = "tier asia smoke; tier tub lung bronc; forbidden xray -- dysp; required smoke -> lung"
SCHEMA_JSON = '{"variables": [{"name": "A", "kind": "binary", "levels": [0, 1]}]}'


@pytest.fixture
def watched(monkeypatch, tmp_path) -> tuple[Path, list[tuple[str, str]]]:
    """A folder whose every file-system use (open, stat, exists, read) is recorded: the calls
    that name a path inside it, as ``(function, path)``."""
    folder = tmp_path / "private"
    folder.mkdir()
    calls: list[tuple[str, str]] = []

    def inside(arg: object) -> str | None:
        if isinstance(arg, (str, bytes, os.PathLike)):
            text = os.fsdecode(os.fspath(arg))
            if text.startswith(str(folder)):
                return text
        return None

    def watch(owner: object, name: str) -> None:
        original: Callable = getattr(owner, name)

        def recorded(*args, **kwargs):
            for arg in args[:2]:  # the path (a method's self, or its first argument)
                path = inside(arg)
                if path is not None:
                    calls.append((name, path))
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, recorded)

    for owner, names in (
        (builtins, ("open",)),
        (io, ("open",)),
        (os, ("open", "stat", "lstat", "access", "listdir", "scandir")),
        (pathlib.Path, ("open", "read_text", "read_bytes", "stat", "exists", "is_file")),
    ):
        for name in names:
            watch(owner, name)
    return folder, calls


def _refused(run_config: dict) -> str:
    with pytest.raises(OptionError) as caught:
        resolve_run_config(run_config)
    return str(caught.value)


# ------------------------------------------------------------------ (a) a path is never read
@pytest.mark.parametrize("content", [SECRET + "\nmore\n", KNOWLEDGE_LIKE])
@pytest.mark.parametrize("method", ["fedpc", "fedfci", "pooled", "fedci-pc", "pc-vote"])
def test_a_knowledge_path_in_a_run_config_is_refused_unread(watched, method, content):
    folder, calls = watched
    path = folder / "shadow"
    path.write_text(content)
    calls.clear()
    message = _refused({"method": method, "options": f"knowledge={path}"})
    assert calls == []  # not opened, not even looked at
    assert "option knowledge" in message
    assert "knowledge='forbidden A -> B; tier C D'" in message  # what to give instead
    assert "\n" not in message
    for leaked in (SECRET, "SECRET", "asia", str(path), "shadow", str(folder)):
        assert leaked not in message


@pytest.mark.parametrize(
    "value",
    ["~/knowledge.txt", "knowledge.txt", "./forbidden", "forbiddenfile", "a;b"],
)
def test_anything_but_statements_is_refused_without_the_value(watched, monkeypatch, value):
    folder, calls = watched
    monkeypatch.chdir(folder)  # a relative path names a file in the watched folder
    (folder / "knowledge.txt").write_text(KNOWLEDGE_LIKE)
    calls.clear()
    message = _refused({"method": "fedpc", "options": f"knowledge='{value}'"})
    assert calls == []
    assert "a run config carries the knowledge statements, not a file" in message
    assert value not in message


def test_a_schema_path_in_a_run_config_is_refused_unread(watched):
    folder, calls = watched
    path = folder / "schema.json"
    path.write_text(SCHEMA_JSON.replace('"A"', '"SECRET_COLUMN"'))
    calls.clear()
    message = _refused({"method": "fedci-pc", "options": f"schema={path}"})
    assert calls == []
    assert "option schema: a run config carries the schema JSON, not a file" in message
    for leaked in ("SECRET_COLUMN", str(path), "schema.json"):
        assert leaked not in message


@pytest.mark.parametrize(
    ("statements", "problem"),
    [
        ("forbidden SECRET_A -> SECRET_A", "line 1: an edge needs two different variables"),
        ("tier SECRET_A; forbidden SECRET_A => SECRET_B", "line 2: expected 'forbidden A -> B'"),
        ("tier SECRET_A; tier SECRET_B SECRET_A", "line 2: a variable is in two tiers"),
        ("required SECRET_A -- SECRET_B", "line 1: a required edge has a direction"),
        ("forbidden SECRET_A -> SECRET_B; required SECRET_A -> SECRET_B", "is forbidden"),
        ("required SECRET_A -> SECRET_B; required SECRET_B -> SECRET_A", "required both ways"),
        (
            "required SECRET_A -> SECRET_B; required SECRET_B -> SECRET_C; "
            "required SECRET_C -> SECRET_A",
            "form a directed cycle",
        ),
        ('tier "SECRET_A', "line 1: No closing quotation"),
    ],
)
def test_errors_in_a_run_configs_statements_name_the_line_not_its_words(statements, problem):
    message = _refused({"method": "fedpc", "options": f"knowledge='{statements}'"})
    assert problem in message
    assert "SECRET" not in message
    if "quotation" not in problem:  # the user's own statements (Python) are quoted, as before
        with pytest.raises(OptionError, match="SECRET"):
            get_method("fedpc").resolve({"knowledge": statements}, "python")


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ('{"variables": [{"name": "SECRET_A", "kind": "SECRET_KIND"}]}', "not a valid schema"),
        ('{"variables": [{"name": "SECRET_A", "kind": "binary"}]}', "not a valid schema"),
        ('{"SECRET_A": ', "not valid JSON (line 1, column"),
    ],
)
def test_errors_in_a_run_configs_schema_never_quote_it(schema, problem):
    message = _refused({"method": "fedci-pc", "options": f"schema='{schema}'"})
    assert problem in message and "SECRET" not in message


def test_every_option_that_may_name_a_file_is_told_its_entry_point():
    """The machinery: a ``local_file`` converter hears where the value was typed."""
    seen = Option("seen", "str", None, "where", nullable=True, convert=lambda v, ep: ep,
                  local_file=True)  # fmt: skip
    options = OptionSet((seen, Option("plain", "str", None, "p", convert=str.upper)))
    for entry_point in ("python", "cli", "spec", "config"):
        values = options.resolve({"seen": "x", "plain": "y"}, owner="t", entry_point=entry_point)
        assert values == {"seen": entry_point, "plain": "Y"}


# ------------------------------------------------ (b) the deployment apps stop at the coordinator
SITES = 3


@pytest.fixture(scope="module")
def asia_frames() -> list[pd.DataFrame]:
    part, _ = sample_partition("asia", 900, SITES, "iid", 0)
    return part.clients


@pytest.mark.parametrize("content", [SECRET + "\n", KNOWLEDGE_LIKE])
def test_the_coordinator_refuses_a_knowledge_path_in_one_line(
    tmp_path, watched, asia_frames, capsys, caplog, content
):
    folder, calls = watched
    path = folder / "shadow"
    path.write_text(content)
    nodes = write_sites(tmp_path, asia_frames)
    calls.clear()
    with pytest.raises(OptionError) as caught:
        run_app(nodes, {"method": "fedpc", "options": f"knowledge={path}"})
    assert calls == []
    printed = capsys.readouterr()
    lines = [line for line in printed.out.splitlines() if "error" in line]
    assert lines == [f"fedcausal-flwr: error: {caught.value}"]  # the one line the submitter reads
    assert "a run config carries the knowledge statements" in lines[0]
    everything = str(caught.value) + printed.out + printed.err + caplog.text
    for leaked in (SECRET, "SECRET", "forbidden asia", str(path), "shadow"):
        assert leaked not in everything


# ------------------------------------------- (c) and (d) statements inline, files where the user is
def test_inline_statements_in_a_run_config_equal_the_command_line_with_the_file(
    tmp_path, asia_frames
):
    # pooled (PC on the pooled rows), which the sites' policy lets through with allow-raw-rows:
    # the test is about the option, not about what a site's policy lets leave it
    nodes = write_sites(tmp_path, asia_frames, **{"allow-raw-rows": True})
    files = [node["data-path"] for node in nodes]
    knowledge_file = tmp_path / "asia.txt"
    knowledge_file.write_text(ASIA_FILE)

    run_app(nodes, {"method": "pooled", "options": f"knowledge='{ASIA_INLINE}'",
                    "result-path": "inline.json"})  # fmt: skip
    deployed = Result.load(tmp_path / "results" / "inline.json")

    out = tmp_path / "cli.json"
    code = main(["run", "--method", "pooled", "--data", *files, "--knowledge",
                 str(knowledge_file), "--quiet", "--out", str(out)])  # fmt: skip
    assert code == 0
    command_line = Result.load(out)
    python = fedcausal_flwr.run("pooled", data=files, knowledge=str(knowledge_file))

    statements = Knowledge.parse(ASIA_FILE).to_text()
    for result in (deployed, command_line, python):
        assert result.config["options"]["knowledge"] == statements  # content, never the path
        assert result.extra["knowledge"]["required"] == [["smoke", "lung"]]
    assert deployed.graph == command_line.graph == python.graph
    assert deployed.extra["knowledge"] == command_line.extra["knowledge"]
    plain = fedcausal_flwr.run("pooled", data=files)
    assert plain.extra["knowledge"] == {}


def test_the_user_s_own_entry_points_read_a_file_and_pass_its_content_on(tmp_path):
    from fedcausal_flwr.study_runs import plan_runs

    path = tmp_path / "k.txt"
    path.write_text(ASIA_FILE)
    statements = Knowledge.parse(ASIA_FILE).to_text()
    spec = get_method("fedpc")
    for entry_point in ("python", "cli", "spec"):
        assert spec.resolve({"knowledge": str(path)}, entry_point)["knowledge"] == statements
    (run,) = plan_runs([f"fedpc:knowledge={path}"], ["asia"], [2], 100)
    assert run.effective_options()["knowledge"] == statements
    # what they pass on is content, which a run config takes as it is
    assert resolve_run_config({"options": f"knowledge='{statements}'"})[2]["knowledge"] == (
        statements
    )
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(SCHEMA_JSON)
    fedci = get_method("fedci-pc")
    local = fedci.resolve({"schema": str(schema_file)}, "cli")["schema"]
    inline = resolve_run_config({"method": "fedci-pc", "options": f"schema='{SCHEMA_JSON}'"})[2]
    assert inline["schema"] == local


def test_a_knowledge_file_of_comments_only_is_no_knowledge(tmp_path):
    """Its content is empty: resolved again (as every backend and strategy does) it stays so."""
    path = tmp_path / "k.txt"
    path.write_text("# nothing known yet\n")
    spec = get_method("fedpc")
    first = spec.resolve({"knowledge": str(path)}, "cli")
    assert first["knowledge"] == ""
    assert spec.resolve(first, "python")["knowledge"] == ""
    assert resolve_run_config({"options": "knowledge=''"})[2]["knowledge"] == ""
