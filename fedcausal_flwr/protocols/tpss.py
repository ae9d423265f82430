"""FedCDnv's actions (two rounds after ``hello``), their payloads and what each discloses.

Wire protocol (after the built-in ``hello``): ``variables`` are the union of the clients'
variables (``d`` of them) with their global ``levels``, ``fci`` the FCI options; ids are global
variable ids (indices into ``variables``), a client's matrices are over its own ``d_k`` variables
in global order. ``fcdnv_init`` is one round (``fci-base`` stops after it); ``fcdnv_update``, with
the union graph G0 the server built from the replies, the second. Payload keys in wire order;
every reply reaches the server per client:

================  =============  ===============================  =========================  ======
action            methods        payload (record: keys) + arrays  reply (per client; meta)   summed
================  =============  ===============================  =========================  ======
``fcdnv_init``    fedcdnv,       ``LocalFciRequest``:             int64 ids ``d_k``, int8    no
                  fedcdnv-vote,  ``variables, levels, test,       ``d_k x d_k`` PAG marks
                  fci-base       alpha, fci``                     (Pag0); meta ``n_rows,
                                                                  tests``
``fcdnv_update``  fedcdnv,       ``UpdateRequest``:               ids, int8 PagU; with       no
                  fedcdnv-vote   ``variables, levels, test,       statistics also float64
                                 alpha, fci, update_depth,        ``d_k x d_k`` transformed
                                 update_rules, theta1, theta2,    p-values, int64 sepset
                                 send_statistics`` + int8         rows; meta ``tests,
                                 ``d x d`` G0                     imported, propagated,
                                                                  conflicts``
================  =============  ===============================  =========================  ======

``send_statistics`` is true for ``fedcdnv`` (TPSS needs the statistics) and false for
``fedcdnv-vote``. The transformed p-values are Eq. (2)'s, the separating sets int64 rows
``[x, y, S..., -1 padding]`` in global ids
(:func:`fedcausal_flwr.protocols.queries.encode_queries`). Meta: :class:`LocalFciReply`,
:class:`UpdateReply`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.payload import Payload
from fedcausal_flwr.protocols.discrete import ComputedTests

FCDNV_INIT = "fcdnv_init"  # round 1: local FCI on the client's variables (C-InitPag)
FCDNV_UPDATE = "fcdnv_update"  # round 2: C-Update with the broadcast G0, then the statistics
ACTIONS = (FCDNV_INIT, FCDNV_UPDATE)

#: each client's local PAG, and its updated PAG with the statistics of the two-level selection
DISCLOSURES = {FCDNV_INIT: disclosure.LOCAL, FCDNV_UPDATE: disclosure.LOCAL}


@dataclass(frozen=True)
class LocalFciRequest(Payload):
    """``fcdnv_init``: FCI over the global ``variables`` and ``levels`` (``fci``: its options)."""

    variables: list[str]
    levels: dict[str, list]
    test: str
    alpha: float
    fci: dict[str, Any]


@dataclass(frozen=True)
class UpdateRequest(LocalFciRequest):
    """``fcdnv_update``: round 1's FCI request plus C-Update's options and the Eq. (2) band."""

    update_depth: int | None = field(kw_only=True)
    update_rules: bool = field(kw_only=True)
    theta1: float = field(kw_only=True)
    theta2: float = field(kw_only=True)
    send_statistics: bool = field(kw_only=True)


@dataclass(frozen=True)
class LocalFciReply(Payload):
    """Reply meta of ``fcdnv_init``: the client's row count and the CI tests its FCI computed."""

    n_rows: int = -1
    tests: int = 0


@dataclass(frozen=True)
class UpdateReply(ComputedTests):
    """Reply meta of ``fcdnv_update``: C-Update's tests and its imported/propagated/conflicts."""

    imported: int = 0
    propagated: int = 0
    conflicts: int = 0
