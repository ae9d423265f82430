"""Benchmark networks, sampling, synthetic generators, schemas, client partitions and the
packaged Sachs reference data.

Everything here is plain numpy / pandas / networkx (pgmpy only to read its shipped BIF files).

Names are imported on first use (PEP 562): reading a site's CSV (``data.csv_input``) does not
import the network, sampling and synthetic-data modules (scipy.stats, networkx, pgmpy), which a
ClientApp process would otherwise pay for on every message.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fedcausal_flwr.data.csv_input import read_client_csv, read_client_files
    from fedcausal_flwr.data.inputs import InputError
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

#: exported name -> the submodule defining it
_EXPORTS: dict[str, str] = {
    "read_client_csv": "csv_input",
    "read_client_files": "csv_input",
    "InputError": "inputs",
    "TILED_NETWORKS": "networks",
    "Network": "networks",
    "list_networks": "networks",
    "load_network": "networks",
    "tile_network": "networks",
    "Partition": "partition",
    "check_client_data": "partition",
    "drop_latents": "partition",
    "from_csv_files": "partition",
    "from_pooled_csv": "partition",
    "split_heterogeneous": "partition",
    "split_iid": "partition",
    "split_site_effects": "partition",
    "split_sizes": "partition",
    "split_variable_subsets": "partition",
    "sachs_continuous": "reference",
    "sachs_continuous_truth": "reference",
    "sachs_discrete": "reference",
    "sachs_discrete_truth": "reference",
    "sachs_file": "reference",
    "codes_to_frame": "sampling",
    "sample_codes": "sampling",
    "sample_frame": "sampling",
    "DataError": "schema",
    "Schema": "schema",
    "VariableSpec": "schema",
    "choose_latents": "synthetic",
    "random_dag": "synthetic",
    "random_discrete_network": "synthetic",
    "random_gaussian_network": "synthetic",
    "random_variable_types": "synthetic",
    "simulate_mixed": "synthetic",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "TILED_NETWORKS",
    "DataError",
    "InputError",
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
    "read_client_csv",
    "read_client_files",
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
