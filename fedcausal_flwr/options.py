"""Declared options: each method states its options once, and every entry point reads them.

An *entry point* is a place where a user sets an option, and each spells option names its own way:

===========  ============================================  ===================
entry point  where                                         spelling
===========  ============================================  ===================
``python``   ``fedcausal_flwr.run(..., max_depth=3)``      ``max_depth``
``cli``      ``fedcausal-flwr run ... --max-depth 3``      ``--max-depth``
``spec``     ``compare --methods fedpc:max_depth=3``       ``max_depth``
``config``   ``flwr run ... --run-config "options='max-depth=3'"``  ``max-depth``
===========  ============================================  ===================

:meth:`OptionSet.resolve` turns what a user typed into the complete, typed option values
(defaults included): strings from the command line and the run config are converted by the
declared type, one boolean rule holds everywhere (``true/false``, ``1/0``, ``yes/no``, ``on/off``),
an unknown name fails with the closest valid one and the valid list, and every error names the
option as the user wrote it on that entry point. Resolving resolved values again returns them
unchanged, so a strategy can resolve its input whoever built it. An option that may name a file
(``knowledge``, ``schema``) reads it on the user's own entry points and keeps its content; from a
run config it takes content only (:func:`content_only`), since every site resolves the run config.
"""

from __future__ import annotations

import difflib
import inspect
import math
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

F = TypeVar("F", bound=Callable[..., Any])
ENTRY_POINTS = ("python", "cli", "spec", "config")
KINDS = ("int", "float", "bool", "str")
TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")
NONE_WORDS = ("none", "null")
_INT_TEXT = re.compile(r"[+-]?\d+")


class OptionError(ValueError):
    """An option is unknown, of the wrong type, out of range or does not apply."""


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


def canonical(name: str) -> str:
    """``--max-depth``, ``max-depth`` and ``max_depth`` all name the option ``max_depth``."""
    return str(name).strip().lstrip("-").replace("-", "_")


def spell(name: str, entry_point: str) -> str:
    """How ``entry_point`` writes the option ``name``."""
    if entry_point == "cli":
        return "--" + name.replace("_", "-")
    if entry_point == "config":
        return name.replace("_", "-")
    if entry_point in ("python", "spec"):
        return name
    raise ValueError(f"unknown entry point {entry_point!r}; expected one of {ENTRY_POINTS}")


def content_only(what: str, example: str) -> str:
    """Why a run config's value that is not ``what`` (``the schema JSON``) is refused, unread.

    Every site and the coordinator resolve the run config, so a path in it would make each read
    (and an error quote) a file of its own machine: a run config carries content only. The
    message names no value: not the path, nor anything read.
    """
    return (
        f"a run config carries {what}, not a file (every site and the coordinator would read a "
        f"path on its own machine): give {what} inline, e.g. {example}"
    )


def seed_option(help: str) -> Option:
    """A method's ``seed`` (the entry points set it to the run's seed unless the user sets it)."""
    return Option(
        "seed", "int", 0, help + " (the entry points set it to the run's seed)", minimum=0
    )


def show_value(value: Any) -> str:
    """A value as a user types it: ``none``, ``true``, ``0.05``, ``chi2``."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def say(name: str, value: Any, entry_point: str) -> str:
    """An option setting written the entry point's way: ``--test chi2``, ``test='chi2'``,
    ``test=chi2``."""
    if entry_point == "cli":
        return f"{spell(name, entry_point)} {show_value(value)}"
    if entry_point == "python":
        return f"{name}={value!r}"
    return f"{spell(name, entry_point)}={show_value(value)}"


def parse_bool(value: Any) -> bool:
    """The one boolean rule: a bool, 0/1, or ``true/false, 1/0, yes/no, on/off`` (any case)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and int(value) in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in TRUE_WORDS:
            return True
        if text in FALSE_WORDS:
            return False
    raise ValueError(f"expected true or false (or 1/0, yes/no, on/off), got {value!r}")


def closest(name: str, valid: Iterable[str]) -> str | None:
    """The valid name a typo most likely meant, or None."""
    found = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return found[0] if found else None


