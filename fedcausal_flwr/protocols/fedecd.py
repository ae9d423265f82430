"""FedECD's own actions, their payloads and what FedECD discloses (its skeleton layers use
:data:`fedcausal_flwr.protocols.voting.PRUNE` and its record).

The wire protocol is documented in :mod:`fedcausal_flwr.strategies.fedecd`; ``orient`` replies
with :class:`fedcausal_flwr.protocols.discrete.HillClimbReply`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.protocols import voting
from fedcausal_flwr.protocols.discrete import DiscreteScope
from fedcausal_flwr.protocols.records import wire

BOOTSTRAP_WEIGHTS = "bootstrap_weights"  # bootstrap mean independence evidence per removed edge
ORIENT = "orient"  # the directions voted over the client's bootstrap BDeu searches
ACTIONS = (BOOTSTRAP_WEIGHTS, ORIENT)

#: each client's layer votes, its bootstrap evidence per removed edge and its voted directions
DISCLOSURES = {
    voting.PRUNE: disclosure.PER_CLIENT,
    BOOTSTRAP_WEIGHTS: disclosure.PER_CLIENT,
    ORIENT: disclosure.PER_CLIENT,
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
    """``bootstrap_weights``: the removed edges' evidence at layer ``level`` under the
    ``evidence`` rule (arrays: the skeleton at the layer's start, the removed pairs)."""

    depth: int = wire("level", kw_only=True)  # PC depth: the conditioning-set size
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
