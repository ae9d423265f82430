"""A site's signing identity and the federation's roster (Flower-free).

Flower 1.42's SecAgg+ trusts the server: it tells each site who the other participants are, so
a coordinator could add participants whose keys it holds (Sybils) and unmask a site's vector
(Bonawitz et al., CCS 2017, sec. 6). Here each site holds an Ed25519 signing key (policy key
``site-key``) and a roster of the public keys of the sites it sums with (``roster``); it signs
the SecAgg+ keys it advertises and accepts only participants whose keys a roster site signed
(:mod:`~fedcausal_flwr.federation.runtime.signed_secagg` applies this to SecAgg+'s messages).

Files:

* ``NAME.key``: the private key, PEM PKCS8, mode 0600 (a key readable by group or others is
  refused, as ssh refuses one). It never leaves the site.
* ``NAME.pub``: one line ``NAME ed25519:<base64 of the 32 raw bytes>``, sent to whoever
  assembles the roster.
* the roster, TOML: ``[sites]`` and one ``"NAME" = "ed25519:<base64>"`` per site. Every site
  gets the same roster (it is public: it holds public keys only).

Rotation: a site makes a new key pair and sends its new ``.pub``; the roster is assembled again
and handed to every site; each site then points ``site-key`` at its new key. A run in progress
keeps the keys it started with only as long as the files do not change, so rotate between runs.

Signed statements carry a domain tag and length-prefixed fields, so no statement of one kind
(or with other field boundaries) reads as another: :func:`keys_statement` (run, SecAgg+ round,
node, the two SecAgg+ public keys) and :func:`submitted_statement` (run, round, node, the
SHA-256 of the masked vector the node sent).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

#: how a public key is written in a ``.pub`` file and in the roster
KEY_PREFIX = "ed25519:"
RAW_KEY_BYTES = 32
PRIVATE_SUFFIX, PUBLIC_SUFFIX = ".key", ".pub"
#: the policy keys that name the files (their spelling in site_policy.KEYS)
SITE_KEY, ROSTER = "site-key", "roster"
#: a site's name: a file name and a TOML key without quoting surprises
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: the domain tags of the two statements a site signs
KEYS_TAG = b"fedcausal-flwr secagg+ keys v1"
SUBMITTED_TAG = b"fedcausal-flwr secagg+ submitted v1"


class SiteIdentityError(ValueError):
    """A key or roster file is missing, unreadable or invalid (the message names the file and
    the entry, never the file's content); ``key``: the policy key naming the file, if any."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


def check_name(name: str) -> str:
    """``name`` if it is a valid site name (letters, digits, ``.``, ``_``, ``-``)."""
    if not NAME.fullmatch(name):
        raise SiteIdentityError(
            f"site name {name!r} must be 1-64 letters, digits, '.', '_' or '-' (not starting "
            "with '.', '_' or '-')"
        )
    return name


# ----------------------------------------------------------------------------- keys
def public_key_text(raw: bytes) -> str:
    """``ed25519:<base64>`` of a raw public key."""
    return KEY_PREFIX + base64.b64encode(raw).decode("ascii")


def parse_public_key(text: str, where: str) -> bytes:
    """The raw 32 bytes of ``ed25519:<base64>``; ``where`` names the file and entry in the error
    (which never quotes the text)."""
    if not isinstance(text, str) or not text.startswith(KEY_PREFIX):
        raise SiteIdentityError(f"{where} is not an '{KEY_PREFIX}<base64>' public key")
    try:
        raw = base64.b64decode(text[len(KEY_PREFIX) :].strip(), validate=True)
    except (binascii.Error, ValueError):
        raise SiteIdentityError(f"{where}: its key is not valid base64") from None
    if len(raw) != RAW_KEY_BYTES:
        raise SiteIdentityError(
            f"{where}: its key has {len(raw)} bytes; an Ed25519 public key has {RAW_KEY_BYTES}"
        )
    return raw


def raw_public_key(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@dataclass(frozen=True)
class KeyFiles:
    """A site's key pair as written by :func:`write_site_key` (paths)."""

    name: str
    private_key: Path
    public_key: Path


def write_site_key(folder: str | os.PathLike, name: str) -> KeyFiles:
    """A new Ed25519 key pair: ``folder/NAME.key`` (mode 0600, never overwritten) and
    ``folder/NAME.pub``."""
    check_name(name)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    private, public = folder / f"{name}{PRIVATE_SUFFIX}", folder / f"{name}{PUBLIC_SUFFIX}"
    for path in (private, public):
        if path.exists():
            raise SiteIdentityError(f"{path} exists; keys are never overwritten")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # created readable by its owner only (no moment where others could read it)
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    os.chmod(private, 0o600)
    public.write_text(f"{name} {public_key_text(raw_public_key(key))}\n", encoding="ascii")
    return KeyFiles(name, private, public)


def load_private_key(path: str | os.PathLike, key: str = SITE_KEY) -> Ed25519PrivateKey:
    """The private key at ``path``; refused if group or others may read it (``chmod 600``), if
    it is missing or not a PEM Ed25519 key. ``key`` names the policy key in errors."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except OSError as err:
        raise SiteIdentityError(f"{key} {str(path)!r} cannot be read ({err.strerror})") from None
    if os.name == "posix" and mode & 0o077:
        raise SiteIdentityError(
            f"{key} {str(path)!r} is readable by group or others (mode {mode & 0o777:04o}); a "
            f"private key must be readable by its owner only: chmod 600 {path}"
        )
    try:
        data = path.read_bytes()
    except OSError as err:
        raise SiteIdentityError(f"{key} {str(path)!r} cannot be read ({err.strerror})") from None
    try:
        loaded = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        loaded = None
    if not isinstance(loaded, Ed25519PrivateKey):
        raise SiteIdentityError(
            f"{key} {str(path)!r} is not an unencrypted PEM Ed25519 private key (make one with "
            "`fedcausal-flwr federation keys`)"
        )
    return loaded


def read_public_key_file(path: str | os.PathLike) -> tuple[str, bytes]:
    """``(name, raw key)`` of a ``.pub`` file (one line ``NAME ed25519:<base64>``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or "not UTF-8 text"
        where = f"public key file {str(path)!r}"
        raise SiteIdentityError(f"{where} cannot be read ({reason})") from None
    lines = [line for line in text.splitlines() if line.strip()]
    parts = lines[0].split() if len(lines) == 1 else []
    if len(parts) != 2:
        raise SiteIdentityError(
            f"public key file {str(path)!r} is not one line 'NAME {KEY_PREFIX}<base64>'"
        )
    name = check_name(parts[0])
    return name, parse_public_key(parts[1], f"public key file {str(path)!r}")


# ----------------------------------------------------------------------------- the roster
@dataclass(frozen=True)
class Roster:
    """The sites a site sums with: name -> raw public key (``path``: where it was read)."""

    sites: Mapping[str, bytes]
    path: str = ""
    by_key: dict[bytes, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_key: dict[bytes, str] = {}
        for name, raw in self.sites.items():
            if raw in by_key:
                raise SiteIdentityError(
                    f"roster {self.path!r}: entries {by_key[raw]!r} and {name!r} have the same key"
                )
            by_key[raw] = name
        object.__setattr__(self, "by_key", by_key)  # frozen: set once, here

    def name_of(self, raw: bytes) -> str | None:
        """The roster name of a public key (None: not in the roster)."""
        return self.by_key.get(raw)

    def __len__(self) -> int:
        return len(self.sites)


def roster_text(sites: Mapping[str, bytes]) -> str:
    """The roster file for ``sites`` (name -> raw public key), names sorted."""
    lines = ["# fedcausal-flwr roster: the sites that sum together (public keys only)", "[sites]"]
    lines += [f'"{check_name(n)}" = "{public_key_text(sites[n])}"' for n in sorted(sites)]
    return "\n".join(lines) + "\n"


def write_roster(path: str | os.PathLike, public_key_files: Iterable[str | os.PathLike]) -> Path:
    """The roster of the given ``.pub`` files (names must be distinct, keys too)."""
    sites: dict[str, bytes] = {}
    for file in public_key_files:
        name, raw = read_public_key_file(file)
        if name in sites:
            raise SiteIdentityError(f"two public key files name site {name!r}")
        sites[name] = raw
    if not sites:
        raise SiteIdentityError("a roster needs at least one site's public key file")
    Roster(sites, str(path))  # distinct keys
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(roster_text(sites), encoding="utf-8")
    return path


def read_roster(path: str | os.PathLike, key: str = ROSTER) -> Roster:
    """The roster at ``path``; errors name the file and the entry (``key``: the policy key)."""
    where = f"{key} {str(path)!r}"
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise SiteIdentityError(f"{where} cannot be read ({err.strerror})") from None
    except UnicodeDecodeError:
        raise SiteIdentityError(f"{where} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as err:
        raise SiteIdentityError(f"{where} is not TOML ({err})") from None
    sites = data.get("sites")
    if not isinstance(sites, dict) or set(data) != {"sites"} or not sites:
        raise SiteIdentityError(
            f'{where} must hold one [sites] table of "NAME" = "{KEY_PREFIX}<base64>" entries'
        )
    parsed = {}
    for name, text in sites.items():
        if not NAME.fullmatch(name):
            raise SiteIdentityError(f"{where}: entry {name!r} is not a valid site name")
        parsed[name] = parse_public_key(text, f"{where}: entry {name!r}")
    return Roster(parsed, str(path))


# ----------------------------------------------------------------------------- statements
def _field(value: bytes | str | int) -> bytes:
    data = value if isinstance(value, bytes) else str(value).encode("utf-8")
    return len(data).to_bytes(8, "big") + data


def _statement(tag: bytes, *fields: bytes | str | int) -> bytes:
    return _field(tag) + b"".join(_field(f) for f in fields)


def keys_statement(run_id: int, group_id: str, node_id: int, pk1: bytes, pk2: bytes) -> bytes:
    """What a site signs at SecAgg+'s setup: these two keys are node ``node_id``'s in round
    ``group_id`` of run ``run_id``."""
    return _statement(KEYS_TAG, run_id, group_id, node_id, pk1, pk2)


def submitted_statement(run_id: int, group_id: str, node_id: int, vector_hash: bytes) -> bytes:
    """What a site signs when it sends its masked vector: node ``node_id`` sent the vector whose
    SHA-256 is ``vector_hash`` in round ``group_id`` of run ``run_id``."""
    return _statement(SUBMITTED_TAG, run_id, group_id, node_id, vector_hash)


def vector_hash(parts: Sequence[bytes]) -> bytes:
    """SHA-256 of a masked vector's parts (each length-prefixed)."""
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(len(part).to_bytes(8, "big"))  # as _field, without copying the part
        hasher.update(part)
    return hasher.digest()


def verify(public_key: bytes, signature: bytes, statement: bytes) -> bool:
    """Whether ``signature`` is the owner of ``public_key`` (raw) signing ``statement``."""
    if not isinstance(signature, bytes) or not isinstance(public_key, bytes):
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, statement)
    except (InvalidSignature, ValueError):
        return False
    return True


# ----------------------------------------------------------------------------- a site
@dataclass(frozen=True)
class SiteIdentity:
    """A site's signing key, its roster, and its own name in it (the entry with its key)."""

    name: str
    private_key: Ed25519PrivateKey
    roster: Roster

    @property
    def public_key(self) -> bytes:
        return raw_public_key(self.private_key)

    def sign(self, statement: bytes) -> bytes:
        return self.private_key.sign(statement)

    @classmethod
    def from_files(cls, site_key: str | os.PathLike, roster: str | os.PathLike) -> SiteIdentity:
        """The identity of a site's key and roster files; its key must be in the roster. An
        error's ``key`` is the policy key of the file at fault."""
        try:
            key = load_private_key(site_key)
        except SiteIdentityError as err:
            raise SiteIdentityError(str(err), SITE_KEY) from None
        try:
            read = read_roster(roster)
        except SiteIdentityError as err:
            raise SiteIdentityError(str(err), ROSTER) from None
        name = read.name_of(raw_public_key(key))
        if name is None:
            raise SiteIdentityError(
                f"the public key of {SITE_KEY} {str(site_key)!r} is not in {ROSTER} "
                f"{str(roster)!r}: add this site's .pub to the roster and hand it out again",
                ROSTER,
            )
        return cls(name, key, read)


def make_federation_keys(folder: str | os.PathLike, names: Sequence[str]) -> list[dict[str, str]]:
    """One key pair per site and their roster in ``folder`` (``roster.toml``); each site's
    policy keys (``site-key``, ``roster``) for its node config, in ``names``' order."""
    folder = Path(folder)
    keys = [write_site_key(folder, name) for name in names]
    roster = write_roster(folder / "roster.toml", [k.public_key for k in keys])
    return [{SITE_KEY: str(k.private_key), ROSTER: str(roster)} for k in keys]
