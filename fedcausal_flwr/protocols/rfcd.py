"""RFCD's action, its payload, what it discloses and its family codec.

The search the server runs is :func:`fedcausal_flwr.discovery.ges.ges_steps`, the score each
client computes is :class:`fedcausal_flwr.discovery.ges.CausalLearnBDeu`.

Wire protocol (after the built-in ``hello``; ``levels`` are the global level sets): one
``family_scores`` round per GES step whose operators need families not scored yet, carrying only
those; families travel as an int64 matrix of rows ``[child, parents ascending..., -1 padding]``
(:func:`encode_families`). Payload keys in wire order:

=================  =============================================  ========================  ======
action             payload (record: keys) + arrays                reply (per client; meta)  summed
=================  =============================================  ========================  ======
``family_scores``  ``FamilyScoresRequest``: ``variables, levels,  float64 local BDeu log    no
                   ess, structure_prior, cardinalities``          score, one per family;
                   + int64 families of one GES step not scored    meta ``families``
                   yet
=================  =============================================  ========================  ======

``cardinalities`` is one of :data:`CARDINALITIES`; the meta is :class:`ScoredFamilies`. Every
reply reaches the server per client (it keeps each family's worst, i.e. smallest, client score).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedcausal_flwr.discovery.ges import Family
from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.payload import Payload

FAMILY_SCORES = "family_scores"  # the client's local BDeu score of each family of a batch
ACTIONS = (FAMILY_SCORES,)
CARDINALITIES = ("observed", "global")  # each client's observed levels, or the global level sets

#: each client's own BDeu score of every family of a batch
DISCLOSURES = {FAMILY_SCORES: disclosure.PER_CLIENT}


@dataclass(frozen=True)
class FamilyScoresRequest(Payload):
    """``family_scores``: score the batch's families by BDeu over the global ``levels``."""

    variables: list[str]
    levels: dict[str, list]
    ess: float
    structure_prior: float | None
    cardinalities: str


@dataclass(frozen=True)
class ScoredFamilies(Payload):
    """Reply meta of ``family_scores``: how many families the client scored."""

    families: int = 0


def encode_families(families: list[Family]) -> np.ndarray:
    """A batch as one int64 matrix of rows ``[child, parents..., -1 padding]``."""
    width = 1 + max((len(parents) for _, parents in families), default=0)
    out = np.full((len(families), width), -1, dtype=np.int64)
    for row, (child, parents) in enumerate(families):
        out[row, : 1 + len(parents)] = (child, *parents)
    return out


def decode_families(matrix: np.ndarray, n_vars: int) -> list[Family]:
    """The families of a matrix built by :func:`encode_families`, checked against ``n_vars``
    variables (``ValueError`` naming the first bad row)."""
    rows = np.asarray(matrix)
    if rows.ndim != 2 or rows.shape[1] < 1 or not np.issubdtype(rows.dtype, np.integer):
        raise ValueError(
            f"a family matrix must be a 2-D integer array with >= 1 column, got shape "
            f"{rows.shape} and dtype {rows.dtype}"
        )
    families = []
    for k, row in enumerate(rows.tolist()):
        child, rest = row[0], row[1:]
        used = [v for v in rest if v >= 0]
        if any(v >= 0 for v in rest[len(used) :]) or any(v < -1 for v in rest):
            raise ValueError(f"family row {k} {row}: parents must come before the -1 padding")
        if not 0 <= child < n_vars or any(v >= n_vars for v in used):
            raise ValueError(f"family row {k} {row}: a variable index is not in 0..{n_vars - 1}")
        if child in used or len(set(used)) != len(used) or used != sorted(used):
            raise ValueError(
                f"family row {k} {row}: parents must be distinct, ascending and exclude the child"
            )
        families.append((child, tuple(used)))
    return families
