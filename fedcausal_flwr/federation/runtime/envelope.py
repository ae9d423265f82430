"""One record per message in the plain rounds: a request's ``FitIns`` and a reply's ``FitRes``
travel as a single ``ConfigRecord``.

Flower's legacy conversion gives a ``FitIns`` two records and one ``Array`` object per tensor, and
a ``FitRes`` four records plus its tensors. In a deployment every one of those objects is a
request of its own, at each hop (ServerApp to SuperLink, SuperLink to SuperNode, SuperNode to the
ClientApp, and back): a plain round's messages were 6-10 objects each, and the SuperLink spent
most of a round serving them. Here a message is three objects (the message, its ``RecordDict``,
one record): the config's entries as they are, and the tensors as one list of bytes.

The SecAgg+ rounds keep Flower's own messages (its mods read them), and so does Flower's
``DefaultWorkflow``. A site reads both forms: its ``envelope_mod``
(:mod:`~fedcausal_flwr.federation.runtime.clientside`) turns an enveloped request into Flower's
legacy records before the ClientApp sees it, and the reply back into the envelope; anything else
passes through untouched. What a request may ask is checked after this, by the
client and its guard, exactly as for the legacy form: the envelope adds no field a coordinator
could not already send.
"""

from __future__ import annotations

from flwr.app import ConfigRecord, RecordDict
from flwr.common import Code, FitIns, FitRes, Parameters, Status

from fedcausal_flwr.federation.runtime.flower_internals import recorddict_to_fitres

#: the one record of an enveloped message
RECORD = "fedcausal"
#: the envelope's own keys (a request's config entries and a reply's metrics are the others)
TENSORS = "fedcausal.tensors"
TENSOR_TYPE = "fedcausal.tensor-type"
NUM_EXAMPLES = "fedcausal.num-examples"
STATUS_CODE = "fedcausal.status-code"
STATUS_MESSAGE = "fedcausal.status-message"
REQUEST_KEYS = frozenset({TENSORS, TENSOR_TYPE})
REPLY_KEYS = frozenset({TENSORS, TENSOR_TYPE, NUM_EXAMPLES, STATUS_CODE, STATUS_MESSAGE})
SCALARS = (bool, int, float, str, bytes)


class EnvelopeError(ValueError):
    """An enveloped message that does not have the envelope's form (says which key, no value)."""


def is_enveloped(content: RecordDict) -> bool:
    """Whether ``content`` is an envelope (its one record is :data:`RECORD`)."""
    return RECORD in content and len(content) == 1


def fitins_record(fitins: FitIns) -> RecordDict:
    """``fitins`` as one ``ConfigRecord``: its config's entries and its tensors."""
    entries = _entries(fitins.config, REQUEST_KEYS, "request config")
    entries.update(_tensor_entries(fitins.parameters))
    return RecordDict({RECORD: ConfigRecord(entries)})


def fitins_of(content: RecordDict) -> FitIns:
    """The ``FitIns`` an envelope (:func:`fitins_record`) carries."""
    record, parameters = _opened(content, REQUEST_KEYS, "request")
    config = _scalars(record, REQUEST_KEYS, "request")
    return FitIns(parameters=parameters, config=config)


def fitres_record(fitres: FitRes) -> RecordDict:
    """``fitres`` as one ``ConfigRecord``: its metrics, tensors, example count and status."""
    entries = _entries(fitres.metrics, REPLY_KEYS, "reply metrics")
    entries.update(_tensor_entries(fitres.parameters))
    entries[NUM_EXAMPLES] = int(fitres.num_examples)
    entries[STATUS_CODE] = int(fitres.status.code.value)
    entries[STATUS_MESSAGE] = str(fitres.status.message)
    return RecordDict({RECORD: ConfigRecord(entries)})


def fitres_of(content: RecordDict) -> FitRes:
    """The ``FitRes`` of a reply, enveloped (:func:`fitres_record`) or in Flower's records."""
    if not is_enveloped(content):
        try:
            return recorddict_to_fitres(content, keep_input=False)
        except (KeyError, TypeError, ValueError):  # a site's reply, whatever it holds
            raise EnvelopeError(
                "the reply is neither an envelope nor Flower's fit records"
            ) from None
    record, parameters = _opened(content, REPLY_KEYS, "reply")
    code, count = _integer(record, STATUS_CODE), _integer(record, NUM_EXAMPLES)
    message = record.get(STATUS_MESSAGE)
    if not isinstance(message, str):
        raise EnvelopeError(f"the reply's {STATUS_MESSAGE!r} is missing or not a string")
    try:
        status = Status(code=Code(code), message=message)
    except ValueError:
        raise EnvelopeError(f"the reply's {STATUS_CODE!r} is not a status code") from None
    metrics = _scalars(record, REPLY_KEYS, "reply")
    return FitRes(status=status, parameters=parameters, num_examples=count, metrics=metrics)


def _entries(values: dict, reserved: frozenset[str], what: str) -> dict:
    clash = sorted(set(values) & reserved)
    if clash:
        raise EnvelopeError(f"the {what} uses the envelope's own key {clash[0]!r}")
    return dict(values)


def _tensor_entries(parameters: Parameters) -> dict:
    return {TENSORS: [bytes(t) for t in parameters.tensors], TENSOR_TYPE: parameters.tensor_type}


def _opened(
    content: RecordDict, keys: frozenset[str], what: str
) -> tuple[ConfigRecord, Parameters]:
    """The envelope's record and its tensors, its form checked (key names only in errors)."""
    record = content[RECORD] if is_enveloped(content) else None
    if not isinstance(record, ConfigRecord):
        raise EnvelopeError(f"the {what} is not one ConfigRecord named {RECORD!r}")
    tensors, tensor_type = record.get(TENSORS), record.get(TENSOR_TYPE)
    if not isinstance(tensors, list):
        raise EnvelopeError(f"the {what}'s {TENSORS!r} is missing or not a list of bytes")
    blobs = [t for t in tensors if isinstance(t, bytes)]
    if len(blobs) != len(tensors):
        raise EnvelopeError(f"the {what}'s {TENSORS!r} is missing or not a list of bytes")
    if not isinstance(tensor_type, str):
        raise EnvelopeError(f"the {what}'s {TENSOR_TYPE!r} is missing or not a string")
    unknown = sorted(k for k in record if k.startswith("fedcausal.") and k not in keys)
    if unknown:
        raise EnvelopeError(f"the {what} has an unknown envelope key {unknown[0]!r}")
    return record, Parameters(tensors=blobs, tensor_type=tensor_type)


def _integer(record: ConfigRecord, key: str) -> int:
    value = record.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise EnvelopeError(f"the reply's {key!r} is missing or not an integer")
    return value


def _scalars(record: ConfigRecord, keys: frozenset[str], what: str) -> dict:
    """The record's entries but the envelope's own, each a scalar (as a legacy config is)."""
    out = {}
    for key, value in record.items():
        if key in keys:
            continue
        if not isinstance(value, SCALARS):
            raise EnvelopeError(f"the {what}'s entry {key!r} is a list, not a scalar")
        out[key] = value
    return out
