"""SecAgg+ against an active server: sites that sign their keys and check who they sum with.

Flower 1.42's ``secaggplus_mod`` trusts the server in every stage. At ``share_keys`` it takes
every entry of the server's record as a participant, so a server can add participants whose keys
it holds (Sybils) and receive, encrypted to them, a site's shares of its mask; at ``unmask``
nothing checks the lists of surviving and dropped nodes; and the server chooses each round's
participants, so sums over {A, B, C} and {A, B} give C's vector. Bonawitz et al. (CCS 2017,
sec. 6) close this with signed keys against a PKI and a signed consistency round.

:func:`signed_secagg_mod` (a client mod placed before ``secure_sum_mod``) does that at a site
with a policy (:mod:`~fedcausal_flwr.federation.core.site_policy`; a simulated node has none and
is left as it is), with its signing key and roster (:mod:`~.site_identity`):

* ``setup``: the round's size must match the roster (all of it, or at least
  ``secure-participants`` of it) and every participant must be every site's neighbour; the site
  signs the two SecAgg+ keys it advertises (with the run, round and node id).
* ``share_keys``: every participant's keys must come with a valid signature by a distinct roster
  site (relayed by the server); the participants must be the whole roster (or at least
  ``secure-participants`` of it) and the same set in every secure round of the run.
* ``collect_masked_vectors``: the site signs a receipt over the masked vector it sends.
* ``unmask``: no participant may be called dropped, the survivors must be exactly the verified
  participants and each must have a valid receipt; only then does the site reveal its shares.

Every refusal is a :class:`~.site_guard.PolicyRefusal` logged in the site's audit log (key
``roster`` for a participant that is not a signed roster site, ``secure-participants`` for the
set of participants). :class:`SignedSecAggRelay` is the server side: it carries the signatures
between the sites, and does nothing for sites that do not sign.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, NoReturn

from flwr.app import ConfigRecord, Context, Message, MessageType, RecordDict

from fedcausal_flwr.federation.core.messages import UNKNOWN_CLIENT, ProtocolError
from fedcausal_flwr.federation.core.site_guard import SiteGuard
from fedcausal_flwr.federation.core.site_identity import (
    SiteIdentity,
    SiteIdentityError,
    keys_statement,
    submitted_statement,
    vector_hash,
    verify,
)
from fedcausal_flwr.federation.core.site_policy import (
    ROSTER,
    SECURE_PARTICIPANTS,
    SITE_KEY,
    PolicyConfigError,
    SitePolicy,
)
from fedcausal_flwr.federation.runtime.flower_internals import (
    RECORD_KEY_CONFIGS,
    SecAggKey,
    SecAggStage,
)

#: every record this module adds to SecAgg+'s messages starts with this
RECORD_PREFIX = "fedcausal.secagg."
#: a setup reply: the site's roster key and its signature over the SecAgg+ keys it advertises
IDENTITY = RECORD_PREFIX + "identity"
#: a share_keys message: node id -> [roster key, signature] of every participant's keys
PEERS = RECORD_PREFIX + "peers"
#: a collect_masked_vectors reply: the masked vector's hash and the site's signature over it
RECEIPT = RECORD_PREFIX + "receipt"
#: an unmask message: node id -> [hash, signature] of every surviving participant
RECEIPTS = RECORD_PREFIX + "receipts"
#: the site's own state in its context (the run, the run's participants, the round's)
STATE = RECORD_PREFIX + "state"
PUBLIC_KEY, SIGNATURE, HASH = "public-key", "signature", "hash"
PARTITION_ID_KEY = "partition-id"

#: set while this site computes the vector SecAgg+ masks: the roster names of the round's
#: verified participants (None outside a signed SecAgg+ round)
_ROSTER_NAMES: ContextVar[tuple[str, ...] | None] = ContextVar("secagg_roster", default=None)


def secagg_roster_names() -> tuple[str, ...] | None:
    """The roster names of the sites this reply's SecAgg+ sum is with (its own included), or
    None (not a signed SecAgg+ round). Read by the site's guard, for its audit log."""
    return _ROSTER_NAMES.get()


def _config(records: RecordDict, name: str) -> ConfigRecord | None:
    """The ConfigRecord ``name`` of ``records`` (read directly: ``RecordDict.config_records``
    rebuilds a view of every record at each access)."""
    record = records.get(name)
    return record if isinstance(record, ConfigRecord) else None


