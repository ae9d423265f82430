"""Method registry: how ``flwr run`` / the CLI find a method's strategy and client by name.

A method module registers itself at import time::

    register_method("fedpc", make_strategy=FedPCStrategy.from_options,
                    make_client=FedPCClient.from_options)

with ``make_strategy(options: dict) -> ProtocolStrategy`` and
``make_client(partition_id: int, data: pandas.DataFrame, options: dict) -> ProtocolClient``.
``options`` is the run configuration with ``-`` in keys replaced by ``_`` (``min-clients`` ->
``min_clients``). Built-in methods are found by importing ``fedcausal_flwr.strategies`` (its
``__init__`` imports the method modules); other modules can be named in the run config key
``plugins`` (comma-separated module names), which both the ServerApp and the ClientApp import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

BUILTIN_METHODS_MODULE = "fedcausal_flwr.strategies"

MakeStrategy = Callable[[dict], Any]
MakeClient = Callable[[int, pd.DataFrame, dict], Any]
MakeData = Callable[[dict, int, int], pd.DataFrame]


class UnknownMethodError(KeyError):
    """No method registered under that name (the message lists the known ones)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class MethodSpec:
    """A registered method. ``make_data(options, partition_id, num_partitions)`` is optional:
    the data a simulated site generates when it has no ``data-path``."""

    name: str
    make_strategy: MakeStrategy
    make_client: MakeClient
    make_data: MakeData | None = None
    description: str = ""


_METHODS: dict[str, MethodSpec] = {}
_DEFAULT_DATA: list[MakeData] = []
_IMPORTED_BUILTINS = False


def register_method(
    name: str,
    make_strategy: MakeStrategy,
    make_client: MakeClient,
    *,
    make_data: MakeData | None = None,
    description: str = "",
    replace: bool = False,
) -> MethodSpec:
    """Register (or, with ``replace=True``, re-register) a method under ``name``."""
    if not isinstance(name, str) or not name or name.strip() != name:
        raise ValueError(f"method name must be a non-empty string without spaces, got {name!r}")
    spec = MethodSpec(name, make_strategy, make_client, make_data, description)
    old = _METHODS.get(name)
    if old is not None and not replace and _signature(old) != _signature(spec):
        raise ValueError(
            f"method {name!r} is already registered (by {_origin(old.make_strategy)}); "
            "pass replace=True to override it"
        )
    _METHODS[name] = spec
    return spec


def _signature(spec: MethodSpec) -> tuple:
    """Identity of a registration by where its callables live (re-imports register again)."""
    make_data = None if spec.make_data is None else _origin(spec.make_data)
    return _origin(spec.make_strategy), _origin(spec.make_client), make_data


def _origin(fn: Callable) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def _import_builtins() -> None:
    global _IMPORTED_BUILTINS
    if not _IMPORTED_BUILTINS:
        importlib.import_module(BUILTIN_METHODS_MODULE)
        _IMPORTED_BUILTINS = True


def known_methods() -> list[str]:
    """Names of all registered methods (built-ins included)."""
    _import_builtins()
    return sorted(_METHODS)


def get_method(name: str) -> MethodSpec:
    """The registered method ``name``; :class:`UnknownMethodError` lists the known ones."""
    _import_builtins()
    try:
        return _METHODS[name]
    except KeyError:
        raise UnknownMethodError(
            f"unknown method {name!r}; known methods: {sorted(_METHODS) or 'none'} "
            "(a plugin module can be named in the run config key 'plugins')"
        ) from None


def import_plugins(modules: str | Iterable[str]) -> None:
    """Import plugin modules (comma-separated string or list) so they register their methods."""
    names = modules.split(",") if isinstance(modules, str) else list(modules)
    for name in (n.strip() for n in names):
        if not name:
            continue
        try:
            importlib.import_module(name)
        except ImportError as err:
            raise ImportError(f"cannot import plugin module {name!r}: {err}") from err


def set_default_simulation_data(make_data: MakeData) -> None:
    """Data generator for simulated sites of methods without their own ``make_data``."""
    _DEFAULT_DATA[:] = [make_data]


def simulation_data(
    spec: MethodSpec,
    options: Mapping[str, Any],
    partition_id: int,
    num_partitions: int,
    default: MakeData | None = None,
) -> pd.DataFrame:
    """The DataFrame simulated site ``partition_id`` of ``num_partitions`` works on: the method's
    ``make_data``, else the registered default, else ``default``."""
    make = spec.make_data or (_DEFAULT_DATA[0] if _DEFAULT_DATA else default)
    if make is None:
        raise LookupError(
            f"site {partition_id} has no 'data-path' in its node_config and method "
            f"{spec.name!r} has no simulation data generator; pass --node-config "
            "\"data-path='site.csv'\" or register one with set_default_simulation_data()"
        )
    data = make(dict(options), int(partition_id), int(num_partitions))
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"simulation data for site {partition_id} is {type(data).__name__}")
    return data
