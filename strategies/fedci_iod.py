"""fedCI-IOD (Hahn et al.): IOD over sites holding different, overlapping variable sets, with
federated CI evidence.

The server drives IOD (:mod:`fedcausal_flwr.discovery.iod`): each *dataset* (a distinct column
set; sites holding the same columns form one) runs FCI's search over its own variables, all of
them in lockstep, so one batch of tests serves every dataset; then the global phase enumerates and
validates the candidate PAGs over the union (no more rounds). A test's evidence pools every site
that observes its variables, whatever dataset asked it. Evidence (``ci``):

* ``fedci`` (``fedci-iod``): fedCI's protocol unchanged (:mod:`~fedcausal_flwr.strategies.fedci`:
  the ``glm`` action, one round per IRLS iteration for all unfinished models of a batch, fixed
  site dummies by default, the paper's mode 2), so each p-value equals the pooled GLM test with
  the site as a covariate on the participating rows;
* ``fisher`` (``iod-fisher``): the ``local_lrt`` action; each site tests on its own rows and the
  server combines the participants' p-values by Fisher's method (the paper's baseline);
* ``pooled`` (``iod-pooled``, the upper bound; NOT private): one ``raw_rows`` round, then the
  server runs every test on the participants' rows in one table with the site as a categorical
  covariate (:class:`~fedcausal_flwr.discovery.iod_evidence.SiteEvidence`, ``"pooled"``).

Pairs no site observes together are never tested and never imputed: IOD asks tests inside one
dataset only; such an edge stays in the global skeleton, and IOD's RemEdges enumeration covers its
presence and absence. A test no site can answer is an error, never ``p = 1``.

Result: ``graph`` is the PAG when the list has exactly one, else None; ``extra["pags"]`` the list
(JSON graphs), ``extra["local_pags"]`` each dataset's PAG with its variables and sites,
``candidates`` (before validation), ``partial``, ``message``, the enumeration bookkeeping, and
fedCI's ``ci_tests`` / ``batches``.

Wire protocol (actions, payload records, replies): :mod:`fedcausal_flwr.protocols.fedci`
(fedCI's ``glm`` and ``local_lrt``, asked only of the sites observing a test's variables, and
``iod-pooled``'s ``raw_rows``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from fedcausal_flwr.data.inputs import InputError
from fedcausal_flwr.data.schema import Schema
from fedcausal_flwr.discovery.driver import StepRunner, with_cache
from fedcausal_flwr.discovery.iod import IODResult, check_datasets, iod_steps
from fedcausal_flwr.discovery.iod_candidates import PROCEDURES
from fedcausal_flwr.discovery.iod_evidence import SiteEvidence
from fedcausal_flwr.discovery.iod_metrics import pag_list_metrics
from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.messages import ClientInfo, ProtocolError
from fedcausal_flwr.federation.core.protocol import Reply, Request
from fedcausal_flwr.federation.core.registry import SecureSupport, register_method
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.graphs.truth import dag_to_pag
from fedcausal_flwr.options import Option, OptionSet, documented_by
from fedcausal_flwr.protocols.fedci import (
    DISCLOSURES,
    FISHER_DISCLOSURES,
    POOLED_DISCLOSURES,
)
from fedcausal_flwr.protocols.pooled import RAW_ROWS, RawRowsRequest
from fedcausal_flwr.result import Result
from fedcausal_flwr.stats.glm import SITE_EFFECTS
from fedcausal_flwr.strategies import glm_tests
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import MethodStrategy, Options
from fedcausal_flwr.strategies.search_stop import stop_search

LOG = logging.getLogger(__name__)
POSSIBLE_DSEP = ("stable", "sequential", "off")


def _options(ci: str) -> OptionSet:
    """fedCI's options (without its search-engine ones, background knowledge and missing values,
    which IOD's candidate enumeration does not take, and differential privacy: IOD's searches,
    a local one per dataset and the merge, have no split of a budget) plus IOD's."""
    drop = {"ci", "site_effect", "possible_dsep", "pds_max_size", "fci_rules", "knowledge"}
    drop |= {"missing"}
    # fedCI's encoding option depends on its ci option, which IOD fixes per method
    base = [
        replace(o, requires=None)
        for o in glm_tests.FEDCI_FCI_OPTIONS
        if o.name not in drop and not o.name.startswith("dp")
    ]
    if ci != "fedci":  # no GLM blocks travel
        base = [o for o in base if o.name not in ("encoding", "fixed_fraction_bits", "fixed_limbs")]
    iod_options = [
        Option(
            "procedure",
            "str",
            "original",
            "IOD procedure: original (Tillman and Spirtes), orderedcolls (colliders with order) "
            "or orderedtriplets (triples with order); same final list, fewer candidates",
            choices=PROCEDURES,
            paper="original (the experiments); App. D compares all three",
        ),
        Option(
            "max_candidates",
            "int",
            100_000,
            "largest enumeration (edge subsets x possible-collider subsets) IOD may run; the "
            "size is computed before it starts and a larger one stops the run (see partial)",
            minimum=1,
            nullable=True,
            null_values=(-1,),
            null_meaning="no cap",
        ),
        Option(
            "partial",
            "bool",
            False,
            "above max_candidates, enumerate only the first max_candidates combinations and "
            "return the PAGs validated among them, marked partial (else the run stops)",
        ),
        Option(
            "possible_dsep",
            "str",
            "stable",
            "FCI's Possible-D-Sep phase in each dataset's search (stable: one round per subset "
            "size; sequential: as causal-learn; off)",
            choices=POSSIBLE_DSEP,
            paper="pcalg::pdsep",
        ),
        shared.pds_max_size(),
    ]
    if ci == "fedci":
        iod_options.append(
            Option(
                "site_effect",
                "str",
                "fixed",
                "client (site) effects in the GLMs: fixed site dummies (fedCI, the pooled test "
                "with the site as a covariate), private per-site intercepts, or none",
                choices=SITE_EFFECTS,
                paper="fixed (fedCI's mode 2)",
            )
        )
    return OptionSet((*base, *iod_options))


