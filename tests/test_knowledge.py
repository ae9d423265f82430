"""Background knowledge for PC and FCI: the file format, the d-separation oracle refined by tiers,
pairs never tested, and causal-learn's ``BackgroundKnowledge`` on ALARM (PC)."""

import warnings

import networkx as nx
import numpy as np
import pytest

from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.discovery.fci import fci
from fedcausal_flwr.discovery.pc import pc
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.graphs.knowledge import Knowledge
from fedcausal_flwr.graphs.truth import dag_to_cpdag
from fedcausal_flwr.stats.oracles import DiscreteOracle, DSeparationOracle

TEXT = """
# comments and blank lines are ignored
forbidden A -> B
forbidden C -- D     # no edge either way
required E -> F
tier A, "G H"
tier B C
"""


def test_the_file_format_reads_every_statement():
    k = Knowledge.parse(TEXT)
    assert set(k.forbidden) == {("A", "B"), ("C", "D"), ("D", "C")}
    assert k.required == (("E", "F"),)
    assert k.tiers == (("A", "G H"), ("B", "C"))
    assert k.is_forbidden("B", "A") and k.is_forbidden("C", "G H")  # a later tier into an earlier
    assert not k.is_forbidden("G H", "C") and k.is_required("E", "F")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("forbid A -> B", "line 1: expected 'forbidden A -> B'"),
        ("\nforbidden A => B", "line 2: expected"),
        ("required A -- B", "a required edge has a direction"),
        ("required A -> A", "two different variables"),
        ("tier", "at least one variable"),
        ("tier A\ntier B A", "'A' is in tier 1 and in tier 2"),
        ("forbidden A -> B\nrequired A -> B", "line 2 .*: required edge A -> B is forbidden"),
        ("tier B\ntier A\nrequired A -> B", "line 3 .*: required edge A -> B is against the tier"),
        ("required A -> B\nrequired B -> A", "are both required"),
        (
            "required A -> B\nrequired B -> C\nrequired C -> A",
            r"line 1 .*the directed cycle A -> B -> C -> A",
        ),
        ('tier "A', "No closing quotation"),
    ],
)
def test_a_bad_statement_is_refused_with_its_line(text, words):
    with pytest.raises(ValueError, match=words):
        Knowledge.parse(text, source="knowledge file k.txt")


def test_required_edges_in_a_directed_cycle_are_refused_from_python_too():
    with pytest.raises(ValueError, match=r"directed cycle X -> Y -> Z -> W -> X; a DAG has none"):
        Knowledge.from_edges(required=[("X", "Y"), ("Y", "Z"), ("Z", "W"), ("W", "X")])
    Knowledge.from_edges(required=[("X", "Y"), ("Y", "Z"), ("X", "Z")])  # no cycle: fine


def test_an_unknown_variable_is_refused_with_its_line(tmp_path):
    path = tmp_path / "k.txt"
    path.write_text("tier A\nforbidden A -> Nope\n")
    knowledge = Knowledge.read(path)
    with pytest.raises(ValueError, match=r"k.txt, line 2 \('forbidden A -> Nope'\): .*'Nope'"):
        knowledge.matrix(["A", "B"])
    with pytest.raises(ValueError, match="cannot read the knowledge file"):
        Knowledge.read(tmp_path / "missing.txt")


def _tiers(dag: Graph, size: int) -> list[list[str]]:
    """The DAG's topological order cut into tiers of ``size`` variables."""
    arrows = (dag.marks == ARROW) & (dag.marks.T == TAIL)
    graph = nx.DiGraph()
    graph.add_nodes_from(dag.names)
    tails, heads = np.nonzero(arrows)
    graph.add_edges_from((dag.names[a], dag.names[b]) for a, b in zip(tails, heads, strict=True))
    order = list(nx.lexicographical_topological_sort(graph))
    return [order[i : i + size] for i in range(0, len(order), size)]


def _refined(cpdag: Graph, dag: Graph, tiers: list[list[str]]) -> Graph:
    """The CPDAG with every edge between two tiers oriented as in the DAG, closed under Meek's
    rules (R1-R4), computed here from the true DAG."""
    from fedcausal_flwr.graphs.meek import apply_meek

    out = cpdag.copy()
    tier = {v: i for i, names in enumerate(tiers) for v in names}
    m, truth = out.marks, dag.marks
    for a, b in zip(*np.nonzero(np.triu(m != NONE, k=1)), strict=True):
        if tier[dag.names[a]] != tier[dag.names[b]]:
            m[a, b], m[b, a] = truth[a, b], truth[b, a]
    apply_meek(out, mode="complete")
    return out


