"""The stack's local certificate authority and the certificates its broker and tests use.

Made with trustme (a well-kept library for test CAs, on ``cryptography``) when the broker
starts on an empty run directory, kept under ``<run>/tls/`` while the stack lives:

* ``ca.crt``, ``ca.key``: the CA; tests issue their own client certificates from it
  (:func:`issue_client`), so a test's principal is a certificate common name of its own;
* ``broker.pem``: the broker's key (PKCS#8, as Java's PEM keystore wants it) and chain,
  for 127.0.0.1, localhost and the node's address (the listeners Pods use);
* ``client.crt``, ``client.key``: a client certificate for ``CN=baton-client``, the
  principal the stack grants everything (like the SCRAM user ``baton``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization

from . import paths, ports

SERVER_NAMES = ("127.0.0.1", "localhost")  # and the node's address (ports.node_ip)
STACK_CLIENT = "baton-client"


def tls_dir() -> Path:
    return paths.RUN / "tls"


@dataclass(frozen=True)
class ClientCert:
    """A client certificate and its key as PEM files, and the principal the broker maps it to."""

    principal: str
    certificate: Path
    key: Path

    def settings(self) -> dict[str, str]:
        """librdkafka's mutual-TLS settings for this certificate against the stack's CA."""
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca_file()),
            "ssl.certificate.location": str(self.certificate),
            "ssl.key.location": str(self.key),
        }


def ca_file() -> Path:
    return tls_dir() / "ca.crt"


def broker_pem() -> Path:
    return tls_dir() / "broker.pem"


def _pkcs8(key_pem: bytes) -> bytes:
    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if private:
        path.chmod(0o600)


def ensure(fresh: bool = False) -> Path:
    """Make the CA, the broker's certificate and the stack client's, unless they exist."""
    folder = tls_dir()
    marker = folder / ".complete"
    if not fresh and marker.exists() and marker.read_text().strip() == ports.node_ip():
        return folder
    ca = trustme.CA(organization_name="Baton local stack")
    _write(folder / "ca.crt", ca.cert_pem.bytes())
    _write(folder / "ca.key", _pkcs8(ca.private_key_pem.bytes()), private=True)
    server = ca.issue_cert(*SERVER_NAMES, ports.node_ip(), common_name="kafka.baton.local")
    chain = b"".join(blob.bytes() for blob in server.cert_chain_pems)
    _write(folder / "broker.pem", _pkcs8(server.private_key_pem.bytes()) + chain, private=True)
    _issue(ca, STACK_CLIENT, folder)
    marker.write_text(ports.node_ip())
    return folder


def _ca() -> trustme.CA:
    folder = tls_dir()
    return trustme.CA.from_pem((folder / "ca.crt").read_bytes(), (folder / "ca.key").read_bytes())


def _issue(
    ca: trustme.CA,
    principal: str,
    folder: Path,
    *,
    not_after: dt.datetime | None = None,
) -> ClientCert:
    if not_after is None:
        cert = ca.issue_cert(f"{principal}.client.baton.local", common_name=principal)
    else:
        cert = ca.issue_cert(
            f"{principal}.client.baton.local",
            common_name=principal,
            not_before=not_after - dt.timedelta(days=2),
            not_after=not_after,
        )
    out = ClientCert(principal, folder / f"{principal}.crt", folder / f"{principal}.key")
    _write(out.certificate, b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    _write(out.key, _pkcs8(cert.private_key_pem.bytes()), private=True)
    return out


def stack_client() -> ClientCert:
    folder = tls_dir()
    return ClientCert(STACK_CLIENT, folder / f"{STACK_CLIENT}.crt", folder / f"{STACK_CLIENT}.key")


def issue_client(
    principal: str, folder: Path, *, expired: bool = False, untrusted: bool = False
) -> ClientCert:
    """A client certificate with common name ``principal`` (the broker's principal for it), from
    the stack's CA, or expired yesterday, or from a CA the broker does not trust."""
    ca = trustme.CA(organization_name="Not the stack") if untrusted else _ca()
    not_after = dt.datetime.now(dt.UTC) - dt.timedelta(days=1) if expired else None
    return _issue(ca, principal, folder, not_after=not_after)