def is_secagg_message(msg: Message) -> bool:
    """Whether ``msg`` is a SecAgg+ stage message (what ``secure_sum_mod`` hands to SecAgg+)."""
    return (
        msg.metadata.message_type == MessageType.TRAIN
        and _config(msg.content, RECORD_KEY_CONFIGS) is not None
    )


def signed_secagg_mod(msg: Message, ctxt: Context, call_next: Callable) -> Message:
    """Client mod: at a site with a policy, SecAgg+ runs only with signed roster sites (see the
    module docstring); everything else passes through unchanged."""
    if not is_secagg_message(msg):
        return call_next(msg, ctxt)
    site = int(ctxt.node_config.get(PARTITION_ID_KEY, UNKNOWN_CLIENT))
    try:
        policy = SitePolicy.of_node(ctxt.node_config)
    except PolicyConfigError as err:
        raise ProtocolError(site, f"site {site}'s policy: {err}") from None
    if policy is None:  # a simulated node: SecAgg+ as Flower runs it
        return call_next(msg, ctxt)
    return _SignedRound(msg, ctxt, policy, site).answer(call_next)


_IDENTITIES: dict[tuple, SiteIdentity] = {}


def load_identity(site_key: str, roster: str) -> SiteIdentity:
    """The site's identity, read again whenever either file changes (mode included)."""
    stamp = []
    for path in (site_key, roster):
        try:
            info = os.stat(path)
            stamp.append((path, info.st_mtime_ns, info.st_size, info.st_mode, info.st_ino))
        except OSError:
            return SiteIdentity.from_files(site_key, roster)  # says what is wrong
    key = tuple(stamp)
    if key not in _IDENTITIES:
        if len(_IDENTITIES) >= 64:  # one per site in a process (in-process runs: several)
            _IDENTITIES.clear()
        _IDENTITIES[key] = SiteIdentity.from_files(site_key, roster)
    return _IDENTITIES[key]


def _pair(value: Any) -> tuple[bytes, bytes] | None:
    """``value`` if it is a list of two bytes values, else None."""
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, bytes) for v in value):
        return value[0], value[1]
    return None


def _listed(record: ConfigRecord, key: str, kind: type) -> list:
    value = record.get(key)
    return [v for v in value if isinstance(v, kind)] if isinstance(value, list) else []


@dataclass
class _RunState:
    """What a site keeps of a run's signed SecAgg+ rounds (in its context's state)."""

    run: str
    #: the roster names of the run's first secure sum (every later one must have the same)
    fixed: list[str] | None = None
    #: the current round (its group id) and its verified participants, ordered by node id
    group: str | None = None
    nodes: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    keys: list[bytes] = field(default_factory=list)
    #: the hash of the masked vector this site sent in the current round
    sent_hash: bytes | None = None

    @classmethod
    def of(cls, ctxt: Context, run: str) -> _RunState:
        """The run's state (another run's is dropped: Flower may carry a node's state across
        the runs of a series)."""
        record = _config(ctxt.state, STATE)
        if record is None or record.get("run") != run:
            return cls(run)
        sent, group = record.get("hash"), record.get("group")
        return cls(
            run,
            fixed=_listed(record, "fixed", str) if "fixed" in record else None,
            group=group if isinstance(group, str) else None,
            nodes=[int(n) for n in _listed(record, "nodes", str)],
            names=_listed(record, "names", str),
            keys=_listed(record, "keys", bytes),
            sent_hash=sent if isinstance(sent, bytes) else None,
        )

    def save(self, ctxt: Context) -> None:
        values: dict[str, Any] = {"run": self.run}
        if self.fixed is not None:
            values["fixed"] = list(self.fixed)
        if self.group is not None:
            values["group"] = self.group
        if self.nodes:
            values.update(nodes=[str(n) for n in self.nodes], names=self.names, keys=self.keys)
        if self.sent_hash is not None:
            values["hash"] = self.sent_hash
        ctxt.state[STATE] = ConfigRecord(values)