@pytest.mark.parametrize("network", ["asia", "sachs", "child", "alarm"])
@pytest.mark.parametrize("size", [1, 3, 8])
def test_tiers_from_the_topological_order_refine_the_true_class(network, size):
    """With a perfect oracle, PC with tiers returns the true CPDAG refined by the tiers; with one
    variable per tier that is the DAG itself."""
    dag = load_network(network).dag
    tiers = _tiers(dag, size)
    knowledge = Knowledge.from_edges(tiers=tiers).matrix(dag.names)
    found = pc(DSeparationOracle(dag), 0.05, knowledge=knowledge, meek="complete").graph
    assert found == _refined(dag_to_cpdag(dag), dag, tiers)
    if size == 1:
        assert np.array_equal(found.marks, dag.marks)
    # every edge knowledge oriented points the DAG's way
    heads = (found.marks == ARROW) & (found.marks.T == TAIL)
    assert np.all(dag.marks[heads] == ARROW)


BANNED = [("HR", "VENTLUNG"), ("HISTORY", "CO"), ("KINKEDTUBE", "BP")]


def _alarm_knowledge(*forbidden: tuple[str, str]):
    """ALARM's DAG, its first five edges required, the BANNED pairs forbidden both ways (and
    ``forbidden`` one way)."""
    dag = load_network("alarm").dag
    names = list(dag.names)
    edges = [(names[a], names[b]) for a, b in zip(*np.nonzero(dag.marks == ARROW), strict=True)]
    required = edges[:5]
    both = [p for a, b in BANNED for p in ((a, b), (b, a))]
    knowledge = Knowledge.from_edges(forbidden=both + list(forbidden), required=required)
    return dag, names, required, BANNED, knowledge


@pytest.mark.parametrize("stable", [True, False])
def test_forbidden_pairs_and_required_edges_are_never_tested(stable):
    dag, names, required, banned, knowledge = _alarm_knowledge()
    oracle = DSeparationOracle(dag)
    result = pc(oracle, 0.05, knowledge=knowledge.matrix(names), stable=stable)
    untouched = {frozenset((names.index(a), names.index(b))) for a, b in banned + required}
    asked = {frozenset((x, y)) for x, y, _ in oracle.cache}
    assert asked and not asked & untouched
    plain = DSeparationOracle(dag)
    pc(plain, 0.05)
    assert len(oracle.cache) < len(plain.cache)
    assert {frozenset((names.index(a), names.index(b))) for a, b in required} <= {
        frozenset(p) for p in result.knowledge["required"]
    }
    assert len(result.knowledge["removed"]) == len(banned)
    for a, b in required:  # kept and oriented as required
        assert result.graph.marks[names.index(a), names.index(b)] == ARROW
        assert result.graph.marks[names.index(b), names.index(a)] == TAIL


def _causallearn_with_knowledge(codes: np.ndarray, names: list[str], knowledge: Knowledge) -> Graph:
    from causallearn.graph.GraphNode import GraphNode
    from causallearn.search.ConstraintBased.PC import pc as cl_pc
    from causallearn.utils.PCUtils.BackgroundKnowledge import BackgroundKnowledge

    bk = BackgroundKnowledge()
    for a, b in knowledge.forbidden:
        bk.add_forbidden_by_node(GraphNode(a), GraphNode(b))
    for a, b in knowledge.required:
        bk.add_required_by_node(GraphNode(a), GraphNode(b))
    for number, tier in enumerate(knowledge.tiers):
        for name in tier:
            bk.add_node_to_tier(GraphNode(name), number)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cg = cl_pc(codes, 0.05, "chisq", background_knowledge=bk, show_progress=False,
                   node_names=names)  # fmt: skip
    return Graph.from_causallearn(cg.G.graph, names, "CPDAG")


def test_equal_to_causallearn_on_alarm_with_a_knowledge_file(tmp_path):
    """Tiers, one-way forbidden and required edges from a file: the same CPDAG as causal-learn's
    ``pc`` with the same ``BackgroundKnowledge`` on ALARM x 3000 (chi2)."""
    net = load_network("alarm")
    names = list(net.variables)
    codes = net.sample_codes(3000, seed=1).astype(np.int64)
    tiers = _tiers(net.dag, 12)
    lines = [f"tier {' '.join(t)}" for t in tiers[:2]]
    lines += ["forbidden HR -> CO", "forbidden LVFAILURE -> HISTORY"]
    lines += ["required INTUBATION -> SHUNT"]
    path = tmp_path / "alarm.txt"
    path.write_text("\n".join(lines) + "\n")
    knowledge = Knowledge.read(path)
    ours = pc(DiscreteOracle(codes, net.cards, names, "chi2"), 0.05,
              knowledge=knowledge.matrix(names))  # fmt: skip
    theirs = _causallearn_with_knowledge(codes, names, knowledge)
    plain = pc(DiscreteOracle(codes, net.cards, names, "chi2"), 0.05).graph
    assert ours.graph == theirs
    assert ours.graph != plain  # the knowledge changed something
    assert ours.knowledge["oriented"]


