"""The pooled references' one action: ``raw_rows``, a site's rows themselves (NOT private).

``pooled`` and ``lcs-pooled`` are the upper bounds the discrete methods are compared with,
``iod-pooled`` fedCI-IOD's; each asks every site for its rows in one round and runs the method's
search on their union. A site answers only with ``allow-raw-rows`` in its policy (disclosure
class ``raw``).

===============  ==============  ====================================  ==========================
action           methods         payload (record: keys)                reply (per client)
===============  ==============  ====================================  ==========================
``raw_rows``     pooled,         ``EncodedRowsRequest``: ``variables,  int64 ``n_k x p`` codes of
                 lcs-pooled      levels, missing``                     its rows over the level
                                                                       sets
``raw_rows``     iod-pooled      ``RawRowsRequest``: ``schema``        float64 ``rows x own
                                                                       columns`` (schema order):
                                                                       level codes or values
===============  ==============  ====================================  ==========================

``EncodedRowsRequest``'s ``missing`` is left out while None, which the client reads as ``error``
(``lcs-pooled`` leaves it out, ``pooled`` sends its option).
"""

from __future__ import annotations

from dataclasses import dataclass

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.payload import Payload, optional
from fedcausal_flwr.protocols.discrete import LevelSets

RAW_ROWS = "raw_rows"  # a site's rows themselves (the pooled references only: NOT private)
ACTIONS = (RAW_ROWS,)
#: what a pooled reference's action discloses: everything
DISCLOSURES = {RAW_ROWS: disclosure.RAW}


@dataclass(frozen=True)
class EncodedRowsRequest(LevelSets):
    """``raw_rows`` of a discrete reference: the client's rows encoded over the level sets
    (``missing``: the mode of the pooled reference; absent: ``error``, as ``lcs-pooled`` asks)."""

    missing: str | None = optional()


@dataclass(frozen=True)
class RawRowsRequest(Payload):
    """``raw_rows`` of iod-pooled: the client's rows over its own columns of the ``schema``."""

    schema: dict
