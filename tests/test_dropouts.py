"""The dropout matrix: every registered method survives a client that drops out at any of its
actions (hello, then each action kind), or stops with the reason when too few clients remain.

For every method of ``builtin_methods()`` (plus the variants that use other actions: FedPC with
``ci=sketch`` and with ``test=fisherz``, fedCI with ``ci=fisher``) a normal in-process run on 3
clients gives the method's action sequence (``Result.log``); then, for each distinct action,
client 1 raises an ordinary exception (a dropout, not a ``ProtocolError``) the first time it is
asked that action:

* with ``min_clients=2`` the run finishes with a graph; ``Result.dropped_clients`` lists client 1
  with the round, the action and the reason; the request is re-issued to clients 0 and 2 and
  nobody asks client 1 anything again;
* with ``min_clients=3`` it stops with :class:`TooFewClientsError` naming client 1, the action and
  the reason.

At ``hello`` the server knows nodes, not partition ids, yet a failing client's error reply names
its partition id (the ClientApp's error mod reads it from the node config): the record names
client 1 and its node. Client 1's rows are shuffled column by
column (no dependencies), so its statistics would change most answers: a dropout before any
statistic is exchanged (at ``hello``, or at the first action after it) must give exactly the
answer (graph, metrics, extra fields other than work counters) of clients 0 and 2 alone from the
start, with their partition ids. Methods that sum through SecAgg+ repeat their dropouts in a
secure run. The sketch restart (FedPC ``ci=sketch``) and the fedCI restart (a dropout inside an
IRLS batch) have their own tests. One Ray case is marked ``slow``; the deployment
case (a SuperNode killed after hello) is in ``tests/test_federation_deploy.py``.

The failing client is built generically: :class:`FailAt` wraps a method's ``make_client`` and
replaces the client's ``answer`` (which ``ProtocolClient.fit`` dispatches every action to,
``hello`` included), so a new method is covered without a line here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import pytest

from fedcausal_flwr.data import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.data.schema import Schema
from fedcausal_flwr.data.synthetic import random_dag, random_gaussian_network, simulate_mixed
from fedcausal_flwr.federation.core.messages import HELLO, TooFewClientsError
from fedcausal_flwr.federation.core.registry import builtin_methods, get_method
from fedcausal_flwr.federation.runtime.localgrid import FIRST_NODE_ID, run_local
from fedcausal_flwr.federation.runtime.runners import (
    BoundClientMaker,
    PartitionedClients,
    run_protocol,
)
from fedcausal_flwr.federation.runtime.workflow import make_client_app, make_server_app
from fedcausal_flwr.protocols.fedci import GLM
from fedcausal_flwr.protocols.fedpc import MARGINS, SKETCH
from fedcausal_flwr.result import Result
from fedcausal_flwr.stats.glm import ClientTable, ci_test_inprocess
from tests.helpers import slow_when

REPO_ROOT = Path(__file__).resolve().parents[1]
FAILING = 1  # the partition that drops out
SURVIVORS = (0, 2)


# ============================================================================ the failing client
class SiteWentAway(ConnectionError):
    """What a site that loses its connection raises: an ordinary exception, i.e. a dropout."""


def reason_text(partition_id: int, action: str) -> str:
    return f"site {partition_id} went away during {action}"


class Call(NamedTuple):
    """One message a client was asked to answer."""

    pid: int
    action: str
    payload: dict
    arrays: list


class FailAt:
    """``make_client(partition_id, data)`` whose client ``client`` raises at an action.

    The wrapped client's ``answer`` (every action goes through it, ``hello`` included) raises
    :class:`SiteWentAway` the ``occurrence``-th time partition ``client`` is asked ``action``
    (``action=None``: never). ``calls`` records every message (:class:`Call`) in order; it lives
    in this object, so counting needs the in-process backend (Ray actors get copies): use
    ``occurrence=1`` elsewhere. Picklable for Ray.
    """

    def __init__(
        self,
        make_client: Callable,
        action: str | None = None,
        client: int = FAILING,
        occurrence: int = 1,
    ):
        self.make_client = make_client
        self.action = action
        self.client = client
        self.occurrence = occurrence
        self.calls: list[Call] = []

    def __call__(self, partition_id: int, data: pd.DataFrame, context=None):
        inner = self.make_client(partition_id, data, context)
        answer = inner.answer

        def failing_answer(name, payload, arrays):
            self.calls.append(Call(partition_id, name, payload, list(arrays)))
            if partition_id == self.client and name == self.action:
                asked = sum(1 for c in self.calls if (c.pid, c.action) == (partition_id, name))
                if asked == self.occurrence:
                    raise SiteWentAway(reason_text(partition_id, name))
            return answer(name, payload, arrays)

        inner.answer = failing_answer  # an instance attribute: ProtocolClient.fit calls it
        return inner

    def calls_after_failure(self) -> list[Call]:
        """The messages after the failing one."""
        target = (self.client, self.action)
        hits = [i for i, c in enumerate(self.calls) if (c.pid, c.action) == target]
        assert len(hits) >= self.occurrence, f"{target} asked {len(hits)} times"
        return self.calls[hits[self.occurrence - 1] + 1 :]


# ============================================================================ cases and data
def scrambled(parts: list[pd.DataFrame]) -> tuple[pd.DataFrame, ...]:
    """Client 1's columns each shuffled on their own (same values and levels, no dependencies):
    a result that still used any of its statistics after it dropped out would show it."""
    rng = np.random.default_rng(5)
    frame = parts[FAILING].copy()
    for col in frame.columns:
        values = frame[col].iloc[rng.permutation(len(frame))]
        values.index = frame.index
        frame[col] = values
    return tuple(frame if k == FAILING else part for k, part in enumerate(parts))


@cache
def discrete_parts() -> tuple[pd.DataFrame, ...]:
    net = load_network("asia")
    return scrambled(split_iid(net.sample(1_500, seed=1), 3, seed=0).clients)


@cache
def subset_parts() -> tuple[pd.DataFrame, ...]:
    """Non-identical variable sets (the fedcdnv family): client 0 sees all, 1 and 2 one less."""
    a, b, c = discrete_parts()
    return a, b.drop(columns=["dysp"]), c.drop(columns=["asia"])


MIXED_TYPES = ("continuous", "binary", "continuous", "categorical", "continuous")


@cache
def mixed_parts() -> tuple[pd.DataFrame, ...]:
    dag = random_dag(5, expected_degree=2.0, seed=1)
    types = dict(zip(dag.names, MIXED_TYPES, strict=True))
    pooled = simulate_mixed(dag, 600, seed=1, types=types, n_levels=3)
    return scrambled([pooled.iloc[k::3].reset_index(drop=True) for k in range(3)])


@cache
def gaussian_parts() -> tuple[pd.DataFrame, ...]:
    dag = random_dag(6, 2, seed=0)
    data = random_gaussian_network(dag, seed=0).sample(900, seed=0)
    return scrambled(split_iid(data, 3, seed=0).clients)


@cache
def wide_parts() -> tuple[pd.DataFrame, ...]:
    """Six-level columns, 60 rows per client: tables larger than a client's data, which FedPC
    counts sparsely (the ``sparse_tables`` action)."""
    rng = np.random.default_rng(3)
    n = 180
    a = rng.integers(0, 6, n)
    b = (a + rng.integers(0, 2, n)) % 6
    c = (b + rng.integers(0, 2, n)) % 6
    d = (c + rng.integers(0, 2, n)) % 6
    frame = pd.DataFrame({"a": a, "b": b, "c": c, "d": d})
    return scrambled([frame.iloc[k::3].reset_index(drop=True) for k in range(3)])


DATA = {
    "discrete": discrete_parts,
    "wide": wide_parts,
    "subsets": subset_parts,
    "mixed": mixed_parts,
    "gaussian": gaussian_parts,
}
#: Options that keep a method fast or that it requires; data kinds other than "discrete".
METHOD_OPTIONS = {
    "fedecd": {"bootstraps": 2, "tabu_length": 10, "max_barren": 3},
    "fedlcs": {"target": "either"},
    "fedlcs-local": {"target": "either"},
    "lcs-pooled": {"target": "either"},
    # a few ADMM iterations (the defaults run about 200 rounds)
    "notears-admm": {"rho1_growth": 4.0, "rho2_growth": 2.0, "rho_max": 1e12, "max_iter": 8},
}
METHOD_DATA = {
    "fedci-pc": "mixed",
    "fedci-fci": "mixed",
    "fedcdnv": "subsets",
    "fedcdnv-vote": "subsets",
    "fci-base": "subsets",
}
#: Option variants whose clients answer other actions than the defaults do.
VARIANTS = (
    ("fedpc", {"ci": "sketch"}, "discrete"),
    ("fedpc", {"test": "g2"}, "wide"),  # sparse tables
    ("fedpc", {"test": "fisherz"}, "gaussian"),
    ("fedpc", {"test": "fisherz", "missing": "testwise"}, "gaussian"),  # query moments
    ("fedci-pc", {"ci": "fisher"}, "mixed"),
    ("fedpc", {"bootstrap": 2}, "discrete"),  # the built-in bootstrap action
)


@dataclass(frozen=True)
class Case:
    method: str
    options: dict = field(default_factory=dict, hash=False)
    data: str = "discrete"

    @property
    def id(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in self.options.items() if k not in _fast_keys(self))
        return f"{self.method}[{extra}]" if extra else self.method

    def partitions(self) -> list[pd.DataFrame]:
        return list(DATA[self.data]())


def _fast_keys(case: Case) -> set[str]:
    return set(METHOD_OPTIONS.get(case.method, {}))


def matrix_cases() -> list[Case]:
    cases = [
        Case(m, dict(METHOD_OPTIONS.get(m, {})), METHOD_DATA.get(m, "discrete"))
        for m in builtin_methods()
    ]
    cases += [Case(m, {**METHOD_OPTIONS.get(m, {}), **o}, d) for m, o, d in VARIANTS]
    return cases


CASES = matrix_cases()


def run_case(
    case: Case,
    maker: FailAt | None = None,
    *,
    min_clients: int | None = None,
    parts: list[pd.DataFrame] | None = None,
    **run_kwargs,
) -> Result:
    """One in-process run of ``case`` through ``run_protocol``, its clients built by ``maker``."""
    spec = get_method(case.method)
    options = spec.resolve(case.options)
    maker = maker or FailAt(BoundClientMaker(spec.make_client, spec.own_options(options)))
    parts = parts if parts is not None else case.partitions()
    return run_protocol(
        spec.new_strategy(options),
        PartitionedClients(maker, parts),
        len(parts),
        min_clients=min_clients,
        **run_kwargs,
    )


def failing_maker(case: Case, action: str | None, occurrence: int = 1) -> FailAt:
    spec = get_method(case.method)
    options = spec.resolve(case.options)
    return FailAt(
        BoundClientMaker(spec.make_client, spec.own_options(options)), action, FAILING, occurrence
    )


def survivors_run(case: Case) -> Result:
    """``case`` on clients 0 and 2 alone from the start, with their partition ids (so anything
    keyed by partition id, e.g. bootstrap seeds or site effects, is the same as after client 1
    dropped out)."""
    spec = get_method(case.method)
    options = spec.resolve(case.options)
    strategy = spec.new_strategy(options)
    maker = FailAt(BoundClientMaker(spec.make_client, spec.own_options(options)))
    app = make_server_app(strategy, num_clients=len(SURVIVORS))
    nodes = [{"partition-id": k, "num-partitions": 3} for k in SURVIVORS]
    run_local(app, make_client_app(PartitionedClients(maker, case.partitions())), 2, None, nodes)
    return strategy.build_result()


@cache
def baseline(case: Case) -> Result:
    """``case`` without a dropout."""
    return run_case(case)


def actions_of(result: Result) -> list[str]:
    return [entry["action"] for entry in result.log]


def steps_of(result: Result) -> list[tuple[str, str, int]]:
    return [(e["action"], e["status"], e["n_clients"]) for e in result.log]


# ============================================================================ the matrix
#: (case id, action) pairs known to fail, with the reason: asserted to still fail (strict).
KNOWN_BUGS: dict[tuple[str, str], str] = {}
#: ``Result.extra`` keys that count work or time rather than describe the answer: after a dropout
#: the survivors answered the failed round twice (and a cache may have served the second time).
WORK_KEYS = {
    "fedecd": {"score_seconds"},
    "fedlcs": {"client_tests", "tests"},
    # per-client reports: the dropped client stays listed (from its hello)
    "fedcdnv": {"clients"},
    "fedcdnv-vote": {"clients"},
    "fci-base": {"clients"},
    "fedci-iod": {"enumeration_seconds"},
    "iod-fisher": {"enumeration_seconds"},
    "iod-pooled": {"enumeration_seconds"},
}


def without_rounds(value):
    """``value`` without ``round`` fields (a dropout shifts later round numbers by one)."""
    if isinstance(value, dict):
        return {k: without_rounds(v) for k, v in value.items() if k != "round"}
    if isinstance(value, list):
        return [without_rounds(v) for v in value]
    return value


def answer_of(case: Case, result: Result) -> dict:
    """What a run learned: graph, variables, metrics and the extra fields that are not work."""
    skip = WORK_KEYS.get(case.method, set())
    return {
        "graph": result.graph,
        "variables": result.variables,
        "metrics": result.metrics,
        "extra": without_rounds({k: v for k, v in result.extra.items() if k not in skip}),
    }


@pytest.fixture(scope="module")
def timings():
    """Seconds per case (printed at the end with ``pytest -s``)."""
    spent: dict[str, tuple[float, list[str], int]] = {}
    yield spent
    total = sum(s for s, _, _ in spent.values())
    print(f"\ndropout matrix: {len(spent)} cases, {total:.1f} s")
    for name, (seconds, actions, n_rounds) in sorted(spent.items()):
        print(f"  {name:22s} {n_rounds:3d} rounds {seconds:5.2f} s  {', '.join(actions)}")


def check_survives(case: Case, normal: Result, action: str) -> Result:
    """Client 1 drops out the first time it is asked ``action``; 2 of 3 clients suffice."""
    maker = failing_maker(case, action)
    result = run_case(case, maker, min_clients=2)
    # the runs are identical up to the first round that asks client 1 for `action`
    first = next(e for e in normal.log if e["action"] == action)
    assert first["n_clients"] == 3, f"client 1 not asked in round {first['round']} ({action})"
    where = first["round"]
    assert result.graph is not None
    assert len(result.dropped_clients) == 1, result.dropped_clients
    dropped = result.dropped_clients[0]
    assert (dropped["round"], dropped["action"]) == (where, action)
    assert reason_text(FAILING, action) in dropped["reason"]
    assert dropped["client"] == FAILING
    if action == HELLO:  # before hello the server knows nodes: the reply named its client
        assert dropped["node"] == FIRST_NODE_ID + FAILING
    # the round is closed as a dropout, then the same request goes to the survivors (a sketch
    # batch restarts from its margins)
    log = result.log
    assert [e["round"] for e in log] == list(range(1, len(log) + 1))
    assert log[where - 1]["status"] == "dropout" and log[where - 1]["n_clients"] == 3
    assert log[where]["action"] == (MARGINS if action == SKETCH else action)
    after = log[where:]
    assert all(e["status"] == "ok" and e["n_clients"] <= 2 for e in after), after
    assert all(e["n_clients"] <= 2 for e in result.ledger if e["round"] > where)
    assert result.config["data"]["clients"] == (2 if action == HELLO else 3)
    # nobody asked client 1 anything after it dropped out; both survivors went on
    later = maker.calls_after_failure()
    assert {c.pid for c in later} == set(SURVIVORS), [c[:2] for c in later]
    return result


def check_stops(case: Case, action: str, where: int) -> None:
    """With ``min_clients=3`` the same dropout stops the run, naming client, action, reason."""
    who = f"client {FAILING}"  # at hello too: the error reply names its client
    with pytest.raises(TooFewClientsError) as err:
        run_case(case, failing_maker(case, action), min_clients=3)
    message = str(err.value)
    assert "2 clients remain but min_clients=3" in message
    assert f"{who} dropped in round {where} ({action!r})" in message
    assert reason_text(FAILING, action) in message


#: the IOD methods' cases (a list of PAGs per run, 8-15 s each) run with the slow tests
IOD_METHODS = ("fedci-iod", "iod-fisher", "iod-pooled")


@pytest.mark.parametrize(
    "case", slow_when(CASES, lambda c: c.method in IOD_METHODS, ids=lambda c: c.id)
)
def test_dropout_at_every_action(case, timings):
    """Client 1 drops out at each action of ``case`` in turn (see the module docstring)."""
    start = time.perf_counter()
    normal = baseline(case)
    actions = list(dict.fromkeys(actions_of(normal)))
    assert actions[0] == HELLO and len(actions) >= 2, actions
    assert normal.dropped_clients == [] and normal.graph is not None
    survivors = None
    failures = {}
    for action in actions:
        try:
            result = check_survives(case, normal, action)
            where = result.dropped_clients[0]["round"]
            check_stops(case, action, where)
            if where <= 2:  # client 1 sent nothing but (perhaps) its hello report
                survivors = survivors or survivors_run(case)
                assert answer_of(case, result) == answer_of(case, survivors)
        except Exception as err:
            failures[action] = f"{type(err).__name__}: {err}"
    timings[case.id] = (time.perf_counter() - start, actions, normal.rounds)
    expected = {a: why for (c, a), why in KNOWN_BUGS.items() if c == case.id}
    unexpected = {a: f for a, f in failures.items() if a not in expected}
    assert not unexpected, "\n".join(f"{case.id} at {a!r}: {f}" for a, f in unexpected.items())
    fixed = [a for a in expected if a not in failures]
    assert not fixed, f"known bugs of {case.id} no longer fail at {fixed}: update KNOWN_BUGS"


def test_matrix_covers_every_action_of_every_builtin_client():
    """Each action a built-in method's client answers is some case's action (so a new action
    needs a new variant in VARIANTS)."""
    answered = set()
    for case in CASES:
        spec = get_method(case.method)
        client = spec.make_client(
            0, case.partitions()[0], spec.own_options(spec.resolve(case.options))
        )
        answered |= set(client.known_actions())
    covered = {a for case in CASES for a in actions_of(baseline(case))}
    assert answered - covered == set()


def sums_securely(case: Case) -> bool:
    spec = get_method(case.method)
    return spec.secure_problem(spec.resolve(case.options)) is None


#: (the wide case's plain run sends sparse tables where a secure run sums dense ones, so their
#: logs differ by design; fedpc's default case covers secure tables)
SECURE_CASES = [case for case in CASES if sums_securely(case) and case.data != "wide"]


@pytest.mark.parametrize(
    "case", slow_when(SECURE_CASES, lambda c: c.method in IOD_METHODS, ids=lambda c: c.id)
)
def test_dropout_under_secagg(case):
    """Methods that sum through SecAgg+: a client raising inside the secure round is dropped
    and the sum is asked again of the survivors, as in a plain run (same record, same rounds,
    same graph; fedCI's fixed-point sums change p-values only far below alpha)."""
    for action in list(dict.fromkeys(actions_of(baseline(case))))[1:]:
        secure = run_case(case, failing_maker(case, action), min_clients=2, secure=True)
        plain = run_case(case, failing_maker(case, action), min_clients=2)

        def record(result):
            return [(d["client"], d["round"], d["action"]) for d in result.dropped_clients]

        assert record(secure) == record(plain) and len(record(secure)) == 1
        assert reason_text(FAILING, action) in secure.dropped_clients[0]["reason"]
        assert steps_of(secure) == steps_of(plain)
        assert secure.graph == plain.graph
        where = secure.dropped_clients[0]["round"]
        after = [e for e in secure.ledger if e["round"] > where and e["summed"]]
        assert after and all(e["secure"] and e["n_clients"] == 2 for e in after)


@pytest.mark.parametrize("method", ["fedcdnv", "fedcdnv-vote", "fci-base"])
def test_local_fci_test_counts_after_a_reissued_init_round(method):
    """The survivors' local FCI test counts are those of their local FCI (as in a run of the
    survivors alone), not 0 because the re-issued request hit the node's state."""
    case = next(c for c in CASES if c.id == method)
    result = run_case(case, failing_maker(case, "fcdnv_init"), min_clients=2)

    def counts(run: Result) -> dict:
        return {k: run.extra["clients"][str(k)]["init_tests"] for k in SURVIVORS}

    assert counts(result) == counts(survivors_run(case))


# ============================================================================ the sketch restart
SKETCH_CASE = Case("fedpc", {"ci": "sketch"})


def same_clients_per_batch(result: Result) -> None:
    """Each sketch sum comes from the clients of the margins sum just before it (a margins sum
    whose sketch round lost a client is abandoned: the next summed entry is margins again)."""
    summed = [e for e in result.ledger if e["summed"]]
    assert summed[0]["kind"] == MARGINS
    abandoned = 0
    for before, entry in zip(summed, summed[1:], strict=False):
        if entry["kind"] == SKETCH:
            assert before["kind"] == MARGINS, summed
            assert before["n_clients"] == entry["n_clients"], (before, entry)
        else:
            abandoned += before["kind"] == MARGINS
    assert summed[-1]["kind"] == SKETCH
    assert abandoned == sum(1 for d in result.dropped_clients if d["action"] == SKETCH)


def test_sketch_dropout_restarts_the_batch_from_its_margins():
    """A dropout between a batch's margins and sketch rounds: the batch restarts from its margins
    with the survivors, so every sum of the batch comes from the same clients. In the first
    batch, nothing client 1 sent is left in the run: it equals a run on clients 0 and 2 alone."""
    maker = failing_maker(SKETCH_CASE, SKETCH)
    result = run_case(SKETCH_CASE, maker, min_clients=2)
    assert [(d["client"], d["round"], d["action"]) for d in result.dropped_clients] == [
        (FAILING, 3, SKETCH)
    ]
    assert steps_of(result)[:5] == [
        (HELLO, "ok", 3),
        (MARGINS, "ok", 3),
        (SKETCH, "dropout", 3),
        (MARGINS, "ok", 2),
        (SKETCH, "ok", 2),
    ]
    assert [e.get("batch") for e in result.log[1:5]] == [0, None, 0, 0]  # batch 0 restarted
    same_clients_per_batch(result)
    assert all(e["n_clients"] == 2 for e in result.ledger if e["round"] > 3)
    # the same answer as clients 0 and 2 from the start: same projections (the seed depends on
    # the batch index only), K = 2 in the sketch, the same margins
    alone = survivors_run(SKETCH_CASE)
    assert answer_of(SKETCH_CASE, result) == answer_of(SKETCH_CASE, alone)
    parts = SKETCH_CASE.partitions()
    renumbered = run_case(SKETCH_CASE, parts=[parts[k] for k in SURVIVORS])
    assert result.graph == renumbered.graph
    assert result.evidence == renumbered.evidence
    # client 1's statistics would have changed the answer (its rows carry no dependencies)
    assert answer_of(SKETCH_CASE, baseline(SKETCH_CASE)) != answer_of(SKETCH_CASE, alone)


def test_sketch_dropout_in_a_later_batch_restarts_that_batch():
    """Client 1 drops out at the second batch's sketch: earlier batches keep their 3-client sums,
    the second restarts from its margins with 2, and no batch mixes client sets."""
    normal = baseline(SKETCH_CASE)
    second = [e for e in normal.log if e["action"] == SKETCH][1]
    result = run_case(SKETCH_CASE, failing_maker(SKETCH_CASE, SKETCH, occurrence=2), min_clients=2)
    where = second["round"]
    assert [(d["client"], d["round"], d["action"]) for d in result.dropped_clients] == [
        (FAILING, where, SKETCH)
    ]
    steps = steps_of(result)
    assert steps[: where - 1] == steps_of(normal)[: where - 1]
    assert steps[where - 2 : where + 2] == [
        (MARGINS, "ok", 3),
        (SKETCH, "dropout", 3),
        (MARGINS, "ok", 2),
        (SKETCH, "ok", 2),
    ]
    assert result.log[where]["batch"] == result.log[where - 2]["batch"] == second["batch"]
    assert result.log[where + 1]["batch"] == second["batch"]
    same_clients_per_batch(result)
    assert all(e["n_clients"] == 2 for e in result.ledger if e["round"] > where)
    done = second["batch"]  # batches decided before the dropout
    assert result.extra["batches"][:done] == normal.extra["batches"][:done]


# ============================================================================ the fedCI restart
FEDCI_CASE = Case("fedci-pc", {}, "mixed")


def test_fedci_dropout_inside_an_irls_batch_restarts_the_batch():
    """Client 1 drops out in the second IRLS round of the second batch: the batch restarts
    from fresh models with the survivors, so no model mixes client sets. Tests decided before
    the dropout are the 3-client pooled GLM tests; every test decided after it is the pooled
    test on clients 0 and 2."""
    normal = baseline(FEDCI_CASE)
    glm_rounds = [e for e in normal.log if e["action"] == GLM]
    batch = [e for e in glm_rounds if e["batch"] == 1]
    assert len(batch) >= 3, batch  # a round in the middle of the batch's IRLS
    target = batch[1]
    where = target["round"]
    maker = failing_maker(FEDCI_CASE, GLM, occurrence=glm_rounds.index(target) + 1)
    result = run_case(FEDCI_CASE, maker, min_clients=2)
    assert [(d["client"], d["round"], d["action"]) for d in result.dropped_clients] == [
        (FAILING, where, GLM)
    ]
    # up to the dropout the run is the baseline's; then batch 1 starts again with every model
    log = result.log
    fields = ("action", "status", "n_clients", "batch", "models")
    assert [[e.get(k) for k in fields] for e in log[: where - 1]] == [
        [e.get(k) for k in fields] for e in normal.log[: where - 1]
    ]
    assert (log[where - 1]["status"], log[where - 1]["n_clients"]) == ("dropout", 3)
    restart = log[where]
    assert (restart["action"], restart["n_clients"], restart["batch"]) == (GLM, 2, 1)
    assert restart["models"] == batch[0]["models"]  # fresh fits of all the batch's models
    assert all(e["n_clients"] == 2 for e in log[where:])
    # what the survivors were asked: before the dropout, models over clients 0, 1, 2; from the
    # restart on, models over 0 and 2 starting again from the batch's initial coefficients
    asked = [c for c in maker.calls if c.pid == 0 and c.action == GLM]
    assert len(asked) == len([e for e in log if e["action"] == GLM])  # one per glm round
    rounds = [e["round"] for e in log if e["action"] == GLM]
    by_round = dict(zip(rounds, asked, strict=True))
    for r, call in by_round.items():
        sites = {tuple(row[3]) for row in call.payload["models"]}
        assert sites == ({(0, 1, 2)} if r <= where else {SURVIVORS}), (r, sites)
    first, restarted = by_round[batch[0]["round"]], by_round[where + 1]
    assert [row[:3] for row in restarted.payload["models"]] == [
        row[:3] for row in first.payload["models"]
    ]
    np.testing.assert_array_equal(restarted.arrays[0], first.arrays[0])
    assert all(e["n_clients"] == 2 for e in result.ledger if e["round"] > where)
    assert result.extra["batches"][0] == normal.extra["batches"][0]
    assert result.extra["batches"][1]["round"] > where

    # tests decided before the dropout (batch 0) and after it (batch 1 on)
    parts = FEDCI_CASE.partitions()
    schema = Schema.infer(parts)
    tables = [ClientTable(frame, schema) for frame in parts]
    tests = result.extra["ci_tests"]
    n_before = result.extra["batches"][0]["tests"]
    assert tests[:n_before] == normal.extra["ci_tests"][:n_before]
    assert len(tests) > n_before
    for k, test in enumerate(tests):
        clients = [0, 1, 2] if k < n_before else list(SURVIVORS)
        assert test["clients"] == clients, test
        ref = ci_test_inprocess([tables[c] for c in clients], test["x"], test["y"], test["given"])
        assert test["p_value"] == pytest.approx(ref.p_value, rel=1e-9, abs=1e-300)
        assert test["n"] == ref.n
    # ... and the same as in a run of clients 0 and 2 from the start, where both ran the test
    alone = {(t["x"], t["y"], tuple(t["given"])): t for t in survivors_run(FEDCI_CASE).extra[
        "ci_tests"]}  # fmt: skip
    shared = [t for t in tests[n_before:] if (t["x"], t["y"], tuple(t["given"])) in alone]
    assert shared
    for test in shared:
        assert test == alone[(test["x"], test["y"], tuple(test["given"]))]


# ============================================================================ Ray
@pytest.mark.slow
def test_ray_dropout_gives_the_inprocess_result(monkeypatch):
    """FedPC with client 1 dropping out at its second action, on Flower's Ray engine: the same
    dropout record and answer as in-process (node ids are the engine's own)."""
    # Ray workers import the failing client factory by module name (tests.test_dropouts)
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    case = Case("fedpc")
    action = actions_of(baseline(case))[1]
    inprocess = run_case(case, failing_maker(case, action), min_clients=2)
    on_ray = run_case(case, failing_maker(case, action), min_clients=2, backend="ray")

    def record(result):  # Ray wraps the reason in its own traceback text
        return [(d["client"], d["round"], d["action"]) for d in result.dropped_clients]

    assert record(on_ray) == record(inprocess) == [(FAILING, 2, action)]
    assert reason_text(FAILING, action) in on_ray.dropped_clients[0]["reason"]
    assert answer_of(case, on_ray) == answer_of(case, inprocess)
    assert steps_of(on_ray) == steps_of(inprocess)
    assert on_ray.ledger == inprocess.ledger
