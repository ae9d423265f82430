"""``ProtocolClient``: a Flower ``NumPyClient`` holding one client's data and answering actions.

A method subclasses :class:`ProtocolClient` and registers one handler per action with
:func:`action`::

    class MyClient(ProtocolClient):
        @action("colsum")
        def colsum(self, payload: dict, arrays: list[np.ndarray]):
            return [self.data.to_numpy().sum(axis=0)], {"n": len(self.data)}

A built-in method names its actions with the constants of its :mod:`fedcausal_flwr.protocols`
module, which its strategy imports too (a client never imports a strategy).

A handler gets the request's JSON payload and broadcast arrays and returns ``(arrays, meta)``;
``meta`` must be JSON-serialisable. For a ``secure`` request it must return exactly one flat integer
vector with ``|value| <= C`` (checked here, before anything is sent). The built-in ``hello`` action
reports the partition id, row count, columns, dtypes, level sets and a fingerprint of the data (a
hash that identifies it for reproducibility and reveals nothing else).

A client built by its method's registration (``MethodSpec.client``: every entry point builds clients
there) carries a :class:`~fedcausal_flwr.federation.core.site_policy.SiteGuard`: it answers only the
actions its method declares with a disclosure class, and at a site only what the site's policy
allows, and logs each reply and refusal in the site's audit log. A client built by hand (a unit
test, a custom factory) has no guard and answers every action it implements.

Flower rebuilds the client object for every message, so attributes never survive a round. State
the protocol relies on across rounds lives in ``self.context.state`` (Flower persists it per node,
in a deployment too). A value that can be recomputed from the data (encoded columns, a CI oracle
and its test cache) may be kept in a :class:`FrameCache`: in a simulation the frame stays in
memory and later rounds reuse the value; in a deployment every message is a new process and it
is recomputed, so no result may depend on a hit.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from flwr.app import Context
from flwr.client import NumPyClient

from fedcausal_flwr.data.columns import as_read, frame_columns
from fedcausal_flwr.data.frame_cache import FrameCache
from fedcausal_flwr.data.inputs import InputError, frame_report
from fedcausal_flwr.federation.core.messages import (
    BOOTSTRAP,
    HELLO,
    KEY_META,
    KEY_PARTITION,
    ProtocolError,
    RequestConfig,
    check_secure_vector,
    to_json,
)
from fedcausal_flwr.federation.core.records import (
    BootstrapPart,
    BootstrapPartReply,
    BootstrapReply,
    BootstrapRequest,
    HelloRequest,
)
from fedcausal_flwr.federation.core.site_guard import SiteGuard
from fedcausal_flwr.federation.runtime.clientside import secagg_participants
from fedcausal_flwr.federation.runtime.signed_secagg import secagg_roster_names
from fedcausal_flwr.payload import MalformedPayload, Payload
from fedcausal_flwr.stats.contingency import MISSING_CODE

#: what an action's handler returns: the reply's arrays and its JSON-serialisable meta
HandlerResult = tuple[list[np.ndarray], "dict[str, Any] | Payload"]
Handler = Callable[..., HandlerResult]
_ACTION_ATTR = "_protocol_action"
_COMPACT_ATTR = "_protocol_compact"
_PAYLOAD_ATTR = "_protocol_payload"


def action(
    name: str, payload: type[Payload] | None = None, compact: bool = False
) -> Callable[[Handler], Handler]:
    """Register the decorated method as the handler of action ``name``.

    ``payload``: the action's typed payload (:mod:`fedcausal_flwr.payload`): the
    handler gets the request's payload decoded into it (a payload it cannot read is an error
    before the handler runs); without it the handler gets the JSON dict.
    ``compact``: outside SecAgg+ its integer arrays travel in the smallest integer type that
    holds their values (counts of a 1,000-row client fit 2 bytes, not 8); the server must read
    them as int64 (the table sums do). SecAgg+ quantises the reply itself, so a secure reply is
    left as it is."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"action name must be a non-empty string, got {name!r}")
    if name in (HELLO, BOOTSTRAP):
        raise ValueError(f"action {name!r} is built in")

    def mark(fn: Handler) -> Handler:
        setattr(fn, _ACTION_ATTR, name)
        setattr(fn, _PAYLOAD_ATTR, payload)
        setattr(fn, _COMPACT_ATTR, compact)
        return fn

    return mark


def compact_integers(array: np.ndarray) -> np.ndarray:
    """``array`` in the smallest integer type holding its values (lossless; others unchanged)."""
    if array.dtype.kind not in "iu" or array.size == 0:
        return array
    high = int(array.max())
    if array.dtype.kind == "u":  # (counts: no minimum to read)
        return array.astype(np.min_scalar_type(high), copy=False)
    low = int(array.min())
    return array.astype(np.result_type(np.min_scalar_type(low), np.min_scalar_type(high)))


