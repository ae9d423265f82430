"""An example method: the federated marginal-independence skeleton (docs/adding-a-method.md)."""
