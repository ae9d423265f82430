"""The payloads every method on discrete data builds on (no action of its own).

The voting baselines, layer-wise voting FedPC, FedECD, FedCSL, FedLCS and its baselines send the
variables and their global level sets (each client encodes its rows over them) and, where the
client tests, the test, its level and the reliability rule: :class:`DiscreteScope`, which each
action's record (in the method's protocols module) extends with its own keys. The server side
builds them with :func:`fedcausal_flwr.strategies.discrete.scoped`, the client side is
:class:`fedcausal_flwr.clients.discrete.DiscreteClient`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedcausal_flwr.payload import Payload


@dataclass(frozen=True)
class LevelSets(Payload):
    """Base of the discrete methods' requests: the variables and their global level sets."""

    variables: list[str]
    levels: dict[str, list]


@dataclass(frozen=True)
class DiscreteScope(LevelSets):
    """Base of every request a client answers with its own tests (``prune``, ``local_graph``,
    FedECD's, FedCSL's and FedLCS's actions): the test, its level ``alpha`` and the reliability
    rule (rows per table cell a test needs; None: off)."""

    test: str
    alpha: float
    reliability: float | None


@dataclass(frozen=True)
class HillClimbReply(Payload):
    """Reply meta of ``orient`` (FedECD) and ``local_dag`` (FedCSL): the seconds the client's BDeu
    searches took and their local score evaluations."""

    score_seconds: float = 0.0
    local_evaluations: int = 0


@dataclass(frozen=True)
class ComputedTests(Payload):
    """Reply meta of an action that ran CI tests at the site: how many it computed."""

    tests: int = 0
