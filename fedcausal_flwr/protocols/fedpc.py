"""FedPC / FedFCI (FedC2SL): actions, payloads, what each discloses, the sketch's fixed point.

Wire protocol (after the built-in ``hello``): ``levels`` are the global level sets (variable ->
its levels); the queries of a batch travel as the first array, an int64 matrix of rows
``[x, y, S..., -1 padding]`` of variable indices
(:func:`fedcausal_flwr.protocols.queries.encode_queries`); table layouts follow
:func:`fedcausal_flwr.stats.contingency.make_layout`. Payload keys are listed in wire order; every
reply's meta is empty.

=================  =======================================  =============================  ======
action             payload (record: keys) + arrays          reply (arrays)                 summed
=================  =======================================  =============================  ======
``tables``         ``TableRequest``: ``variables, levels,   int64 vector, all tables of    yes
                   max_cells, missing`` + queries           the batch
``sparse_tables``  ``TableRequest`` (as ``tables``)         int64 flat indices of the      server
                   + queries                                nonzero cells, int64 counts
``margins``        ``TableRequest`` (as ``tables``)         int64 vector, ``n_xz, n_yz``   yes
                   + queries                                of every table
``sketch``         ``SketchRequest``: ``variables, levels,  int64 vector, projected        yes
                   max_cells, missing, seed,                residuals ``x 2**8``
                   sketch_length, clients``
                   + queries, float64 expected counts
``moments``        ``MomentsRequest``: ``variables,         float64 ``[n, sum x, x x^T]``  server
                   missing``                                over its rows
``query_moments``  ``MomentsRequest`` (as ``moments``)      float64, per query ``[n,       server
                   + queries                                sum v, v v^T]`` over its
                                                            rows complete on ``v``
=================  =======================================  =============================  ======

summed ``yes``: the server uses only the sum over clients (added by SecAgg+ in a secure run, by the
server otherwise); ``server``: each client's reply reaches the server, which sums it: the moments
in partition order (deterministic float sums), the sparse tables merged exactly (int64).
``max_cells`` is the most table cells a client holds at once (dense tables; ``sparse_tables``
ignores it); ``clients`` is the K clients that share the expected counts ``E``. In a differentially
private run (``dp=central``) each ``tables`` request also carries ``privacy``: its
:class:`~fedcausal_flwr.privacy.charges.PrivacyCharge` (mechanism, tables, noise variance
per cell, ``rho``, the run's target epsilon and delta), which each site logs with its reply; a run
without it sends no ``privacy`` key.

``tables`` and ``sparse_tables`` replies that do not go through SecAgg+ travel compact: each
integer array in the smallest type that holds its values (counts of a 1,000-row client in 2
bytes; ``@action(..., compact=True)``); the server reads them as int64. ``sketch``: a client's
share ``P (T_k - E/K) / sqrt(E)`` of the projected residuals (projection seeded by ``seed``,
``sketch_length`` rows) travels in fixed point, ``rint(value * SKETCH_SCALE)`` (8 fractional bits).

What travels when: ``ci="exact"`` asks each batch as dense ``tables`` or, where the clients' nonzero
cells are the smaller reply or a dense table is over ``max_cells`` (never in a secure run), as
``sparse_tables``; a batch over a memory budget travels in several rounds. ``ci="sketch"`` asks
``margins``, then ``sketch`` with the expected counts the server computed from the summed margins
(two rounds per batch). Gaussian data (``test="fisherz"``): one ``moments`` round for the run, or
with ``missing="testwise"`` one ``query_moments`` round per batch instead.

Missing values: every request carries the mode ``missing`` (``error``, ``testwise``,
``listwise``). ``testwise``: a client codes a missing value as ``MISSING_CODE`` and leaves the row
out of each table that uses its column (discrete), or answers ``query_moments`` (each test's
moments over the rows complete on ``v = (x, y, S)``); ``listwise``: a client drops its incomplete
rows first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.payload import Payload, optional
from fedcausal_flwr.stats.contingency import DEFAULT_MAX_CELLS

TABLES = "tables"  # summed contingency tables of a batch (exact / secure)
SPARSE_TABLES = "sparse_tables"  # nonzero cells of a batch's tables, merged on the server (exact)
MARGINS = "margins"  # summed stratum margins (sketch, first round of a batch)
SKETCH = "sketch"  # summed projected residuals (sketch, second round)
MOMENTS = "moments"  # data moments n, sum x, x x^T (Gaussian data)
QUERY_MOMENTS = "query_moments"  # per-test moments over each test's complete rows (Gaussian)
ACTIONS = (TABLES, SPARSE_TABLES, MARGINS, SKETCH, MOMENTS, QUERY_MOMENTS)

#: what each action discloses: dense tables, margins and sketches are sums (through SecAgg+ in a
#: secure run); sparse tables and the Gaussian moments reach the server per client
DISCLOSURES = {
    TABLES: disclosure.SUM,
    MARGINS: disclosure.SUM,
    SKETCH: disclosure.SUM,
    SPARSE_TABLES: disclosure.PER_CLIENT,
    MOMENTS: disclosure.PER_CLIENT,
    QUERY_MOMENTS: disclosure.PER_CLIENT,
}

SKETCH_SCALE = 2**8  # fixed point of the summed sketch: residuals travel as rint(value * scale)


@dataclass(frozen=True)
class TableRequest(Payload):
    """``tables``, ``sparse_tables``, ``margins``: count the batch's tables over the global
    ``levels`` (``max_cells``: the most cells the client holds at once; ``missing``: the mode)."""

    variables: list[str]
    levels: dict[str, list]
    max_cells: int = DEFAULT_MAX_CELLS
    missing: str = "error"
    #: a private run's charge for this request (:class:`~.records.PrivacyCharge`; absent: none)
    privacy: dict[str, Any] | None = optional()


@dataclass(frozen=True)
class SketchRequest(TableRequest):
    """``sketch``: the batch's projected residuals (projection ``seed``, ``sketch_length`` rows,
    ``clients`` sharing the expected counts)."""

    seed: int = field(kw_only=True)
    sketch_length: int = field(kw_only=True)
    clients: int = field(kw_only=True)


@dataclass(frozen=True)
class MomentsRequest(Payload):
    """``moments`` (all rows) and ``query_moments`` (each test's complete rows)."""

    variables: list[str]
    missing: str
