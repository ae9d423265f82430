"""A plain round's messages travel as one record (federation/runtime/envelope.py): what it
carries is exactly the legacy FitIns/FitRes, a site answers either form in kind, and a reply
that is not an envelope's form is a failure of the site that sent it, named."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.common import Code, FitIns, FitRes, Status, ndarrays_to_parameters, parameters_to_ndarrays

from fedcausal_flwr.federation.runtime.envelope import (
    NUM_EXAMPLES,
    RECORD,
    STATUS_CODE,
    TENSORS,
    EnvelopeError,
    fitins_of,
    fitins_record,
    fitres_of,
    fitres_record,
    is_enveloped,
)
from fedcausal_flwr.federation.runtime.flower_internals import (
    fitins_to_recorddict,
    fitres_to_recorddict,
    recorddict_to_fitres,
    set_task_identity,
)
from fedcausal_flwr.federation.runtime.localgrid import run_local
from fedcausal_flwr.federation.runtime.runners import PartitionedClients
from fedcausal_flwr.federation.runtime.workflow import RunSettings, make_client_app, make_server_app
from tests.test_federation_toy import ToyClient, ToyStrategy, toy_partitions, toy_reference

ARRAYS = [np.arange(6, dtype=np.int64).reshape(2, 3), np.array([0.5, -1.0])]
CONFIG = {"action": "colsum", "payload": '{"a": 1}', "round": 3, "secure": False, "blob": b"\x00"}


def objects(content: RecordDict) -> int:
    """How many objects a message with ``content`` is in a deployment (each is a request at
    every hop): the message, its RecordDict and what that holds."""
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

    return 1 + len(get_all_nested_objects(content))


def test_a_request_and_a_reply_carry_exactly_the_legacy_fields_in_three_objects():
    fitins = FitIns(ndarrays_to_parameters(ARRAYS), dict(CONFIG))
    back = fitins_of(fitins_record(fitins))
    assert back.config == CONFIG and back.parameters.tensor_type == "numpy.ndarray"
    for got, sent in zip(parameters_to_ndarrays(back.parameters), ARRAYS, strict=True):
        assert np.array_equal(got, sent) and got.dtype == sent.dtype
    fitres = FitRes(Status(Code.OK, "Success"), ndarrays_to_parameters(ARRAYS), 1, {"meta": "{}"})
    reply = fitres_of(fitres_record(fitres))
    assert (reply.status, reply.num_examples, reply.metrics) == (fitres.status, 1, {"meta": "{}"})
    assert reply.parameters.tensors == fitres.parameters.tensors
    # Flower's records are still read (the SecAgg+ rounds and Flower's DefaultWorkflow use them)
    legacy = fitres_of(fitres_to_recorddict(fitres, keep_input=True))
    assert (
        legacy.parameters.tensors == fitres.parameters.tensors and legacy.metrics == reply.metrics
    )
    # what a deployment moves per message: 3 objects, against 8 and 10 in Flower's records
    assert objects(fitins_record(fitins)) == objects(fitres_record(fitres)) == 3
    assert objects(fitins_to_recorddict(fitins, True)) == 8
    assert objects(fitres_to_recorddict(fitres, keep_input=True)) == 10


def test_the_envelopes_own_keys_cannot_be_overwritten_by_a_field():
    fitins = FitIns(ndarrays_to_parameters([]), {TENSORS: "x"})
    with pytest.raises(EnvelopeError, match="envelope's own key 'fedcausal.tensors'"):
        fitins_record(fitins)
    fitres = FitRes(Status(Code.OK, ""), ndarrays_to_parameters([]), 1, {NUM_EXAMPLES: 2})
    with pytest.raises(EnvelopeError, match="envelope's own key 'fedcausal.num-examples'"):
        fitres_record(fitres)


@pytest.mark.parametrize("drop", [STATUS_CODE, NUM_EXAMPLES, TENSORS])
def test_a_reply_missing_an_envelope_field_is_refused_by_name(drop):
    fitres = FitRes(Status(Code.OK, ""), ndarrays_to_parameters(ARRAYS), 1, {"meta": "secret"})
    content = fitres_record(fitres)
    del content[RECORD][drop]
    with pytest.raises(EnvelopeError, match=repr(drop)) as caught:
        fitres_of(content)
    assert "secret" not in str(caught.value)
    content[RECORD][drop] = True if drop != TENSORS else ["not bytes"]  # a bool is no integer
    with pytest.raises(EnvelopeError, match=repr(drop)):
        fitres_of(content)


def test_a_site_answers_each_form_in_kind_with_the_same_fitres():
    set_task_identity(1, 0)
    app = make_client_app(PartitionedClients(ToyClient, toy_partitions(1)))
    config = {"action": "hello", "payload": "{}", "round": 1, "secure": False, "secure_bound": 0}
    fitins = FitIns(ndarrays_to_parameters([]), config)

    def ask(content: RecordDict) -> Message:
        context = Context(1, 1, {"partition-id": 0, "num-partitions": 1}, RecordDict(), {})
        reply = app(Message(content, dst_node_id=1, message_type="train"), context)
        assert not reply.has_error(), reply.error
        return reply

    enveloped, legacy = ask(fitins_record(fitins)), ask(fitins_to_recorddict(fitins, True))
    assert is_enveloped(enveloped.content) and not is_enveloped(legacy.content)
    a, b = fitres_of(enveloped.content), recorddict_to_fitres(legacy.content, keep_input=False)
    assert (a.status, a.num_examples, a.metrics) == (b.status, b.num_examples, b.metrics)
    assert a.parameters.tensors == b.parameters.tensors


def test_a_malformed_reply_is_the_failure_of_the_site_that_sent_it():
    """Site 1's replies after hello lose their status code on the way out: it drops out, named,
    and the run's answers are the survivors' pooled answers."""
    parts = toy_partitions(3)
    client_app = make_client_app(PartitionedClients(ToyClient, parts))

    def corrupting(message: Message, context: Context) -> Message:
        action = message.content[RECORD]["action"]
        reply = client_app(message, context)
        if context.node_config["partition-id"] == 1 and action != "hello":
            content = reply.content
            del content[RECORD][STATUS_CODE]
            reply.content = content
        return reply

    strategy = ToyStrategy()
    server_app = make_server_app(strategy, RunSettings(num_clients=3, min_clients=2))
    run_local(server_app, corrupting, 3)  # type: ignore[arg-type]
    result = strategy.build_result()
    assert [d["client"] for d in result.dropped_clients] == [1]
    assert (
        "a malformed reply: the reply's 'fedcausal.status-code'"
        in result.dropped_clients[0]["reason"]
    )
    survivors = toy_reference({0: parts[0], 2: parts[2]}, [0, 2])
    assert result.extra["ssd"] == pytest.approx(survivors["ssd"])


def test_a_reply_in_neither_form_is_refused_without_its_content():
    content = RecordDict({"fitres.metrics": ConfigRecord({"meta": "secret"})})
    with pytest.raises(EnvelopeError, match="neither an envelope nor Flower's fit records") as e:
        fitres_of(content)
    assert "secret" not in str(e.value)


def test_a_record_that_is_not_a_config_record_is_no_envelope():
    content = RecordDict({RECORD: ConfigRecord({})})
    with pytest.raises(EnvelopeError, match="'fedcausal.tensors' is missing"):
        fitins_of(content)
