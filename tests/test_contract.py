"""One contract per method: declared options read by every entry point (Python API, `run`,
`compare`, the `flwr run` apps), the same defaults everywhere, every effective option recorded, the
method docs generated from the declarations, and nothing we start phoning out."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import fedcausal_flwr
from fedcausal_flwr import flwr_app
from fedcausal_flwr.cli import main
from fedcausal_flwr.compare import compare
from fedcausal_flwr.federation.core.registry import builtin_methods, get_method, known_methods
from fedcausal_flwr.federation.runtime.localgrid import run_local
from fedcausal_flwr.method_reference import methods_markdown
from fedcausal_flwr.options import REQUIRED, OptionError
from fedcausal_flwr.result import Result

REPO_ROOT = Path(__file__).resolve().parents[1]
SMALL = {"network": "asia", "samples": 900, "clients": 3, "seed": 2}


def app_run(tmp_path, run_config: dict, clients: int = 3) -> Result:
    """The `flwr run` apps on the in-process grid (the same objects a SuperLink runs)."""
    run_local(
        flwr_app.server_app,
        flwr_app.client_app,
        clients,
        {**run_config, "result-path": "app-result.json"},
    )
    return Result.load(tmp_path / "results" / "app-result.json")  # conftest's results folder


def test_fedecd_effective_options_are_the_same_on_every_door(tmp_path, capsys):
    api = fedcausal_flwr.run("fedecd", **SMALL)
    out = tmp_path / "cli.json"
    argv = ["run", "--method", "fedecd", "--network", "asia", "--samples", "900", "--clients", "3",
            "--seed", "2", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    cli = Result.load(out)
    study = compare(["fedecd"], ["asia"], [3], samples=900, seeds=[2], out=tmp_path / "sweep",
                    plots=False, progress=False)  # fmt: skip
    record = json.loads((tmp_path / "sweep" / "runs" / f"{study.frame['key'][0]}.json").read_text())
    swept = Result.from_json(record["result"])
    app = app_run(tmp_path, {"method": "fedecd", "network": "asia", "samples": 900, "seed": 2})
    expected = get_method("fedecd").resolve({"seed": 2})
    assert expected["alpha"] == 0.01 and expected["test"] == "g2" and expected["max_depth"] == 3
    for result in (api, cli, swept, app):
        assert result.config["options"] == expected
        assert result.config["data"]["fingerprint"] == api.config["data"]["fingerprint"]
        assert result.graph == api.graph
    capsys.readouterr()


@pytest.mark.parametrize("depth,expected", [("-1", None), (-1, None), ("none", None), ("3", 3),
                                            (3, 3), ("0", 0)])  # fmt: skip
def test_max_depth_as_text_or_number_behaves_as_the_integer(tmp_path, depth, expected):
    result = fedcausal_flwr.run("fedpc", max_depth=depth, **SMALL)
    assert result.config["options"]["max_depth"] == expected
    reference = fedcausal_flwr.run("fedpc", max_depth=expected, **SMALL)
    assert result.graph == reference.graph
    assert result.extra["tests"] > 0  # "-1" used to mean "test nothing"
    levels = result.extra["depths_searched"]
    assert levels <= (expected + 1 if expected is not None else 99)
    app = app_run(tmp_path, {"method": "fedpc", "network": "asia", "samples": 900, "seed": 2,
                             "options": f"max-depth={depth}"})  # fmt: skip
    assert app.config["options"]["max_depth"] == expected and app.graph == reference.graph


def test_a_misspelled_python_keyword_fails_with_a_suggestion():
    with pytest.raises(OptionError, match="method 'fedpc' has no option 'alhpa' \\(did you mean "
                       "alpha\\?\\)"):  # fmt: skip
        fedcausal_flwr.run("fedpc", alhpa=0.01, **SMALL)
    with pytest.raises(OptionError, match="clients does not apply with data"):
        fedcausal_flwr.run("fedpc", data=[], clients=3)
    with pytest.raises(OptionError, match="give network"):
        fedcausal_flwr.run("fedpc")


def test_method_options_reach_the_method_through_the_run_config(tmp_path):
    lcs = app_run(tmp_path, {"method": "fedlcs", "options": "target=either ratio=1.0 sep-depth=1",
                             "samples": 900, "truth": "network"})  # fmt: skip
    assert lcs.extra["target"] == "either"
    assert lcs.config["options"]["ratio"] == 1.0 and lcs.config["options"]["sep_depth"] == 1
    assert "f1" in lcs.metrics
    vote = app_run(tmp_path, {"method": "fedpc-vote", "options": "ratio=1", "samples": 900})
    assert vote.extra["ratio"] == "1.0"
    for bad, message in (
        ({"method": "fedlcs"}, "method 'fedlcs' needs option target"),
        ({"method": "fedpc", "options": "alhpa=0.1"}, "has no option 'alhpa' \\(did you mean "
                                                       "alpha\\?\\)"),
        ({"method": "fedpc", "tau": 0.1}, "run config has no option 'tau'"),
        ({"method": "fedpc", "samples": "many"}, "option samples: expected an integer"),
        ({"method": "fedpc-vote", "secure": True}, "secure=true does not apply"),
    ):  # fmt: skip
        with pytest.raises(OptionError, match=message):
            app_run(tmp_path, bad)


def test_the_app_runs_with_the_supernodes_that_are_there(tmp_path):
    """num-clients = 0 (the default): Flower's default local simulation has 2 SuperNodes."""
    result = app_run(tmp_path, {"samples": 600}, clients=2)
    assert result.config["data"]["clients"] == 2 and result.graph is not None
    with pytest.raises(Exception, match="2 of 3 required clients connected after 0.5 s"):
        app_run(tmp_path, {"samples": 600, "num-clients": 3, "connect-timeout": 0.5}, clients=2)