FEDCI_IOD_OPTIONS = _options("fedci")
IOD_FISHER_OPTIONS = _options("fisher")
IOD_POOLED_OPTIONS = _options("pooled")
#: fedCI's option values the IOD methods run with where they offer none
FEDCI_DEFAULTS = glm_tests.FEDCI_FCI_OPTIONS.defaults()


class FedCIIODStrategy(MethodStrategy):
    """fedci-iod: IOD on fedCI's federated GLM tests (a
    :class:`~fedcausal_flwr.strategies.glm_tests.GLMTests` it holds as ``tests``); by its evidence
    (``ci``), iod-fisher (``fisher``: each site's own likelihood-ratio p-values, combined by
    Fisher's method; the fedCI paper's baseline) and iod-pooled (``pooled``: tests of the sites'
    rows pooled at the server, the site a covariate; the upper bound, NOT private)."""

    name = "fedci-iod"
    OPTIONS = FEDCI_IOD_OPTIONS
    VARIANTS = {
        "fedci": ("fedci-iod", FEDCI_IOD_OPTIONS),
        "fisher": ("iod-fisher", IOD_FISHER_OPTIONS),
        "pooled": ("iod-pooled", IOD_POOLED_OPTIONS),
    }

    def __init__(
        self, options: Mapping[str, Any] | None = None, /, *, ci: str = "fedci", **keywords: Any
    ) -> None:
        super().__init__(options, variant=ci, **keywords)
        #: the tests' evidence (fedCI's ``ci`` option, fixed per method): ``fedci``, ``fisher``,
        #: or ``pooled`` (the server runs them on the sites' rows)
        self.ci = ci
        # fedCI's tests read every fedCI option: ci is the method's evidence, and those IOD does
        # not offer (missing values, the search engine's) keep fedCI's defaults
        self.options = Options({**FEDCI_DEFAULTS, **self.options, "ci": self.ci})
        #: the federated CI tests: schema, tests asked, batches, the server's privacy part
        self.tests = glm_tests.GLMTests(self.options)
        #: why the search ended before its last depth (None: it did not)
        self.stopped: str | None = None
        self.runner: StepRunner | None = None
        self.evidence: SiteEvidence | None = None
        self.progress_lines: list[str] = []
        self.datasets: list[tuple[int, ...]] = []
        self.dropped: set[int] = set()

    def input_needs(self) -> InputNeeds:
        """fedCI's needs, except that the sites may hold different columns."""
        return replace(self.tests.input_needs(), same_columns=False)

    # ------------------------------------------------------------------ protocol
    def next_request(self) -> Request | None:
        runner = self.runner if self.runner is not None else self.start_search()
        if runner.pending is None:  # the search has finished
            return None
        if self.ci != "pooled":
            return self.tests.request(self, runner.pending)
        assert self.tests.schema is not None  # validate_clients has set it
        return Request(RAW_ROWS, RawRowsRequest(self.tests.schema.to_json()))

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        assert self.runner is not None and self.runner.pending is not None  # the asked batch
        if request.action != RAW_ROWS:
            pvalues = self.tests.answer(self, request, replies, self.runner.pending)
            if pvalues is not None:
                self.runner.answer(pvalues)
            return
        self._answer_pooled(replies, self.runner)

    def forget_pending_batch(self) -> None:
        self.tests.forget()

    def privacy_plan(self) -> dict[str, Any] | None:
        return self.tests.privacy_plan(self)

    def stop_search(self, refusal: str) -> bool:
        return stop_search(self, refusal)

    # ------------------------------------------------------------------ iod-pooled
    def _answer_pooled(self, replies: list[Reply], runner: StepRunner) -> None:
        """iod-pooled's one round: every batch of the search, tested on the sites' rows."""
        schema = self.tests.schema
        assert schema is not None  # validate_clients has set it
        pids = [reply.client for reply in replies]
        frames = [self._rows_frame(reply, schema) for reply in replies]
        self.evidence = SiteEvidence(
            frames, schema, "pooled", ridge=self.options.ridge, **self.tests.fit_options
        )
        self.annotate(rows=sum(len(f) for f in frames))
        while (queries := runner.pending) is not None:
            pvalues = self.evidence.compute_batch(queries)
            for query in queries:
                res = self.evidence.results[query]
                self.tests.tests[query] = replace(res, clients=tuple(pids[k] for k in res.clients))
            self.tests.batches.append(
                {"round": self.current_round, "tests": len(queries), "rounds": 0}
            )
            runner.answer(pvalues)

    def _rows_frame(self, reply: Reply, schema: Schema) -> pd.DataFrame:
        """A site's ``raw_rows`` reply as a frame over its own columns, levels restored."""
        own = [v for v in schema.names if v in self.client_info[reply.client].columns]
        rows = np.asarray(reply.arrays[0], dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] != len(own):
            raise ProtocolError(
                reply.client, f"sent rows of shape {rows.shape}, expected n x {len(own)} ({own})"
            )
        columns = {}
        for j, name in enumerate(own):
            spec = schema[name]
            if spec.kind == "continuous":
                columns[name] = rows[:, j]
                continue
            codes = rows[:, j].astype(np.int64)
            if (
                (codes != rows[:, j]).any()
                or codes.min(initial=0) < 0
                or codes.max(initial=0) >= spec.card
            ):
                raise ProtocolError(
                    reply.client, f"sent level codes of {name!r} outside 0..{spec.card - 1}"
                )
            columns[name] = np.asarray(spec.levels)[codes]  # the levels' own dtype
        return pd.DataFrame(columns)

    def validate_clients(self, info: dict[int, ClientInfo]) -> None:
        """fedCI's schema checks, and at least two variables per site (IOD tests pairs)."""
        self.tests.validate(info, self.entry_point)
        for pid in sorted(info):
            if len(info[pid].columns) < 2:
                raise InputError(
                    f"has only the column(s) {list(info[pid].columns)}; IOD needs at least two "
                    "variables per site",
                    client=pid,
                    fix="give the site at least two of the variables, or leave it out",
                    entry_point=self.entry_point,
                )

    def _progress(self, line: str) -> None:
        """IOD's own lines: kept in the result, logged, and shown with the run's progress (the
        enumeration runs on the server after the last round, possibly for minutes)."""
        self.progress_lines.append(line)
        LOG.info("%s", line)
        self.report(line)

    def start_search(self, max_depth: int | None = None) -> StepRunner:
        """IOD's search, capped at ``max_depth``; its batches answered before come from the
        cache."""
        names = self.tests.begin(self)
        where = {v: i for i, v in enumerate(names)}
        sets = [[where[c] for c in self.client_info[pid].columns] for pid in self.alive_clients]
        self.datasets = check_datasets(names, sets)
        options = self.options
        steps = iod_steps(
            names,
            self.datasets,
            options.alpha,
            procedure=options.procedure,
            max_depth=options.max_depth if max_depth is None else max_depth,
            possible_dsep=options.possible_dsep,
            pds_max_size=options.pds_max_size,
            max_candidates=options.max_candidates,
            partial=options.partial,
            progress=self._progress,
        )
        self.runner = StepRunner(with_cache(steps, self.tests.cache))
        return self.runner

    def on_clients_dropped(self, dropped: list[int]) -> None:
        self.tests.on_clients_dropped(self, dropped)
        self.dropped.update(dropped)

    def result_payload(self) -> dict:
        assert self.runner is not None  # the search has run
        result: IODResult = self.runner.result
        # a dataset's sites: those still in the run at its end (a dropped site is listed under
        # the result's dropped clients, with the round it left)
        sites: dict[tuple[int, ...], list[int]] = {}
        where = {v: i for i, v in enumerate(self.tests.names)}
        for pid in sorted(set(self.client_info) - self.dropped):
            key = tuple(sorted(where[c] for c in self.client_info[pid].columns))
            sites.setdefault(key, []).append(pid)
        enum = result.enumeration
        return {
            "graph": result.pags[0] if len(result.pags) == 1 else None,
            "variables": list(result.names),
            "pags": [g.to_json() for g in result.pags],
            "n_pags": len(result.pags),
            "message": result.message,
            "procedure": result.procedure,
            "candidates": result.candidates,
            "partial": result.partial,
            "enumeration": {
                "size": enum.size,
                "size_exact": enum.size_exact,
                "enumerated": enum.enumerated,
                "removable_edges": [[result.names[x], result.names[y]] for x, y in enum.removable],
                "rejected": dict(enum.rejected),
            },
            "enumeration_seconds": enum.seconds,
            "local_pags": [
                {
                    "variables": list(d.pag.names),
                    "sites": sites.get(d.variables, []),
                    "pag": d.pag.to_json(),
                }
                for d in result.local
            ],  # fmt: skip
            "progress": self.progress_lines,
            **self.tests.report(),
        }