@dataclass(frozen=True)
class Option:
    """One declared option.

    ``kind`` is ``int``, ``float``, ``bool`` or ``str``; ``convert`` replaces the kind's rule for
    special values (it gets the raw value and returns the typed one or raises ``ValueError``).
    ``nullable`` admits ``None`` (typed ``none``); ``null_values`` are values that also mean None
    (``-1`` for "no depth cap"). ``requires=(other, values)``: setting this option away from its
    default only makes sense when option ``other`` has one of ``values`` (an error otherwise).
    ``paper`` says what the paper (or, where it is silent, its authors' code) sets; ``why`` says
    why the default differs from it (empty when it does not). ``local_file``: the value may name a
    file on the user's machine, so ``convert`` is called as ``convert(value, entry_point)``: it
    reads a file only on the user's own entry points, never from a run config (``config``, see
    :func:`content_only`).
    """

    name: str
    kind: str
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    min_exclusive: bool = False
    max_exclusive: bool = False
    nullable: bool = False
    null_values: tuple[Any, ...] = ()
    null_meaning: str = ""
    requires: tuple[str, tuple[Any, ...]] | None = None
    paper: str = ""
    why: str = ""
    convert: Callable[..., Any] | None = None
    local_file: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"option {self.name!r}: unknown kind {self.kind!r}")
        if canonical(self.name) != self.name:
            raise ValueError(f"option name {self.name!r} must be a snake_case identifier")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def describe_type(self) -> str:
        """What values the option takes, in words (for help and errors)."""
        if self.choices:
            text = "one of " + ", ".join(self.choices)
        else:
            text = {
                "int": "an integer",
                "float": "a number",
                "bool": "true or false",
                "str": "a string",
            }[self.kind]
            bounds = []
            if self.minimum is not None:
                bounds.append(f"{'>' if self.min_exclusive else '>='} {show_value(self.minimum)}")
            if self.maximum is not None:
                bounds.append(f"{'<' if self.max_exclusive else '<='} {show_value(self.maximum)}")
            if bounds:
                text += " " + " and ".join(bounds)
        if self.nullable:
            extra = "/".join(["none", *(show_value(v) for v in self.null_values)])
            text += f", or {extra}" + (f" ({self.null_meaning})" if self.null_meaning else "")
        return text

    def parse(self, value: Any, entry_point: str = "python") -> Any:
        """The typed value; ``ValueError`` with the reason (the caller adds the option's name).
        ``entry_point``: where the value was typed (a ``local_file`` converter reads no file
        from a run config)."""
        if self.nullable and (
            value is None or (isinstance(value, str) and value.strip().lower() in NONE_WORDS)
        ):
            return None
        if value is None:
            raise ValueError(f"a value is needed ({self.describe_type()})")
        if self.convert is not None:
            typed = self.convert(value, entry_point) if self.local_file else self.convert(value)
        elif self.kind == "bool":
            typed = parse_bool(value)
        elif self.kind == "int":
            typed = _parse_int(value)
        elif self.kind == "float":
            typed = _parse_float(value)
        else:
            if not isinstance(value, str):
                raise ValueError(f"expected {self.describe_type()}, got {value!r}")
            typed = value.strip()
        if self.nullable and any(_same(typed, null) for null in self.null_values):
            return None
        self._check_range(typed)
        return typed

    def _check_range(self, value: Any) -> None:
        if self.choices and value not in self.choices:
            hint = closest(str(value), self.choices)
            raise ValueError(
                f"{value!r} is not one of {', '.join(self.choices)}"
                + (f" (did you mean {hint!r}?)" if hint else "")
            )
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return
        low, high = self.minimum, self.maximum
        if low is not None and (value <= low if self.min_exclusive else value < low):
            raise ValueError(f"expected {self.describe_type()}, got {show_value(value)}")
        if high is not None and (value >= high if self.max_exclusive else value > high):
            raise ValueError(f"expected {self.describe_type()}, got {show_value(value)}")


def _same(value: Any, null: Any) -> bool:
    if isinstance(value, bool) or isinstance(null, bool):
        return value is null
    return type(value) in (int, float) and type(null) in (int, float) and value == null


def _parse_int(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"expected an integer, got {value!r}")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and value == int(value):
        return int(value)
    if isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
        return int(value.strip())
    raise ValueError(f"expected an integer, got {value!r}")


def _parse_float(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"expected a number, got {value!r}")
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"expected a finite number, got {value!r}")
    return number