def test_pyproject_declares_exactly_the_app_settings():
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    assert config["config"] == flwr_app.DEFAULT_RUN_CONFIG
    # every declared default is a valid value of its setting
    flwr_app.APP_SETTINGS.resolve(config["config"], owner="pyproject", entry_point="config")


def test_every_method_declares_its_options_and_resolves_its_defaults():
    for name in known_methods():
        spec = get_method(name)
        required = {o.name: "X" for o in spec.options if o.default is REQUIRED}
        values = spec.resolve(required)
        assert list(values) == spec.options.names
        for option in spec.options:
            assert option.help, f"{name}.{option.name} has no help"
            if option.default is not REQUIRED:
                assert values[option.name] == option.default


def test_docs_method_options_are_generated_from_the_declarations():
    docs = (REPO_ROOT / "docs" / "methods.md").read_text()
    assert docs == methods_markdown(), "run: fedcausal-flwr methods --markdown > docs/methods.md"


def test_the_method_table_agrees_with_the_declarations():
    """docs/methods/index.md: every registered method has a row; every flag a row mentions is
    an option (or run setting) of its methods, with values the option allows."""
    from fedcausal_flwr.settings import RUN_SETTINGS

    table = (REPO_ROOT / "docs" / "methods" / "index.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    listed: set[str] = set()
    for row in rows:
        cells = row.split(" | ")
        methods = re.findall(r"`([a-z0-9-]+)`", cells[0])
        listed.update(methods)
        specs = [get_method(m) for m in methods if m in known_methods()]
        for flag, values in re.findall(r"`--([a-z-]+)(?: ([a-z0-9.\\|]+))?`", row):
            name = flag.replace("-", "_")
            owners = [s.options[name] for s in specs if name in s.options]
            assert owners or name in RUN_SETTINGS, f"{methods}: --{flag} is no option of theirs"
            for value in filter(None, values.replace("\\", "").split("|")):
                for option in owners:
                    option.parse(value)  # raises if the page names a value it does not allow
    assert listed - {"local-avg", "local-best"} == set(builtin_methods())


def test_the_docs_list_the_defaults_that_differ_from_the_papers():
    readme = (REPO_ROOT / "docs" / "options.md").read_text()
    start = readme.index("<!-- defaults-vs-papers: start -->")
    section = readme[start : readme.index("<!-- defaults-vs-papers: end -->")]
    from fedcausal_flwr.method_reference import defaults_vs_papers

    assert section.split("\n", 1)[1].strip() == defaults_vs_papers().strip()


def test_nothing_we_start_phones_out(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLWR_", "RAY_USAGE"))}
    code = "import os, fedcausal_flwr; print([os.environ[k] for k in " + repr(
        ["FLWR_TELEMETRY_ENABLED", "FLWR_DISABLE_UPDATE_CHECK",
         "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION", "RAY_USAGE_STATS_ENABLED"]
    ) + "])"  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "['0', '1', '1', '0']", out.stderr
    from fedcausal_flwr.federation.deployment.local_deployment import LocalDeployment
    from fedcausal_flwr.federation.runtime.runners import quiet_flower

    with quiet_flower():  # the Ray runner's environment
        assert {k: os.environ[k] for k in fedcausal_flwr.NO_PHONING_OUT} == (
            fedcausal_flwr.NO_PHONING_OUT
        )
    deployment = LocalDeployment(tmp_path, [{"partition-id": 0}])
    for key, value in (("FLWR_DISABLE_UPDATE_CHECK", "1"), ("FLWR_TELEMETRY_ENABLED", "0"),
                       ("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION", "1")):  # fmt: skip
        assert deployment.env[key] == value


def test_no_method_option_shares_its_name_with_a_run_setting():
    """A method option named as a run setting would be shadowed on the command line (the run's
    flag wins) and clash in ``run(...)``'s keywords; only the seed is one on purpose (the
    method's randomness is the run's seed)."""
    from fedcausal_flwr.federation.core.registry import get_method, known_methods
    from fedcausal_flwr.settings import RUN_SETTINGS

    shared = {
        (method, option.name)
        for method in known_methods()
        for option in get_method(method).options
        if option.name in RUN_SETTINGS and option.name != "seed"
    }
    assert not shared, sorted(shared)
