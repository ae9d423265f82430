"""Graphs with edge marks (DAG, CPDAG, MAG, PAG), ground truths and orientation rules.

Modules: ``graph`` (the marked graph), ``truth`` (DAG -> CPDAG / MAG / PAG, m-separation), and the
orientation rules by family: ``colliders`` (PC's colliders and FCI's R0, decided by ``sepsets``),
``meek``, ``fci_rules`` (Zhang's R1-R10 and ``apply_fci_rules``; R4's decision in ``fci_context``),
``causallearn_fci`` (causal-learn's FCI rule loop), ``causallearn_graph`` (the ancestor matrix and
triple enumerations that causal-learn's PC orientation reads) and ``extension`` (PDAG -> DAG);
``marks`` holds the edge tests they share.

The rules work **in place** on a :class:`Graph` (``marks[i, j]`` is the mark at j on edge i-j).
Every rule set comes in two flavours:

* **textbook** (``mode="complete"`` for Meek, ``mode="zhang"`` for FCI): Meek (1995) R1-R4 and
  Zhang (2008) R1-R10 applied to closure. Rules only ever turn an undirected edge (PC) or a circle
  (FCI) into something more specific; a rule that would overwrite a non-circle mark is skipped.
* **causal-learn** (``mode="causallearn"``): a step-by-step reproduction of causal-learn 0.1.4.8
  (``UCSepset.uc_sepset`` with ``uc_priority`` 0/1/2, ``Meek.meek``, and the rule functions and main
  loop of ``FCI.fci``), including its visiting order, its incremental ancestor matrix ``dpath``
  (not a full transitive closure), its gating of R4 on a change by R1-R3 and its search shortcuts.
  It exists so that an engine can be compared with causal-learn edge by edge.
"""

from fedcausal_flwr.graphs.causallearn_graph import CausalLearnAncestry
from fedcausal_flwr.graphs.colliders import (
    CONFLICT_POLICIES,
    ColliderOrientation,
    fci_orient_colliders,
    orient_colliders,
)
from fedcausal_flwr.graphs.fci_context import DiscriminatingPath
from fedcausal_flwr.graphs.fci_rules import FCI_MODES, apply_fci_rules
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.graphs.meek import MEEK_MODES, apply_meek, orient_cpdag
from fedcausal_flwr.graphs.sepsets import (
    SEPSET_RULES,
    Sepsets,
    pair_key,
    recorded_sepsets,
    triple_status,
)
from fedcausal_flwr.graphs.truth import (
    ancestor_matrix,
    check_dag,
    check_mag,
    d_separated,
    dag_to_cpdag,
    dag_to_mag,
    dag_to_pag,
    directed_matrix,
    mag_to_pag,
)

__all__ = [
    "ARROW",
    "CIRCLE",
    "CONFLICT_POLICIES",
    "FCI_MODES",
    "MEEK_MODES",
    "NONE",
    "SEPSET_RULES",
    "TAIL",
    "CausalLearnAncestry",
    "ColliderOrientation",
    "DiscriminatingPath",
    "Graph",
    "Sepsets",
    "ancestor_matrix",
    "apply_fci_rules",
    "apply_meek",
    "check_dag",
    "check_mag",
    "d_separated",
    "dag_to_cpdag",
    "dag_to_mag",
    "dag_to_pag",
    "directed_matrix",
    "fci_orient_colliders",
    "mag_to_pag",
    "orient_colliders",
    "orient_cpdag",
    "pair_key",
    "recorded_sepsets",
    "triple_status",
]
