"""FedCSL's actions (the wire protocol is documented in :mod:`fedcausal_flwr.strategies.fedcsl`)."""

from __future__ import annotations

NEIGHBOURS = "neighbours"  # every variable's HITON-PC set + the client weight from its p-values
LOCAL_DAG = "local_dag"  # the client's BDeu hill-climbing DAG inside the federated skeleton
ACTIONS = (NEIGHBOURS, LOCAL_DAG)
