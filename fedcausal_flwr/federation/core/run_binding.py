"""What a site's accepted ``hello`` fixes for the rest of its run (Flower-free).

A site answers nothing but ``hello`` until it has accepted one in the run; once it refused one,
it answers nothing more in the run. The accepted ``hello`` binds the run at the site: the columns
it reported (only those its policy shares: a request naming a column its policy keeps home is
refused; a column it does not have at all may be another site's), each column's levels as it
reported them (a request may add other sites' levels, never leave one of its own out, and may
encode a column as categories only if ``hello`` listed its levels), and the run's privacy plan.
A request outside the binding is refused (policy key :data:`HELLO_KEY`) and logged, whatever
the coordinator's ServerApp does.

The binding lives in the node's own state for the run (Flower keeps ``Context.state`` at the
SuperNode, out of the server's reach); :class:`BindingStore` is that state as the guard sees it.
Flower may carry a node's state into a later run of a "run series": a binding names its run, and
a binding of another run is no binding.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

#: the refusal key of a message outside what this run's accepted hello fixed (or before it)
HELLO_KEY = "hello"


class BindingStore(Protocol):
    """The node's own state for the run, as JSON text (None: nothing stored yet)."""

    def load(self) -> str | None: ...

    def save(self, text: str) -> None: ...


class MemoryStore:
    """A :class:`BindingStore` in memory (tests, and nodes whose state is a plain dict)."""

    def __init__(self) -> None:
        self.text: str | None = None

    def load(self) -> str | None:
        return self.text

    def save(self, text: str) -> None:
        self.text = text


def canonical(value: Any) -> str:
    """One text per JSON value (keys sorted), to compare payloads and levels."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class RunBinding:
    """A site's ``hello`` outcome in one run (see the module docstring)."""

    run: str
    accepted: bool
    #: the accepted hello's payload (a repeated hello must be the same)
    hello: str = ""
    #: column -> the levels hello reported (None: a decimal column, no levels listed)
    levels: dict[str, list | None] = field(default_factory=dict)
    #: columns of the site's file its policy keeps home (``share-columns``)
    withheld: list[str] = field(default_factory=list)

    def encode(self) -> str:
        return canonical(
            {"run": self.run, "accepted": self.accepted, "hello": self.hello,
             "levels": self.levels, "withheld": self.withheld}
        )  # fmt: skip

    @classmethod
    def decode(cls, text: str | None) -> RunBinding | None:
        if not text:
            return None
        try:
            value = json.loads(text)
            return cls(str(value["run"]), bool(value["accepted"]), str(value["hello"]),
                       dict(value["levels"]), list(value["withheld"]))  # fmt: skip
        except (ValueError, KeyError, TypeError):
            return None  # unreadable: treated as no binding (the run must say hello again)

    @property
    def columns(self) -> frozenset[str]:
        return frozenset(self.levels)


def named_levels(payload: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every ``(column, levels)`` pair a request names (``levels``: a list, or None where the
    request names the column without levels), whatever the method's payload: ``variables`` (a
    list of names), ``levels`` (name -> list), fedCI's ``schema`` and NOTEARS' ``encoding``, and
    the parts of a bootstrap request."""
    variables = payload.get("variables")
    if isinstance(variables, list):
        for name in variables:
            if not isinstance(name, dict):
                yield str(name), None
    levels = payload.get("levels")
    if isinstance(levels, Mapping):
        yield from ((str(k), v) for k, v in levels.items())
    schema = payload.get("schema")
    if isinstance(schema, Mapping) and isinstance(schema.get("variables"), list):
        for spec in schema["variables"]:
            if isinstance(spec, Mapping):
                yield str(spec.get("name")), spec.get("levels")
    encoding = payload.get("encoding")
    if isinstance(encoding, Mapping) and isinstance(encoding.get("levels"), Mapping):
        yield from ((str(k), v) for k, v in encoding["levels"].items())
    parts = payload.get("parts")
    if isinstance(parts, list):
        for part in parts:
            if isinstance(part, Mapping) and isinstance(part.get("payload"), Mapping):
                yield from named_levels(part["payload"])


def scope_problem(binding: RunBinding, payload: Mapping[str, Any], max_levels: int) -> str | None:
    """Why a request falls outside ``binding`` (None: it does not). The words name columns and
    counts of levels the request itself sent, never a value of the site's."""
    for name, given in named_levels(payload):
        if name in binding.withheld:
            return f"it names column {name!r}, which this site's policy keeps home"
        if name not in binding.levels or given is None:
            continue  # another site's column (methods over non-identical variable sets)
        own = binding.levels[name]
        if own is None:
            return (
                f"it encodes column {name!r} as categories, and this site's hello listed no "
                "levels for it (a decimal column)"
            )
        if not isinstance(given, list):
            return f"its levels of column {name!r} are not a list"
        if len(given) > max(max_levels, len(own)):
            return (
                f"it gives column {name!r} {len(given)} levels, more than this site's "
                f"max-levels {max_levels}"
            )
        missing = {canonical(v) for v in own} - {canonical(v) for v in given}
        if missing:
            return (
                f"its levels of column {name!r} leave out levels this site reported in hello "
                "(the global level set must include every site's levels)"
            )
    return None


def widest_table(options: Mapping[str, Any]) -> int | None:
    """The most variables one table of the run may span: two plus the run's deepest declared
    conditioning set (``max_depth``, and FCI's ``pds_max_size``), as the site resolved the run
    config itself (None: a depth without a cap)."""
    depths = [options[name] for name in ("max_depth", "pds_max_size") if name in options]
    if not depths or any(d is None for d in depths):
        return None
    return 2 + max(int(d) for d in depths)
