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


def test_fedpc_splits_a_level_over_the_budget_and_refuses_only_a_query_over_it_alone():
    parts = split_iid(load_network("alarm").sample(500, seed=1), 2, seed=0).clients
    full = fedcausal_flwr.run("fedpc", data=parts)
    small = fedcausal_flwr.run("fedpc", data=parts, max_cells=1000)
    assert small.graph == full.graph and small.rounds > full.rounds  # more rounds, same graph
    with pytest.raises(ValueError, match=r"table of \w+ _\|\|_ \w+ \| \[\] has \d cells.*"
                       r"budget max_cells=3: raise the budget \(--max-cells \d+"):  # fmt: skip
        fedcausal_flwr.run("fedpc", data=parts, max_cells=3)
    with pytest.raises(ValueError, match=r"secure run sums dense tables"):
        fedcausal_flwr.run("fedpc", data=parts, max_cells=3, secure=True)


def test_fedpc_bounds_what_the_server_holds_of_many_clients_replies():
    """max_server_cells caps the clients' tables the server holds in one round (clients x
    cells): a level over it travels in more rounds with the same graph; one table whose copies
    alone exceed it is refused, naming the option."""
    parts = split_iid(load_network("alarm").sample(2000, seed=1), 10, seed=0).clients
    full = fedcausal_flwr.run("fedpc", data=parts)
    batches = full.extra["batches"]
    largest = max(b["dense_cells"] for b in batches)
    assert largest * 10 <= 2**27  # the default budget is not binding here
    small = fedcausal_flwr.run("fedpc", data=parts, max_server_cells=largest * 10 // 4)
    assert small.graph == full.graph and small.rounds > full.rounds
    assert small.extra["tests"] == full.extra["tests"]
    with pytest.raises(ValueError, match=r"server would hold \d+ cells.*max_server_cells=50: "
                       r"raise it \(--max-server-cells \d+"):  # fmt: skip
        fedcausal_flwr.run("fedpc", data=parts, max_server_cells=50)
