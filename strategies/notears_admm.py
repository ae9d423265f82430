"""NOTEARS-ADMM (Ng & Zhang, AISTATS 2022), linear: federated NOTEARS by ADMM.

Continuous optimisation of the least-squares score of a linear SEM with an L1 penalty under the
acyclicity constraint ``h(W) = tr(exp(W o W)) - d = 0``, split by ADMM so that every client fits
its own matrix ``W_k`` on its own rows and the server fits the consensus ``Z`` (where the L1
penalty and the acyclicity constraint live, as in the paper). The maths, Flower-free, is
:mod:`fedcausal_flwr.discovery.notears`. **One round per ADMM iteration.**

Defaults are the authors' linear code and example notebook (github.com/ignavierng/notears-admm,
Apache-2.0, read for facts): ``lambda1 = 0.01``, initial penalties ``rho1 = rho2 = 0.001``
(acyclicity, consensus), growth ``x1.75`` / ``x1.25`` per iteration while below
``rho_max = 1e16``, at most ``max_iter = 200`` iterations (with these values the penalties reach
``rho_max`` after 197), zero initial matrices, the estimate thresholded at ``|w| > 0.3`` and then
cut to a DAG by removing the smallest weights on cycles. Choices where the paper and the code are
silent or where ours differs:

* the L1 term and the consensus subproblem: L-BFGS-B on ``Z = Z+ - Z-`` with ``Z+, Z- >= 0``
  (the NOTEARS bound trick), warm-started at the last ``Z``; the authors' code hands the
  non-smooth ``|Z|_1`` to L-BFGS-B directly;
* unequal client sizes: each client's loss is its share ``0.5 / N ||X_k - X_k W||^2`` of the
  pooled loss (``N`` the rows of the clients still taking part), which is the code's
  ``1 / (n K)`` when the sizes are equal; every client centres its columns on its own means (as
  the code);
* discrete data (``discrete``): ``frequency`` (default) maps every integer, text or true/false
  column as FedC2SL's experiments did before running NOTEARS-ADMM: the levels sorted by falling
  pooled frequency (ties: the sorted level order, not the order of first appearance, which would
  depend on the row order), each replaced by the midpoint of its interval of cumulative
  frequency, times ``discrete_scale`` (20 there). The pooled frequencies cost one summed round
  (``level_counts``) before the ADMM; decimal columns are used as they are. ``as_numbers`` uses
  integer and true/false columns as their values (text is refused); ``refuse`` accepts decimal
  columns only;
* ``zero_diagonal`` (off by default, as the code): fixes the diagonal of ``W_k`` and ``Z`` to 0
  (centralised NOTEARS's bounds) instead of leaving self-loops to ``h``;
* a column constant over all clients is kept: centred it is zero, so it becomes an isolated node;
* the run is deterministic (zero start, no sampling): there is no seed option;
* dropouts: the dropped client's dual and data leave the objective (``N`` shrinks) and the
  iteration is asked again of the survivors, who start it from the same duals.

Measured on the example notebook's setting (``experiments/notears_admm_check.py``: ER d = 20 with
20 edges, 8 clients x 32 rows, seeds 0-2; the notebook reports SHD 0 on its own single seed):
SHD 10 / 1 / 2 (mean 4.33) with the code's free diagonal, 7 / 1 / 2 (mean 3.33) with
``zero_diagonal``; centralised NOTEARS with the same ``lambda1`` and threshold: 1 / 0 / 0. The
ADMM reaches a feasible but worse local optimum on seed 0. 198 rounds, 5.64 MB down and 5.26 MB up
per run.

The nonlinear (MLP) variant of the paper needs a deep-learning framework outside this project's
dependencies and is not provided.

Wire protocol (actions, payload records, replies, the state each side keeps):
:mod:`fedcausal_flwr.protocols.notears_admm`.

What the server learns: the pooled level frequencies of the discrete columns (a sum), and every
iteration each client's ``W_k``. In this linear model that reveals the client's covariance: the
server knows ``Z``, ``rho2`` and ``B_k``, and ``(C_k + rho2 I) W_k = C_k + rho2 Z - B_k`` gives
``C_k = (rho2 (Z - W_k) - B_k) (W_k - I)^-1`` whenever ``W_k - I`` is invertible, i.e. the
client's sufficient statistics (its centred ``X_k'X_k`` divided by ``N``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, cast

import numpy as np

from fedcausal_flwr.data.inputs import Fix, InputError
from fedcausal_flwr.discovery.notears import (
    AdmmSettings,
    AdmmState,
    frequency_midpoints,
    threshold_dag,
)
from fedcausal_flwr.federation.core.input_checks import value_type
from fedcausal_flwr.federation.core.messages import ClientInfo, ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.core.registry import register_method
from fedcausal_flwr.graphs.graph import ARROW, TAIL, Graph
from fedcausal_flwr.options import Option, OptionSet
from fedcausal_flwr.protocols.notears_admm import (
    ADMM_STEP,
    DISCLOSURES,
    DISCRETE_MODES,
    LEVEL_COUNTS,
    AdmmStepRequest,
    LevelCountsRequest,
)
from fedcausal_flwr.strategies.base import InputNeeds, MethodStrategy

NUMBERS_FIX = Fix("use {} to map text columns to numbers", (("discrete", "frequency"),))


def _positive(name: str, default: float, help: str, paper: str) -> Option:
    return Option(name, "float", default, help, minimum=0.0, min_exclusive=True, paper=paper)


NOTEARS_ADMM_OPTIONS = OptionSet(
    (
        Option(
            "lambda1",
            "float",
            0.01,
            "L1 penalty on the consensus weights",
            minimum=0.0,
            paper="0.01 (the code's default and example notebook)",
        ),
        _positive(
            "rho1", 0.001, "initial penalty of the acyclicity term h(Z)^2", "0.001 in the code"
        ),
        _positive(
            "rho2", 0.001, "initial penalty of the consensus ||W_k - Z||^2", "0.001 in the code"
        ),
        Option(
            "rho1_growth",
            "float",
            1.75,
            "factor on rho1 after every iteration while rho1 < rho_max",
            minimum=1.0,
            paper="1.75 in the code",
        ),
        Option(
            "rho2_growth",
            "float",
            1.25,
            "factor on rho2 after every iteration while rho2 < rho_max",
            minimum=1.0,
            paper="1.25 in the code",
        ),
        _positive("rho_max", 1e16, "stop when both penalties reached this", "1e16 in the code"),
        Option(
            "max_iter",
            "int",
            200,
            "at most this many ADMM iterations (one round each)",
            minimum=1,
            paper="200 in the code",
        ),
        Option(
            "zero_diagonal",
            "bool",
            False,
            "fix the diagonal of every matrix to 0 (no self-loops) instead of leaving it to h",
            paper="false (the code leaves the diagonal free; centralised NOTEARS fixes it)",
        ),
        Option(
            "threshold",
            "float",
            0.3,
            "keep an edge when |weight| > threshold (then the smallest weights on cycles go)",
            minimum=0.0,
            paper="0.3 in the example notebook (the paper grid-searched it)",
        ),
        Option(
            "discrete",
            "str",
            "frequency",
            "integer/text/true-false columns: FedC2SL's frequency-midpoint map (one summed "
            "round), their values as numbers, or refuse them",
            choices=DISCRETE_MODES,
            paper="frequency in FedC2SL's experiments (the paper uses continuous data)",
        ),
        _positive(
            "discrete_scale", 20.0, "factor on the frequency midpoints", "20 in FedC2SL's code"
        ),
    )
)


class NotearsAdmmStrategy(MethodStrategy):
    """NOTEARS-ADMM's server; see the module docstring for the rules (the wire protocol:
    :mod:`fedcausal_flwr.protocols.notears_admm`)."""

    name = "notears-admm"
    OPTIONS = NOTEARS_ADMM_OPTIONS

    def __init__(self, options: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        super().__init__(options, **keywords)
        #: the ADMM's schedule: the options of that name
        self.settings = AdmmSettings(**{f.name: self.options[f.name] for f in fields(AdmmSettings)})
        self.admm: AdmmState | None = None
        self.encoding: dict[str, Any] = {}  # levels and numbers of the mapped columns
        self.counted = False
        self.graph: Graph | None = None

    # ------------------------------------------------------------------ inputs
    def input_needs(self) -> InputNeeds:
        """Numbers unless discrete columns are mapped; a constant column is harmless (it becomes
        an isolated node) and any client size works (a client's share of the loss)."""
        if self.options.discrete == "frequency":
            return InputNeeds(values="any", varying=False)
        return InputNeeds(values="numeric", varying=False, value_fix=NUMBERS_FIX)

    def validate_clients(self, info: dict[int, ClientInfo]) -> None:
        for pid in sorted(info):
            report = info[pid]
            for col in report.columns:
                kind = value_type(report.dtypes[col], report.levels.get(col))
                if kind == "float":
                    continue
                if self.options.discrete == "refuse":
                    raise InputError(
                        f"holds {kind} values (dtype {report.dtypes[col]}), but notears-admm "
                        "with discrete=refuse takes decimal numbers only",
                        client=pid,
                        column=col,
                        fix=Fix(
                            "use {} (FedC2SL's map) or {}",
                            (("discrete", "frequency"), ("discrete", "as_numbers")),
                        ),
                        entry_point=self.entry_point,
                    )
                if self.options.discrete == "frequency" and report.levels.get(col) is None:
                    raise InputError(
                        f"has too many distinct {kind} values (dtype {report.dtypes[col]}) to map "
                        "by frequency",
                        client=pid,
                        column=col,
                        fix=Fix(
                            "code it as decimal numbers, or use {}", (("discrete", "as_numbers"),)
                        ),
                        entry_point=self.entry_point,
                    )

    def discrete_columns(self) -> list[str]:
        """The columns mapped by frequency: every non-decimal column at some client."""
        if self.options.discrete != "frequency":
            return []
        found = set()
        for report in self.client_info.values():
            for col in report.columns:
                if value_type(report.dtypes[col], report.levels.get(col)) != "float":
                    found.add(col)
        return [v for v in self.variables if v in found]

    # ------------------------------------------------------------------ protocol
    def next_request(self) -> Request | None:
        if self.graph is not None:
            return None
        columns = self.discrete_columns()
        if columns and not self.counted:
            levels = self.global_levels()
            # mapped columns have level sets (validate_clients refused one too varied to map)
            mapped = cast(dict[str, list], {v: levels[v] for v in columns})
            counting = LevelCountsRequest(columns, mapped)
            return Request(LEVEL_COUNTS, counting, secure=True)
        if self.admm is None:
            self.admm = AdmmState(len(self.variables), self.settings)
        if self.admm.finished:
            self._finish()
            return None
        admm = self.admm
        payload = AdmmStepRequest(
            self.variables,
            admm.iteration + 1,
            admm.rho2,
            dual_rho=admm.dual_rho,
            rows=self.n_total,
            zero_diagonal=self.settings.zero_diagonal,
            encoding=self.encoding,
        )
        return Request(ADMM_STEP, payload, arrays=[admm.consensus])

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        if request.action == LEVEL_COUNTS:
            self._map_levels(request, replies[0])
            return
        assert self.admm is not None  # next_request built it
        d = len(self.variables)
        locals_ = {}
        for r in replies:
            local = np.asarray(r.arrays[0], dtype=np.float64) if r.arrays else np.zeros(0)
            if local.shape != (d, d):
                raise ClientProtocolError(
                    f"client {r.client} sent a local matrix of shape {local.shape}, expected "
                    f"{d}x{d}"
                )
            locals_[r.client] = local
        entry = self.admm.advance(locals_)
        self.annotate(**{k: v for k, v in entry.items() if k != "iteration"})

    def on_clients_dropped(self, dropped: list[int]) -> None:
        """The dropped clients' duals leave; an ADMM iteration is rebuilt (the pooled row count
        changed); the summed counts are simply asked of the survivors again."""
        if self.admm is not None:
            self.admm.drop(dropped)
            self.retract_request()

    def _map_levels(self, request: Request, total: Reply) -> None:
        asked = LevelCountsRequest.decode(request.payload)
        columns, levels = asked.variables, asked.levels
        counts = np.asarray(total.arrays[0], dtype=np.int64)
        sizes = [len(levels[v]) for v in columns]
        if counts.shape != (sum(sizes),) or np.any(counts < 0):
            raise ClientProtocolError(
                f"the summed level counts have shape {counts.shape}, expected ({sum(sizes)},)"
            )
        values = {}
        for name, part in zip(columns, np.split(counts, np.cumsum(sizes)[:-1]), strict=True):
            values[name] = frequency_midpoints(part, self.options.discrete_scale).tolist()
        self.encoding = {"levels": {v: levels[v] for v in columns}, "values": values}
        self.counted = True
        self.annotate(mapped_columns=len(columns))

    def _finish(self) -> None:
        assert self.admm is not None
        self.dag_weights, self.cycle_cut = threshold_dag(
            self.admm.consensus, self.options.threshold
        )
        edges = self.dag_weights != 0
        marks = np.zeros(edges.shape, dtype=np.int8)
        marks[edges] = ARROW
        marks[edges.T] = TAIL
        self.graph = Graph(tuple(self.variables), marks, "DAG")

    # ------------------------------------------------------------------ result
    def result_payload(self) -> dict:
        admm = self.admm
        if admm is None or self.graph is None:
            return {"graph": None, "variables": self.variables}
        last = admm.trace[-1] if admm.trace else {}
        return {
            "graph": self.graph,
            "variables": self.variables,
            "weights": admm.consensus.tolist(),
            "iterations": admm.iteration,
            "converged": admm.rho1 >= self.settings.rho_max and admm.rho2 >= self.settings.rho_max,
            "h": last.get("h"),
            "primal_residual": last.get("primal_residual"),
            "dual_residual": last.get("dual_residual"),
            "trace": admm.trace,
            "cycle_cut": self.cycle_cut,
            "encoding": self.encoding,
            "options": dict(self.options),
        }


register_method(
    "notears-admm",
    NotearsAdmmStrategy,
    "fedcausal_flwr.clients.notears_admm:NotearsAdmmClient",
    disclosures=DISCLOSURES,
    paper="NOTEARS-ADMM (Ng & Zhang 2022)",
    description="NOTEARS-ADMM (Ng & Zhang 2022), linear: federated NOTEARS by ADMM, one round "
    "per iteration",
)
