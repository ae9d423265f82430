"""Guards against blow-ups: what would not fit is refused before a client computes it, with the
number and the option that raises the cap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import fedcausal_flwr
from fedcausal_flwr.data import load_network
from fedcausal_flwr.data.partition import split_iid


def test_fedci_refuses_a_categorical_column_with_too_many_levels():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "a": rng.normal(size=600),
            "b": rng.normal(size=600),
            "id": np.arange(600) % 200,  # 200 levels: a multinomial with 199 categories
        }
    )
    parts = split_iid(frame, 2, seed=0).clients
    with pytest.raises(ValueError, match="'id' has 200 levels.*--max-categories 200"):
        fedcausal_flwr.run("fedci-pc", data=parts)
    few = [p.assign(id=p["id"] % 3) for p in parts]  # the same column recoded to 3 levels runs
    assert fedcausal_flwr.run("fedci-pc", data=few).graph is not None


def test_fedpc_refuses_a_level_whose_tables_exceed_the_budget():
    parts = split_iid(load_network("alarm").sample(500, seed=1), 2, seed=0).clients
    with pytest.raises(ValueError, match=r"need 5,354 cells, over the budget max_cells=1,000.*"
                       r"--max-cells 5354"):  # fmt: skip
        fedcausal_flwr.run("fedpc", data=parts, max_cells=1000)
    assert fedcausal_flwr.run("fedpc", data=parts, max_cells=6000, max_depth=0).graph is not None
