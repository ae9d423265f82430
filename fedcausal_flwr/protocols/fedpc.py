"""FedPC / FedFCI (FedC2SL): actions, payloads, what each discloses, the sketch's fixed point.

The wire protocol is documented in :mod:`fedcausal_flwr.strategies.fedpc`; queries travel as
:func:`fedcausal_flwr.protocols.queries.encode_queries` matrices (the first array).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.protocols.records import Payload, wire
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


@dataclass(frozen=True)
class SketchRequest(TableRequest):
    """``sketch``: the batch's projected residuals (projection ``seed``, length ``l``, ``k``
    clients sharing the expected counts)."""

    seed: int = field(kw_only=True)
    sketch_length: int = wire("l", kw_only=True)
    clients: int = wire("k", kw_only=True)


@dataclass(frozen=True)
class MomentsRequest(Payload):
    """``moments`` (all rows) and ``query_moments`` (each test's complete rows)."""

    variables: list[str]
    missing: str
