"""FedCDnv, FedCDnv-vote and FCI-base through Flower: oracle recovery of the true PAG, the
baselines recomputed from the clients' own FCI runs, the ledger, round-2 state, bad input, Ray."""

import numpy as np
import pandas as pd
import pytest

import fedcausal_flwr.clients.tpss as client_module
from fedcausal_flwr.clients.tpss import FedCDnvClient
from fedcausal_flwr.data.partition import drop_latents, split_sizes, split_variable_subsets
from fedcausal_flwr.data.synthetic import choose_latents, random_dag, random_discrete_network
from fedcausal_flwr.discovery.fci import fci
from fedcausal_flwr.discovery.tpss_union import observed_mask, overlap_matrix, status_matrix
from fedcausal_flwr.federation.core.messages import ClientProtocolError
from fedcausal_flwr.federation.runtime.runners import PartitionedClients, run_method, run_protocol
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.graphs.truth import dag_to_mag, dag_to_pag
from fedcausal_flwr.options import OptionError
from fedcausal_flwr.result import Result
from fedcausal_flwr.stats.oracles import DiscreteOracle, DSeparationOracle
from fedcausal_flwr.strategies.tpss import make_strategy, score_result

METHODS = ("fedcdnv", "fedcdnv-vote", "fci-base")


class OracleClient(FedCDnvClient):
    """Test-only: every CI test answered by d-separation in the true DAG (latents hidden)."""

    dag: Graph | None = None

    def _oracle(self, payload, variables):
        return DSeparationOracle(self.dag, variables)


def oracle_run(dag, client_columns, options=None, method="fedcdnv"):
    rng = np.random.default_rng(0)
    frames = [pd.DataFrame(rng.integers(0, 2, (30, len(c))), columns=c) for c in client_columns]
    cls = type("BoundOracleClient", (OracleClient,), {"dag": dag})
    factory = PartitionedClients(cls, frames)
    return run_protocol(make_strategy(options or {}, method), factory, len(frames))


def oracle_dag(seed):
    dag = random_dag(10, 2.5, seed=seed)
    latent = choose_latents(dag, 0.15, seed=seed)
    return dag, latent, [v for v in dag.names if v not in latent]


def test_oracle_with_identical_variable_sets_recovers_the_true_pag():
    dag, latent, observed = oracle_dag(3)
    truth = dag_to_pag(dag, latent)
    assert np.any(truth.marks == TAIL) and np.any(truth.marks == ARROW)
    exact = oracle_run(dag, [observed] * 3)  # default options
    assert exact.graph == truth
    assert set(np.unique(exact.extra["status"])) == {-2, 0, 2}
    assert exact.extra["decisions"] == []
    # the paper's FedG carries arrowheads only: the true PAG with its tails read as circles
    paper = oracle_run(dag, [observed] * 3, {"tails": "drop"})
    assert paper.graph == Graph(truth.names, np.where(truth.marks == TAIL, CIRCLE, truth.marks))


def test_oracle_with_non_identical_variable_sets():
    """Co-observed true adjacencies are kept, -2 pairs are truly non-adjacent, and FedG's
    arrowheads on true edges are the true MAG's (ancestral facts survive marginalisation)."""
    dag, latent, observed = oracle_dag(5)
    d = len(observed)
    columns = [[v for k, v in enumerate(observed) if (k - 2 * i) % d >= 3] for i in range(4)]
    result = oracle_run(dag, columns)
    names = result.variables
    assert sorted(names) == sorted(observed)
    mag = dag_to_mag(dag, latent).subgraph(names)
    learned = result.graph.marks
    together = np.zeros((d, d), dtype=bool)
    for cols in columns:
        ids = [names.index(c) for c in cols]
        together[np.ix_(ids, ids)] = True
    true_adj = mag.marks != NONE
    assert np.all(learned[true_adj & together] != NONE)
    status = np.asarray(result.extra["status"])
    assert np.any(status == -2) and not np.any(true_adj & (status == -2))
    both = true_adj & (learned != NONE)
    assert np.all(mag.marks[both & (learned == ARROW)] == ARROW)
    assert result.extra["never_together"] and result.extra["pairwise_overlap"]
    # FeddG from the status matrix recomputed on FedG (option), options echoed in the result
    again = oracle_run(dag, columns, {"feddg_status": "fedg", "lemma_scope": "adjacent"})
    assert again.extra["options"]["feddg_status"] == "fedg"
    assert again.extra["options"]["lemma_scope"] == "adjacent"
    mask = observed_mask([[names.index(c) for c in cols] for cols in columns], d)
    expected = status_matrix(again.graph.adjacency(), overlap_matrix(mask), "adjacent")
    assert np.array_equal(np.asarray(again.extra["status"]), expected)


