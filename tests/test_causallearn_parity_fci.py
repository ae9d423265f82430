"""FedFCI equals causal-learn 0.1.4.8's ``fci`` with its Possible-D-Sep subset bug patched, in
exact mode at K = 1, 3 and 10, on samples of barley (levels up to 67: tables too big to count
densely) and water (six single-level columns).

The patch, in the reference only: causal-learn's ``removeByPossibleDsep`` calls
``DepthChoiceGenerator.next()`` for the next subset before it tests the current one, and ``next``
returns the same list object each time, refilled in place; so within each subset size the first
subset is never tested and the last is tested twice. :func:`subsets_fixed` makes ``next`` return a
copy, which is what the loop assumes. The project tests every subset (docs/exactness.md,
"Differences from causal-learn"); :func:`test_the_subset_bug_skips_the_first_subset_of_each_size`
pins it.
"""

import contextlib
import io
import warnings
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from causallearn.search.ConstraintBased.FCI import fci as cl_fci
from causallearn.utils import DepthChoiceGenerator as depth_choice
from helpers import uneven_clients

from fedcausal_flwr.clients.fedpc import FedPCClient
from fedcausal_flwr.data import load_network
from fedcausal_flwr.data.partition import split_sizes
from fedcausal_flwr.federation.core.messages import ClientProtocolError
from fedcausal_flwr.federation.runtime.runners import PartitionedClients, run_method, run_protocol
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.stats.contingency import make_layout
from fedcausal_flwr.strategies.fedpc import METHODS


@contextlib.contextmanager
def subsets_fixed():
    """causal-learn with ``DepthChoiceGenerator.next()`` returning a copy (see the docstring)."""
    original = depth_choice.DepthChoiceGenerator.next

    def next_copy(self):
        choice = original(self)
        return None if choice is None else list(choice)

    depth_choice.DepthChoiceGenerator.next = next_copy
    try:
        yield
    finally:
        depth_choice.DepthChoiceGenerator.next = original


def causallearn_fci(codes: np.ndarray, names: list[str]) -> Graph:
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # it prints its rules and warns on constant columns
        graph, _ = cl_fci(codes, "chisq", 0.05, show_progress=False, node_names=names)
    return Graph.from_causallearn(graph.graph, names, "PAG")


def sample(network: str, rows: int) -> tuple[pd.DataFrame, np.ndarray]:
    """A sample as read from CSV (observed levels only) and its codes for causal-learn."""
    frame = load_network(network).sample(rows, seed=0).astype(str)
    codes = np.column_stack(
        [pd.Categorical(frame[c], categories=sorted(frame[c].unique())).codes for c in frame]
    ).astype(np.int64)
    return frame, codes


@pytest.fixture(scope="module")
def barley():
    frame, codes = sample("barley", 3_000)
    names = list(frame.columns)
    with subsets_fixed():
        reference = causallearn_fci(codes, names)
    return frame, codes, reference


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 3, 10])
def test_barley_fci_in_exact_mode_equals_patched_causallearn(barley, k):
    frame, _, reference = barley
    result = run_method("fedfci", uneven_clients(frame, k), {"fci_rules": "causallearn"})
    assert result.graph == reference
    # tables over the dense budget were counted sparsely, not refused
    assert "sparse_tables" in {entry["kind"] for entry in result.ledger}


def _subsets_removebypossibledsep_tests(n: int) -> list[tuple[int, ...]]:
    """The subsets (of size >= 2) causal-learn's ``removeByPossibleDsep`` loop tests for ``n``
    Possible-D-Sep candidates: its own loop shape, ``origin = choice; choice = gen.next()``."""
    gen = depth_choice.DepthChoiceGenerator(n, n)
    tested = []
    choice = gen.next()
    while choice is not None:
        origin = choice
        choice = gen.next()
        if len(origin) >= 2:
            tested.append(tuple(origin))
    return tested


def test_the_subset_bug_skips_the_first_subset_of_each_size():
    """Pins causal-learn's bug and the patch: of the 11 subsets of size >= 2 of 4 candidates it
    never tests {0, 1} and {0, 1, 2} and tests {2, 3} and {1, 2, 3} twice; patched, each once."""
    every = [c for r in (2, 3, 4) for c in combinations(range(4), r)]
    buggy = _subsets_removebypossibledsep_tests(4)
    assert len(buggy) == len(every) and set(buggy) != set(every)
    assert set(every) - set(buggy) == {(0, 1), (0, 1, 2)}
    assert sorted(c for c in set(buggy) if buggy.count(c) == 2) == [(1, 2, 3), (2, 3)]
    with subsets_fixed():
        assert _subsets_removebypossibledsep_tests(4) == every


@pytest.mark.parametrize("k", [1, 3, 10])
def test_water_fci_keeps_single_level_columns_isolated_as_causallearn(k):
    frame, codes = sample("water", 2_000)
    names = list(frame.columns)
    with subsets_fixed():
        reference = causallearn_fci(codes, names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the single-level columns' notes
        result = run_method("fedfci", uneven_clients(frame, k), {"fci_rules": "causallearn"})
    assert result.graph == reference
    assert len(result.extra["constant_columns"]) == 6


class SmallMemoryClient(FedPCClient):
    """A site that cannot hold more than 4 cells of any table (as if memory ran out)."""

    def _layout(self, payload, arrays, *, sparse):
        codes, cards, layout = super()._layout(payload, arrays, sparse=sparse)
        self._refusing(make_layout, layout.queries, cards, 4, normalised=True)
        return codes, cards, layout


def test_a_client_that_cannot_count_a_batch_stops_the_run_with_its_cause():
    parts = split_sizes(load_network("asia").sample(2_000, seed=0), alpha=1.0, k=3, seed=0).clients

    def make_client(pid, data, context=None):
        client = SmallMemoryClient if pid == 1 else FedPCClient
        return client(pid, data, context)

    with pytest.raises(ClientProtocolError, match=r"client 1.*cannot count the tables.*limit 4"):
        run_protocol(
            METHODS["pc"].strategy({}), PartitionedClients(make_client, parts), 3, min_clients=1
        )
