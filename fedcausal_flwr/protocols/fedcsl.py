"""FedCSL's actions, their payloads and what each discloses.

Wire protocol (after the built-in ``hello``; ``levels`` are the global level sets): one
``neighbours`` round, then one ``local_dag`` round inside the skeleton the server built from the
neighbour sets. Payload keys in wire order; every reply reaches the server per client:

==============  ===========================================  ==============================  ======
action          payload (record: keys) + arrays              reply (per client; meta)        summed
==============  ===========================================  ==============================  ======
``neighbours``  ``NeighboursRequest``: ``variables, levels,  uint8 ``p x p`` (``[t, v]``: v  no
                test, alpha, reliability, max_depth``        in PC(t)), float64
                                                             ``[weight]``; meta ``tests,
                                                             unreliable_pairs``
``local_dag``   ``LocalDagRequest``: ``variables, levels,    uint8 ``p x p`` DAG             no
                test, alpha, reliability, ess,               (``[i, j]``: i -> j); meta
                structure_prior, tabu_length, max_barren,    ``score_seconds,
                lower_triangle_compat`` + uint8 ``p x p``    local_evaluations``
                federated skeleton
==============  ===========================================  ==============================  ======

``neighbours`` replies with meta :class:`NeighboursReply`, ``local_dag`` with
:class:`fedcausal_flwr.protocols.discrete.HillClimbReply`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.protocols.discrete import ComputedTests, DiscreteScope

NEIGHBOURS = "neighbours"  # every variable's HITON-PC set + the client weight from its p-values
LOCAL_DAG = "local_dag"  # the client's BDeu hill-climbing DAG inside the federated skeleton
ACTIONS = (NEIGHBOURS, LOCAL_DAG)

#: each client's HITON-PC sets with its weight, and its own BDeu DAG
DISCLOSURES = {NEIGHBOURS: disclosure.LOCAL, LOCAL_DAG: disclosure.LOCAL}


@dataclass(frozen=True)
class NeighboursRequest(DiscreteScope):
    """``neighbours``: HITON-PC of every variable, conditioning sets up to ``max_depth``."""

    max_depth: int | None = field(kw_only=True)


@dataclass(frozen=True)
class NeighboursReply(ComputedTests):
    """Reply meta of ``neighbours``: the tests HITON-PC computed and how many pairs had no
    reliable unconditional test."""

    unreliable_pairs: int = 0


@dataclass(frozen=True)
class LocalDagRequest(DiscreteScope):
    """``local_dag``: one BDeu tabu hill climbing on all rows inside the federated skeleton (the
    first array)."""

    ess: float = field(kw_only=True)
    structure_prior: bool = field(kw_only=True)
    tabu_length: int = field(kw_only=True)
    max_barren: int = field(kw_only=True)
    lower_triangle_compat: bool = field(kw_only=True)
