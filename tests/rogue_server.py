"""A rogue coordinator for tests (not a test module): it speaks Flower's Message API itself to
the project's real ClientApp on the in-process grid, skipping hello or not, with any action,
payload and arrays, in Flower's legacy records or in the project's one-record envelope, or any
content it forges, and reads back what each site answered or why it refused."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.app import Message, MessageType, RecordDict
from flwr.common import Code, FitIns, ndarrays_to_parameters, parameters_to_ndarrays

from fedcausal_flwr import flwr_app
from fedcausal_flwr.federation.core.messages import (
    HELLO,
    KEY_ACTION,
    KEY_META,
    KEY_PAYLOAD,
    KEY_ROUND,
    KEY_SECAGG,
    KEY_SECURE,
    KEY_SECURE_BOUND,
    REFUSAL_CODE,
    to_json,
)
from fedcausal_flwr.federation.core.records import HELLO_MAX_LEVELS, HelloRequest
from fedcausal_flwr.federation.runtime.envelope import fitins_record, fitres_of
from fedcausal_flwr.federation.runtime.flower_internals import fitins_to_recorddict
from fedcausal_flwr.federation.runtime.localgrid import LocalGrid


@dataclass
class Outcome:
    """One site's answer: its arrays and meta, or its error (code, reason as it left the site,
    the reason's message and policy key)."""

    arrays: list[np.ndarray] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    code: int | None = None
    reason: str = ""
    message: str = ""
    policy: str | None = None

    @property
    def answered(self) -> bool:
        return self.code is None

    @property
    def refused(self) -> bool:
        return self.code == REFUSAL_CODE


def outcome_of(reply: Message) -> Outcome:
    """A reply message read as an :class:`Outcome`."""
    if reply.has_error():
        reason = reply.error.reason or ""
        try:
            content = json.loads(reason)
        except ValueError:
            content = None
        if not isinstance(content, dict):
            return Outcome(code=int(reply.error.code), reason=reason, message=reason)
        policy = content.get("policy")
        return Outcome(
            code=int(reply.error.code),
            reason=reason,
            message=str(content.get("message", reason)),
            policy=None if policy is None else str(policy),
        )
    fitres = fitres_of(reply.content)  # enveloped or Flower's records, as the request was
    if fitres.status.code != Code.OK:
        text = fitres.status.message
        return Outcome(code=int(fitres.status.code.value), reason=text, message=text)
    meta = json.loads(str(fitres.metrics.get(KEY_META, "{}")))
    return Outcome(parameters_to_ndarrays(fitres.parameters), meta)


class RogueCoordinator:
    """Sends whatever it likes to the sites of ``nodes`` (node configs, partition ``k`` at
    position ``k``) under ``run_config``; each call is one round and returns ``{site: Outcome}``.
    ``enveloped``: requests travel in the project's envelope (as its own ServerApp sends them)
    instead of Flower's legacy records."""

    def __init__(
        self,
        nodes: Sequence[Mapping[str, Any]],
        run_config: Mapping[str, Any] | None = None,
        client_app: Callable[..., Message] = flwr_app.client_app,
        *,
        enveloped: bool = False,
    ):
        self.enveloped = enveloped
        config = {"method": "fedpc", "num-clients": len(nodes), **(run_config or {})}
        self.run_id = secrets.randbits(63) or 1
        app: Any = client_app  # a ClientApp, or a function wrapping one
        self.grid = LocalGrid(app, len(nodes), config, nodes, run_id=self.run_id)
        self.node_of = dict(enumerate(self.grid.get_node_ids()))
        self.round = 0

    def send(
        self,
        action: str,
        payload: Mapping[str, Any] | None = None,
        arrays: Sequence[np.ndarray] = (),
        sites: Iterable[int] | None = None,
        *,
        secure: bool = False,
        clip: int = 0,
    ) -> dict[int, Outcome]:
        """One round of ``action`` to ``sites`` (default: all), as a plain fit message."""
        self.round += 1
        config = {
            KEY_ACTION: action,
            KEY_PAYLOAD: to_json(dict(payload or {})),
            KEY_ROUND: self.round,
            KEY_SECURE: secure,
            KEY_SECAGG: False,
            KEY_SECURE_BOUND: clip,
        }
        fitins = FitIns(ndarrays_to_parameters([np.asarray(a) for a in arrays]), config)
        wrap = fitins_record if self.enveloped else (lambda ins: fitins_to_recorddict(ins, True))
        return self.send_content(lambda: wrap(fitins), sites)

    def send_content(
        self, content: Callable[[], RecordDict], sites: Iterable[int] | None = None
    ) -> dict[int, Outcome]:
        """One round whose message to each of ``sites`` holds ``content()`` (any records)."""
        wanted = sorted(self.node_of) if sites is None else list(sites)
        messages = [
            Message(
                content(),
                dst_node_id=self.node_of[site],
                message_type=MessageType.TRAIN,
                group_id=str(self.round),
            )
            for site in wanted
        ]
        site_of = {node: site for site, node in self.node_of.items()}
        replies = self.grid.send_and_receive(messages)
        return {site_of[r.metadata.src_node_id]: outcome_of(r) for r in replies}

    def hello(
        self,
        sites: Iterable[int] | None = None,
        max_levels: int = HELLO_MAX_LEVELS,
        privacy: Mapping[str, Any] | None = None,
    ) -> dict[int, Outcome]:
        """The built-in ``hello`` (with a privacy plan, if given)."""
        request = HelloRequest(max_levels, None if privacy is None else dict(privacy))
        return self.send(HELLO, request.encode(), sites=sites)
