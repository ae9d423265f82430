"""The base of every method's server side, re-exported where the strategies live.

A method subclasses :class:`ProtocolStrategy`, the Flower-free protocol core of
:mod:`fedcausal_flwr.federation.core.protocol` (hooks ``next_request`` / ``handle_replies`` /
``result_payload``) and declares what it needs of the clients' data (:class:`InputNeeds`, checked
after hello); the runtime wraps it in Flower's adapter
(:mod:`fedcausal_flwr.federation.runtime.adapter`), so a strategy file reads as its protocol.
"""

from fedcausal_flwr.federation.core.input_checks import InputNeeds, require_same_columns
from fedcausal_flwr.federation.core.protocol import ProtocolStrategy

__all__ = ["InputNeeds", "ProtocolStrategy", "require_same_columns"]