@documented_by(FEDCI_IOD_OPTIONS)
def make_strategy(options: Mapping[str, Any], ci: str = "fedci") -> FedCIIODStrategy:
    """fedci-iod (``ci="fedci"``), iod-fisher or iod-pooled from its options."""
    return FedCIIODStrategy(options, ci=ci)


def iod_fisher_strategy(options: Mapping[str, Any]) -> FedCIIODStrategy:
    """iod-fisher: IOD on Fisher-combined local tests."""
    return FedCIIODStrategy(options, ci="fisher")


def iod_pooled_strategy(options: Mapping[str, Any]) -> FedCIIODStrategy:
    """iod-pooled: IOD on the sites' rows pooled at the server."""
    return FedCIIODStrategy(options, ci="pooled")


def result_pags(result: Result) -> list[Graph]:
    """The PAG list of a fedci-iod / iod-fisher result."""
    return [Graph.from_json(g) for g in result.extra.get("pags", [])]


#: what score_pag_list's numbers are
SCORE_VIEW = "the list of PAGs against the true PAG"


def score_pag_list(result: Result, dag: Graph) -> dict[str, float]:
    """The list's metrics (:func:`~fedcausal_flwr.discovery.iod_metrics.pag_list_metrics`)
    against the PAG of ``dag`` over the result's variables (the others are latent)."""
    variables = list(result.variables)
    unknown = [v for v in variables if v not in dag.names]
    if unknown:
        raise ValueError(f"the true graph lacks the learned variables {unknown}")
    truth = dag_to_pag(dag, [v for v in dag.names if v not in variables])
    return pag_list_metrics(result_pags(result), truth)


