"""The fast BIF reader returns exactly what pgmpy's BIFReader returns."""

import gzip

import numpy as np
import pytest
from pgmpy.readwrite import BIFReader

from fedcausal_flwr.data.bif import read_bif
from fedcausal_flwr.data.networks import _example_dir


@pytest.mark.parametrize(
    "name", ["asia", "sachs", "child", "insurance", "alarm", "water", "win95pts", "hepar2"]
)
def test_reader_matches_pgmpy(name):
    text = gzip.open(_example_dir() / f"{name}.bif.gz").read().decode()
    ours = read_bif(text, name)
    theirs = BIFReader(string=text)
    assert ours.variables == list(theirs.variable_names)
    for v in ours.variables:
        assert ours.parents[v] == list(theirs.variable_parents[v])
        assert ours.states[v] == list(theirs.variable_states[v])
        np.testing.assert_array_equal(ours.cpts[v], np.asarray(theirs.variable_cpds[v], float))


def test_reader_names_the_problem():
    text = """variable A { type discrete [ 2 ] { a0, a1 }; }
    variable B { type discrete [ 2 ] { b0, b1 }; }
    probability ( A ) { table 0.5, 0.5; }
    probability ( B | A ) { (a0) 0.1, 0.9; (a2) 0.3, 0.7; }"""
    with pytest.raises(ValueError, match="unknown state 'a2' of 'A' in the table of 'B'"):
        read_bif(text, "toy")
    with pytest.raises(ValueError, match="misses parent configurations"):
        read_bif(text.replace("(a2) 0.3, 0.7;", ""), "toy")
    with pytest.raises(ValueError, match="no probability block"):
        read_bif(text.split("probability ( B")[0], "toy")
