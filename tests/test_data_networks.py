"""Benchmark networks read offline from pgmpy's files, and tiled networks."""

import gzip
import json
from importlib import resources

import networkx as nx
import numpy as np
import pytest

from fedcausal_flwr.data import TILED_NETWORKS, Network, list_networks, load_network, tile_network
from fedcausal_flwr.graphs import Graph

EXAMPLES = resources.files("pgmpy") / "utils" / "example_models"


@pytest.mark.parametrize(
    ("name", "nodes", "edges"),
    [
        ("asia", 8, 8),
        ("sachs", 11, 17),
        ("child", 20, 25),
        ("insurance", 27, 52),
        ("alarm", 37, 46),
        # the tiled networks' published counts
        ("child3", 60, 79),
        ("child5", 100, 126),
        ("insurance3", 81, 163),
        ("insurance5", 135, 281),
        ("alarm3", 111, 149),
    ],
)
def test_bnlearn_and_tiled_counts(name, nodes, edges):
    net = load_network(name)
    assert (net.n_nodes, net.n_edges) == (nodes, edges)
    assert str(net) == f"Network '{name}': {nodes} nodes, {edges} edges, discrete"
    assert repr(net) == str(net)
    dag = net.dag
    assert isinstance(dag, Graph) and dag.kind == "DAG"
    assert dag.n_edges() == edges
    assert list(dag.names) == net.variables
    assert nx.is_directed_acyclic_graph(dag.to_networkx())


def test_unknown_name_lists_available():
    with pytest.raises(ValueError, match="unknown network 'nope'") as err:
        load_network("nope")
    for name in ("alarm", "child3", "ecoli70", "asia"):
        assert name in str(err.value)


def test_list_and_cache():
    names = list_networks()
    for name in ("alarm", "asia", "munin", "ecoli70", "arth150", *TILED_NETWORKS):
        assert name in names
    assert load_network("ALARM") is load_network("alarm")


def test_bif_matches_pgmpy_model():
    """Our parents, states and CPT layout equal the TabularCPDs pgmpy builds from the same file."""
    from pgmpy.readwrite import BIFReader

    with gzip.open(EXAMPLES / "insurance.bif.gz") as fh:
        model = BIFReader(string=fh.read().decode()).get_model()
    net = load_network("insurance")
    assert set(net.variables) == set(model.nodes())
    for v in net.variables:
        cpd = model.get_cpds(v)
        assert list(cpd.variables[1:]) == net.parents[v]
        assert list(cpd.state_names[v]) == net.states[v]
        np.testing.assert_allclose(net.cpts[v], cpd.get_values())
    assert sorted(net.edges) == sorted(model.edges())


def test_topological_order_is_valid():
    net = load_network("alarm")
    position = {net.variables[c]: k for k, c in enumerate(net.topological_order)}
    assert sorted(position.values()) == list(range(net.n_nodes))
    for parent, child in net.edges:
        assert position[parent] < position[child]


def test_gaussian_network_matches_file():
    net = load_network("ecoli70")
    assert (net.n_nodes, net.n_edges, net.kind) == (46, 70, "gaussian")
    assert str(net) == "Network 'ecoli70': 46 nodes, 70 edges, gaussian"
    assert np.all(net.cards == 0)
    raw = json.loads((EXAMPLES / "ecoli70.json").read_text())
    for v, cpd in raw["cpds"].items():
        assert net.parents[v] == cpd["parents"]
        assert net.intercepts[v] == pytest.approx(cpd["coefficients"]["(Intercept)"][0])
        expected = [cpd["coefficients"][p][0] for p in cpd["parents"]]
        np.testing.assert_allclose(net.coefficients[v], expected)
        assert net.noise_sd[v] ** 2 == pytest.approx(cpd["variance"][0])
    for name, nodes, edges in [
        ("magic-niab", 44, 66),
        ("magic-irri", 64, 102),
        ("arth150", 107, 150),
    ]:
        g = load_network(name)
        assert (g.n_nodes, g.n_edges) == (nodes, edges)


def test_tiling_structure_and_determinism():
    base = load_network("child")
    tiled = tile_network(base, 3, seed=7, n_links=6)
    again = tile_network(base, 3, seed=7, n_links=6)
    other = tile_network(base, 3, seed=8, n_links=6)
    assert tiled.n_nodes == 60 and tiled.n_edges == 75 + 6
    assert tiled.edges == again.edges
    assert all(np.array_equal(tiled.cpts[v], again.cpts[v]) for v in tiled.variables)
    assert tiled.edges != other.edges
    assert tiled.variables[:20] == [f"{v}_1" for v in base.variables]
    links = []
    for parent, child in tiled.edges:
        cp, cc = int(parent.rsplit("_", 1)[1]), int(child.rsplit("_", 1)[1])
        assert cp <= cc
        if cp < cc:
            links.append((parent, child))
    assert len(links) == 6
    # links spread evenly (3 per receiving copy), at most one new parent per node
    assert sorted(int(c.rsplit("_", 1)[1]) for _, c in links) == [2, 2, 2, 3, 3, 3]
    assert len({c for _, c in links}) == 6
    for parent, child in links:
        stem = child.rsplit("_", 1)[0]
        assert tiled.parents[child] == [
            f"{p}_{child.rsplit('_', 1)[1]}" for p in base.parents[stem]
        ] + [parent]
        card_new = len(tiled.states[parent])
        assert tiled.cpts[child].shape == (
            base.cpts[stem].shape[0],
            base.cpts[stem].shape[1] * card_new,
        )
        np.testing.assert_allclose(tiled.cpts[child].sum(axis=0), 1.0)
    # untouched nodes keep the base CPT
    untouched = [v for v in tiled.variables if v not in {c for _, c in links}]
    for v in untouched:
        np.testing.assert_array_equal(tiled.cpts[v], base.cpts[v.rsplit("_", 1)[0]])
    model = tiled.to_pgmpy()
    assert model.check_model()


def test_tiling_errors():
    with pytest.raises(ValueError, match="discrete"):
        tile_network(load_network("ecoli70"), 2)
    with pytest.raises(ValueError, match="at most 8 linking edges"):
        tile_network(load_network("asia"), 2, n_links=9)


def test_network_validation():
    with pytest.raises(ValueError, match="sums to"):
        Network(
            "bad", ["A"], {"A": []}, states={"A": ["a", "b"]}, cpts={"A": np.array([[0.5], [0.6]])}
        )
    with pytest.raises(ValueError, match="cycle"):
        Network(
            "cyc",
            ["A", "B"],
            {"A": ["B"], "B": ["A"]},
            states={"A": ["0", "1"], "B": ["0", "1"]},
            cpts={"A": np.full((2, 2), 0.5), "B": np.full((2, 2), 0.5)},
        )
    with pytest.raises(ValueError, match="shape"):
        Network(
            "shape",
            ["A", "B"],
            {"A": [], "B": ["A"]},
            states={"A": ["0", "1"], "B": ["0", "1"]},
            cpts={"A": np.full((2, 1), 0.5), "B": np.full((2, 1), 0.5)},
        )