#: A cross-option rule: ``check(values, entry_point) -> message or None``; the message names options
#: with :func:`say` / :func:`spell` for the entry point.
Check = Callable[[Mapping[str, Any], str], "str | None"]


class ResolvedOptions(dict[str, Any]):
    """Options as :meth:`OptionSet.resolve` returns them: complete, typed and checked against
    ``option_set``. Resolving them again with that set returns them as they are, so an entry
    point resolves a run's options once and what it hands them to (the runner, the strategy)
    reads them without a second pass."""

    def __init__(self, values: Mapping[str, Any], option_set: OptionSet):
        super().__init__(values)
        self.option_set = option_set

    def copy(self) -> ResolvedOptions:
        return ResolvedOptions(self, self.option_set)

    def __reduce__(self):  # pickled to a Ray worker as the same resolved options
        return ResolvedOptions, (dict(self), self.option_set)


@dataclass(frozen=True)
class OptionSet:
    """A method's (or an entry point's) declared options plus cross-option rules."""

    options: tuple[Option, ...] = ()
    checks: tuple[Check, ...] = ()
    by_name: dict[str, Option] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [o.name for o in self.options]
        if len(set(names)) != len(names):
            raise ValueError(
                f"options declared twice: {sorted({n for n in names if names.count(n) > 1})}"
            )
        object.__setattr__(self, "by_name", {o.name: o for o in self.options})

    def __contains__(self, name: str) -> bool:
        return canonical(name) in self.by_name

    def __getitem__(self, name: str) -> Option:
        return self.by_name[canonical(name)]

    def __iter__(self):
        return iter(self.options)

    def __len__(self) -> int:
        return len(self.options)

    @property
    def names(self) -> list[str]:
        return [o.name for o in self.options]

    def defaults(self) -> dict[str, Any]:
        """Declared defaults (required options left out)."""
        return {o.name: o.default for o in self.options if not o.required}

    def extend(self, *options: Option, checks: Sequence[Check] = ()) -> OptionSet:
        """This set plus more options (a later option of the same name replaces the earlier)."""
        merged = {o.name: o for o in self.options}
        merged.update({o.name: o for o in options})
        return OptionSet(tuple(merged.values()), (*self.checks, *checks))

    def without(self, *names: str) -> OptionSet:
        return OptionSet(tuple(o for o in self.options if o.name not in names), self.checks)

    def resolve(
        self,
        raw: Mapping[str, Any] | None,
        *,
        owner: str,
        entry_point: str = "python",
    ) -> ResolvedOptions:
        """Every option's typed value (given, else default), checked.

        ``raw`` maps names as typed on ``entry_point`` (``--max-depth``, ``max-depth``,
        ``max_depth``) to values; ``owner`` names what the options belong to in errors
        (``method 'fedecd'``). Options this set resolved already come back as they are.
        """
        if entry_point not in ENTRY_POINTS:
            raise ValueError(f"unknown entry point {entry_point!r}; expected one of {ENTRY_POINTS}")
        if isinstance(raw, ResolvedOptions) and raw.option_set is self:
            return raw
        given: dict[str, Any] = {}
        typed_as: dict[str, str] = {}
        for key, value in (raw or {}).items():
            name = canonical(key)
            if name in typed_as:
                raise OptionError(
                    f"{owner}: option {spell(name, entry_point)} is given twice "
                    f"(as {typed_as[name]!r} and {key!r})"
                )
            if name not in self.by_name:
                raise OptionError(self.unknown_message(str(key), owner, entry_point))
            typed_as[name] = str(key)
            given[name] = value
        values: dict[str, Any] = {}
        for option in self.options:
            if option.name in given:
                try:
                    values[option.name] = option.parse(given[option.name], entry_point)
                except ValueError as err:
                    shown = (
                        typed_as[option.name]
                        if entry_point != "cli"
                        else spell(option.name, entry_point)
                    )
                    raise OptionError(f"{owner}: option {shown}: {err}") from None
            elif option.required:
                how = ""
                spec = re.fullmatch(r"method '([^']+)'", owner)
                if entry_point == "spec" and spec:  # how a compare method spec gives it
                    how = f"; give it in the method spec: {spec.group(1)}:{option.name}=VALUE"
                raise OptionError(
                    f"{owner} needs option {spell(option.name, entry_point)} ({option.help}; "
                    f"{option.describe_type()}){how}"
                )
            else:
                values[option.name] = option.default
        for name in given:
            requirement = self.by_name[name].requires
            if requirement is None or values[name] == self.by_name[name].default:
                continue  # at its default an option changes nothing (resolved values stay valid)
            other, allowed = requirement
            if values[other] not in allowed:
                wanted = " or ".join(say(other, v, entry_point) for v in allowed)
                raise OptionError(
                    f"{owner}: option {spell(name, entry_point)} applies only with {wanted} "
                    f"(here {say(other, values[other], entry_point)})"
                )
        for check in self.checks:
            message = check(values, entry_point)
            if message:
                raise OptionError(f"{owner}: {message}")
        return ResolvedOptions(values, self)

    def unknown_message(self, key: str, owner: str, entry_point: str) -> str:
        """Unknown option: the owner, the name as typed, the closest valid name, the valid list."""
        valid = [spell(n, entry_point) for n in self.names]
        hint = closest(spell(canonical(key), entry_point), valid)
        listing = ", ".join(valid) if valid else "none"
        return (
            f"{owner} has no option {key!r}"
            + (f" (did you mean {hint}?)" if hint else "")
            + f"; its options: {listing}"
        )

    def table(self, entry_point: str = "cli") -> list[tuple[str, str, str, str, str]]:
        """Rows ``(name, values, default, help, paper)`` for help texts and documentation."""
        return [
            (
                spell(o.name, entry_point),
                o.describe_type(),
                "(required)" if o.required else show_value(o.default),
                o.help,
                o.paper,
            )
            for o in self.options
        ]

    def numpy_doc(self) -> str:
        """A numpy-style ``Parameters`` section of these options (for generated docstrings)."""
        lines = ["Parameters", "----------"]
        for option in self.options:
            default = "required" if option.required else f"default {show_value(option.default)}"
            lines.append(f"{option.name} : {option.describe_type()}")
            text = f"{option.help[0].upper()}{option.help[1:]}; {default}."
            if option.paper:
                text += f" Paper: {option.paper}."
            if option.why:
                text += f" Why this default: {option.why}."
            lines.append(f"    {text}")
        return "\n".join(lines)


