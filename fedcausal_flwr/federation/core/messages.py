"""The wire vocabulary shared by every method's strategy and client (Flower-free).

A protocol step is a :class:`Request` (server -> clients) answered by one :class:`Reply` per client.
On the wire a request travels as a legacy Flower ``FitIns``: the action name under
``config["action"]``, the JSON payload as a string under ``config["payload"]`` and the arrays
as ``Parameters``. A reply is a ``FitRes``: arrays as ``Parameters``, ``num_examples == 1`` (the
SecAgg+ exact-sum recipe needs equal weights) and the reply metadata as a JSON string under
``metrics["meta"]``.

Secure (summed) requests: every client answers with ONE flat integer vector; the server only ever
sees the sum, computed either plainly (int64, in partition order) or through SecAgg+. The SecAgg+
parameters that make that sum exact are ``weight 1, clipping_range=C, quantization_range=2C,
modulus_range=2**32`` with ``|value| <= C`` and ``n * 2C < 2**32`` (see :func:`secure_bound_for`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from fedcausal_flwr.payload import MalformedPayload, Payload

R = TypeVar("R", bound=Payload)

# Keys of the FitIns config / FitRes metrics.
KEY_ACTION = "action"
KEY_PAYLOAD = "payload"
KEY_ROUND = "round"
KEY_SECURE = "secure"
KEY_SECURE_BOUND = "secure_bound"
#: the reply goes through SecAgg+ (a summable request in a secure run): keep its integer type
KEY_SECAGG = "secagg"
KEY_META = "meta"
KEY_PARTITION = "partition_id"


@dataclass(frozen=True)
class RequestConfig:
    """A request as it travels in Flower's config record, under the keys above: written by the
    server's adapter, read by every client (the one statement of that format)."""

    action: str
    payload: str  # the JSON payload
    round: int | None
    secure: bool
    #: the reply goes through SecAgg+ (a summable request in a secure run): it keeps its type
    secagg: bool
    #: the bound of a secure reply's values (read only for a secure request)
    secure_bound: int

    def to_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {KEY_ACTION: self.action, KEY_PAYLOAD: self.payload}
        if self.round is not None:
            config[KEY_ROUND] = self.round
        config.update({KEY_SECURE: self.secure, KEY_SECAGG: self.secagg,
                       KEY_SECURE_BOUND: self.secure_bound})  # fmt: skip
        return config

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> RequestConfig:
        """A client's reading of the config: an absent key is no action, an empty payload, no
        round, a plain request, a reply whose path is unknown (its types kept)."""
        secure = bool(config.get(KEY_SECURE, False))
        return cls(
            str(config.get(KEY_ACTION, "")),
            str(config.get(KEY_PAYLOAD, "{}")),
            int(config[KEY_ROUND]) if KEY_ROUND in config else None,
            secure,
            bool(config.get(KEY_SECAGG, True)),
            int(config[KEY_SECURE_BOUND]) if secure else 0,
        )


HELLO = "hello"
#: built-in action of the federated bootstrap: several requests, each on one resample of the rows
BOOTSTRAP = "bootstrap"
SUMMED = -1  # Reply.client of an aggregated (summed) reply
UNKNOWN_CLIENT = -2  # ProtocolError.client when the site does not know its partition id
# (not SUMMED's value: an error can never read as a sum's, nor a sum's as an unknown site's)
MODULUS_RANGE = 2**32
MAX_CLIP = 2**30 - 1  # SecAgg+ quantizes into int32, so 2C must stay below 2**31

#: Error codes of the replies a client's ClientApp sends instead of raising: a refusal (its data or
#: the request is invalid: the run stops) and a failure (anything else: a dropout). Typed fields
#: of the reply, next to Flower's own codes (0-8 in 1.42), so the server never parses error text;
#: the reason is JSON naming the client, so even a failure in hello says which client it was.
REFUSAL_CODE = 4101
CLIENT_FAILURE_CODE = 4102


