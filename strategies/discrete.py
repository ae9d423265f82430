"""What the methods on discrete data share, owned by none of them (Flower-free).

The voting baselines, layer-wise voting FedPC, FedECD, FedCSL, FedLCS and its baselines run
discrete CI tests (G2 or Pearson chi2) over the clients' global level sets: their options
``alpha``, ``test``, ``max_depth`` and ``reliability`` (:func:`common_options`), their strategies'
set-up (:class:`DiscreteMethodStrategy`: the declared options resolved once, levels fixed after
hello, every request built on their shared record
:class:`~fedcausal_flwr.protocols.discrete.DiscreteScope`, the mark matrices clients send
checked), the pooled reference's oracle over raw rows (:func:`pooled_oracle`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np

from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.input_notes import note_constant_columns
from fedcausal_flwr.federation.core.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.options import OptionSet
from fedcausal_flwr.protocols.discrete import DiscreteScope
from fedcausal_flwr.protocols.queries import encode_queries
from fedcausal_flwr.protocols.voting import PVALUES, PValuesRequest
from fedcausal_flwr.stats.batch_oracle import Query
from fedcausal_flwr.stats.oracles import DiscreteOracle
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import MethodStrategy, option_attributes

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


class DiscreteMethodStrategy(MethodStrategy):
    """Common set-up: the declared options (each subclass's :attr:`OPTIONS`, with at least
    :func:`common_options`' four), global level sets and cardinalities; discrete data (checked
    after hello by the input check, as :attr:`needs` declares)."""

    #: Discrete columns; each client tests on its own rows (the pooled reference overrides this).
    needs = InputNeeds(values="discrete", local_tests=True)
    #: the common options, read as attributes too
    alpha, test, max_depth, reliability = option_attributes(*COMMON)

    def __init__(self, options: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        super().__init__(options, **keywords)
        self.levels: dict[str, list] = {}
        self.cards = np.zeros(0, dtype=np.int64)
        self.constant: list[str] = []

    def input_needs(self) -> InputNeeds:
        return replace(self.needs, test=self.options.test)

    @property
    def started(self) -> bool:
        return bool(self.levels)

    def start(self) -> None:
        """Fix the global level sets (after hello; once), over which every client encodes."""
        if self.started:
            return
        levels = self.global_levels()
        # never None: the input check required every column to be discrete
        self.levels = {v: levels[v] or [] for v in self.variables}
        self.cards = np.array([len(self.levels[v]) for v in self.variables], dtype=np.int64)
        if self.needs.isolates_constants:
            self.constant = note_constant_columns(self.name, self.levels, allowed=True)
        for v, card in zip(self.variables, self.cards, strict=True):
            if card < 2 and not self.needs.isolates_constants:
                raise ValueError(
                    f"variable {v!r} has a single level {self.levels[v]} over all clients; a "
                    "CI test needs at least two"
                )

    def scoped(self, record: type[Scoped], **fields: Any) -> Scoped:
        """An action's request ``record`` (a :class:`DiscreteScope`): this run's variables, level
        sets, test, alpha and reliability, then the action's own ``fields``."""
        options = self.options
        return record(
            self.variables, self.levels, options.test, options.alpha, options.reliability, **fields
        )

    def pvalues_request(self, queries: Sequence[Query]) -> Request:
        """Action ``pvalues``: every client's own p-value of each of ``queries``."""
        asked = PValuesRequest(
            self.variables, self.levels, self.options.test, self.options.reliability
        )
        return Request(PVALUES, asked, arrays=[encode_queries(queries)], nan_ok=True)

    def client_marks(self, reply: Reply) -> np.ndarray:
        """A client's mark matrix, checked (shape, codes, both ends marked)."""
        p = len(self.variables)
        marks = np.asarray(reply.arrays[0]) if reply.arrays else np.zeros(0)
        if marks.shape != (p, p):
            raise ClientProtocolError(
                f"client {reply.client} sent a graph of shape {marks.shape}, expected {p}x{p}"
            )
        try:
            Graph(tuple(self.variables), marks)
        except ValueError as err:
            raise ClientProtocolError(
                f"client {reply.client} sent an invalid graph: {err}"
            ) from None
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