def documented_by(options: OptionSet) -> Callable[[F], F]:
    """Append ``options``' Parameters section to the decorated factory's docstring, so
    ``help(make_strategy)`` documents the declaration itself."""

    def document(factory: F) -> F:
        intro = inspect.cleandoc(factory.__doc__ or "")
        factory.__doc__ = f"{intro}\n\n{options.numpy_doc()}"
        return factory

    return document


def parse_assignments(text: str, *, what: str) -> dict[str, str]:
    """``"max-depth=3 target='A,B'"`` -> ``{"max-depth": "3", "target": "A,B"}``.

    Whitespace separates assignments; quotes group (shell rules). Values stay strings: the
    declared types convert them.
    """
    try:
        tokens = shlex.split(text or "")
    except ValueError as err:
        raise OptionError(f"{what}: cannot read {text!r}: {err}") from None
    return _key_values(tokens, lambda problem: f"{what}: {problem} (in {text!r})", strip=False)


def _key_values(
    parts: Iterable[str], message: Callable[[str], str], *, strip: bool
) -> dict[str, str]:
    """``key=value`` parts as a dict (values stripped with ``strip``); a part without ``=`` or a
    key given twice is an :class:`OptionError` worded by ``message``."""
    out: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise OptionError(message(f"{part!r} is not key=value"))
        if key in out:
            raise OptionError(message(f"{key!r} is given twice"))
        out[key] = value.strip() if strip else value
    return out


def parse_spec(spec: str, *, what: str = "spec") -> tuple[str, dict[str, str]]:
    """``"fedpc:ci=sketch:alpha=0.01"`` -> ``("fedpc", {"ci": "sketch", "alpha": "0.01"})``.

    The syntax of method specs in ``compare`` and of network (``er:d=20``) and partition
    (``dirichlet:alpha=0.5``) specs on every entry point. Values stay strings.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise OptionError(f"a {what} must be a non-empty string, got {spec!r}")
    name, *parts = spec.strip().split(":")
    return name.strip(), _key_values(
        parts, lambda problem: f"{what} {spec!r}: {problem}", strip=True
    )