@pytest.fixture(scope="module")
def discrete_setting():
    """8-node network, one latent, 3 clients of unequal sizes observing 6 of 7 variables."""
    dag = random_dag(8, 2.5, seed=11)
    net = random_discrete_network(dag, card_range=(2, 3), seed=11)
    latent = choose_latents(dag, 0.15, seed=11)
    pooled = net.sample(2400, seed=11)
    part = split_sizes(pooled, sizes=[1200, 700, 500], seed=11)
    part = split_variable_subsets(drop_latents(part, latent), fraction=0.85, seed=2)
    runs = {m: run_method(m, part.clients, {}, backend="inprocess") for m in METHODS}
    return dag, latent, part, runs


def local_graphs(part, names):
    """Each client's own FCI (G2, alpha 0.05) embedded over ``names``; and its variable ids."""
    out, ids = [], []
    for frame in part.clients:
        cols = [v for v in names if v in frame.columns]
        levels = {v: sorted(frame[v].unique()) for v in cols}
        codes = np.column_stack([pd.Index(levels[v]).get_indexer(frame[v]) for v in cols])
        oracle = DiscreteOracle(codes, [len(levels[v]) for v in cols], cols, test="g2")
        marks = np.zeros((len(names), len(names)), dtype=np.int8)
        idx = [names.index(v) for v in cols]
        marks[np.ix_(idx, idx)] = fci(oracle, 0.05).graph.marks
        out.append(marks)
        ids.append(idx)
    return out, ids


def test_baselines_recomputed_from_the_clients_own_fci(discrete_setting):
    _, _, part, runs = discrete_setting
    names = runs["fci-base"].variables
    graphs, ids = local_graphs(part, names)
    sizes = part.sizes
    d = len(names)
    for i in range(d):
        for j in range(i + 1, d):
            voters = [k for k in range(len(graphs)) if i in ids[k] and j in ids[k]]
            yes = [k for k in voters if graphs[k][i, j] != NONE]
            weighted = sum(sizes[k] for k in yes) > sum(sizes[k] for k in voters if k not in yes)
            assert (runs["fci-base"].graph.marks[i, j] != NONE) == weighted
            assert (runs["fedcdnv-vote"].graph.marks[i, j] != NONE) == (2 * len(yes) > len(voters))
            # each pair's edge votes: the (row-weighted for fci-base) share of the voters with it
            for method, share in (
                ("fci-base", sum(sizes[k] for k in yes) / max(1, sum(sizes[k] for k in voters))),
                ("fedcdnv-vote", len(yes) / max(1, len(voters))),
            ):
                votes = runs[method].extra["edge_votes"]
                found = {(x, y): v for x, y, v in votes["kept"] + votes["removed"]}
                assert found.get((names[i], names[j]), 0.0) == pytest.approx(share)
            if weighted:  # arrowheads: union over the clients reporting the edge
                for a, b in ((i, j), (j, i)):
                    arrow = any(graphs[k][a, b] == ARROW for k in yes)
                    assert (runs["fci-base"].graph.marks[a, b] == ARROW) == arrow
    # G0 is the union of the same local graphs, for every method
    g0 = Graph.from_json(runs["fedcdnv"].extra["g0"])
    assert np.array_equal(g0.adjacency(), np.any([g != NONE for g in graphs], axis=0))


