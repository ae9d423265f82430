"""FedECD's own actions, their payloads and what FedECD discloses (its skeleton layers use
:data:`fedcausal_flwr.protocols.voting.PRUNE` and its record).

Wire protocol (after the built-in ``hello``; ``levels`` are the global level sets). Each layer of
the skeleton is one ``prune`` round (``PruneRequest``, see :mod:`fedcausal_flwr.protocols.voting`;
FedECD ignores the separating sets it returns); a layer whose vote removed edges (``E_del``) is
followed by one ``bootstrap_weights`` round; after the last layer one ``orient`` round. Payload
keys in wire order; every reply reaches the server per client:

=====================  =========================================  =========================  ======
action                 payload (record: keys) + arrays            reply (per client; meta)   summed
=====================  =========================================  =========================  ======
``bootstrap_weights``  ``BootstrapWeightsRequest``: ``variables,  float64 mean weight per    no
                       levels, test, alpha, reliability,          ``E_del`` pair; meta
                       bootstraps, seed, resample, depth,         ``tests``
                       evidence`` + uint8 ``p x p`` skeleton at
                       the layer's start + int64 ``E_del``
                       pairs ``(n, 2)``
``orient``             ``OrientRequest``: ``variables, levels,    uint8 ``p x p`` voted      no
                       test, alpha, reliability, bootstraps,      directions (both entries:
                       seed, resample, ess, structure_prior,      undirected); meta
                       tabu_length, max_barren,                   ``score_seconds,
                       lower_triangle_compat, tie_rule``          local_evaluations``
                       + uint8 ``p x p`` skeleton S*
=====================  =========================================  =========================  ======

``BootstrapWeightsRequest.depth`` is the layer's conditioning-set size;
``bootstrap_weights`` replies one weight per broadcast pair, in their order, with meta
:class:`~fedcausal_flwr.protocols.discrete.ComputedTests`; ``orient``'s meta is
:class:`fedcausal_flwr.protocols.discrete.HillClimbReply`; S* is the final voted skeleton.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.protocols import voting
from fedcausal_flwr.protocols.discrete import DiscreteScope

BOOTSTRAP_WEIGHTS = "bootstrap_weights"  # bootstrap mean independence evidence per removed edge
ORIENT = "orient"  # the directions voted over the client's bootstrap BDeu searches
ACTIONS = (BOOTSTRAP_WEIGHTS, ORIENT)

#: each client's layer votes, its bootstrap evidence per removed edge and its voted directions
DISCLOSURES = {
    voting.PRUNE: disclosure.LOCAL,
    BOOTSTRAP_WEIGHTS: disclosure.LOCAL,
    ORIENT: disclosure.LOCAL,
}


@dataclass(frozen=True)
class BootstrapScope(DiscreteScope):
    """Base of ``bootstrap_weights`` and ``orient``: ``bootstraps`` replicates per client, each
    resampled from ``(seed, partition id, replicate)`` (``resample`` false: the full data)."""

    bootstraps: int = field(kw_only=True)
    seed: int = field(kw_only=True)
    resample: bool = field(default=True, kw_only=True)


@dataclass(frozen=True)
class BootstrapWeightsRequest(BootstrapScope):
    """``bootstrap_weights``: the removed edges' evidence at layer ``depth`` under the
    ``evidence`` rule (arrays: the skeleton at the layer's start, the removed pairs)."""

    depth: int = field(kw_only=True)  # PC depth: the conditioning-set size
    evidence: str = field(kw_only=True)


@dataclass(frozen=True)
class OrientRequest(BootstrapScope):
    """``orient``: one BDeu tabu hill climbing per replicate inside the skeleton (the first
    array), the directions voted with ``tie_rule``."""

    ess: float = field(kw_only=True)
    structure_prior: bool = field(kw_only=True)
    tabu_length: int = field(kw_only=True)
    max_barren: int = field(kw_only=True)
    lower_triangle_compat: bool = field(kw_only=True)
    tie_rule: str = field(kw_only=True)