#: the site's noise for distributed differential privacy, per process: fresh randomness from the
#: operating system (never a seed a request could name: a known seed lets the server remove the
#: noise), drawn again in a forked process so that two processes never share a stream
_SITE_NOISE: dict[int, np.random.Generator] = {}


def site_noise() -> np.random.Generator:
    """This process's generator for the site's own noise shares."""
    pid = os.getpid()
    if pid not in _SITE_NOISE:
        _SITE_NOISE.clear()
        _SITE_NOISE[pid] = np.random.default_rng()
    return _SITE_NOISE[pid]


class ProtocolClient(NumPyClient):
    """Base class of every method's client side. See the module docstring."""

    _actions: ClassVar[dict[str, str]] = {}
    #: each action's typed payload (None: the handler reads the JSON dict)
    _payloads: ClassVar[dict[str, type[Payload] | None]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        actions: dict[str, str] = {}
        payloads: dict[str, type[Payload] | None] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                name = getattr(value, _ACTION_ATTR, None)
                if name is not None:
                    actions[name] = attr
                    payloads[name] = getattr(value, _PAYLOAD_ATTR, None)
        cls._actions = actions
        cls._payloads = payloads

    def __init__(
        self,
        partition_id: int,
        data: pd.DataFrame,
        context: Context | None = None,
        guard: SiteGuard | None = None,
    ):
        if not isinstance(data, pd.DataFrame):
            raise TypeError(
                f"client {partition_id}: data must be a pandas DataFrame, got {type(data).__name__}"
            )
        self.partition_id = int(partition_id)
        self.data = as_read(data)  # values as the checks read them (blanks, unused categories)
        #: the message's Flower context (its ``state`` persists per node across messages)
        self.context = context
        #: the gate of this client's replies (``MethodSpec.client`` gives it; None: built by hand)
        self.guard = guard

    # ------------------------------------------------------------------ Flower API
    def get_parameters(self, config: dict) -> list[np.ndarray]:
        return []

    def evaluate(self, parameters: list[np.ndarray], config: dict) -> tuple[float, int, dict]:
        return 0.0, 1, {}

    def fit(self, parameters: list[np.ndarray], config: dict) -> tuple[list[np.ndarray], int, dict]:
        """Dispatch ``config["action"]``; ``num_examples`` is always 1 (exact SecAgg+ sums)."""
        request = RequestConfig.of(config)
        name, round_ = request.action, request.round
        payload = json.loads(request.payload)
        # what the site's own mod saw, never what the request claims
        participants = secagg_participants()
        summed_with = secagg_roster_names()  # the sites it verified (a signed round)
        kind = None
        try:
            if self.guard is not None:  # logs and raises a refusal
                kind = self.guard.check(name, payload, round_, participants, summed_with)
            arrays, meta = self.answer(name, payload, list(parameters))
        except Exception:
            if name == HELLO and self.guard is not None:  # a refused hello binds the run
                self.guard.bind_refused()
            raise
        if name == HELLO and self.guard is not None:
            self.guard.bind_hello(payload, meta)
        bound = request.secure_bound if request.secure else None
        arrays = self.packed(name, arrays, bound, compact=not request.secagg)
        try:
            meta_json = to_json(meta)
        except (TypeError, ValueError) as err:
            raise ProtocolError(self.partition_id, f"action {name!r}: meta {err}") from None
        if self.guard is not None and kind is not None:
            self.guard.sent(name, kind, arrays, meta, round_, participants is not None, summed_with)
        metrics = {KEY_PARTITION: self.partition_id, KEY_META: meta_json}
        return arrays, 1, metrics

    def packed(self, name: str, arrays: list, bound: int | None, compact: bool) -> list[np.ndarray]:
        """The reply arrays of action ``name`` as they travel: numeric (checked), one integer
        vector within ``bound`` for a secure request (``bound`` given), and, where ``compact`` and
        the handler allows it, each integer array in its smallest type."""
        arrays = [np.asarray(a) for a in arrays]
        for k, arr in enumerate(arrays):
            if arr.dtype == object:
                raise ProtocolError(
                    self.partition_id,
                    f"action {name!r} returned array {k} with dtype object; return numeric "
                    "arrays (anything else belongs in meta)",
                )
        if bound is not None:
            check_secure_vector(arrays, bound, self.partition_id, name)
        handler = getattr(self, self._actions.get(name, ""), None)
        if compact and getattr(handler, _COMPACT_ATTR, False):
            arrays = [compact_integers(a) for a in arrays]
        return arrays

    # ------------------------------------------------------------------ dispatch
    @classmethod
    def known_actions(cls) -> list[str]:
        return sorted([HELLO, BOOTSTRAP, *cls._actions])

    def answer(
        self, name: str, payload: dict, arrays: list[np.ndarray]
    ) -> tuple[list[np.ndarray], dict]:
        """Run the handler of action ``name`` (usable directly in unit tests, without Flower;
        :meth:`fit` asks the client's guard first)."""
        if name == HELLO:
            return self.hello(payload)
        if name == BOOTSTRAP:
            return self.bootstrap(payload, arrays)
        attr = self._actions.get(name)
        if attr is None:
            raise ProtocolError(
                self.partition_id,
                f"unknown action {name!r} for {type(self).__name__}; "
                f"known actions: {self.known_actions()}",
            )
        handler = getattr(self, attr)
        record = self._payloads.get(name)
        try:
            request = payload if record is None else record.decode(payload)
        except MalformedPayload as err:  # the server's mistake, the same at every site
            raise ProtocolError(self.partition_id, f"action {name!r}: {err}") from None
        out = handler(request, arrays)
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict | Payload)):
            raise TypeError(
                f"{type(self).__name__}.{attr} must return (list of arrays, dict or Payload), "
                f"got {type(out).__name__}"
            )
        replied, meta = out
        return list(replied), meta.encode() if isinstance(meta, Payload) else meta

    def hello(self, payload: dict) -> tuple[list[np.ndarray], dict]:
        """Built-in first round: who I am and what my columns look like
        (:func:`~fedcausal_flwr.data.inputs.frame_report`, which the API's input check uses too).
        Data no method can use is a refusal, which stops the run, not a failure, which would drop
        this site and let the run go on without it."""
        max_levels = int(HelloRequest.decode(payload).max_levels)
        cap = max_levels if self.guard is None else self.guard.hello_cap(max_levels)
        try:
            report = frame_report(self.data, self.partition_id, cap)
        except InputError as err:  # the server names the client: the rest of the message
            detail = InputError(
                err.problem, column=err.column, fix=err.fix, entry_point=err.entry_point
            )
            raise ProtocolError(
                self.partition_id,
                str(detail),
                kind="the site's data fail the input check",
                column=err.column,
            ) from None
        if self.guard is None:
            return [], report
        self.guard.check_levels(self.data, report["levels"])
        cells = self.guard.cell_cap()
        return [], report if cells is None else {**report, "max_request_cells": cells}

    def allocating(self, action: str, cells: int, width: int | None = None) -> None:
        """Say how many cells (table cells, block entries) answering ``action`` allocates and
        over how many variables its widest table is, before it does: a site refuses more than
        its policy's ``max-request-cells`` and tables wider than the run's declared depth."""
        if self.guard is not None:
            self.guard.check_cells(action, int(cells), width)

    def bootstrap(self, payload: dict, arrays: list[np.ndarray]) -> tuple[list[np.ndarray], dict]:
        """Built-in action of the federated bootstrap
        (:mod:`fedcausal_flwr.federation.core.bootstrap`): answer each part with the method's own
        handler on its replicate's rows (replicate 0: the rows themselves, k: resample k), checked
        and packed as a request of its own would be."""
        request = BootstrapRequest.decode(payload)
        seed, sample = int(request.seed), str(request.sample)
        out: list[np.ndarray] = []
        parts: list[dict] = []
        start = 0
        for part in map(BootstrapPart.decode, request.parts):
            name, n = str(part.action), int(part.n_arrays)
            if name not in self._actions:
                raise ProtocolError(
                    self.partition_id,
                    f"bootstrap part {name!r} is not an action of {type(self).__name__}; "
                    f"known actions: {sorted(self._actions)}",
                )
            given = arrays[start : start + n]
            start += n
            if len(given) != n:
                raise ProtocolError(
                    self.partition_id, f"bootstrap part {name!r} lacks {n - len(given)} arrays"
                )
            replica = copy.copy(self)
            replica.data = self.resample(seed, int(part.replicate), sample)
            # the class's answer: a wrapper set on this instance (a test's failing client) wraps
            # the bootstrap action as a whole and must not answer the part on these rows
            answer, meta = type(self).answer(replica, name, part.payload, given)
            bound = int(part.secure_bound) if part.secure else None
            answer = self.packed(name, answer, bound, compact=True)  # never through SecAgg+
            out.extend(answer)
            parts.append(BootstrapPartReply(len(answer), meta).encode())
        return out, BootstrapReply(parts).encode()

    def resample(self, seed: int, replicate: int, sample: str) -> pd.DataFrame:
        """This client's rows in bootstrap replicate ``replicate`` (0: the rows themselves);
        kept with the frame, so later rounds of a simulation count the same resample without
        redrawing it (a deployment redraws it: a function of seed, client and replicate only)."""
        if replicate == 0:
            return self.data
        from fedcausal_flwr.discovery.bootstrap import resample_rows  # only when resampling

        frames = _RESAMPLES.get(self.data, ("bootstrap", seed, sample), dict)
        if replicate not in frames:
            try:
                rows = resample_rows(len(self.data), seed, self.partition_id, replicate, sample)
            except ValueError as err:
                raise ProtocolError(self.partition_id, f"bootstrap: {err}") from None
            frames[replicate] = self.data.iloc[rows].reset_index(drop=True)
        return frames[replicate]


