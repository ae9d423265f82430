"""IOD's CI evidence from sites holding different columns, computed in this process.

Three sources, one :class:`SiteEvidence` oracle over the union of the variables (a test's
participants are the sites observing all of its variables; a test no site can answer is an error,
never ``p = 1``: docs/choices.md, IOD):

* ``fedci``: fedCI's symmetric GLM likelihood-ratio test fitted over every participant's rows with
  fixed site dummies (:func:`~fedcausal_flwr.stats.glm.ci_test_inprocess`, the same IRLS the
  Flower strategy drives round by round);
* ``fisher``: each participant runs that test on its own rows (no site term) and the p-values are
  combined by Fisher's method (the paper's meta-analysis baseline, df = 2k over k participants);
* ``pooled``: the participants' rows concatenated into one table with the site as a categorical
  covariate in the conditioning set (the paper's centralised baseline; one table, so no
  federation and no site dummies in the design: an independent route to fedCI's number).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from fedcausal_flwr.data.schema import Schema, VariableSpec
from fedcausal_flwr.stats.batch_oracle import CIOracle, Query
from fedcausal_flwr.stats.glm import (
    CITestResult,
    ClientTable,
    ci_test_inprocess,
    fisher_combine,
    participants,
)

EVIDENCE = ("fedci", "fisher", "pooled")
SITE_COLUMN = "__site__"


def datasets_of(frames: Sequence[pd.DataFrame], names: Sequence[str]) -> list[tuple[int, ...]]:
    """Each distinct column set of ``frames`` as ascending indices into ``names``, first-seen
    order (IOD's datasets: sites holding the same columns form one)."""
    where = {v: i for i, v in enumerate(names)}
    out: dict[tuple[int, ...], None] = {}
    for k, frame in enumerate(frames):
        unknown = [c for c in frame.columns if c not in where]
        if unknown:
            raise ValueError(f"client {k} has columns {unknown} that the schema does not declare")
        out[tuple(sorted(where[c] for c in frame.columns))] = None
    return list(out)


class SiteEvidence(CIOracle):
    """p-values from the sites' frames by ``evidence`` (see the module docstring)."""

    def __init__(
        self,
        frames: Sequence[pd.DataFrame],
        schema: Schema,
        evidence: str = "fedci",
        ridge: float = 0.0,
        **fit_options: float,
    ):
        if evidence not in EVIDENCE:
            raise ValueError(f"unknown evidence {evidence!r}; use one of {EVIDENCE}")
        super().__init__(schema.names)
        self.frames, self.schema, self.evidence = list(frames), schema, evidence
        self.tables = [ClientTable(df, schema, f"client {k}") for k, df in enumerate(frames)]
        self.ridge = float(ridge)
        self.fit_options: dict[str, Any] = dict(fit_options)  # IRLS tolerances, to the fits
        self.results: dict[Query, CITestResult] = {}
        self._pooled: dict[tuple[int, ...], ClientTable] = {}

    def _pooled_table(self, sites: tuple[int, ...]) -> ClientTable:
        """The participants' rows in one table, with the site column when there are several."""
        if sites not in self._pooled:
            frames = [self.frames[k].assign(**{SITE_COLUMN: str(k)}) for k in sites]
            specs = list(self.schema)
            if len(sites) > 1:
                specs.append(VariableSpec(SITE_COLUMN, "categorical", tuple(str(k) for k in sites)))
            table = pd.concat(frames, ignore_index=True, join="inner")
            self._pooled[sites] = ClientTable(table, Schema(tuple(specs)), "pooled")
        return self._pooled[sites]

    def test_result(self, x: str, y: str, given: Sequence[str]) -> CITestResult:
        """One test's full result (statistics, participants, rows)."""
        given = list(given)
        sites = participants(self.tables, [x, y, *given])
        if not sites:
            raise ValueError(
                f"CI test {x} _||_ {y} | {given}: no client observes all of "
                f"{[x, y, *given]} (a missing test is not read as independent)"
            )
        opts = self.fit_options
        if self.evidence == "fedci":
            return ci_test_inprocess(self.tables, x, y, given, "fixed", self.ridge, **opts)
        if self.evidence == "pooled":
            cond = [*given, SITE_COLUMN] if len(sites) > 1 else given
            res = ci_test_inprocess([self._pooled_table(sites)], x, y, cond, "none", self.ridge,
                                    **opts)  # fmt: skip
            return replace(res, given=tuple(given), clients=sites)
        local = [ci_test_inprocess([self.tables[k]], x, y, given, "none", self.ridge, **opts)
                 for k in sites]  # fmt: skip
        statistic, df, p = fisher_combine([r.p_value for r in local])
        nan = float("nan")
        return CITestResult(x, y, tuple(given), p, nan, nan, statistic, statistic, df, df, sites,
                            sum(r.n for r in local), max(r.rounds for r in local))  # fmt: skip

    def compute_batch(self, queries: list[Query]) -> np.ndarray:
        names = self.variables
        out = []
        for q in queries:
            res = self.test_result(names[q[0]], names[q[1]], [names[v] for v in q[2]])
            self.results[q] = res
            out.append(res.p_value)
        return np.asarray(out, dtype=float)
