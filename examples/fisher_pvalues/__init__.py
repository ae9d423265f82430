"""An example federated CI test: Fisher's combination of each site's p-values."""
