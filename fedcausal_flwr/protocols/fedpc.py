"""FedC2SL's actions and the fixed point of its sketch.

The wire protocol is documented in :mod:`fedcausal_flwr.strategies.fedpc`; queries travel as
:func:`fedcausal_flwr.protocols.queries.encode_queries` matrices.
"""

from __future__ import annotations

TABLES = "tables"  # summed contingency tables of a batch (exact / secure)
SPARSE_TABLES = "sparse_tables"  # nonzero cells of a batch's tables, merged on the server (exact)
MARGINS = "margins"  # summed stratum margins (sketch, first round of a batch)
SKETCH = "sketch"  # summed projected residuals (sketch, second round)
MOMENTS = "moments"  # data moments n, sum x, x x^T (Gaussian data)
QUERY_MOMENTS = "query_moments"  # per-test moments over each test's complete rows (Gaussian)
ACTIONS = (TABLES, SPARSE_TABLES, MARGINS, SKETCH, MOMENTS, QUERY_MOMENTS)

SKETCH_SCALE = 2**8  # fixed point of the summed sketch: residuals travel as rint(value * scale)
