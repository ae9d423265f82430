"""Certificates and keys for a TLS deployment with SuperNode authentication, made with the
``cryptography`` package (installed with Flower; no ``openssl`` needed).

What Flower 1.42 expects, and what this module writes:

* ``ca.crt``: a self-signed CA certificate. The SuperLink gets it as ``--ssl-ca-certfile``; every
  SuperNode as ``--root-certificates``; the ``flwr`` CLI as ``root-certificates`` in its
  ``[superlink.<name>]`` connection.
* ``server.pem`` / ``server.key``: the SuperLink's certificate, signed by the CA, valid for the
  host names and IP addresses the SuperNodes dial (``--ssl-certfile`` / ``--ssl-keyfile``).
* ``<node>`` / ``<node>.pub``: a SuperNode's ECDSA key pair in OpenSSH format (what
  ``ssh-keygen -t ecdsa -b 384`` writes). The private key stays at the site
  (``--auth-supernode-private-key``); the public key is registered at the SuperLink with
  ``flwr supernode register <node>.pub <federation>``.

For a federation across machines, run this once at the coordinator (``fedcausal-flwr federation
credentials``) and hand each site ``ca.crt`` and its own key; see docs/deploy.md.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Where a SuperNode on the same machine dials the SuperLink.
LOCAL_HOSTS = ("127.0.0.1", "localhost")
#: Validity of the generated certificates.
VALID_DAYS = 365


@dataclass(frozen=True)
class TlsFiles:
    """The SuperLink's TLS files (paths)."""

    ca_certificate: Path
    server_certificate: Path
    server_key: Path


@dataclass(frozen=True)
class NodeKey:
    """A SuperNode's authentication key pair in OpenSSH format (paths)."""

    private_key: Path
    public_key: Path


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if private:  # private keys readable by their owner only
        os.chmod(path, 0o600)
    return path


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "fedcausal-flwr federation"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _subject_alternative_names(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def write_tls_files(
    directory: str | os.PathLike, hosts: Sequence[str] = LOCAL_HOSTS, days: int = VALID_DAYS
) -> TlsFiles:
    """A new CA (``ca.crt``; its key is not kept: nothing else is ever signed with it) and a
    SuperLink certificate it signed for ``hosts`` (``server.pem``, ``server.key``), in
    ``directory``. ``hosts`` are the names or IP addresses SuperNodes and the CLI dial."""
    if not hosts:
        raise ValueError("the server certificate needs at least one host name or IP address")
    directory = Path(directory)
    now = dt.datetime.now(dt.UTC)
    start, end = now - dt.timedelta(minutes=5), now + dt.timedelta(days=days)

    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_name = _name("fedcausal-flwr local CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    server_key = ec.generate_private_key(ec.SECP384R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_subject_alternative_names(hosts), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )

    pem = serialization.Encoding.PEM
    return TlsFiles(
        ca_certificate=_write(directory / "ca.crt", ca_cert.public_bytes(pem)),
        server_certificate=_write(directory / "server.pem", server_cert.public_bytes(pem)),
        server_key=_write(
            directory / "server.key",
            server_key.private_bytes(
                pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
            private=True,
        ),
    )


def write_node_key(directory: str | os.PathLike, name: str) -> NodeKey:
    """A SuperNode's ECDSA (P-384) key pair in OpenSSH format: ``directory/name`` (private,
    unencrypted, mode 600) and ``directory/name.pub``."""
    directory = Path(directory)
    key = ec.generate_private_key(ec.SECP384R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return NodeKey(
        private_key=_write(directory / name, private, private=True),
        public_key=_write(directory / f"{name}.pub", public + f" {name}\n".encode()),
    )


def check_readable(path: str | os.PathLike, what: str, option: str) -> Path:
    """``path`` if it is a readable file, else a :class:`FileNotFoundError` naming ``what`` it
    should be and the ``option`` that takes it (before Flower prints a traceback for it)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{option}: the {what} file {str(path)!r} does not exist")
    if not os.access(path, os.R_OK):
        raise PermissionError(f"{option}: the {what} file {str(path)!r} is not readable")
    return path


def check_node_key(path: str | os.PathLike, option: str = "--auth-supernode-private-key") -> Path:
    """``path`` if it holds an ECDSA private key in OpenSSH format (what Flower's SuperNode
    accepts), else a clear error naming the file and the ``option``."""
    path = check_readable(path, "SuperNode private key", option)
    try:
        key = serialization.load_ssh_private_key(path.read_bytes(), None)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"{option}: {str(path)!r} is not an unencrypted OpenSSH private key ({error})"
        ) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(
            f"{option}: {str(path)!r} holds a {type(key).__name__}; Flower's SuperNode "
            "authentication needs an ECDSA key (ssh-keygen -t ecdsa -b 384)"
        )
    return path


def check_certificate(path: str | os.PathLike, what: str, option: str) -> Path:
    """``path`` if it holds a PEM certificate, else a clear error naming ``option``."""
    path = check_readable(path, what, option)
    try:
        x509.load_pem_x509_certificates(path.read_bytes())
    except ValueError as error:
        raise ValueError(f"{option}: {str(path)!r} is not a PEM certificate ({error})") from None
    return path
