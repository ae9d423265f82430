"""Benchmark networks, sampling, synthetic generators, schemas, client partitions and the
packaged Sachs reference data.

Everything here is plain numpy / pandas / networkx (pgmpy only to read its shipped BIF files).
"""

from fedcausal_flwr.data.networks import (
    TILED_NETWORKS,
    Network,
    list_networks,
    load_network,
    tile_network,
)
from fedcausal_flwr.data.partition import (
    Partition,
    check_client_data,
    drop_latents,
    from_csv_files,
    from_pooled_csv,
    split_heterogeneous,
    split_iid,
    split_site_effects,
    split_sizes,
    split_variable_subsets,
)
from fedcausal_flwr.data.reference import (
    sachs_continuous,
    sachs_continuous_truth,
    sachs_discrete,
    sachs_discrete_truth,
    sachs_file,
)
from fedcausal_flwr.data.sampling import codes_to_frame, sample_codes, sample_frame
from fedcausal_flwr.data.schema import DataError, Schema, VariableSpec
from fedcausal_flwr.data.synthetic import (
    choose_latents,
    random_dag,
    random_discrete_network,
    random_gaussian_network,
    random_variable_types,
    simulate_mixed,
)

__all__ = [
    "TILED_NETWORKS",
    "DataError",
    "Network",
    "Partition",
    "Schema",
    "VariableSpec",
    "check_client_data",
    "choose_latents",
    "codes_to_frame",
    "drop_latents",
    "from_csv_files",
    "from_pooled_csv",
    "list_networks",
    "load_network",
    "random_dag",
    "random_discrete_network",
    "random_gaussian_network",
    "random_variable_types",
    "sachs_continuous",
    "sachs_continuous_truth",
    "sachs_discrete",
    "sachs_discrete_truth",
    "sachs_file",
    "sample_codes",
    "sample_frame",
    "simulate_mixed",
    "split_heterogeneous",
    "split_iid",
    "split_site_effects",
    "split_sizes",
    "split_variable_subsets",
    "tile_network",
]
