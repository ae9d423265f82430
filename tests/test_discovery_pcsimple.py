"""PCsimple reproduces the FedLCS paper's Table 2 trace with a fixed independence table."""

from fedcausal_flwr.discovery.driver import drive
from fedcausal_flwr.discovery.pcsimple import apply_layer, pcsimple_steps
from fedcausal_flwr.graphs import Graph
from fedcausal_flwr.stats.batch_oracle import normalise_query
from fedcausal_flwr.stats.oracles import DSeparationOracle, TableOracle

NAMES = ["A", "B", "C", "E", "F", "T"]
A, B, C, E, F, T = range(6)
# E _||_ T ; B _||_ T | A ; F _||_ T | A ; everything else dependent.
TABLE = {("E", "T", ()): 0.9, ("B", "T", ("A",)): 0.8, ("F", "T", ("A",)): 0.7}


def test_table2_trace():
    oracle = TableOracle(TABLE, NAMES, default=0.0)
    result = drive(pcsimple_steps(len(NAMES), T, alpha=0.05), oracle)
    assert result.pc == [A, C]
    assert result.removed_at == {E: 0, B: 1, F: 1}
    assert result.sepsets == {E: (), B: (A,), F: (A,)}
    # layer 0 and layer 1 ran; at l = 2, |CPC| = 2 = l stops the search
    assert [layer["depth"] for layer in result.layers] == [0, 1]


def test_layer_one_scans_on_the_fly_pool():
    """C is tested given A and F only: B left the pool earlier in the same layer."""
    asked = []
    oracle = TableOracle(TABLE, NAMES, default=0.0)

    def pvalue(q):
        asked.append(q)
        return oracle.test(*q)

    kept, found = apply_layer(T, [A, B, C, F], 1, pvalue, alpha=0.05)
    assert kept == [A, C] and found == {B: (A,), F: (A,)}
    c_tests = [q for q in asked if C in q[:2]]
    assert c_tests == [normalise_query(C, T, (A,)), normalise_query(C, T, (F,))]
    # the stable variant keeps B in C's pool
    asked.clear()
    apply_layer(T, [A, B, C, F], 1, pvalue, alpha=0.05, stable=True)
    assert normalise_query(C, T, (B,)) in asked


def test_one_batch_per_layer():
    oracle = TableOracle(TABLE, NAMES, default=0.0)
    drive(pcsimple_steps(len(NAMES), T, alpha=0.05), oracle)
    assert oracle.n_batches == 2


def test_dseparation_oracle_gives_true_parents_and_children():
    # A -> T <- B, T -> C, C -> D, E -> D, A -> C
    names = ["A", "B", "T", "C", "D", "E"]
    dag = Graph.from_edges(
        names, [("A", "T"), ("B", "T"), ("T", "C"), ("C", "D"), ("E", "D"), ("A", "C")]
    )
    oracle = DSeparationOracle(dag)
    result = drive(pcsimple_steps(len(names), 2, alpha=0.05), oracle)
    assert sorted(result.pc) == [0, 1, 3]