class _SignedRound:
    """One SecAgg+ stage message at a site with a policy."""

    def __init__(self, msg: Message, ctxt: Context, policy: SitePolicy, site: int):
        self.msg, self.ctxt, self.policy, self.site = msg, ctxt, policy, site
        configs = msg.content[RECORD_KEY_CONFIGS]
        assert isinstance(configs, ConfigRecord)  # is_secagg_message
        self.configs = configs
        self.stage = str(configs.get(SecAggKey.STAGE, ""))
        self.group = str(msg.metadata.group_id)
        self.run_id = int(ctxt.run_id)
        self.node = int(msg.metadata.dst_node_id)
        self.state = _RunState.of(ctxt, str(self.run_id))

    def refuse(self, key: str, problem: str) -> NoReturn:
        """Log and raise a refusal (the policy key ``key``)."""
        method = str(self.ctxt.run_config.get("method", ""))
        guard = SiteGuard(method, {}, policy=self.policy, site=self.site, run=str(self.run_id))
        guard.refuse(
            key,
            f"site {self.site} refuses a secure sum: {problem}",
            action=f"secagg:{self.stage}",
            round_=int(self.group) if self.group.isdigit() else None,
            secure=True,
        )

    def identity(self) -> SiteIdentity:
        policy = self.policy
        if policy.site_key is None or policy.roster is None:
            self.refuse(
                ROSTER,
                f"its policy names no {SITE_KEY} and {ROSTER}, so it cannot tell the other "
                "participants from ones the server made up (docs/deploy.md, 'A roster from "
                "scratch')",
            )
        try:
            return load_identity(policy.site_key, policy.roster)
        except SiteIdentityError as err:
            self.refuse(err.key or ROSTER, str(err))

    def answer(self, call_next: Callable) -> Message:
        identity = self.identity()
        stages = {
            SecAggStage.SETUP: self.setup,
            SecAggStage.SHARE_KEYS: self.share_keys,
            SecAggStage.COLLECT_MASKED_VECTORS: self.collect,
            SecAggStage.UNMASK: self.unmask,
        }
        if self.stage not in stages:
            return call_next(self.msg, self.ctxt)  # SecAgg+ itself refuses an unknown stage
        return stages[self.stage](identity, call_next)

    # ------------------------------------------------------------------ the stages
    def setup(self, identity: SiteIdentity, call_next: Callable) -> Message:
        sample = self.configs.get(SecAggKey.SAMPLE_NUMBER)
        share = self.configs.get(SecAggKey.SHARE_NUMBER)
        sites, least = len(identity.roster), self.policy.secure_participants
        if type(sample) is int and type(share) is int:  # else SecAgg+ refuses the message
            if least is None and sample != sites:
                self.refuse(
                    SECURE_PARTICIPANTS,
                    f"the round has {sample} participants, its roster {sites} sites, and its "
                    f"policy has {SECURE_PARTICIPANTS} = roster (every site of the roster)",
                )
            if least is not None and not least <= sample <= sites:
                self.refuse(
                    SECURE_PARTICIPANTS,
                    f"the round has {sample} participants; its policy {SECURE_PARTICIPANTS} = "
                    f"{least} and its roster of {sites} sites allow {least} to {sites}",
                )
            if share != sample:
                self.refuse(
                    SECURE_PARTICIPANTS,
                    f"each site would share its keys with {share} of the {sample} participants; "
                    "it must see every participant (SecAgg+ share_num = sample_num)",
                )
        state = self.state
        state.group, state.nodes, state.names, state.keys, state.sent_hash = (
            self.group,
            [],
            [],
            [],
            None,
        )
        state.save(self.ctxt)
        reply = call_next(self.msg, self.ctxt)
        if reply.has_error():
            return reply
        keys = reply.content[RECORD_KEY_CONFIGS]
        pk1, pk2 = keys[SecAggKey.PUBLIC_KEY_1], keys[SecAggKey.PUBLIC_KEY_2]
        assert isinstance(pk1, bytes) and isinstance(pk2, bytes)  # SecAgg+'s own reply
        statement = keys_statement(self.run_id, self.group, self.node, pk1, pk2)
        reply.content[IDENTITY] = ConfigRecord(
            {PUBLIC_KEY: identity.public_key, SIGNATURE: identity.sign(statement)}
        )
        return reply

    def share_keys(self, identity: SiteIdentity, call_next: Callable) -> Message:
        peers = self.msg.content.pop(PEERS, None)
        state = self.state
        if state.group != self.group:
            self.refuse(ROSTER, f"keys for round {self.group}, whose setup it did not answer")
        if peers is None:
            self.refuse(ROSTER, "the server relayed no signatures for the participants' keys")
        roster = identity.roster
        signers: dict[str, int] = {}
        keys: dict[int, tuple[str, bytes]] = {}
        for text, value in self.configs.items():
            if text == SecAggKey.STAGE:
                continue
            pair = _pair(value)
            if not text.isdigit() or pair is None:
                self.refuse(ROSTER, f"participant entry {text[:30]!r} is not a node's two keys")
            node = int(text)
            relayed = _pair(peers.get(text))
            if relayed is None:
                self.refuse(ROSTER, f"participant node {node}'s keys are signed by no site")
            public_key, signature = relayed
            name = roster.name_of(public_key)
            if name is None:
                self.refuse(ROSTER, f"participant node {node} signs with a key not in its roster")
            statement = keys_statement(self.run_id, self.group, node, *pair)
            # its own entry: its own key (checked below) and, by SecAgg+, its own two keys
            if node != self.node and not verify(public_key, signature, statement):
                self.refuse(
                    ROSTER,
                    f"participant node {node}'s signature (as site {name!r}) over its SecAgg+ "
                    "keys does not verify",
                )
            if name in signers:
                self.refuse(
                    ROSTER,
                    f"roster site {name!r} signs for two participants (nodes {signers[name]} "
                    f"and {node})",
                )
            if node == self.node and public_key != identity.public_key:
                self.refuse(ROSTER, f"its own entry (node {node}) is signed by site {name!r}")
            signers[name] = node
            keys[node] = (name, public_key)
        if self.node not in keys:
            self.refuse(ROSTER, "the round's participants do not include this site")
        names = set(signers)
        least = self.policy.secure_participants
        if least is None and names != set(roster.sites):
            missing = ", ".join(sorted(set(roster.sites) - names))
            self.refuse(
                SECURE_PARTICIPANTS,
                f"the round's participants are {len(names)} of its roster's {len(roster)} sites "
                f"(missing: {missing}) and its policy has {SECURE_PARTICIPANTS} = roster",
            )
        if least is not None and len(names) < least:
            self.refuse(
                SECURE_PARTICIPANTS,
                f"the round has {len(names)} signed participants and its policy "
                f"{SECURE_PARTICIPANTS} = {least}",
            )
        if state.fixed is None:
            state.fixed = sorted(names)
        elif set(state.fixed) != names:
            self.refuse(
                SECURE_PARTICIPANTS,
                f"this run's first secure sum was with {', '.join(state.fixed)}; this round's "
                f"would be with {', '.join(sorted(names))} (two sums over different sets of "
                "sites reveal their difference)",
            )
        state.nodes = sorted(keys)
        state.names = [keys[node][0] for node in state.nodes]
        state.keys = [keys[node][1] for node in state.nodes]
        state.save(self.ctxt)
        return call_next(self.msg, self.ctxt)

    def collect(self, identity: SiteIdentity, call_next: Callable) -> Message:
        state = self.state
        if state.group != self.group or not state.nodes:
            self.refuse(
                ROSTER,
                f"its masked vector is asked for in round {self.group}, whose participants it "
                "has not verified",
            )
        token = _ROSTER_NAMES.set(tuple(sorted(state.names)))
        try:
            reply = call_next(self.msg, self.ctxt)
        finally:
            _ROSTER_NAMES.reset(token)
        if reply.has_error():
            return reply
        configs = reply.content[RECORD_KEY_CONFIGS]
        sent = vector_hash(_listed(configs, SecAggKey.MASKED_PARAMETERS, bytes))
        statement = submitted_statement(self.run_id, self.group, self.node, sent)
        reply.content[RECEIPT] = ConfigRecord({HASH: sent, SIGNATURE: identity.sign(statement)})
        state.sent_hash = sent
        state.save(self.ctxt)
        return reply

    def unmask(self, identity: SiteIdentity, call_next: Callable) -> Message:
        receipts = self.msg.content.pop(RECEIPTS, None)
        state = self.state
        if state.group != self.group or state.sent_hash is None:
            self.refuse(
                ROSTER,
                f"its key shares are asked for in round {self.group}, where it sent no masked "
                "vector",
            )
        dead = self.configs.get(SecAggKey.DEAD_NODE_ID_LIST)
        if dead:
            self.refuse(
                SECURE_PARTICIPANTS,
                "the server calls a participant dropped (a dropped participant's mask key "
                "would be revealed; a signed sum has every participant or none)",
            )
        active = self.configs.get(SecAggKey.ACTIVE_NODE_ID_LIST)
        if not isinstance(active, list) or sorted(map(int, active)) != state.nodes:
            self.refuse(
                SECURE_PARTICIPANTS,
                "the server's list of the round's surviving participants is not the "
                f"{len(state.nodes)} participants it verified",
            )
        if receipts is None:
            self.refuse(ROSTER, "the server relayed no receipts for the masked vectors")
        for node, name, public_key in zip(state.nodes, state.names, state.keys, strict=True):
            receipt = _pair(receipts.get(str(node)))
            valid = receipt is not None and (
                node == self.node  # its own: the hash it signed (checked below)
                or verify(
                    public_key,
                    receipt[1],
                    submitted_statement(self.run_id, self.group, node, receipt[0]),
                )
            )
            if receipt is None or not valid:
                self.refuse(
                    ROSTER, f"site {name!r} (node {node}) has no valid receipt for its vector"
                )
            if node == self.node and receipt[0] != state.sent_hash:
                self.refuse(ROSTER, "its own receipt, as relayed, is not the one it signed")
        return call_next(self.msg, self.ctxt)


