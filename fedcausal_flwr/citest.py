"""One-call federated CI tests on mixed data (fedCI's symmetric GLM LRT, or Fisher's method).

``citest(data=[df, ...], x=, y=, given=[...])`` runs the federation in this process: each frame is
one client; only aggregates cross the (simulated) boundary. :class:`FedCIOracle` answers PC/FCI
batches the same way, for local engine runs and as the reference of the Flower strategy.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence

import numpy as np
import pandas as pd

from fedcausal_flwr.data.schema import Schema
from fedcausal_flwr.stats.batch_oracle import CIOracle, Query
from fedcausal_flwr.stats.glm import (
    CITestResult,
    ClientTable,
    check_test,
    ci_test_inprocess,
    fisher_combine,
    fit_models,
    participants,
    result_from_states,
    test_models,
)

CI_METHODS = ("fedci", "fisher")


def _tables(data: Sequence[pd.DataFrame], schema: Schema | None) -> list[ClientTable]:
    if isinstance(data, pd.DataFrame):
        data = [data]
    data = list(data)
    if not data:
        raise ValueError("citest needs at least one client data frame")
    schema = Schema.infer(data) if schema is None else schema
    return [ClientTable(df, schema, f"client_{k}") for k, df in enumerate(data)]


def citest(
    data: Sequence[pd.DataFrame],
    x: str,
    y: str,
    given: Sequence[str] = (),
    site_effect: str = "none",
    backend: str = "inprocess",
    ci: str = "fedci",
    schema: Schema | None = None,
    ridge: float = 0.0,
    tol: float = 1e-5,
) -> CITestResult:
    """Test ``x _||_ y | given`` over client frames ``data``.

    Parameters
    ----------
    data : sequence of DataFrame
        One frame per client; a client lacking one of the variables takes no part.
    x, y : str
        The variables tested.
    given : sequence of str
        The conditioning set.
    site_effect : {"none", "fixed", "private"}
        How client (site) effects enter the GLMs (``ci="fedci"`` only).
    backend : {"inprocess"}
        Where the clients run.
    ci : {"fedci", "fisher"}
        ``fedci``: the federated symmetric likelihood-ratio test, equal to the pooled one.
        ``fisher``: each client runs the same test alone and the p-values are combined by
        Fisher's method (``statistic`` is Fisher's T, ``df`` is ``2k``). The same spelling as
        the ``ci`` option of ``fedci-pc`` / ``fedci-fci``.
    schema : Schema, optional
        Variable kinds and levels; inferred from the dtypes if omitted.
    ridge, tol : float
        IRLS ridge penalty and log-likelihood tolerance.

    Returns
    -------
    CITestResult
        The p-value, the statistics and degrees of freedom of both directions, the clients that
        took part and the number of rows.
    """
    if backend != "inprocess":
        raise ValueError(f"backend {backend!r} is not supported yet; use 'inprocess'")
    if ci not in CI_METHODS:
        raise ValueError(f"unknown ci {ci!r}; use one of {CI_METHODS}")
    tables = _tables(data, schema)
    given = list(given)
    if ci == "fedci":
        return ci_test_inprocess(tables, x, y, given, site_effect, ridge, tol=tol)
    check_test(tables[0].schema, x, y, given)
    clients = participants(tables, [x, y, *given])
    local = [ci_test_inprocess([tables[k]], x, y, given, "none", ridge, tol=tol) for k in clients]
    if not local:
        nan = float("nan")
        return CITestResult(x, y, tuple(given), nan, nan, nan, nan, nan, 0, 0, (), 0)
    statistic, df, p = fisher_combine([r.p_value for r in local])
    return CITestResult(
        x, y, tuple(given), p, float("nan"), float("nan"), statistic, statistic, df, df,
        clients, sum(r.n for r in local), max(r.rounds for r in local),
    )  # fmt: skip


class FedCIOracle(CIOracle):
    """A :class:`CIOracle` whose batches are fedCI tests fitted in lockstep in this process."""

    def __init__(
        self,
        data: Sequence[pd.DataFrame],
        schema: Schema | None = None,
        site_effect: str = "none",
        ridge: float = 0.0,
        testwise: bool = False,
        **fit_options,
    ):
        self.tables = _tables(data, schema)
        self.testwise = bool(testwise)  # each test over the rows observed on its variables
        self.schema = self.tables[0].schema
        super().__init__(self.schema.names)
        self.site_effect, self.ridge, self.fit_options = site_effect, ridge, fit_options
        self.results: dict[Query, CITestResult] = {}
        self.n_rounds = 0

    def compute_batch(self, queries: list[Query]) -> np.ndarray:
        names = self.variables
        jobs = []
        for q in queries:
            x, y, s = names[q[0]], names[q[1]], [names[v] for v in q[2]]
            clients = participants(self.tables, [x, y, *s])
            if not clients:
                raise ValueError(f"CI test {x} _||_ {y} | {s}: no client observes all of them")
            models = test_models(x, y, s, self.site_effect, clients, self.testwise)
            jobs.append((q, x, y, s, clients, models))
        models = [m for job in jobs for m in job[5]]
        states, rounds = fit_models(self.tables, models, self.ridge, **self.fit_options)
        self.n_rounds += rounds
        out = []
        for i, (q, x, y, s, clients, _) in enumerate(jobs):
            res = result_from_states(x, y, s, states[4 * i : 4 * i + 4], self.schema, clients,
                                     rounds)  # fmt: skip
            self.results[q] = res
            out.append(res.p_value)
        return np.asarray(out, dtype=float)


class _CallableModule(types.ModuleType):
    """Importing this submodule rebinds ``fedcausal_flwr.citest`` to it (Python sets the package
    attribute), so the module itself forwards calls: ``fedcausal_flwr.citest(...)`` always works."""

    def __call__(self, *args, **kwargs) -> CITestResult:
        return citest(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
