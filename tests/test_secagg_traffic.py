"""SecAgg+'s own traffic is counted apart from the payload, and matches a count by hand.

The toy protocol (tests/test_federation_toy.py) has one secure step: a vector of 10 int64 level
counts per client, summed by SecAgg+ over 3 clients (every client the neighbour of every other).
The hand count below follows SecAgg+'s four stages (Flower 1.42's ``SecAggPlusWorkflow`` and
``secaggplus_mod``) with sizes derived from the public formats involved (PEM keys of NIST P-384,
Shamir shares of 16-byte blocks, Fernet tokens, ``.npy`` arrays), not from the run.
"""

from __future__ import annotations

import base64
import io
import math

import numpy as np
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from fedcausal_flwr.federation.runtime.runners import run_method
from fedcausal_flwr.result import Result
from tests.test_federation_toy import toy_partitions

N = 3  # clients, all neighbours of each other (SecAgg+ topology for 3 clients)
D = 10  # length of the toy's secure vector: levels of a (3) + b (3) + c (4)
NUMBER = 8  # bytes counted for an int or float value


def npy_len(array: np.ndarray) -> int:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return len(buffer.getvalue())


def shamir_share_len(secret_len: int) -> int:
    """Flower's Shamir share of a secret: 4 index bytes + 16 per block of the PKCS#7-padded
    secret."""
    return 4 + 16 * (secret_len // 16 + 1)


def fernet_token_len(plaintext_len: int) -> int:
    """Fernet: version (1) + time (8) + IV (16) + AES-CBC of the padded text + HMAC (32),
    base64url encoded."""
    raw = 1 + 8 + 16 + 16 * (plaintext_len // 16 + 1) + 32
    return 4 * math.ceil(raw / 3)


def hand_count() -> dict[str, tuple[int, int]]:
    """Per stage: (bytes down to ONE client, bytes up from ONE client)."""
    key = ec.generate_private_key(ec.SECP384R1())
    public_pem = len(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    private_pem = len(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    seed_share = shamir_share_len(32)  # the 32-byte private mask seed
    key_share = shamir_share_len(private_pem)  # the first private key
    # a share for one neighbour: src id (8) + dst id (8) + share length (4) + both shares
    ciphertext = fernet_token_len(8 + 8 + 4 + seed_share + key_share)
    others = N - 1
    # masked vector: the weight factor as a (1,) int64 array + the D counts, masked, as int64
    masked = npy_len(np.zeros(1, np.int64)) + npy_len(np.zeros(D, np.int64))
    return {
        # 'setup' + sample, share numbers, threshold, clip, target and mod ranges, max weight;
        # back: two public keys
        "setup": (len("setup") + 7 * NUMBER, 2 * public_pem),
        # every neighbour's (itself included) two public keys; back: one encrypted share pair
        # and its destination id per other neighbour
        "share_keys": (
            len("share_keys") + N * 2 * public_pem,
            others * (ciphertext + NUMBER),
        ),
        # the encrypted shares addressed to it and their sources; back: the masked vector
        "collect_masked_vectors": (
            len("collect_masked_vectors") + others * (ciphertext + NUMBER),
            masked,
        ),
        # the surviving neighbours (all N) and the dropped ones (none); back: one mask seed
        # share per survivor, with its id
        "unmask": (len("unmask") + N * NUMBER, N * (NUMBER + seed_share)),
    }


def test_secagg_protocol_bytes_match_a_hand_count_and_stay_apart_from_the_payload():
    parts = toy_partitions(N)
    plain = run_method("toy", parts)
    secure = run_method("toy", parts, secure=True)
    expected = hand_count()

    secure_round = next(e["round"] for e in secure.log if e["secure"])
    assert [(e["round"], e["stage"]) for e in secure.secagg] == [
        (secure_round, stage) for stage in expected
    ]
    for entry in secure.secagg:
        down, up = expected[entry["stage"]]
        assert (entry["n_clients"], entry["n_replies"]) == (N, N)
        assert entry["per_client"] == {k: {"up": up, "down": down} for k in range(N)}, entry
        assert (entry["bytes_up"], entry["bytes_down"]) == (N * up, N * down)
    assert secure.secagg_bytes_up == N * sum(up for _, up in expected.values())
    assert secure.secagg_bytes_down == N * sum(down for down, _ in expected.values())
    # for the record: 3 clients, a 10-value vector -> 6,582 B up and 7,959 B down of protocol,
    # against 2,660 B up / 546 B down of payload for the whole run
    assert (secure.secagg_bytes_up, secure.secagg_bytes_down) == (6582, 7959)

    # the payload is counted as in a plain run, and a plain run has no protocol traffic
    assert (secure.bytes_up, secure.bytes_down) == (plain.bytes_up, plain.bytes_down)
    assert (plain.secagg_bytes_up, plain.secagg_bytes_down, plain.secagg) == (0, 0, [])
    assert "SecAgg+ protocol: 6,582 B up / 7,959 B down" in secure.summary()
    assert "SecAgg+" not in plain.summary()

    # the counts survive the result file
    again = Result.from_json(secure.to_json())
    assert again.secagg == secure.secagg
    assert (again.secagg_bytes_up, again.secagg_bytes_down) == (6582, 7959)


def test_fernet_size_used_by_the_hand_count():
    """The Fernet token formula above, checked on Fernet itself."""
    from cryptography.fernet import Fernet

    fernet = Fernet(base64.urlsafe_b64encode(bytes(32)))
    for length in (0, 15, 16, 396):
        assert len(fernet.encrypt(bytes(length))) == fernet_token_len(length)