# ----------------------------------------------------------------------------- the server side
def stage_of(messages: Iterable[Message]) -> str | None:
    """The SecAgg+ stage of a batch of messages (None: not SecAgg+)."""
    for message in messages:
        record = _config(message.content, RECORD_KEY_CONFIGS)
        if record is not None and SecAggKey.STAGE in record:
            return str(record[SecAggKey.STAGE])
    return None


class SignedSecAggRelay:
    """A Grid for ``SecAggPlusWorkflow`` that carries the sites' signatures: the setup replies'
    signed keys to every ``share_keys`` message (for the node ids it lists), the masked vectors'
    receipts to every ``unmask`` message (for its surviving node ids). Nodes that do not sign get
    nothing added. Everything else is the wrapped grid's."""

    def __init__(self, grid: Any):
        self._grid = grid
        self._identities: dict[int, list[bytes]] = {}
        self._receipts: dict[int, list[bytes]] = {}

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> list[Message]:
        messages = list(messages)
        stage = stage_of(messages)
        if stage == SecAggStage.SETUP:
            self._identities, self._receipts = {}, {}
        for message in messages:
            configs = _config(message.content, RECORD_KEY_CONFIGS)
            if configs is None:
                continue
            if stage == SecAggStage.SHARE_KEYS and self._identities:
                wanted = [int(k) for k in configs if k != SecAggKey.STAGE and k.isdigit()]
                self._attach(message, PEERS, wanted, self._identities)
            elif stage == SecAggStage.UNMASK and self._receipts:
                active = configs.get(SecAggKey.ACTIVE_NODE_ID_LIST) or []
                self._attach(message, RECEIPTS, active, self._receipts)  # type: ignore[arg-type]
        replies = self._grid.send_and_receive(messages, timeout=timeout)
        collected = {
            SecAggStage.SETUP: (IDENTITY, PUBLIC_KEY, self._identities),
            SecAggStage.COLLECT_MASKED_VECTORS: (RECEIPT, HASH, self._receipts),
        }
        if stage in collected:
            record_name, first, into = collected[stage]
            for reply in replies:
                record = None if reply.has_error() else _config(reply.content, record_name)
                if record is not None:
                    pair = _pair([record.get(first), record.get(SIGNATURE)])
                    if pair is not None:
                        into[int(reply.metadata.src_node_id)] = list(pair)
        return replies

    @staticmethod
    def _attach(
        message: Message, name: str, nodes: Iterable[int], known: dict[int, list[bytes]]
    ) -> None:
        relayed = {str(n): known[n] for n in nodes if n in known}
        if relayed:
            message.content[name] = ConfigRecord(relayed)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)
