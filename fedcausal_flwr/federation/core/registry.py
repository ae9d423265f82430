"""Method registry: how ``flwr run`` / the CLI find a method's strategy and client by name.

A method module registers itself at import time::

    register_method("rfcd", RFCDStrategy, "fedcausal_flwr.clients.rfcd:RFCDClient",
                    disclosures=DISCLOSURES, bootstrap=True)

with the strategy class (a ``strategies.base.MethodStrategy``: built as ``Class(options)``, its
``OPTIONS`` are the method's declared options) or any ``make_strategy(options: dict) ->
ProtocolStrategy`` with ``options=`` given, and the client class as ``"package.module:Class"``
(built as ``Class(partition_id, data, context=, guard=)``, its module imported when the first
client is built), or a factory ``make_client(partition_id: int, data: pandas.DataFrame, options:
dict, *, context=None, guard=None) -> ProtocolClient``. The options are an
:class:`~fedcausal_flwr.options.OptionSet` (name, type, default, range, help, the paper's
value); every entry point resolves what the user typed with :func:`resolve_options` before the
first round, and the strategy gets the complete, typed values.
``disclosures`` declares, next to the options, what each action of its clients discloses
(:mod:`~fedcausal_flwr.federation.core.disclosure`): a client built by :meth:`MethodSpec.client`
answers only those actions (:class:`~fedcausal_flwr.federation.core.site_policy.SiteGuard`).
Built-in methods are found through the package's metadata: its entry points of group
:data:`METHOD_GROUP` (``pyproject.toml``: method name -> the module that registers it), read
without importing any method. :func:`get_method` imports only the module of the method asked for
(a ClientApp answering a FedPC message imports FedPC's module, not every method's), while
:func:`known_methods` / :func:`builtin_methods` import them all. Other modules can be named in the
run config key ``plugins`` (comma-separated module names), which both the ServerApp and the
ClientApp import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import PackageNotFoundError, distribution
from typing import Any

import pandas as pd

from fedcausal_flwr.environment import DISTRIBUTION
from fedcausal_flwr.federation.core.bootstrap import SECURE_PROBLEM as BOOTSTRAP_SECURE_PROBLEM
from fedcausal_flwr.federation.core.bootstrap import BootstrapStrategy, with_bootstrap
from fedcausal_flwr.federation.core.disclosure import declare
from fedcausal_flwr.federation.core.run_binding import BindingStore, widest_table
from fedcausal_flwr.federation.core.site_guard import SiteGuard
from fedcausal_flwr.federation.core.site_policy import SitePolicy
from fedcausal_flwr.options import (
    OptionError,
    OptionSet,
    ResolvedOptions,
    canonical,
    closest,
    say,
    spell,
)

#: the entry-point group of the package's metadata naming each built-in method's module
METHOD_GROUP = "fedcausal_flwr.methods"

MakeStrategy = Callable[[dict], Any]
#: ``make_client(partition_id, data, options, *, context=None, guard=None)``
MakeClient = Callable[..., Any]
MakeData = Callable[[dict, int, int], pd.DataFrame]
#: ``secure(options) -> None`` if the method can sum its statistics through SecAgg+ with these
#: options, else the reason it cannot (a sentence).
SecureSupport = Callable[[dict], "str | None"]
#: ``score(result, true_dag) -> metrics`` for methods whose result is not scored as a whole graph
#: against the truth of its kind (e.g. FedLCS's local structures).
Score = Callable[[Any, Any], dict]
#: ``summaries(result, true_dag) -> {row label: metrics}``: extra rows a comparison reports for a
#: run (e.g. ``local``'s per-client average and best-oracle rows).
Summaries = Callable[[Any, Any], dict]


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
    options: OptionSet = OptionSet()
    secure: SecureSupport | None = None
    paper: str = ""
    score: Score | None = None
    summaries: Summaries | None = None
    min_sites: int = 1
    #: options the registry added for the federated bootstrap (``bootstrap``,
    #: ``bootstrap_sample``, and ``seed`` if the method had none): its own factories never see them
    bootstrap_keys: tuple[str, ...] = ()
    #: what each action of the method's clients discloses (action -> class)
    disclosures: Mapping[str, str] = field(default_factory=dict)
    #: the view a ``score`` hook's numbers are in (e.g. "local structure of the target against
    #: the true DAG"); a method scored as a whole graph is in the common view of its graph's kind
    score_view: str = ""
    #: the method's own options, before the registry's additions (its factories resolve these)
    method_options: OptionSet = OptionSet()
    #: the module that registered the method (a built-in's is named in the package's metadata)
    registered_by: str = ""

    @property
    def owner(self) -> str:
        return f"method {self.name!r}"

    def resolve(self, raw: Mapping[str, Any] | None, entry_point: str = "python") -> dict[str, Any]:
        """The method's complete, typed options from what a user typed on ``entry_point``."""
        return self.options.resolve(raw, owner=self.owner, entry_point=entry_point)

    def seeded(self, raw: Mapping[str, Any] | None, seed: int) -> dict[str, Any]:
        """``raw`` plus the run's ``seed`` as the method's seed, if the method has a seed option
        and ``raw`` does not set it (the one rule every entry point uses)."""
        out = dict(raw or {})
        if "seed" in self.options and "seed" not in {canonical(k) for k in out}:
            out["seed"] = seed
        return out

    def new_strategy(self, options: Mapping[str, Any]) -> Any:
        """The method's strategy for resolved ``options`` (every entry point builds strategies
        here; the run it joins is told the method's ``min_sites`` and the entry point)."""
        own = self.own_options(options)
        replicates = int(options.get("bootstrap") or 0) if self.bootstrap_keys else 0
        if replicates:
            strategy = BootstrapStrategy(
                lambda: self.make_strategy(own.copy()),
                replicates,
                int(options.get("seed") or 0),
                str(options.get("bootstrap_sample") or "subsample"),
            )
        else:
            strategy = self.make_strategy(own)
        return strategy

    def secure_problem(self, options: Mapping[str, Any]) -> str | None:
        """Why SecAgg+ cannot carry this run's statistics (None: it can)."""
        if self.bootstrap_keys and options.get("bootstrap"):
            return BOOTSTRAP_SECURE_PROBLEM
        if self.secure is None:
            return (
                f"{self.name} declares no sum SecAgg+ can carry (its registration has no "
                "secure hook)"
            )
        return self.secure(self.own_options(options))

    def guard(
        self,
        site: int,
        policy: SitePolicy | None = None,
        *,
        secure_run: bool = False,
        run: str = "",
        store: BindingStore | None = None,
        options: Mapping[str, Any] | None = None,
        withheld: frozenset[str] = frozenset(),
    ) -> SiteGuard:
        """The gate of a client of this method: its declared disclosures, and the site's
        ``policy`` and run ``store`` (:mod:`.run_binding`) where it has them; ``options``: the
        run's resolved options (they fix the widest table a request may ask); ``withheld``: the
        columns of its file the site keeps home."""
        return SiteGuard(
            self.name,
            dict(self.disclosures),
            bool(self.bootstrap_keys),
            policy,
            secure_run,
            int(site),
            str(run),
            store,
            None if options is None else widest_table(options),
            withheld,
        )

    def client(
        self,
        partition_id: int,
        data: pd.DataFrame,
        options: Mapping[str, Any],
        guard: SiteGuard | None = None,
        context: Any = None,
    ) -> Any:
        """A client of this method for resolved ``options`` and the message's Flower
        ``context``, answering only what the method declares (and ``guard``'s policy allows):
        how every entry point builds clients."""
        guard = guard or self.guard(partition_id)
        return self.make_client(
            int(partition_id), data, self.own_options(options), context=context, guard=guard
        )

    def own_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` without those the registry added (the method's factories get these);
        resolved options stay resolved, for the method's own option set."""
        own = {k: v for k, v in options.items() if k not in self.bootstrap_keys}
        if isinstance(options, ResolvedOptions) and options.option_set is self.options:
            return ResolvedOptions(own, self.method_options)
        return own


_METHODS: dict[str, MethodSpec] = {}
_DEFAULT_DATA: list[MakeData] = []
_IMPORTED_BUILTINS = False


def register_method(
    name: str,
    make_strategy: MakeStrategy,
    make_client: MakeClient | str,
    *,
    make_data: MakeData | None = None,
    description: str = "",
    options: OptionSet | None = None,
    secure: SecureSupport | None = None,
    paper: str = "",
    score: Score | None = None,
    score_view: str = "",
    summaries: Summaries | None = None,
    min_sites: int = 1,
    bootstrap: bool = False,
    disclosures: Mapping[str, str] | None = None,
    replace: bool = False,
    registered_by: str | None = None,
) -> MethodSpec:
    """Register (or, with ``replace=True``, re-register) a method under ``name``.

    ``make_client``: a factory, or the client class as ``"package.module:Class"`` (built with the
    partition id and data, its module imported when the first client is built:
    :func:`client_class`). ``options``: the method's declared options (none if omitted: then any
    option is an error). ``secure``: given if the method can route its summed statistics through
    SecAgg+. ``score`` / ``summaries``: hooks for results scored other than as a whole graph, and
    for the extra rows a comparison reports (see :mod:`fedcausal_flwr.scoring`); ``score_view`` says
    what a ``score`` hook's numbers are (required with it: every table states its view).
    ``min_sites``: how many clients the method needs at least (2 for methods that combine the
    clients' own results: one client's "vote" is no vote); fewer is an input error naming it.
    ``bootstrap``: the method takes the option ``bootstrap`` (the federated bootstrap of
    :mod:`~fedcausal_flwr.federation.core.bootstrap`; its clients must keep no state between
    messages). ``registered_by``: the registering module, where the strategy factory is defined
    elsewhere (a search method's is :mod:`~fedcausal_flwr.strategies.search`'s); default: the
    factory's module. ``disclosures``: action -> disclosure class (``raw``, ``per_client``,
    ``summed``, ``metadata``) of every action its clients answer; an action left out is refused.
    """
    if not isinstance(name, str) or not name or name.strip() != name:
        raise ValueError(f"method name must be a non-empty string without spaces, got {name!r}")
    if isinstance(make_client, str):
        make_client = client_class(make_client)
    if options is None:  # a strategy class declares its options (strategies.base.MethodStrategy)
        options = getattr(make_strategy, "OPTIONS", None)
    if options is not None and not isinstance(options, OptionSet):
        raise TypeError(f"options of method {name!r} must be an OptionSet")
    if isinstance(min_sites, bool) or not isinstance(min_sites, int) or min_sites < 1:
        raise ValueError(f"min_sites of method {name!r} must be an integer >= 1, got {min_sites!r}")
    if score is not None and not score_view:
        raise ValueError(f"method {name!r}: a score hook needs score_view (what its numbers are)")
    declared = options or OptionSet()
    offered = with_bootstrap(declared) if bootstrap else declared
    added = tuple(o.name for o in offered.options if o.name not in declared)
    spec = MethodSpec(
        name,
        make_strategy,
        make_client,
        make_data,
        description,
        offered,
        secure,
        paper,
        score,
        summaries,
        min_sites,
        added,
        declare(f"method {name!r}", disclosures),
        score_view,
        declared,
        registered_by or str(getattr(make_strategy, "__module__", "?")),
    )
    return _store(spec, replace)


def client_class(path: str) -> MakeClient:
    """The client factory of a method whose client is the class at ``path``
    (``"package.module:Class"``, built as ``Class(partition_id, data, context=, guard=)``). The
    module is imported
    when the first client is built: a server never imports its method's client side."""
    module, colon, name = path.partition(":")
    if not colon or not module or not name.isidentifier():
        raise ValueError(f"a client class is named 'package.module:Class', got {path!r}")

    def make_client(
        partition_id: int, data: pd.DataFrame, options: dict, *, context: Any = None,
        guard: Any = None,
    ) -> Any:  # fmt: skip
        built = getattr(importlib.import_module(module), name)
        return built(partition_id, data, context=context, guard=guard)

    make_client.__module__, make_client.__qualname__ = module, name  # its origin: the class
    return make_client


def _store(spec: MethodSpec, replace: bool) -> MethodSpec:
    """Keep ``spec`` under its name: a built-in registers its name first, and another
    registration of a taken name needs ``replace``."""
    name = spec.name
    builtin = _builtin_module(name)
    if builtin is not None and spec.registered_by != builtin:
        # another module takes a built-in name: the built-in registers first, so the clash (or,
        # with replace=True, the replacement) does not depend on what was imported before
        importlib.import_module(builtin)
    old = _METHODS.get(name)
    if old is not None and not replace and _signature(old) != _signature(spec):
        raise ValueError(
            f"method {name!r} is already registered (by {old.registered_by}); "
            "pass replace=True to override it"
        )
    _METHODS[name] = spec
    return spec


def _signature(spec: MethodSpec) -> tuple:
    """Identity of a registration by where its callables live (re-imports register again)."""
    make_data = None if spec.make_data is None else _origin(spec.make_data)
    return spec.registered_by, _origin(spec.make_strategy), _origin(spec.make_client), make_data


def _origin(fn: Callable) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


@cache
def builtin_method_map() -> dict[str, str]:
    """Built-in method name -> the full name of the module that registers it, as the package's
    metadata declares them (:data:`METHOD_GROUP`), read without importing any method."""
    try:
        points = distribution(DISTRIBUTION).entry_points
    except PackageNotFoundError:
        raise ImportError(
            f"{DISTRIBUTION} is not installed, so its methods cannot be found: install it "
            "(pip install -e . in a source tree)"
        ) from None
    return {point.name: point.value for point in points if point.group == METHOD_GROUP}


def _builtin_module(name: str) -> str | None:
    """The full name of the module that registers built-in method ``name`` (None: no built-in)."""
    return builtin_method_map().get(name)


def _import_builtins() -> None:
    """Import every built-in method module (for listings; a run imports only its method's)."""
    global _IMPORTED_BUILTINS
    if not _IMPORTED_BUILTINS:
        for module in sorted(set(builtin_method_map().values())):
            importlib.import_module(module)
        _IMPORTED_BUILTINS = True


def known_methods() -> list[str]:
    """Names of all registered methods (built-ins included)."""
    _import_builtins()
    return sorted(_METHODS)


def builtin_methods() -> list[str]:
    """Names of the methods this package ships (plugins left out), e.g. for its documentation."""
    _import_builtins()
    packages = {name: module.rpartition(".")[0] for name, module in builtin_method_map().items()}
    return sorted(  # a built-in name a plugin took over (replace=True) is the plugin's
        name
        for name, spec in _METHODS.items()
        if name in packages and spec.registered_by.startswith(packages[name] + ".")
    )


def get_method(name: str) -> MethodSpec:
    """The registered method ``name``; :class:`UnknownMethodError` lists the known ones.

    Imports only the module that registers ``name`` (a built-in not yet imported), or every
    built-in module when ``name`` is unknown (to list them)."""
    if isinstance(name, str) and name not in _METHODS:
        module = _builtin_module(name)
        if module is not None:
            importlib.import_module(module)
    try:
        return _METHODS[name]
    except KeyError:
        _import_builtins()
        hint = closest(str(name), _METHODS)
        raise UnknownMethodError(
            f"unknown method {name!r}"
            + (f" (did you mean {hint!r}?)" if hint else "")
            + f"; known methods: {', '.join(sorted(_METHODS)) or 'none'} "
            "(a plugin module can be named in the run config key 'plugins')"
        ) from None


def resolve_options(
    name: str, raw: Mapping[str, Any] | None, entry_point: str = "python"
) -> dict[str, Any]:
    """Method ``name``'s complete, typed options from ``raw`` as typed on ``entry_point``."""
    return get_method(name).resolve(raw, entry_point)


def check_secure(
    spec: MethodSpec, options: Mapping[str, Any], secure: bool, entry_point: str
) -> None:
    """A secure run of a method (or option set) that cannot sum through SecAgg+ is an error."""
    if not secure:
        return
    problem = spec.secure_problem(options)
    if problem:
        flag = (
            spell("secure", entry_point)
            if entry_point == "cli"
            else say("secure", True, entry_point)
        )
        raise OptionError(f"{spec.owner}: {flag} does not apply: {problem}")


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