#: each client frame's bootstrap resamples (replicate -> frame), released with the frame
_RESAMPLES = FrameCache()


# ============================================================================ table codes
@lru_cache(maxsize=4096)
def _level_index(levels: tuple, kinds: tuple) -> pd.Index:
    """A variable's global levels as an index, made once per level set (every client of a
    process encodes with the same levels, every batch); ``kinds`` (the levels' types) keeps
    ``(1, True)`` apart from ``(1, 1)``, which compare equal."""
    return pd.Index(levels)


# A site's columns as integer codes over the global level sets: every method on discrete data
# encodes with these.
def encode_columns(
    data: pd.DataFrame, variables: list[str], levels: dict, client: int, missing: str = "error"
) -> np.ndarray:
    """Integer codes of ``variables`` over the global ``levels``; unknown values are an error.

    ``missing``: ``"testwise"`` codes a missing value as :data:`MISSING_CODE` (each table leaves
    the row out); ``"listwise"`` drops the rows missing any of ``variables`` first; ``"error"``
    (the input check already refused missing values) treats one as an unknown value.
    """
    if missing == "listwise":
        data = complete_rows(data, variables, client)
    by_name = {column.name: column for column in reversed(frame_columns(data))}
    codes = np.empty((len(data), len(variables)), dtype=np.int64)
    for j, name in enumerate(variables):
        column = by_name.get(name)
        if column is None:
            raise ProtocolError(
                client,
                f"column {name!r} is missing (the server asked for it)",
                kind="the server asked for a column this site does not have",
                column=name,
            )
        held = tuple(levels[name])
        index = _level_index(held, tuple(type(v) for v in held))
        if column.values is not None:  # numbers: matched value by value
            col_codes = index.get_indexer(column.values)
            present = ~np.isnan(column.values)
        else:  # the column's own codes, mapped through its distinct values
            assert column.codes is not None
            lookup = np.append(index.get_indexer(column.uniques), -1)
            col_codes = lookup[column.codes]
            present = column.codes >= 0
        bad = col_codes < 0
        if missing == "testwise":
            bad &= present
        if bad.any():
            row = int(np.argmax(bad))
            example = (
                (
                    column.values[row]
                    if column.values is not None
                    else column.uniques[column.codes[row]]  # type: ignore[index]
                )
                if present[row]
                else None
            )
            raise ProtocolError(
                client,
                f"column {name!r} has value {example!r} outside the global level set "
                f"{levels[name]} ({int(bad.sum())} rows)",
                kind="a value of this site lies outside the global level set",
                column=name,
            )
        codes[:, j] = np.where(col_codes < 0, MISSING_CODE, col_codes)
    return codes


def complete_rows(data: pd.DataFrame, variables: list[str], client: int) -> pd.DataFrame:
    """List-wise deletion: the rows with a value in every one of ``variables``."""
    kept = data.dropna(subset=[v for v in variables if v in data.columns])
    if kept.empty:
        raise ProtocolError(
            client,
            f"list-wise deletion leaves no rows: each of its {len(data)} rows misses a value "
            "(use missing=testwise, or drop the emptiest columns)",
            kind="list-wise deletion leaves no rows (use missing=testwise)",
        )
    return kept


_ENCODED = FrameCache()


def cached_codes(
    data: pd.DataFrame, variables: list[str], levels: dict, client: int, missing: str = "error"
) -> np.ndarray:
    """:func:`encode_columns` of the exact variables, level sets and missing mode asked, kept per
    frame (in a simulation each round would otherwise re-encode the same frame)."""
    key = json.dumps([variables, [levels[v] for v in variables], missing], default=str)
    return _ENCODED.get(data, key, lambda: encode_columns(data, variables, levels, client, missing))