def test_fedcdnv_decides_exactly_the_disagreements(discrete_setting):
    _, _, part, runs = discrete_setting
    result = runs["fedcdnv"]
    names = result.variables
    graphs, ids = local_graphs(part, names)
    learned = result.graph.marks != NONE
    decided = {d["pair"] for d in result.extra["decisions"]}
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            voters = [k for k in range(len(graphs)) if i in ids[k] and j in ids[k]]
            yes = [k for k in voters if graphs[k][i, j] != NONE]
            pair = f"{names[i]}|{names[j]}"
            if 0 < len(yes) < len(voters):
                assert pair in decided
            else:
                assert pair not in decided and learned[i, j] == (len(yes) == len(voters) > 0)
    for d in result.extra["decisions"]:
        assert d["level"] == 1 or d["adjacent"] == (d["value"] > 0)
    # FeddG: exactly FedG's edges on the pairs the status matrix calls definite (stat = +2),
    # marks kept; every stat = +1 / -1 edge of FedG is left out. This setting has both kinds.
    feddg = Graph.from_json(result.extra["feddg"])
    status = np.asarray(result.extra["status"])
    fedg_adjacent = result.graph.adjacency()
    assert np.any(fedg_adjacent & (status == 2)) and np.any(fedg_adjacent & (np.abs(status) == 1))
    assert np.array_equal(feddg.adjacency(), fedg_adjacent & (status == 2))
    assert np.all(result.graph.marks[feddg.adjacency()] == feddg.marks[feddg.adjacency()])
    upper = np.triu(np.ones_like(status, dtype=bool), k=1)
    assert result.extra["definite_edges"] == int(np.sum(upper & fedg_adjacent & (status == 2)))
    assert result.extra["definite_non_edges"] == int(
        np.sum(upper & ~fedg_adjacent & (status == -2))
    )


def test_ledger_shows_what_the_server_saw(discrete_setting):
    _, _, _, runs = discrete_setting
    ledger = {e["kind"]: e for e in runs["fedcdnv"].ledger}
    assert [a["dtype"] for a in ledger["fcdnv_init"]["arrays"]] == ["int64", "int8"]
    dtypes = [a["dtype"] for a in ledger["fcdnv_update"]["arrays"]]
    assert dtypes == ["int64", "int8", "float64", "int64"]  # ids, PAG, p-values, sepsets
    assert "n_rows" in ledger["fcdnv_init"]["meta_keys"]
    vote = {e["kind"]: e for e in runs["fedcdnv-vote"].ledger}
    assert [a["dtype"] for a in vote["fcdnv_update"]["arrays"]] == ["int64", "int8"]
    assert [e["kind"] for e in runs["fci-base"].ledger] == ["hello", "fcdnv_init"]
    assert runs["fedcdnv"].rounds == 3 and runs["fci-base"].rounds == 2


def test_scores_read_the_definite_pairs_from_the_status_matrix():
    """FDR-C over all learned edges, FDR-dC over those with stat = 2, FDR-nC / -dnC likewise."""
    names = ("a", "b", "c", "d")
    truth = Graph.from_edges(names, [("a", "b", "tail", "arrow"), ("c", "d", "circle", "circle")])
    learned = Graph.from_edges(
        names, [("a", "b", "circle", "arrow"), ("a", "c", "circle", "circle")], kind="PAG"
    )
    status = np.array([[0, 2, 1, -2], [2, 0, -1, -2], [1, -1, 0, 2], [-2, -2, 2, 0]])
    result = Result(
        method="fedcdnv",
        config={},
        variables=list(names),
        graph=learned,
        extra={"status": status.tolist()},
    )
    scores = score_result(result, Graph(names, truth.marks, "PAG"))
    assert scores["adj_precision"] == 0.5 and scores["adj_recall"] == 0.5
    assert scores["arrow_precision"] == 1.0 and scores["arrow_recall"] == 1.0
    assert scores["fdr_c"] == 0.5  # a - c is wrong
    assert scores["fdr_dc"] == 0.0  # among stat = 2 pairs only a - b is learned
    assert scores["fdr_nc"] == 0.25  # c - d missed among 4 learned non-edges
    assert scores["fdr_dnc"] == 0.0  # a - d, b - d: truly absent


