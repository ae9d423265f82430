"""The option machinery every entry point shares (Flower-free): types, the boolean rule, ranges,
unknown names with suggestions, entry point spellings, requirements between options and idempotent
resolution."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.options import (
    REQUIRED,
    Option,
    OptionError,
    OptionSet,
    canonical,
    parse_assignments,
    parse_bool,
    parse_spec,
    say,
    spell,
)

DEPTH = Option("max_depth", "int", None, "largest conditioning set", minimum=0, nullable=True,
               null_values=(-1,), null_meaning="no cap")  # fmt: skip
SET = OptionSet(
    (
        Option(
            "alpha",
            "float",
            0.05,
            "level",
            minimum=0.0,
            maximum=1.0,
            min_exclusive=True,
            max_exclusive=True,
        ),  # fmt: skip
        DEPTH,
        Option("ci", "str", "exact", "mode", choices=("exact", "sketch")),
        Option("sketch_length", "int", 50, "l", minimum=2, requires=("ci", ("sketch",))),
        Option("resample", "bool", True, "draw resamples"),
        Option(
            "reliability",
            "float",
            5.0,
            "rows per cell",
            minimum=0.0,
            nullable=True,
            null_values=(0,),
        ),  # fmt: skip
    )
)


def resolve(raw, entry_point="python"):
    return SET.resolve(raw, owner="method 'toy'", entry_point=entry_point)


@pytest.mark.parametrize("given", [-1, "-1", None, "none", "None", " NONE "])
def test_no_cap_spellings_all_mean_none(given):
    assert resolve({"max_depth": given})["max_depth"] is None


@pytest.mark.parametrize("given", [3, "3", " 3 ", 3.0, np.int64(3)])
def test_depth_given_as_text_or_number_is_the_integer(given):
    value = resolve({"max_depth": given})["max_depth"]
    assert value == 3 and type(value) is int


@pytest.mark.parametrize("given", ["3.5", 3.5, "-2", -2, "three", True, ""])
def test_bad_depths_are_errors_naming_the_option(given):
    with pytest.raises(OptionError, match="method 'toy': option max_depth"):
        resolve({"max_depth": given})


@pytest.mark.parametrize(
    "text,expected",
    [("true", True), ("False", False), ("1", True), ("0", False), ("yes", True), ("NO", False),
     ("on", True), ("off", False), (True, True), (0, False), (np.bool_(True), True)],
)  # fmt: skip
def test_one_boolean_rule(text, expected):
    assert parse_bool(text) is expected
    assert resolve({"resample": text})["resample"] is expected


@pytest.mark.parametrize("text", ["maybe", "2", 2, "", None])
def test_anything_else_is_not_a_boolean(text):
    with pytest.raises(OptionError, match="option resample"):
        resolve({"resample": text})


def test_defaults_fill_what_was_not_given_and_resolution_is_idempotent():
    values = resolve({"alpha": "0.01"})
    assert values == {
        "alpha": 0.01,
        "max_depth": None,
        "ci": "exact",
        "sketch_length": 50,
        "resample": True,
        "reliability": 5.0,
    }
    assert resolve(values) == values
    assert resolve({"reliability": "0"})["reliability"] is None  # 0 means off


@pytest.mark.parametrize("alpha", [0, 1, "1.5", -0.1, "nan", "inf"])
def test_alpha_outside_the_open_interval_is_refused(alpha):
    with pytest.raises(OptionError, match="alpha"):
        resolve({"alpha": alpha})


def test_unknown_option_names_method_option_closest_name_and_the_list():
    with pytest.raises(OptionError) as err:
        resolve({"alhpa": 0.01})
    text = str(err.value)
    assert "method 'toy' has no option 'alhpa'" in text
    assert "did you mean alpha?" in text
    assert "its options: alpha, max_depth, ci, sketch_length, resample, reliability" in text


def test_errors_name_the_option_as_written_on_each_door():
    with pytest.raises(OptionError, match="has no option '--alhpa' \\(did you mean --alpha\\?\\)"):
        resolve({"--alhpa": "0.01"}, entry_point="cli")
    with pytest.raises(OptionError, match="option --max-depth: "):
        resolve({"--max-depth": "x"}, entry_point="cli")
    with pytest.raises(OptionError, match="option max-depth: "):
        resolve({"max-depth": "x"}, entry_point="config")
    with pytest.raises(OptionError, match="did you mean sketch-length"):
        resolve({"sketch-lenght": "3"}, entry_point="config")


def test_an_option_given_twice_in_two_spellings_is_an_error():
    with pytest.raises(OptionError, match="given twice"):
        resolve({"max_depth": 1, "max-depth": 2})


def test_choices_suggest_the_closest_value():
    with pytest.raises(OptionError, match="'skech' is not one of exact, sketch \\(did you mean"):
        resolve({"ci": "skech"})


def test_an_option_that_does_not_apply_is_an_error_not_silence():
    with pytest.raises(OptionError, match="--sketch-length applies only with --ci sketch \\(here "
                       "--ci exact\\)"):  # fmt: skip
        resolve({"--sketch-length": "20"}, entry_point="cli")
    assert resolve({"sketch_length": 20, "ci": "sketch"})["sketch_length"] == 20


def test_required_options_and_cross_option_checks():
    def both_or_none(values, entry_point):
        if values["a"] and not values["b"]:
            return f"{say('a', True, entry_point)} needs {spell('b', entry_point)}"
        return None

    spec = OptionSet(
        (
            Option("target", "str", REQUIRED, "the target"),
            Option("a", "bool", False, ""),
            Option("b", "bool", False, ""),
        ),  # fmt: skip
        checks=(both_or_none,),
    )
    with pytest.raises(OptionError, match="method 'x' needs option --target"):
        spec.resolve({}, owner="method 'x'", entry_point="cli")
    with pytest.raises(OptionError, match="--a true needs --b"):
        spec.resolve({"target": "T", "a": "yes"}, owner="method 'x'", entry_point="cli")
    assert spec.resolve({"target": "T"}, owner="m")["target"] == "T"


def test_spellings_and_assignment_strings():
    assert canonical("--max-depth") == canonical("max-depth") == "max_depth"
    assert [spell("max_depth", d) for d in ("python", "cli", "spec", "config")] == [
        "max_depth", "--max-depth", "max_depth", "max-depth",
    ]  # fmt: skip
    assert parse_assignments("max-depth=3 target='A,B'  ratio=0.5", what="x") == {
        "max-depth": "3",
        "target": "A,B",
        "ratio": "0.5",
    }
    with pytest.raises(OptionError, match="not key=value"):
        parse_assignments("alpha", what="options")
    with pytest.raises(OptionError, match="given twice"):
        parse_assignments("a=1 a=2", what="options")
    assert parse_spec("fedpc:ci=sketch:alpha=0.01") == ("fedpc", {"ci": "sketch", "alpha": "0.01"})
    with pytest.raises(OptionError, match="not key=value"):
        parse_spec("fedpc:ci")


def test_declarations_are_checked():
    with pytest.raises(ValueError, match="declared twice"):
        OptionSet((DEPTH, DEPTH))
    with pytest.raises(ValueError, match="unknown kind"):
        Option("x", "complex", 0, "")
    with pytest.raises(ValueError, match="snake_case"):
        Option("max-depth", "int", 0, "")


def test_a_command_line_run_resolves_its_methods_options_once(monkeypatch, tmp_path, capsys):
    """``--alpha`` on the command line is parsed and checked once (the entry point's
    resolution); the runner and the strategy read the resolved options as they are, and the
    strategy's tests use the value typed."""
    from fedcausal_flwr import options as options_module
    from fedcausal_flwr.cli import main
    from fedcausal_flwr.result import Result

    resolved, passed = [], []
    resolve = options_module.OptionSet.resolve

    def counted(self, raw, *, owner, entry_point="python"):
        if owner == "method 'fedpc'":
            same = isinstance(raw, options_module.ResolvedOptions) and raw.option_set is self
            (passed if same else resolved).append(entry_point)
        return resolve(self, raw, owner=owner, entry_point=entry_point)

    monkeypatch.setattr(options_module.OptionSet, "resolve", counted)
    out = tmp_path / "r.json"
    argv = ["run", "--method", "fedpc", "--network", "asia", "--samples", "300", "--clients", "2",
            "--alpha", "0.01", "--quiet", "--no-edges", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert resolved == ["cli"] and passed  # resolved once; read as they are after
    assert Result.load(out).config["options"]["alpha"] == 0.01
