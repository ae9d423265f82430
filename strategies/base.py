"""The base of every method's server side, re-exported where the strategies live.

A method subclasses :class:`MethodStrategy` (or, for a strategy without declared options, the
Flower-free protocol core :class:`ProtocolStrategy` of
:mod:`fedcausal_flwr.federation.core.protocol`: hooks ``next_request`` / ``handle_replies`` /
``result_payload``) and declares what it needs of the clients' data (:class:`InputNeeds`, checked
after hello); the runtime wraps it in Flower's adapter
(:mod:`fedcausal_flwr.federation.runtime.adapter`), so a strategy file reads as its protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

from fedcausal_flwr.federation.core.input_checks import InputNeeds, require_same_columns
from fedcausal_flwr.federation.core.protocol import ProtocolStrategy
from fedcausal_flwr.federation.core.registry import register_method
from fedcausal_flwr.options import OptionSet


class Options(Mapping[str, Any]):
    """A method's resolved options, read by attribute (``options.alpha``) or by name."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"no option {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("resolved options are read-only")

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Options({self._values!r})"


class MethodStrategy(ProtocolStrategy):
    """A method's server side, built from its declared options.

    ``Strategy(options)`` (a mapping, keywords, or both) resolves them once through the class's
    :attr:`OPTIONS`: names, types, defaults, ranges and cross-option rules are stated there, and
    the strategy reads the result as :attr:`options`; it never restates a default or a range. The
    registry builds strategies this way from options an entry point has already resolved (read
    as they are: :class:`~fedcausal_flwr.options.ResolvedOptions`), and a test or a script may
    pass raw keywords.
    """

    #: the method's declared options (:class:`~fedcausal_flwr.options.OptionSet`)
    OPTIONS: ClassVar[OptionSet] = OptionSet()
    #: the other methods this class serves: variant -> (method name, its declared options)
    #: (FedPC's strategy with ``variant="fci"`` is FedFCI's)
    VARIANTS: ClassVar[Mapping[str, tuple[str, OptionSet]]] = {}

    def __init__(
        self,
        options: Mapping[str, Any] | None = None,
        /,
        *,
        variant: str | None = None,
        method: tuple[str, OptionSet] | None = None,
        **keywords: Any,
    ) -> None:
        super().__init__()
        #: the options this strategy's method declares: the class's :attr:`OPTIONS`, its
        #: variant's, or those of the ``method`` (name, options) it was made for (one class
        #: serving methods declared elsewhere: the search over a federated CI test)
        self.declared = self.OPTIONS
        if method is not None:
            self.name, self.declared = method
        elif variant is not None:
            if variant not in self.VARIANTS:
                known = ", ".join(self.VARIANTS) or "none"
                raise ValueError(f"{type(self).__name__} has no variant {variant!r} ({known})")
            self.name, self.declared = self.VARIANTS[variant]
        raw = options if options is not None and not keywords else {**(options or {}), **keywords}
        self.options = Options(self.declared.resolve(raw, owner=f"method {self.name!r}"))


def register_variants(
    makers: Mapping[str, Callable[[Mapping[str, Any]], MethodStrategy]],
    variants: Mapping[str, tuple[str, OptionSet]],
    descriptions: Mapping[str, str],
    client: str,
    **registration: Any,
) -> None:
    """Register each method a strategy class serves (``variants``: its :attr:`VARIANTS`),
    built by ``makers[variant]``, with its own name, options and description and the rest of
    the ``registration`` (:func:`~fedcausal_flwr.federation.core.registry.register_method`'s
    keywords) alike."""
    for variant, make in makers.items():
        name, declared = variants[variant]
        register_method(
            name, make, client, description=descriptions[variant], options=declared,
            **registration,
        )  # fmt: skip


def option_attributes(*names: str) -> tuple[Any, ...]:
    """Read-only attributes of a strategy, one per option of ``names``: in a class body,
    ``alpha, test = option_attributes("alpha", "test")`` reads ``strategy.alpha`` as
    ``strategy.options.alpha``."""

    def attribute(name: str) -> property:
        return property(lambda self: self.options[name], doc=f"option {name}")

    return tuple(attribute(name) for name in names)


__all__ = [
    "InputNeeds",
    "MethodStrategy",
    "Options",
    "ProtocolStrategy",
    "option_attributes",
    "register_variants",
    "require_same_columns",
]
