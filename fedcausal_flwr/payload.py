"""Typed payloads: a message's JSON payload (or a reply's meta) as a frozen dataclass (the
lowest layer: the protocol core, the privacy charges and every method's protocol build on it).

Each field is one key of the payload, in the order the payload lists them on the wire::

    @dataclass(frozen=True)
    class PruneRequest(DiscreteScope):
        depth: int

    Request(PRUNE, PruneRequest(variables, levels, test, alpha, reliability, depth=2))
    ...
    @action(PRUNE, PruneRequest)
    def prune(self, request: PruneRequest, arrays): ...

:meth:`Payload.encode` gives the dict that travels (fields in declaration order, so a subclass's
fields follow its base's); :meth:`Payload.decode` reads it back, with a field's default when its
key is absent, and refuses a payload that lacks a required key or carries a key the record does not
declare (a request is never half read). A field travels under its own name; one declared with
:func:`optional` is left out of the payload while it is None. The strategy and the client of a
method build and read its payloads only through these records, so each key is written once, in the
method's :mod:`fedcausal_flwr.protocols` module (the protocol core's own actions:
:mod:`fedcausal_flwr.federation.core.records`). A reply's meta is read with
:meth:`~fedcausal_flwr.federation.core.messages.Reply.meta_as`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Self

_omit_none_key = "omit_none"  # metadata key: leave the field out of the payload while it is None


class MalformedPayload(ValueError):
    """A payload a record cannot read (a key missing, or one it does not declare)."""


def optional(**kwargs: Any) -> Any:
    """A field (default None) left out of the payload while it is None."""
    return field(default=None, metadata={_omit_none_key: True}, **kwargs)


_LAYOUTS: dict[type, tuple[tuple[str, bool, bool], ...]] = {}


def _layout(cls: type) -> tuple[tuple[str, bool, bool], ...]:
    """``(key, required, omitted while None)`` of each field of ``cls``."""
    layout = _LAYOUTS.get(cls)
    if layout is None:
        layout = _LAYOUTS[cls] = tuple(
            (
                f.name,
                f.default is MISSING and f.default_factory is MISSING,
                bool(f.metadata.get(_omit_none_key)),
            )
            for f in fields(cls)
        )
    return layout


@dataclass(frozen=True)
class Payload:
    """Base of every typed payload (see the module docstring)."""

    def encode(self) -> dict[str, Any]:
        """The JSON payload: one key per field, in declaration order."""
        out: dict[str, Any] = {}
        for key, _, omit in _layout(type(self)):
            value = getattr(self, key)
            if not (omit and value is None):
                out[key] = value
        return out

    @classmethod
    def decode(cls, payload: Mapping[str, Any]) -> Self:
        """The record of a payload :meth:`encode` made (defaults for absent optional keys)."""
        if isinstance(payload, cls):
            return payload
        layout = _layout(cls)
        unknown = set(payload) - {key for key, _, _ in layout}
        if unknown:
            raise MalformedPayload(
                f"{cls.__name__} has no key {sorted(unknown)[0]!r}; "
                f"it reads {[key for key, _, _ in layout]}"
            )
        values: dict[str, Any] = {}
        for key, required, _ in layout:
            if key in payload:
                values[key] = payload[key]
            elif required:
                raise MalformedPayload(f"{cls.__name__} needs the key {key!r}")
        return cls(**values)