def test_a_pair_knowledge_removed_leaves_its_triples_undecided():
    """causal-learn gives a pair removed by knowledge the empty separating set, so each common
    neighbour becomes a collider; here the pair was never tested, so its triples stay ambiguous."""
    dag = load_network("asia").dag
    names = list(dag.names)
    # tub -> either <- lung is a true collider, smoke -> lung -> either is not
    knowledge = Knowledge.parse("forbidden smoke -- either\n").matrix(names)
    result = pc(DSeparationOracle(dag), 0.05, knowledge=knowledge)
    triple = tuple(names.index(v) for v in ("either", "lung", "smoke"))
    x, y, z = min(triple[0], triple[2]), triple[1], max(triple[0], triple[2])
    assert (x, y, z) in result.colliders.ambiguous
    assert result.graph.marks[names.index("either"), y] != ARROW or (
        result.graph.marks[names.index("smoke"), y] != ARROW
    )


# ------------------------------------------------------------------------------- the entry points
ALARM_KNOWLEDGE = "forbidden HR -> CO\nforbidden HISTORY -- CO\nrequired INTUBATION -> SHUNT\n"


@pytest.fixture(scope="module")
def alarm_sites():
    from fedcausal_flwr.data.partition import split_iid

    net = load_network("alarm")
    frame = net.sample(3000, seed=2)
    return net, frame, split_iid(frame, 3, seed=0).clients


def _pooled_pc(net, frame, knowledge: Knowledge):
    names = list(net.variables)
    codes = np.stack([frame[v].cat.codes.to_numpy() for v in names], axis=1).astype(np.int64)
    cards = [len(frame[v].cat.categories) for v in names]
    return pc(DiscreteOracle(codes, cards, names, "chi2"), 0.05, knowledge=knowledge.matrix(names))


def test_fedpc_with_a_knowledge_file_equals_pooled_pc_with_it(alarm_sites, tmp_path):
    from fedcausal_flwr.federation.runtime.runners import run_method

    net, frame, parts = alarm_sites
    path = tmp_path / "alarm.txt"
    path.write_text(ALARM_KNOWLEDGE)
    federated = run_method("fedpc", parts, {"knowledge": str(path)})
    expected = _pooled_pc(net, frame, Knowledge.parse(ALARM_KNOWLEDGE))
    assert federated.graph == expected.graph
    assert federated.extra["knowledge"]["removed"] == [["HISTORY", "CO"]] or federated.extra[
        "knowledge"
    ]["removed"] == [["CO", "HISTORY"]]
    assert federated.extra["knowledge"]["required"] == [["INTUBATION", "SHUNT"]]
    assert federated.config["options"]["knowledge"] == Knowledge.parse(ALARM_KNOWLEDGE).to_text()
    central = run_method("pooled", parts, {"knowledge": ALARM_KNOWLEDGE.replace("\n", ";")})
    assert (
        central.graph == expected.graph
        and central.extra["knowledge"] == federated.extra["knowledge"]
    )
    plain = run_method("fedpc", parts, {})
    assert plain.extra["knowledge"] == {} and plain.graph != federated.graph


def test_a_knowledge_object_works_from_python(alarm_sites):
    from fedcausal_flwr.federation.runtime.runners import run_method

    net, frame, parts = alarm_sites
    knowledge = Knowledge.from_edges(required=[("INTUBATION", "SHUNT")], tiers=[["HISTORY"]])
    result = run_method("fedpc", parts, {"knowledge": knowledge})
    assert result.graph == _pooled_pc(net, frame, knowledge).graph


def test_knowledge_errors_name_the_statement_and_the_option(alarm_sites, tmp_path):
    from fedcausal_flwr.federation.runtime.runners import run_method
    from fedcausal_flwr.options import OptionError

    _, _, parts = alarm_sites
    with pytest.raises(Exception, match=r"'forbidden HR -> Nope'.*'Nope', which the data"):
        run_method("fedpc", parts, {"knowledge": "forbidden HR -> Nope"})
    with pytest.raises(OptionError, match="knowledge"):
        run_method("fedpc", parts, {"knowledge": str(tmp_path / "absent.txt")})
    with pytest.raises(OptionError, match="works with the separating-set colliders"):
        run_method("fedpc", parts, {"knowledge": "tier HR", "uc_rule": 1})
    with pytest.raises(OptionError, match="works with the separating-set colliders"):
        run_method("fedpc", parts, {"knowledge": "tier HR", "uc_priority": -1})
    with pytest.raises(OptionError, match="knowledge works with FCI's Zhang rules"):
        run_method(
            "pooled",
            parts,
            {"knowledge": "tier HR", "algorithm": "fci", "fci_rules": "causallearn"},
        )


