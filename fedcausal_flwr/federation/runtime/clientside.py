"""The client side every method runs in (in-process, Ray, deployment): the ClientApp's mods and
the builder of a ClientApp around a client factory.

Kept apart from :mod:`.apps` (the ServerApp and its workflow) so that a ClientApp process imports
neither the server-side workflow nor the protocol core: a deployment starts one ClientApp
process per message (or forks one from a warm executor), and what it imports is paid each time.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Protocol

from flwr.app import Context, Error, Message, MessageType
from flwr.client import Client
from flwr.client.mod import secaggplus_mod
from flwr.clientapp import ClientApp

from fedcausal_flwr.federation.core.messages import (
    CLIENT_FAILURE_CODE,
    KEY_ACTION,
    REFUSAL_CODE,
    UNKNOWN_CLIENT,
    ProtocolError,
    encode_client_failure,
    encode_refusal,
)
from fedcausal_flwr.federation.core.site_bundle import APP_COMPONENTS, BUNDLE, bundle_problem
from fedcausal_flwr.federation.core.site_guard import PolicyRefusal, SiteGuard, public_error
from fedcausal_flwr.federation.core.site_policy import (
    PolicyConfigError,
    SitePolicy,
)
from fedcausal_flwr.federation.runtime.envelope import (
    EnvelopeError,
    fitins_of,
    fitres_record,
    is_enveloped,
)
from fedcausal_flwr.federation.runtime.flower_internals import (
    RECORD_KEY_CONFIGS,
    fitins_to_recorddict,
    recorddict_to_fitres,
    secagg_sample_size,
)
from fedcausal_flwr.federation.runtime.signed_secagg import signed_secagg_mod


class BuiltClient(Protocol):
    """What the runtime needs of the client a factory builds (a ``clients.base.ProtocolClient``):
    built with the message's context and the guard of a site's policy, and Flower's ``Client``
    around it."""

    context: Context | None
    guard: SiteGuard | None

    def to_client(self) -> Client: ...


logger = logging.getLogger(__name__)

PARTITION_ID_KEY = "partition-id"
ClientFactory = Callable[[int, Context], BuiltClient]


#: set while a reply is computed inside SecAgg+ (by this site's own mod, never by the request):
#: the number of participants of the round; None outside SecAgg+
_SECAGG_PARTICIPANTS: ContextVar[int | None] = ContextVar("secagg_participants", default=None)


def secagg_participants() -> int | None:
    """How many participants the SecAgg+ round this reply goes through has (None: the reply is
    not masked by SecAgg+). Read by a site's guard (``require-secure``)."""
    return _SECAGG_PARTICIPANTS.get()


def secure_sum_mod(msg: Message, ctxt: Context, call_next: Callable) -> Message:
    """Client mod: SecAgg+ stage messages go to ``secaggplus_mod``; all others pass through.
    While SecAgg+ asks the client for the vector it masks, :func:`secagg_participants` says so."""
    if (
        msg.metadata.message_type == MessageType.TRAIN
        and RECORD_KEY_CONFIGS in msg.content.config_records
    ):
        token = _SECAGG_PARTICIPANTS.set(secagg_sample_size(ctxt))
        try:
            return secaggplus_mod(msg, ctxt, call_next)
        finally:
            _SECAGG_PARTICIPANTS.reset(token)
    return call_next(msg, ctxt)


def envelope_mod(msg: Message, ctxt: Context, call_next: Callable) -> Message:
    """Client mod: an enveloped request reaches the ClientApp in Flower's legacy records and its
    reply leaves enveloped; every other message passes through as it is."""
    if msg.metadata.message_type != MessageType.TRAIN or not is_enveloped(msg.content):
        return call_next(msg, ctxt)
    try:
        fitins = fitins_of(msg.content)
    except EnvelopeError as err:
        site = int(ctxt.node_config.get(PARTITION_ID_KEY, UNKNOWN_CLIENT))
        kind = "the request is not a well-formed envelope"
        raise ProtocolError(site, str(err), kind=kind) from None
    msg.content = fitins_to_recorddict(fitins, keep_input=False)
    reply = call_next(msg, ctxt)
    if reply.has_content():
        reply.content = fitres_record(recorddict_to_fitres(reply.content, keep_input=False))
    return reply


def client_error_mod(msg: Message, ctxt: Context, call_next: Callable) -> Message:
    """Client mod (outermost): an exception becomes a typed error reply naming the client (its
    partition id, from the node config) instead of Flower's error text. A :class:`ProtocolError`
    (its data or the request is invalid) is a refusal (``REFUSAL_CODE``: the run stops); anything
    else a failure (``CLIENT_FAILURE_CODE``: a dropout, named even in hello)."""
    try:
        return call_next(msg, ctxt)
    except Exception as error:
        return Message(site_error(msg, ctxt, error), reply_to=msg)


