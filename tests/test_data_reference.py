"""The packaged Sachs reference data: shapes, levels, truths over the data's columns, checksums."""

import hashlib
import re
from importlib.resources import files

import numpy as np
import pytest

from fedcausal_flwr.data import (
    sachs_continuous,
    sachs_continuous_truth,
    sachs_discrete,
    sachs_discrete_truth,
    sachs_file,
)
from fedcausal_flwr.data.reference import SACHS_FILES, read_edge_list
from fedcausal_flwr.graphs.truth import check_dag

PROTEINS = set("P38 PIP2 PIP3 PKA PKC p44/42 pakts473 pjnk plcg pmek praf".split())


def _directed(graph) -> set[tuple[str, str]]:
    """Edges ``u -> v`` by name (``Graph.edges()`` gives ``(u, v, mark at u, mark at v)``)."""
    out = set()
    for u, v, mark_u, mark_v in graph.edges():
        if (mark_u, mark_v) == ("tail", "arrow"):
            out.add((u, v))
        elif (mark_u, mark_v) == ("arrow", "tail"):
            out.add((v, u))
    return out


def test_discrete_is_853_rows_of_11_proteins_at_3_levels():
    frame = sachs_discrete()
    assert frame.shape == (853, 11)
    assert set(frame.columns) == PROTEINS
    assert all(dtype == np.int64 for dtype in frame.dtypes)
    assert set(np.unique(frame.to_numpy())) == {0, 1, 2}
    assert all(frame[c].nunique() == 3 for c in frame.columns)
    # first data row as in the file
    assert frame.iloc[0].tolist() == [0, 2, 1, 0, 0, 0, 2, 0, 2, 2, 2]


def test_discrete_truth_is_the_17_edge_bnlearn_dag_over_the_columns():
    frame, dag = sachs_discrete(), sachs_discrete_truth()
    assert dag.names == tuple(frame.columns) and dag.kind == "DAG"
    assert dag.n_edges() == 17
    check_dag(dag)
    edges = _directed(dag)
    assert len(edges) == 17
    assert {("PKC", "praf"), ("praf", "pmek"), ("pmek", "p44/42"), ("PIP3", "PIP2")} <= edges


def test_continuous_is_7466_rows_of_11_proteins_as_floats():
    frame = sachs_continuous()
    assert frame.shape == (7466, 11)
    assert set(frame.columns) == PROTEINS
    assert all(dtype == np.float64 for dtype in frame.dtypes)
    assert not frame.isna().any().any() and (frame.to_numpy() > 0).all()


def test_continuous_truth_is_the_distributed_consensus_graph_with_its_cycle():
    frame, graph = sachs_continuous(), sachs_continuous_truth()
    assert graph.names == tuple(frame.columns) and graph.kind == "SKELETON"
    edges = _directed(graph)
    assert graph.n_edges() == len(edges) == 18  # the file name says 17; it lists 18
    assert {("PIP3", "plcg"), ("plcg", "PIP2"), ("PIP2", "PIP3")} <= edges
    with pytest.raises(ValueError, match="cycle"):
        check_dag(graph)
    bnlearn = _directed(sachs_discrete_truth())
    assert len(edges & bnlearn) == 14
    assert bnlearn - edges == {("PIP3", "PIP2"), ("p44/42", "pakts473"), ("PKC", "PKA")}


def test_files_match_the_checksums_in_the_readme():
    folder = files("fedcausal_flwr.data").joinpath("sachs")
    readme = folder.joinpath("README.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^\| `([\w.]+)` \|.*\| `([0-9a-f]{64})` \|$", readme, re.MULTILINE))
    assert set(listed) == set(SACHS_FILES)
    for name in SACHS_FILES:
        assert hashlib.sha256(sachs_file(name).read_bytes()).hexdigest() == listed[name], name
    shipped = {p.name for p in folder.iterdir()}
    assert shipped == {*SACHS_FILES, "README.md"}


def test_unknown_names_are_errors(tmp_path):
    with pytest.raises(KeyError, match="no packaged Sachs file"):
        sachs_file("sachs.csv")
    path = tmp_path / "edges.csv"
    path.write_text("cause,effect\nPKC,raf\n")
    with pytest.raises(ValueError, match="raf"):
        read_edge_list(path, list(sachs_discrete().columns))
    path.write_text("from,to\nPKC,praf\n")
    with pytest.raises(ValueError, match="cause,effect"):
        read_edge_list(path, list(sachs_discrete().columns))