@dataclass
class Request:
    """One protocol step: what the server asks of (a subset of) the clients.

    ``secure=True`` means every client answers with one flat integer vector that the server only
    sees summed (through SecAgg+ when the run is secure, plainly otherwise).
    ``clients=None`` asks every client still alive; otherwise a list of partition ids.
    ``nan_ok``: the replies may mark missing values with NaN (by default a NaN in a reply is a
    malformed reply, as an infinity always is).
    """

    action: str
    #: the JSON payload, or a typed record of it (:mod:`fedcausal_flwr.payload`),
    #: kept as the dict its ``encode()`` gives
    payload: Any = field(default_factory=dict)
    arrays: list[np.ndarray] = field(default_factory=list)
    secure: bool = False
    clients: list[int] | None = None
    nan_ok: bool = False  # replies may hold NaN (e.g. "no p-value" markers); never +-inf

    def __post_init__(self) -> None:
        if not isinstance(self.action, str) or not self.action:
            raise TypeError(f"Request.action must be a non-empty string, got {self.action!r}")
        encode = getattr(self.payload, "encode", None)
        if callable(encode):
            self.payload = encode()
        if not isinstance(self.payload, dict):
            raise TypeError(f"Request.payload must be a dict, got {type(self.payload).__name__}")
        self.arrays = [np.asarray(a) for a in self.arrays]
        for k, arr in enumerate(self.arrays):
            if arr.dtype == object:
                raise TypeError(
                    f"request {self.action!r}: array {k} has dtype object; send numeric arrays "
                    "(anything else belongs in the JSON payload)"
                )
        if self.clients is not None:
            self.clients = sorted({int(c) for c in self.clients})
            if not self.clients:
                raise ValueError(f"request {self.action!r} asks an empty list of clients")


#: the key of a sum's meta that lists the partition ids it adds up
CONTRIBUTORS = "contributors"


@dataclass
class Reply:
    """One client's answer (``client`` = partition id), or the sum (``client == SUMMED``)."""

    client: int
    arrays: list[np.ndarray]
    meta: dict

    def meta_as(self, record: type[R]) -> R:
        """This reply's meta read as ``record``; meta it cannot read is the client's protocol
        error (naming it), as any malformed reply is."""
        try:
            return record.decode(self.meta)
        except MalformedPayload as err:
            raise ClientProtocolError(f"client {self.client} sent meta {err}") from None

    @property
    def contributors(self) -> list[int]:
        """The partition ids whose vectors a sum (``client == SUMMED``) adds up ([] for one
        client's reply)."""
        return [int(c) for c in self.meta.get(CONTRIBUTORS) or []] if self.client == SUMMED else []


@dataclass
class ClientInfo:
    """What a client tells the server in the built-in ``hello`` round."""

    partition_id: int
    n_rows: int
    columns: list[str]
    dtypes: dict[str, str]
    levels: dict[str, list | None]  # sorted observed values; None for float / many-valued columns
    n_missing: dict[str, int]
    version: str = ""
    fingerprint: str = ""
    constant: dict[str, Any] = field(default_factory=dict)  # column -> its one value, if constant
    n_complete: int | None = None  # rows without a missing value (None: not reported)
    # columns a test cannot separate, by name (fedcausal_flwr.data.dependence): "duplicates" and
    # "determines" ([a, b] pairs), "collinear" ({"columns": [...], "condition": c})
    dependence: dict[str, list] = field(default_factory=dict)
    #: the most cells one request may make this site allocate (its policy; None: no cap)
    max_request_cells: int | None = None

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> ClientInfo:
        return cls(
            partition_id=int(meta["partition_id"]),
            n_rows=int(meta["n_rows"]),
            columns=list(meta["columns"]),
            dtypes=dict(meta["dtypes"]),
            levels=dict(meta["levels"]),
            n_missing={k: int(v) for k, v in meta["n_missing"].items()},
            version=str(meta.get("version", "")),
            fingerprint=str(meta.get("fingerprint", "")),
            constant=dict(meta.get("constant", {})),
            n_complete=None if meta.get("n_complete") is None else int(meta["n_complete"]),
            dependence={str(k): list(v) for k, v in dict(meta.get("dependence") or {}).items()},
            max_request_cells=(
                None if meta.get("max_request_cells") is None else int(meta["max_request_cells"])
            ),
        )


class FederationError(RuntimeError):
    """The federated run cannot continue (transport, SecAgg+ or bookkeeping failure)."""


class TooFewClientsError(FederationError):
    """Fewer clients than required connected, or remain after dropouts."""


class ProtocolError(ValueError):
    """A deterministic client-side error (bad request, bad data, overflow) that stops the run.

    Unlike any other exception raised by a client (treated as a dropout), re-asking the survivors
    would not help. The client's ClientApp turns it into a refusal reply (error code
    :data:`REFUSAL_CODE`, :func:`encode_refusal`) and the server re-raises it as
    :class:`ClientProtocolError`.
    """

    def __init__(
        self, client: int, message: str, *, kind: str | None = None, column: str | None = None
    ):
        self.client = int(client)
        self.detail = message
        #: what went wrong in words that carry no data (a site's error leaves it with this and
        #: ``column`` only; the full ``message`` stays in its audit log)
        self.kind = kind
        self.column = column
        super().__init__(f"ProtocolError[client={self.client}]: {message}")


class ClientProtocolError(ValueError):
    """Server-side: a client reported a :class:`ProtocolError`."""


class SitePolicyError(ClientProtocolError):
    """Server-side: a site refused a message under its policy or its method's declared
    disclosures (the message names the site and the policy key, in one line)."""