def test_round_two_reuses_round_one_from_the_node_state(discrete_setting, monkeypatch):
    _, _, part, runs = discrete_setting
    calls = []
    original = client_module.local_fci

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(client_module, "local_fci", counting)
    again = run_method("fedcdnv", part.clients, {}, backend="inprocess")
    assert len(calls) == 3  # one FCI per client, although two rounds need it
    assert again.graph == runs["fedcdnv"].graph
    # without a node state (a bare client), round 2 recomputes the same FCI
    strategy_payload = {
        "variables": again.variables,
        "levels": {
            v: sorted(pd.concat([f[v] for f in part.clients if v in f]).unique().tolist())
            for v in again.variables
        },
        "test": "g2",
        "alpha": 0.05,
        "fci": {
            "max_depth": None,
            "possible_dsep": "sequential",
            "pds_max_size": None,
            "rules": "zhang",
        },
    }
    bare = FedCDnvClient(0, part.clients[0])
    first = bare.answer("fcdnv_init", strategy_payload, [])[0]
    g0 = Graph.from_json(again.extra["g0"]).marks
    update = {
        **strategy_payload,
        "update_depth": 3,
        "update_rules": False,
        "theta1": 0.049,
        "theta2": 0.45,
        "send_statistics": True,
    }
    arrays, meta = bare.answer("fcdnv_update", update, [g0])
    assert np.array_equal(arrays[0], first[0]) and len(arrays) == 4
    assert np.array_equal(arrays[1] != NONE, first[1] != NONE)


class ExtraEdgeClient(FedCDnvClient):
    """Test-only: adds an edge in C-Update (a protocol violation)."""

    def update(self, payload, arrays):
        out, meta = super().update(payload, arrays)
        marks = out[1].copy()
        empty = np.argwhere(np.triu(marks == NONE, k=1))[0]
        marks[empty[0], empty[1]] = marks[empty[1], empty[0]] = CIRCLE
        return [out[0], marks, *out[2:]], meta


def test_protocol_violations_and_bad_input_are_clear_errors():
    rng = np.random.default_rng(1)
    frames = [
        pd.DataFrame(rng.integers(0, 2, (50, len(c))), columns=c)
        for c in (["a", "b", "c"], ["b", "c"])
    ]
    factory = PartitionedClients(ExtraEdgeClient, frames)
    with pytest.raises(ClientProtocolError, match="changed adjacencies"):
        run_protocol(make_strategy({}, "fedcdnv"), factory, 2)
    floats = [frames[0], frames[1].astype(float)]
    with pytest.raises(ValueError, match="client 1 column 'b'.*not discrete"):
        run_method("fedcdnv", floats, {}, backend="inprocess")
    constant = [frames[0].assign(a=0), frames[1]]
    with pytest.raises(ValueError, match=r"column 'a' is constant \(0\) over all clients"):
        run_method("fci-base", constant, {}, backend="inprocess")
    with pytest.raises(ValueError, match="unknown method"):
        make_strategy({}, "fedcdnv-typo")
    with pytest.raises(ValueError, match="level1"):
        make_strategy({"level1": "both"}, "fedcdnv")


def test_declared_options_reach_the_tpss_options_from_strings():
    strategy = make_strategy(
        {"clip_w": "true", "theta2": "0.3", "update_depth": "-1", "level1": "any"}, "fedcdnv"
    )
    parsed = strategy.options
    assert parsed.clip_w and parsed.theta2 == 0.3 and parsed.update_depth is None
    assert parsed.level1 == "any" and parsed.band == (0.001, 0.35)
    with pytest.raises(OptionError, match="option clip_w: expected true or false"):
        make_strategy({"clip_w": "maybe"}, "fedcdnv")
    with pytest.raises(OptionError, match="theta1=0.06 must be below alpha=0.05"):
        make_strategy({"theta1": 0.06}, "fedcdnv")
    # TPSS's own options do not apply to the baselines: an error, not silence
    with pytest.raises(OptionError, match="method 'fci-base' has no option 'theta1'"):
        make_strategy({"theta1": 0.01}, "fci-base")
    assert make_strategy({"alpha": 0.01}, "fedcdnv-vote").options.alpha == 0.01
