"""fedcausal-flwr: federated causal structure learning on Flower."""

__version__ = "0.1.0"