def _not_summable(what: str) -> SecureSupport:
    """The SecAgg+ support of a method whose clients send ``what``: none."""
    return lambda options: f"{what}, which cannot be summed"


#: each IOD method: its variant, its maker and what its registration says of it alone
METHODS: tuple[tuple[str, Callable[..., FedCIIODStrategy], dict[str, Any]], ...] = (
    (
        "fedci",
        FedCIIODStrategy,
        {
            "disclosures": DISCLOSURES,
            "secure": glm_tests.secure_support,
            "paper": "fedCI-IOD (Hahn et al.)",
            "description": "IOD over sites with different, overlapping variable sets (latent "
            "confounding) on federated fedCI likelihood-ratio tests; returns every consistent PAG",
        },
    ),
    (
        "fisher",
        iod_fisher_strategy,
        {
            "disclosures": FISHER_DISCLOSURES,
            "secure": _not_summable("Fisher's combination collects each client's p-values"),
            "paper": "baseline (Hahn et al.: IOD with meta-analysis)",
            "description": "IOD over sites with different variable sets on Fisher-combined local "
            "likelihood-ratio tests (the fedCI paper's baseline)",
        },
    ),
    (
        "pooled",
        iod_pooled_strategy,
        {
            "disclosures": POOLED_DISCLOSURES,
            "secure": _not_summable("the pooled upper bound collects every site's rows"),
            "paper": "upper bound (Hahn et al.: IOD on the pooled data)",
            "description": "IOD on the sites' rows pooled at the server (the site as a covariate): "
            "the upper bound for fedci-iod; NOT private, every site sends its rows",
        },
    ),
)
for _variant, _make, _own in METHODS:
    _name, _declared = FedCIIODStrategy.VARIANTS[_variant]
    register_method(
        _name,
        _make,
        "fedcausal_flwr.clients.fedci_iod:FedCIIODClient",
        options=_declared,
        score=score_pag_list,
        score_view=SCORE_VIEW,
        **_own,
    )

__all__ = [
    "FedCIIODStrategy",
    "iod_fisher_strategy",
    "iod_pooled_strategy",
    "make_strategy",
    "result_pags",
    "score_pag_list",
]
