"""A throwaway certificate authority and TLS-only ``redis-server`` processes for tests.

:func:`make_ca` writes a CA, a server certificate for 127.0.0.1 and localhost, and a
client certificate (all signed by that CA) into a directory. :func:`start_tls_redis`
starts a ``redis-server`` that listens on a TLS port only (``--port 0``): a client that
speaks plain text to it finds no plain port, and one that speaks plain text to the TLS
port leaves an ``SSL routines`` error in its log (:meth:`TlsRedis.tls_errors`).
"""

from __future__ import annotations

import datetime
import ipaddress
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from support.lifetime import dies_with_this_process

#: What redis-server logs when a client's bytes are not a TLS handshake it accepts
#: (plain text to the TLS port: "wrong version number"), or a handshake fails.
TLS_ERROR = re.compile(r"SSL routines|wrong version number|Error accepting a client connection")
#: A client that hung up in the middle of its handshake: a process killed while it
#: connected (the failover kills a primary; a test stops its workers), never plain text.
#: Plain text logs "wrong version number" (test_redis_tls.py checks the detector).
HUNG_UP = re.compile(r"unexpected eof while reading|Connection reset by peer")


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _issue(
    ca_key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    subject: str,
    usage: x509.ObjectIdentifier,
    san: Sequence[x509.GeneralName] = (),
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(san)), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def make_ca(
    directory: Path,
    name: str = "sheetsync test CA",
    server_hosts: Sequence[str] = ("127.0.0.1", "localhost"),
) -> Pki:
    """A new CA in ``directory``, with a server certificate for ``server_hosts`` and a
    client certificate signed by it."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
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
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    server_cert, server_key = _issue(
        ca_key,
        ca_cert.subject,
        "sheetsync test redis",
        ExtendedKeyUsageOID.SERVER_AUTH,
        [_san(host) for host in server_hosts],
    )
    client_cert, client_key = _issue(
        ca_key, ca_cert.subject, "sheetsync test client", ExtendedKeyUsageOID.CLIENT_AUTH
    )
    pki = Pki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        server_cert=directory / "redis.crt",
        server_key=directory / "redis.key",
        client_cert=directory / "client.crt",
        client_key=directory / "client.key",
    )
    _write_cert(ca_cert, pki.ca_cert)
    _write_key(ca_key, pki.ca_key)
    _write_cert(server_cert, pki.server_cert)
    _write_key(server_key, pki.server_key)
    _write_cert(client_cert, pki.client_cert)
    _write_key(client_key, pki.client_key)
    return pki


def client_query(pki: Pki, *, client_cert: bool = True) -> str:
    """The URL query that trusts ``pki``'s CA (and presents its client certificate)."""
    options = {"ssl_ca_certs": str(pki.ca_cert)}
    if client_cert:
        options.update(ssl_certfile=str(pki.client_cert), ssl_keyfile=str(pki.client_key))
    return urlencode(options)


def tls_client(pki: Pki, port: int, **options: object) -> redis.Redis:
    """A redis-py client of the test itself, over TLS with ``pki``'s client certificate."""
    return redis.Redis(
        host="127.0.0.1",
        port=port,
        ssl=True,
        ssl_ca_certs=str(pki.ca_cert),
        ssl_certfile=str(pki.client_cert),
        ssl_keyfile=str(pki.client_key),
        socket_timeout=2,
        socket_connect_timeout=2,
        **options,  # type: ignore[arg-type]
    )


def server_tls_args(pki: Pki, *, client_certs: bool) -> list[str]:
    """redis-server's TLS options for ``pki`` (``--tls-auth-clients yes`` with
    ``client_certs``: a client without a certificate signed by the CA is refused)."""
    return [
        "--tls-cert-file",
        str(pki.server_cert),
        "--tls-key-file",
        str(pki.server_key),
        "--tls-ca-cert-file",
        str(pki.ca_cert),
        # Its own connections (a replica to its primary) present the client certificate.
        "--tls-client-cert-file",
        str(pki.client_cert),
        "--tls-client-key-file",
        str(pki.client_key),
        "--tls-auth-clients",
        "yes" if client_certs else "no",
    ]


@dataclass
class TlsRedis:
    """A TLS-only redis-server child."""

    port: int
    log: Path
    process: subprocess.Popen[bytes]

    def url(self, db: int, query: str = "", password: str | None = None) -> str:
        auth = f":{password}@" if password else ""
        return f"rediss://{auth}127.0.0.1:{self.port}/{db}" + (f"?{query}" if query else "")

    def tls_errors(self) -> list[str]:
        """The lines of its log where a client's connection failed at the TLS layer."""
        text = self.log.read_text(errors="replace")
        return [
            line
            for line in text.splitlines()
            if TLS_ERROR.search(line) and not HUNG_UP.search(line)
        ]

    def wait_ready(self, client: redis.Redis, timeout_s: float = 20) -> None:
        """Until ``client`` (the test's own, over TLS) gets PONG."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"redis-server exited: {self.log.read_text()}")
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


def start_tls_redis(
    pki: Pki, port: int, directory: Path, *, client_certs: bool, extra: Sequence[str] = ()
) -> TlsRedis:
    """A redis-server on ``port`` that speaks TLS only (no plain port) and logs to
    ``directory``; the caller waits for it to answer."""
    log = directory / f"redis-{port}.log"
    args = [
        "redis-server",
        "--port",
        "0",
        "--tls-port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(directory),
        *server_tls_args(pki, client_certs=client_certs),
        *extra,
    ]
    with open(log, "wb") as out:
        process = subprocess.Popen(
            dies_with_this_process(args),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return TlsRedis(port, log, process)


def start_tls_sentinel(
    pki: Pki, port: int, directory: Path, *, service: str, primary_port: int, password: str
) -> TlsRedis:
    """A sentinel on a TLS port only, watching ``service`` at 127.0.0.1:``primary_port``
    over TLS (its certificate is the server's, which the test CA signed)."""
    config = directory / f"sentinel-{port}.conf"
    config.write_text(
        f"port 0\ntls-port {port}\nbind 127.0.0.1\n"
        f"tls-cert-file {pki.server_cert}\ntls-key-file {pki.server_key}\n"
        f"tls-ca-cert-file {pki.ca_cert}\ntls-auth-clients yes\ntls-replication yes\n"
        f"tls-client-cert-file {pki.client_cert}\ntls-client-key-file {pki.client_key}\n"
        f"sentinel monitor {service} 127.0.0.1 {primary_port} 2\n"
        f"sentinel auth-pass {service} {password}\n"
        f"sentinel down-after-milliseconds {service} 1000\n"
        f"sentinel failover-timeout {service} 4000\n"
    )
    log = directory / f"sentinel-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            dies_with_this_process(["redis-server", str(config), "--sentinel"]),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return TlsRedis(port, log, process)
