"""What the methods on discrete data share, owned by none of them (Flower-free).

The voting baselines, layer-wise voting FedPC, FedECD, FedCSL, FedLCS and its baselines run
discrete CI tests (G2 or Pearson chi2) over the clients' global level sets: their options
``alpha``, ``test``, ``max_depth`` and ``reliability`` (:func:`common_options`), the part each of
their strategies holds (:class:`DiscreteLevels`: the level sets fixed after hello, their
cardinalities, the constant columns kept as isolated nodes), their input needs with the run's
test (:func:`discrete_needs`), every request built on their shared record
:class:`~fedcausal_flwr.protocols.discrete.DiscreteScope` (:func:`scoped`,
:func:`pvalues_request`), the mark matrices clients send checked (:func:`client_marks`), the
pooled reference's oracle over raw rows (:func:`pooled_oracle`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar

import numpy as np

from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.input_notes import note_constant_columns
from fedcausal_flwr.federation.core.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.core.protocol import ProtocolStrategy
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.options import OptionSet
from fedcausal_flwr.protocols.discrete import DiscreteScope
from fedcausal_flwr.protocols.queries import encode_queries
from fedcausal_flwr.protocols.voting import PVALUES, PValuesRequest
from fedcausal_flwr.stats.batch_oracle import Query
from fedcausal_flwr.stats.oracles import DiscreteOracle
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import MethodStrategy, Options

Scoped = TypeVar("Scoped", bound=DiscreteScope)
#: the options every discrete method declares (:func:`common_options`)
COMMON = ("alpha", "test", "max_depth", "reliability")


def common_options(
    alpha: float = 0.05,
    test: str = "chi2",
    max_depth: int | None = None,
    reliability: float | None = None,
    paper: Mapping[str, str] | None = None,
    why: Mapping[str, str] | None = None,
) -> OptionSet:
    """``alpha``, ``test``, ``max_depth`` and ``reliability`` of the discrete voting methods,
    with a method's defaults, the paper's values (``paper``: option -> what the paper says) and
    why a default differs from it (``why``)."""
    said, reason = dict(paper or {}), dict(why or {})
    options = (
        shared.alpha(alpha),
        shared.test(test),
        shared.max_depth(max_depth),
        shared.reliability(reliability),
    )
    return OptionSet(
        tuple(replace(o, paper=said.get(o.name, ""), why=reason.get(o.name, "")) for o in options)
    )


class DiscreteLevels:
    """A discrete method's level sets: each variable's global level set over all clients (fixed
    once, after hello; every client encodes its rows over them), their cardinalities and the
    columns constant over all clients that the method keeps as isolated nodes."""

    def __init__(self) -> None:
        self.levels: dict[str, list] = {}
        self.cards = np.zeros(0, dtype=np.int64)
        self.constant: list[str] = []

    def fix(self, strategy: ProtocolStrategy) -> None:
        """Fix the level sets of ``strategy``'s variables from its clients' hello reports (once:
        a later call does nothing). A single-level column is an isolated node if the strategy's
        :attr:`~ProtocolStrategy.needs` say so (``isolates_constants``), an error otherwise."""
        if self.levels:
            return
        levels = strategy.global_levels()
        variables, isolates = strategy.variables, strategy.needs.isolates_constants
        # never None: the input check required every column to be discrete
        self.levels = {v: levels[v] or [] for v in variables}
        self.cards = np.array([len(self.levels[v]) for v in variables], dtype=np.int64)
        if isolates:
            self.constant = note_constant_columns(strategy.name, self.levels, allowed=True)
        for v, card in zip(variables, self.cards, strict=True):
            if card < 2 and not isolates:
                raise ValueError(
                    f"variable {v!r} has a single level {self.levels[v]} over all clients; a "
                    "CI test needs at least two"
                )


class HoldsLevels(Protocol):
    """What the request builders read of a discrete method's strategy: its variables, resolved
    options and :class:`DiscreteLevels` (attribute ``discrete``)."""

    options: Options
    discrete: DiscreteLevels

    @property
    def variables(self) -> list[str]: ...


def discrete_needs(strategy: MethodStrategy) -> InputNeeds:
    """A discrete method's ``input_needs``: its :attr:`~ProtocolStrategy.needs` with the run's
    test (option ``test``)."""
    return replace(strategy.needs, test=strategy.options.test)


def scoped(strategy: HoldsLevels, record: type[Scoped], **fields: Any) -> Scoped:
    """An action's request ``record`` (a :class:`DiscreteScope`): the run's variables, level
    sets, test, alpha and reliability, then the action's own ``fields``."""
    options, levels = strategy.options, strategy.discrete.levels
    return record(
        strategy.variables, levels, options.test, options.alpha, options.reliability, **fields
    )


def pvalues_request(strategy: HoldsLevels, queries: Sequence[Query]) -> Request:
    """Action ``pvalues``: every client's own p-value of each of ``queries``."""
    options, levels = strategy.options, strategy.discrete.levels
    asked = PValuesRequest(strategy.variables, levels, options.test, options.reliability)
    return Request(PVALUES, asked, arrays=[encode_queries(queries)], nan_ok=True)


def client_marks(reply: Reply, variables: Sequence[str]) -> np.ndarray:
    """A client's mark matrix over ``variables``, checked (shape, codes, both ends marked)."""
    p = len(variables)
    marks = np.asarray(reply.arrays[0]) if reply.arrays else np.zeros(0)
    if marks.shape != (p, p):
        raise ClientProtocolError(
            f"client {reply.client} sent a graph of shape {marks.shape}, expected {p}x{p}"
        )
    try:
        Graph(tuple(variables), marks)
    except ValueError as err:
        raise ClientProtocolError(f"client {reply.client} sent an invalid graph: {err}") from None
    if not np.isin(marks, (NONE, TAIL, ARROW, CIRCLE)).all():
        raise ClientProtocolError(f"client {reply.client} sent unknown mark codes")
    return marks.astype(np.int8)


def pooled_oracle(
    replies: list[Reply],
    variables: list[str],
    cards,
    test: str,
    rows: dict[int, int],
    reliability: float | None = None,
    empty_strata_add_dof: bool = False,
    allow_missing: bool = False,
) -> DiscreteOracle:
    """A centralised oracle over the clients' raw encoded rows (``raw_rows`` replies, in partition
    order); ``rows`` gets each client's row count; ``allow_missing``: test-wise deletion."""
    p = len(variables)
    parts = []
    for reply in replies:
        codes: np.ndarray = np.asarray(reply.arrays[0]) if reply.arrays else np.zeros((0,))
        if codes.ndim != 2 or codes.shape[1] != p:
            raise ClientProtocolError(
                f"client {reply.client} sent data of shape {codes.shape}, expected (n, {p})"
            )
        parts.append(codes.astype(np.int64))
        rows[reply.client] = int(codes.shape[0])
    return DiscreteOracle(
        np.concatenate(parts),
        cards,
        variables,
        test=test,
        reliability=reliability,
        empty_strata_add_dof=empty_strata_add_dof,
        allow_missing=allow_missing,
    )