def test_the_command_line_reads_a_knowledge_file(alarm_sites, tmp_path):
    from fedcausal_flwr.cli import main
    from fedcausal_flwr.result import Result

    net, frame, parts = alarm_sites
    files = []
    for k, part in enumerate(parts):
        files.append(str(tmp_path / f"site{k}.csv"))
        part.to_csv(files[-1], index=False)
    path = tmp_path / "alarm.txt"
    path.write_text(ALARM_KNOWLEDGE)
    out = tmp_path / "result.json"
    code = main(["run", "--method", "fedpc", "--data", *files, "--knowledge", str(path),
                 "--quiet", "--out", str(out)])  # fmt: skip
    assert code == 0
    result = Result.load(out)
    assert result.extra["knowledge"]["required"] == [["INTUBATION", "SHUNT"]]
    assert result.graph == _pooled_pc(net, frame, Knowledge.parse(ALARM_KNOWLEDGE)).graph


# ============================================================================ FCI
@pytest.mark.parametrize("network", ["asia", "sachs", "child", "alarm"])
@pytest.mark.parametrize("size", [1, 3])
def test_fci_with_tiers_is_sound_and_knows_more(network, size):
    """With a d-separation oracle (no latent variables: the true MAG is the DAG) and tiers from
    its topological order, FCI's PAG has the true skeleton, every mark it decides is the DAG's,
    every edge between tiers has its arrowhead at the later tier, and it decides at least the
    marks FCI decides without the tiers."""
    dag = load_network(network).dag
    tiers = _tiers(dag, size)
    knowledge = Knowledge.from_edges(tiers=tiers).matrix(dag.names)
    found = fci(DSeparationOracle(dag), 0.05, knowledge=knowledge).graph
    plain = fci(DSeparationOracle(dag), 0.05).graph
    m = found.marks
    assert np.array_equal(m != NONE, dag.marks != NONE)
    assert np.all((m == CIRCLE) | (m == dag.marks))
    tier = {v: i for i, names in enumerate(tiers) for v in names}
    for a, b in zip(*np.nonzero(m != NONE), strict=True):
        if tier[dag.names[a]] < tier[dag.names[b]]:
            assert m[a, b] == ARROW  # the arrowhead at the later variable
    decided = (m != CIRCLE) & (m != NONE)
    assert np.all(decided[(plain.marks != CIRCLE) & (plain.marks != NONE)])
    assert decided.sum() > ((plain.marks != CIRCLE) & (plain.marks != NONE)).sum()


@pytest.mark.parametrize("possible_dsep", ["sequential", "stable"])
def test_fci_never_tests_forbidden_pairs_or_required_edges(possible_dsep):
    dag, names, required, banned, knowledge = _alarm_knowledge(("CO", "HR"))
    oracle = DSeparationOracle(dag)
    result = fci(oracle, 0.05, knowledge=knowledge.matrix(names), possible_dsep=possible_dsep)
    untouched = {frozenset((names.index(a), names.index(b))) for a, b in banned + required}
    asked = {frozenset((x, y)) for x, y, _ in oracle.cache}
    assert asked and not asked & untouched
    m = result.graph.marks
    for a, b in required:  # kept and oriented as required
        assert m[names.index(a), names.index(b)] == ARROW
        assert m[names.index(b), names.index(a)] == TAIL
    hr, co = names.index("HR"), names.index("CO")  # forbidden CO -> HR: an arrowhead at CO
    assert m[hr, co] == ARROW and ["HR", "CO"] in [
        [names[a], names[b]] for a, b in result.knowledge["arrowheads"]
    ] + [[names[a], names[b]] for a, b in result.knowledge["oriented"]]
    assert len(result.knowledge["removed"]) == len(banned)


def test_fedfci_with_knowledge_equals_pooled_fci_with_it(alarm_sites):
    from fedcausal_flwr.discovery.fci import fci as local_fci
    from fedcausal_flwr.federation.runtime.runners import run_method

    net, frame, parts = alarm_sites
    text = ALARM_KNOWLEDGE.replace("\n", ";")
    federated = run_method("fedfci", parts, {"knowledge": text})
    names = list(net.variables)
    codes = np.stack([frame[v].cat.codes.to_numpy() for v in names], axis=1).astype(np.int64)
    cards = [len(frame[v].cat.categories) for v in names]
    oracle = DiscreteOracle(codes, cards, names, "chi2")
    expected = local_fci(oracle, 0.05, knowledge=Knowledge.parse(ALARM_KNOWLEDGE).matrix(names))
    assert federated.graph == expected.graph
    assert federated.extra["knowledge"]["required"] == [["INTUBATION", "SHUNT"]]
    central = run_method("pooled", parts, {"knowledge": text, "algorithm": "fci"})
    assert central.graph == expected.graph
    assert federated.graph != run_method("fedfci", parts, {}).graph
