"""What the report and the console say the server held: derived from what each run did (plain or
SecAgg+, no noise, the server's noise or the sites' shares), never from what the method could do.

Every method family runs in process in each mode it has: FedPC/FedFCI's tables and fedCI's GLM
blocks plain and secure (FedPC also with central and distributed noise), the methods that send
local results plain (they have no secure mode: asking for one is refused).
"""

import html
import json
import re
from functools import cache

import pytest

import fedcausal_flwr
from fedcausal_flwr.options import OptionError
from fedcausal_flwr.report import ledger_section, ledger_summary, summed_actions
from fedcausal_flwr.server_held import (
    EACH,
    NOISY_SUM_ONLY,
    NOT_RECORDED,
    SUM_ONLY,
    SUMMED_BY_SERVER,
    run_mode,
)

DATA = {"network": "asia", "samples": 600, "clients": 3, "backend": "inprocess"}
VOTING = {
    "fedpc-vote": {},
    "fedecd": {},
    "pc-vote": {},
    "fedcdnv": {},
    "fedlcs": {"target": "dysp"},
}


@cache
def _record(method: str, secure: bool, **options) -> dict:
    """A compare run record of one in-process run, as a study's runs/*.json holds it."""
    result = fedcausal_flwr.run(method, secure=secure, **DATA, **options)
    saved = json.loads(json.dumps(result.to_json()))
    return {"status": "ok", "key": "k", "network": "asia", "n": 600, "K": 3, "partition": "iid",
            "seed": 0, "method": method, "result": saved, "summary": result.summary()}  # fmt: skip


def _held(record: dict) -> dict[str, list[str]]:
    """Each message kind's labels in the report's table of ``record``."""
    result = record["result"]
    rows = ledger_summary(result["ledger"], result["config"], summed_actions(result))
    held: dict[str, list[str]] = {}
    for kind, label, *_ in rows:
        held.setdefault(kind, []).append(label)
    return held


def _section(record: dict) -> str:
    return ledger_section([record], "k")


@pytest.mark.parametrize(
    ("method", "summed"), [("fedpc", "tables"), ("fedfci", "tables"), ("fedci-pc", "glm")]
)
def test_a_plain_run_says_the_server_held_each_clients_reply(method, summed):
    record = _record(method, False)
    held = _held(record)
    assert held[summed] == [SUMMED_BY_SERVER] and held["hello"] == [EACH]
    page = _section(record)
    assert "Plain run (no SecAgg+): the server held every client&#x27;s reply" in page
    # no row of a plain run says the server held a sum alone
    assert not re.search(r"<td class='name'>[^<]*sum only", page)
    assert f"{SUMMED_BY_SERVER}: {summed}" in record["summary"]
    assert "sum only" not in record["summary"]


@pytest.mark.parametrize(
    ("method", "summed"), [("fedpc", "tables"), ("fedfci", "tables"), ("fedci-pc", "glm")]
)
def test_a_secure_run_says_the_server_held_the_sum_only(method, summed):
    record = _record(method, True)
    assert record["result"]["config"]["run"]["secure"] is True
    held = _held(record)
    assert held[summed] == [SUM_ONLY] and held["hello"] == [EACH]
    page = _section(record)
    assert f"<td class='name'>{summed}</td><td class='name'>{SUM_ONLY}</td>" in page
    assert "Secure run: SecAgg+ summed the messages" in page and "Plain run" not in page
    assert f"{SUM_ONLY}: {summed}" in record["summary"]


@pytest.mark.parametrize(
    ("secure", "dp", "label", "said"),
    [
        (False, "central", SUMMED_BY_SERVER + ", then noised by the server", "(dp=central)"),
        (True, "central", SUM_ONLY + ", then noised by the server", "held them noiseless"),
        (True, "distributed", NOISY_SUM_ONLY, "never held a noiseless sum"),
    ],
)
def test_noise_is_said_as_the_run_placed_it(secure, dp, label, said):
    record = _record("fedpc", secure, dp=dp, dp_epsilon=8)
    assert _held(record)["tables"] == [label]
    page = _section(record)
    assert said in page and "target epsilon 8" in page  # the accountant's sentence stays
    assert label in record["summary"]


def test_a_run_without_noise_is_never_called_noisy():
    """dp_epsilon=inf: the sites add shares of variance 0, so the server holds the exact sum."""
    record = _record("fedpc", True, dp="distributed", dp_epsilon="inf")
    assert _held(record)["tables"] == [SUM_ONLY]
    assert run_mode(record["result"]["config"], record["result"]["ledger"]) == (True, None)
    said = _section(record).split("<p class='muted'>")[0]  # the legend apart
    assert "noisy" not in said and "noiseless" not in said and "release(s), no noise." in said


@pytest.mark.parametrize("method", sorted(VOTING))
def test_local_result_methods_say_each_clients_and_have_no_secure_mode(method):
    record = _record(method, False, **VOTING[method])
    held = _held(record)
    assert held and all(labels == [EACH] for labels in held.values()), held
    assert "sum" not in "".join(re.findall(r"<td class='name'>([^<]*)</td>", _section(record)))
    with pytest.raises(OptionError, match="secure=True does not apply"):
        fedcausal_flwr.run(method, secure=True, **DATA, **VOTING[method])


def test_a_record_that_does_not_say_whether_secagg_ran_is_not_recorded():
    """An older record without the run settings or the ledger's flags: a summed message is
    "not recorded", never "sum"; a message never summed is still each client's."""
    record = json.loads(json.dumps(_record("fedpc", True)))
    result = record["result"]
    del result["config"]["run"]["secure"]
    for entry in result["ledger"]:
        entry.pop("secure")
    held = _held(record)
    assert held["tables"] == [NOT_RECORDED] and held["hello"] == [EACH]
    page = _section(record)
    assert "does not say whether SecAgg+ ran" in page and SUM_ONLY not in page.split("<p")[0]
    # the run's recorded declaration, else the registration's, else the entries' own flags
    assert (
        summed_actions(result)
        == result["config"].pop("summed_actions")
        == ["margins", "sketch", "tables"]
    )
    assert summed_actions(result) == ["margins", "sketch", "tables"]
    result["method"] = result["config"]["method"] = "not-registered"
    assert summed_actions(result) is None
    assert _held(record)["tables"] == [NOT_RECORDED]


def test_a_plain_record_without_ledger_flags_is_read_from_its_run_settings():
    record = json.loads(json.dumps(_record("fedpc", False)))
    for entry in record["result"]["ledger"]:
        entry.pop("secure")
    assert _held(record)["tables"] == [SUMMED_BY_SERVER]


def test_compare_records_the_mode_its_report_reads(tmp_path):
    from fedcausal_flwr.compare import compare

    compare(["fedpc"], ["asia"], [3], samples=600, seeds=[0], out=tmp_path, progress=False,
            plots=False)  # fmt: skip
    (path,) = (tmp_path / "runs").glob("*.json")
    result = json.loads(path.read_text())["result"]
    assert result["config"]["run"]["secure"] is False
    assert run_mode(result["config"], result["ledger"]) == (False, None)
    page = (tmp_path / "report.html").read_text()
    held = html.escape(SUMMED_BY_SERVER)
    assert f"<td class='name'>tables</td><td class='name'>{held}</td>" in page
