"""fedcausal-flwr."""
