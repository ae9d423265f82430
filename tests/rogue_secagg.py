"""A coordinator that runs SecAgg+'s server side itself (for tests, not a test module).

It drives the in-process grid with Flower Messages and Flower's own SecAgg+ primitives (key
pairs, Shamir shares, the share encryption, the mask generator), as a malicious ServerApp would:
it can run an honest round over any set of nodes, relaying the sites' signatures as the project's
relay does (or not), add participants whose keys it made (Sybils) and unmask a site's vector with
their shares, and send each site its own lists of survivors and dropouts. The vectors are integers
in [-CLIP, CLIP] with a quantisation range of 2 * CLIP, so sums and recovered vectors are exact.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from flwr.app import ConfigRecord, Message, MessageType, RecordDict
from flwr.common import FitIns, bytes_to_ndarray, ndarrays_to_parameters
from flwr.common.secure_aggregation.crypto.shamir import combine_shares, create_shares
from flwr.common.secure_aggregation.crypto.symmetric_encryption import (
    decrypt,
    encrypt,
    generate_shared_key,
)
from flwr.common.secure_aggregation.ndarrays_arithmetic import (
    factor_extract,
    parameters_addition,
    parameters_mod,
    parameters_subtraction,
)
from flwr.common.secure_aggregation.quantization import dequantize
from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS, Key, Stage
from flwr.common.secure_aggregation.secaggplus_utils import (
    pseudo_rand_gen,
    share_keys_plaintext_concat,
    share_keys_plaintext_separate,
)
from flwr.supercore.primitives.asymmetric import (
    bytes_to_private_key,
    bytes_to_public_key,
    generate_key_pairs,
    private_key_to_bytes,
    public_key_to_bytes,
)

from fedcausal_flwr.federation.core.site_identity import keys_statement, raw_public_key
from fedcausal_flwr.federation.runtime.flower_internals import fitins_to_recorddict
from fedcausal_flwr.federation.runtime.signed_secagg import (
    HASH,
    IDENTITY,
    PEERS,
    PUBLIC_KEY,
    RECEIPT,
    RECEIPTS,
    SIGNATURE,
)

CLIP = 64
MOD = 2**32


@dataclass
class Keys:
    """A participant's two SecAgg+ key pairs (private halves only for the coordinator's own)."""

    pk1: bytes
    pk2: bytes
    sk1: bytes = b""
    sk2: bytes = b""

    @classmethod
    def generate(cls) -> Keys:
        (sk1, pk1), (sk2, pk2) = generate_key_pairs(), generate_key_pairs()
        return cls(
            public_key_to_bytes(pk1),
            public_key_to_bytes(pk2),
            private_key_to_bytes(sk1),
            private_key_to_bytes(sk2),
        )


@dataclass
class Round:
    """What a round gave the coordinator: replies by stage and node, and the sum if it got one."""

    replies: dict[str, dict[int, Message]] = field(default_factory=dict)
    total: np.ndarray | None = None

    def errors(self) -> dict[int, Message]:
        """The error replies of the last stage that had any."""
        for stage in reversed(list(self.replies)):
            failed = {n: r for n, r in self.replies[stage].items() if r.has_error()}
            if failed:
                return failed
        return {}


class RogueSecAgg:
    """SecAgg+'s server side over a LocalGrid (see the module docstring)."""

    def __init__(self, grid, clip: int = CLIP):
        self.grid, self.clip = grid, clip
        self.round = 0
        self.group = "0"

    # ------------------------------------------------------------------ messages
    def send(self, contents: Mapping[int, RecordDict]) -> dict[int, Message]:
        messages = [
            Message(content, dst_node_id=node, message_type=MessageType.TRAIN, group_id=self.group)
            for node, content in contents.items()
        ]
        return {r.metadata.src_node_id: r for r in self.grid.send_and_receive(messages)}

    def setup(self, nodes: Sequence[int], sample: int | None = None, share: int | None = None,
              threshold: int = 2) -> dict[int, Message]:  # fmt: skip
        self.round += 1
        self.group = str(self.round)
        n = len(nodes) if sample is None else sample
        record = {
            Key.STAGE: Stage.SETUP, Key.SAMPLE_NUMBER: n, Key.SHARE_NUMBER: share or n,
            Key.THRESHOLD: threshold, Key.CLIPPING_RANGE: float(self.clip),
            Key.TARGET_RANGE: 2 * self.clip, Key.MOD_RANGE: MOD, Key.MAX_WEIGHT: 1.0,
        }  # fmt: skip
        return self.send({node: RecordDict({RECORD_KEY_CONFIGS: ConfigRecord(record)})
                          for node in nodes})  # fmt: skip

    def share_keys(
        self, to: Sequence[int], keys: Mapping[int, Keys], peers: Mapping[int, list] | None
    ) -> dict[int, Message]:
        contents = {}
        for node in to:
            record = ConfigRecord({str(n): [k.pk1, k.pk2] for n, k in keys.items()})
            record[Key.STAGE] = Stage.SHARE_KEYS
            content = RecordDict({RECORD_KEY_CONFIGS: record})
            if peers is not None:
                content[PEERS] = ConfigRecord({str(n): list(p) for n, p in peers.items()})
            contents[node] = content
        return self.send(contents)

    def collect(self, shares: Mapping[int, list[tuple[int, bytes]]]) -> dict[int, Message]:
        """``shares``: destination -> [(source, ciphertext)]."""
        contents = {}
        for node, received in shares.items():
            content = fitins_to_recorddict(FitIns(ndarrays_to_parameters([]), {}), True)
            content.config_records[RECORD_KEY_CONFIGS] = ConfigRecord({
                Key.STAGE: Stage.COLLECT_MASKED_VECTORS,
                Key.CIPHERTEXT_LIST: [c for _, c in received],
                Key.SOURCE_LIST: [s for s, _ in received],
            })  # fmt: skip
            contents[node] = content
        return self.send(contents)

    def unmask(
        self, lists: Mapping[int, tuple[list[int], list[int]]], receipts: Mapping[int, list] | None
    ) -> dict[int, Message]:
        """``lists``: node -> (active, dead) as that node is told."""
        contents = {}
        for node, (active, dead) in lists.items():
            record = ConfigRecord({Key.STAGE: Stage.UNMASK, Key.ACTIVE_NODE_ID_LIST: active,
                                   Key.DEAD_NODE_ID_LIST: dead})  # fmt: skip
            content = RecordDict({RECORD_KEY_CONFIGS: record})
            if receipts is not None:
                content[RECEIPTS] = ConfigRecord({str(n): list(r) for n, r in receipts.items()})
            contents[node] = content
        return self.send(contents)

    # ------------------------------------------------------------------ an honest round
    def secure_sum(
        self,
        nodes: Sequence[int],
        relay: bool = True,
        unmask_lists: Callable[[int], tuple[list[int], list[int]]] | None = None,
        receipts: bool = True,
    ) -> Round:
        """SecAgg+ over ``nodes`` (a full mesh, threshold 2), relaying the sites' signatures
        (``relay``) and receipts (``relay and receipts``); ``unmask_lists(node)`` overrides what
        each node is told at unmask (default: every node survived)."""
        out = Round()
        out.replies["setup"] = replies = self.setup(nodes)
        if any(r.has_error() for r in replies.values()):
            return out
        keys = {n: Keys(*_pair(r, Key.PUBLIC_KEY_1, Key.PUBLIC_KEY_2)) for n, r in replies.items()}
        identities = {n: list(_record(r, IDENTITY, PUBLIC_KEY, SIGNATURE)) for n, r in
                      replies.items() if IDENTITY in r.content.config_records}  # fmt: skip
        out.replies["share_keys"] = replies = self.share_keys(
            nodes, keys, identities if relay and identities else None
        )
        if any(r.has_error() for r in replies.values()):
            return out
        forwarded: dict[int, list[tuple[int, bytes]]] = {n: [] for n in nodes}
        for src, reply in replies.items():
            record = reply.content.config_records[RECORD_KEY_CONFIGS]
            for dst, ciphertext in zip(record[Key.DESTINATION_LIST], record[Key.CIPHERTEXT_LIST],
                                       strict=True):  # fmt: skip
                forwarded[int(dst)].append((src, ciphertext))
        out.replies["collect"] = replies = self.collect(forwarded)
        if any(r.has_error() for r in replies.values()):
            return out
        masked = {n: [bytes_to_ndarray(b) for b in r.content.config_records[RECORD_KEY_CONFIGS]
                      [Key.MASKED_PARAMETERS]] for n, r in replies.items()}  # fmt: skip
        signed = {n: list(_record(r, RECEIPT, HASH, SIGNATURE)) for n, r in replies.items()
                  if RECEIPT in r.content.config_records}  # fmt: skip
        lists = {n: (unmask_lists or (lambda _: (list(nodes), [])))(n) for n in nodes}
        relayed = signed if relay and receipts and signed else None
        out.replies["unmask"] = replies = self.unmask(lists, relayed)
        if any(r.has_error() for r in replies.values()):
            return out
        seed_shares: dict[int, list[bytes]] = {n: [] for n in nodes}
        for node, reply in replies.items():
            record = reply.content.config_records[RECORD_KEY_CONFIGS]
            pairs = zip(record[Key.NODE_ID_LIST], record[Key.SHARE_LIST], strict=True)
            for owner, share in list(pairs)[: len(lists[node][0])]:  # the survivors' seeds
                seed_shares[int(owner)].append(share)
        total = None
        for vector in masked.values():
            total = vector if total is None else parameters_addition(total, vector)
        assert total is not None
        for node in nodes:  # every pairwise mask cancels: remove each node's own mask
            mask = pseudo_rand_gen(combine_shares(seed_shares[node]), MOD, _shapes(total))
            total = parameters_subtraction(total, mask)
        out.total = self._values(total, len(nodes))
        return out

    def _values(self, quantised: list[np.ndarray], count: int) -> np.ndarray:
        _, vector = factor_extract(parameters_mod(quantised, MOD))
        (values,) = dequantize(vector, float(self.clip), 2 * self.clip)
        return np.rint(values - (count - 1) * self.clip)

    # ------------------------------------------------------------------ the Sybil attack
    def sybil_attack(self, site: int, sybils: int = 2, relay: str = "none") -> Round:
        """One real ``site`` and ``sybils`` participants whose keys the coordinator made; if the
        site answers, its own vector, unmasked with the Sybils' shares of its mask (``total``).
        ``relay``: ``none`` (no signatures), ``coordinator`` (the coordinator signs the Sybils'
        keys with a key of its own), ``replay`` (the site's own signature, shown for each)."""
        out = Round()
        n = sybils + 1
        out.replies["setup"] = replies = self.setup([site], sample=n, threshold=2)
        if replies[site].has_error():
            return out
        own = Keys(*_pair(replies[site], Key.PUBLIC_KEY_1, Key.PUBLIC_KEY_2))
        fakes = {7001 + k: Keys.generate() for k in range(sybils)}
        peers = None
        if relay != "none":
            signed = _record(replies[site], IDENTITY, PUBLIC_KEY, SIGNATURE)
            peers = {site: list(signed)}
            forger = Ed25519PrivateKey.generate()
            for node, keys in fakes.items():
                statement = keys_statement(self.grid.run.run_id, self.group, node, keys.pk1,
                                           keys.pk2)  # fmt: skip
                peers[node] = (list(signed) if relay == "replay"
                               else [raw_public_key(forger), forger.sign(statement)])  # fmt: skip
        out.replies["share_keys"] = replies = self.share_keys([site], {site: own, **fakes}, peers)
        if replies[site].has_error():
            return out
        # the site's shares for the Sybils, decrypted with their keys: its mask seed, whole
        record = replies[site].content.config_records[RECORD_KEY_CONFIGS]
        seed_shares = []
        for dst, ciphertext in zip(record[Key.DESTINATION_LIST], record[Key.CIPHERTEXT_LIST],
                                   strict=True):  # fmt: skip
            shared = generate_shared_key(bytes_to_private_key(fakes[int(dst)].sk2),
                                         bytes_to_public_key(own.pk2))  # fmt: skip
            _, _, seed_share, _ = share_keys_plaintext_separate(decrypt(shared, ciphertext))
            seed_shares.append(seed_share)
        seed = combine_shares(seed_shares)
        # the Sybils' own (well-formed) shares for the site, so that it masks its vector
        forwarded = []
        for node, keys in fakes.items():
            seeds = create_shares(os.urandom(32), 2, n)
            sk1s = create_shares(keys.sk1, 2, n)
            plaintext = share_keys_plaintext_concat(node, site, seeds[0], sk1s[0])
            shared = generate_shared_key(
                bytes_to_private_key(keys.sk2), bytes_to_public_key(own.pk2)
            )
            forwarded.append((node, encrypt(shared, plaintext)))
        out.replies["collect"] = replies = self.collect({site: forwarded})
        if replies[site].has_error():
            return out
        masked = [bytes_to_ndarray(b) for b in replies[site].content.config_records[
            RECORD_KEY_CONFIGS][Key.MASKED_PARAMETERS]]  # fmt: skip
        vector = parameters_subtraction(masked, pseudo_rand_gen(seed, MOD, _shapes(masked)))
        for node, keys in fakes.items():  # the pairwise masks, from the Sybils' private keys
            shared = generate_shared_key(
                bytes_to_private_key(keys.sk1), bytes_to_public_key(own.pk1)
            )
            mask = pseudo_rand_gen(shared, MOD, _shapes(masked))
            added = site > node  # the site adds the mask of a smaller node id, else subtracts it
            vector = (parameters_subtraction if added else parameters_addition)(vector, mask)
        out.total = self._values(vector, 1)
        return out


def _shapes(arrays: list[np.ndarray]) -> list[tuple[int, ...]]:
    return [a.shape for a in arrays]


def _pair(reply: Message, first: str, second: str) -> tuple[bytes, bytes]:
    record = reply.content.config_records[RECORD_KEY_CONFIGS]
    return record[first], record[second]


def _record(reply: Message, name: str, first: str, second: str) -> tuple[bytes, bytes]:
    record = reply.content.config_records[name]
    return record[first], record[second]