def site_error(msg: Message, ctxt: Context, error: Exception) -> Error:
    """The error reply of ``error``. A site with data (a policy) says only what
    :func:`~fedcausal_flwr.federation.core.site_guard.public_error` allows (no value, count,
    row or file content) and logs the full text in its audit log; a simulated node (no data of
    its own) gives the full text."""
    client = int(ctxt.node_config.get(PARTITION_ID_KEY, UNKNOWN_CLIENT))
    if not isinstance(error, ProtocolError):
        logger.warning("client failed at a %s message", msg.metadata.message_type, exc_info=error)
    try:
        policy = SitePolicy.of_node(ctxt.node_config)
    except PolicyConfigError:  # the site's own configuration: its refusal says so, no value
        policy = SitePolicy()
    if policy is not None:
        action = _action_of(msg)
        method = str(ctxt.run_config.get("method", ""))
        guard = SiteGuard(method, {}, policy=policy, site=client, run=str(ctxt.run_id))
        try:
            guard.log_error(action, error)
        except ProtocolError:  # the log cannot be written: the reply says nothing more
            pass
        text = public_error(error, client, action, policy)
        key = error.key if isinstance(error, PolicyRefusal) else None
        if isinstance(error, ProtocolError):
            error = PolicyRefusal(client, key, text) if key else ProtocolError(client, text)
        else:
            error = RuntimeError(text)
    if isinstance(error, ProtocolError):
        return Error(code=REFUSAL_CODE, reason=encode_refusal(error))
    return Error(code=CLIENT_FAILURE_CODE, reason=encode_client_failure(client, error))


def _action_of(msg: Message) -> str:
    """The action a message asks (its legacy config's ``action``; a SecAgg+ stage otherwise)."""
    for record in msg.content.config_records.values():
        if KEY_ACTION in record:
            return str(record[KEY_ACTION])
        if "stage" in record:
            return "secagg:" + str(record["stage"])
    return ""


#: The mods of every ClientApp the project builds, outermost first (a plain round's request comes
#: in one record and is opened inside the error mod: envelope; a site with a policy signs its
#: SecAgg+ keys and checks the other participants' before SecAgg+ runs: signed_secagg).
CLIENT_MODS = (client_error_mod, envelope_mod, signed_secagg_mod, secure_sum_mod)


def partition_id_of(context: Context) -> int:
    """The site's partition id from ``node_config`` (set by simulation, or passed per site)."""
    if PARTITION_ID_KEY not in context.node_config:
        raise ProtocolError(
            UNKNOWN_CLIENT,
            f"node_config of node {context.node_id} has no '{PARTITION_ID_KEY}'; start the "
            f"SuperNode with --node-config \"{PARTITION_ID_KEY}=<k> data-path='...'\" "
            "(a distinct integer per site)",
            kind=f"the site's node config has no '{PARTITION_ID_KEY}' (start its SuperNode with "
            f"--node-config \"{PARTITION_ID_KEY}=<k> data-path='...'\")",
        )
    return int(context.node_config[PARTITION_ID_KEY])


def make_client_app(client_factory: ClientFactory) -> ClientApp:
    """A ClientApp building ``client_factory(partition_id, context)`` for every message."""

    def client_fn(context: Context):
        partition_id = partition_id_of(context)
        client = client_factory(partition_id, context)
        if getattr(client, "partition_id", None) != partition_id:
            raise ValueError(
                f"client factory returned {type(client).__name__} with partition_id "
                f"{getattr(client, 'partition_id', None)} for partition {partition_id}"
            )
        if client.context is not context:  # its node state would be lost between messages
            raise ValueError(
                f"client factory returned {type(client).__name__} without this message's "
                "context: build it with the context the factory is given"
            )
        return client.to_client()

    return ClientApp(client_fn=client_fn, mods=list(CLIENT_MODS))


def installed_client_app(content: bytes, context: Context) -> Callable[..., Message]:
    """What a site's ``fedcausal-executor`` runs for a task, whatever the bundle names: the
    installed package's ClientApp (the one :data:`~.site_bundle.APP_COMPONENTS` names) if the
    bundle is this project's manifest-only bundle, else an app that answers with a refusal
    (policy key ``bundle``, logged in the site's audit log). The bundle's files are never
    installed or imported."""
    problem = bundle_problem(content)
    if problem is None:
        module, _, name = APP_COMPONENTS["clientapp"].partition(":")
        return getattr(importlib.import_module(module), name)
    site = int(context.node_config.get(PARTITION_ID_KEY, UNKNOWN_CLIENT))

    def refuse(message: Message, context: Context) -> Message:
        try:
            policy = SitePolicy.of_node(context.node_config)
        except PolicyConfigError:
            policy = None  # the bundle is refused all the same; the policy's error comes later
        method = str(context.run_config.get("method", ""))
        guard = SiteGuard(method, {}, policy=policy, site=site, run=str(context.run_id))
        try:
            guard.refuse(BUNDLE, f"site {site} refuses the run: {problem}", action="",
                         round_=None, secure=False)  # fmt: skip
        except ProtocolError as refusal:
            return Message(
                Error(code=REFUSAL_CODE, reason=encode_refusal(refusal)), reply_to=message
            )
        raise AssertionError("unreachable")  # pragma: no cover

    return refuse