@dataclass(frozen=True)
class Failure:
    """Why a client's reply is missing: the error code (``REFUSAL_CODE`` or
    ``CLIENT_FAILURE_CODE`` from a project client, Flower's own otherwise, None when there was no
    error reply at all, e.g. a timeout) and the reason."""

    code: int | None
    reason: str

    @property
    def refusal(self) -> tuple[int, str] | None:
        """``(client, message)`` if this is a client's refusal (a :class:`ProtocolError`)."""
        return decode_client_error(self.code, self.reason) if self.code == REFUSAL_CODE else None

    @property
    def policy(self) -> str | None:
        """The policy key of a site's refusal under its policy (None: any other failure)."""
        if self.code != REFUSAL_CODE:
            return None
        try:
            key = json.loads(self.reason).get("policy")
        except (ValueError, AttributeError):
            return None
        return str(key) if key else None

    @property
    def client(self) -> int | None:
        """The partition id the reply names, if it came from a project client."""
        decoded = decode_client_error(self.code, self.reason)
        return None if decoded is None or decoded[0] == UNKNOWN_CLIENT else decoded[0]

    @property
    def text(self) -> str:
        """The reason in words (the message of a project client's error reply)."""
        decoded = decode_client_error(self.code, self.reason)
        return self.reason if decoded is None else decoded[1]


class ClientFailure(Exception):
    """A failed reply whose sender is known (the client failed, or did not answer in time)."""

    def __init__(self, node_id: int, reason: str, code: int | None = None):
        self.node_id = int(node_id)
        self.failure = Failure(code, reason)
        super().__init__(f"node {node_id}: {reason}")


def encode_refusal(error: ProtocolError) -> str:
    """The reason of a refusal reply: JSON with the client and its message (and the policy key
    of a site's policy refusal)."""
    content: dict[str, Any] = {"client": error.client, "message": error.detail}
    key = getattr(error, "key", None)
    if key:
        content["policy"] = str(key)
    return json.dumps(content)


def encode_client_failure(client: int, error: BaseException) -> str:
    """The reason of a failure reply: JSON with the client and what went wrong."""
    return json.dumps({"client": int(client), "message": f"{type(error).__name__}: {error}"})


def decode_client_error(code: int | None, reason: str) -> tuple[int, str] | None:
    """``(client, message)`` of a project client's error reply (None for any other failure)."""
    if code not in (REFUSAL_CODE, CLIENT_FAILURE_CODE):
        return None
    try:
        content = json.loads(reason)
        return int(content["client"]), str(content["message"])
    except (ValueError, KeyError, TypeError):
        return UNKNOWN_CLIENT, reason


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"{type(obj).__name__} value {obj!r} is not JSON-serialisable")


def to_json(obj: Any) -> str:
    """Deterministic compact JSON (sorted keys; numpy scalars/arrays converted)."""
    return json.dumps(obj, default=_json_default, sort_keys=True, separators=(",", ":"))


def encode_payload(payload: Mapping[str, Any], where: str) -> str:
    """JSON for a payload or meta dict; ``where`` names the message in the error."""
    try:
        return to_json(dict(payload))
    except (TypeError, ValueError) as err:
        raise TypeError(f"{where}: payload is not JSON-serialisable ({err})") from None


def secure_bound_for(n_clients: int) -> int:
    """Largest C with ``n * 2C < 2**32`` (and 2C < 2**31): SecAgg+ then sums exactly."""
    if n_clients < 1:
        raise ValueError(f"need at least one client, got {n_clients}")
    return min(MAX_CLIP, (MODULUS_RANGE - 1) // (2 * n_clients))


def check_secure_vector(arrays: Sequence[np.ndarray], bound: int, client: int, action: str) -> None:
    """Raise :class:`ProtocolError` unless ``arrays`` is one flat integer vector, |v| <= bound."""
    if len(arrays) != 1:
        raise ProtocolError(
            client, f"secure action {action!r} must return exactly one array, got {len(arrays)}"
        )
    vec = np.asarray(arrays[0])
    if vec.ndim != 1 or not (np.issubdtype(vec.dtype, np.integer) or vec.dtype == np.bool_):
        raise ProtocolError(
            client,
            f"secure action {action!r} must return a flat integer vector, got dtype {vec.dtype} "
            f"and shape {vec.shape}",
        )
    if vec.size:
        max_abs = max(int(vec.max()), -int(vec.min()))  # no int64 copy of the vector
        if max_abs > bound:
            raise ProtocolError(
                client,
                f"secure action {action!r}: max |value| {max_abs} exceeds the exact-sum bound "
                f"C={bound} for this number of clients (n * 2C must stay below 2**32)",
            )


def array_nbytes(tensors: Sequence[bytes]) -> int:
    """Bytes of serialised arrays as they travel (``Parameters.tensors``)."""
    return int(sum(len(t) for t in tensors))
