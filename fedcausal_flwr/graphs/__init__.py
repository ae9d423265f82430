"""Graphs with edge marks (DAG, CPDAG, MAG, PAG), ground truths and orientation rules."""

from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph

__all__ = ["ARROW", "CIRCLE", "NONE", "TAIL", "Graph"]
