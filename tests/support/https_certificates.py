"""A server certificate for 127.0.0.1 and localhost, signed by a throwaway CA
(``support.tls.make_ca``), under the names an operator hands ``sheetsync web
--ssl-certfile/--ssl-keyfile``, Flower's ``--certfile/--keyfile`` and
docker-compose.tls.yml's directory: cert.pem and key.pem, with ca.pem for clients."""

from __future__ import annotations

import shutil
import ssl
from dataclasses import dataclass
from pathlib import Path

from support.tls import make_ca


@dataclass(frozen=True)
class ServerCertificate:
    ca: Path  #: the CA's certificate: what clients trust
    cert: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        """A client's context that trusts this CA only, with every check on."""
        return ssl.create_default_context(cafile=str(self.ca))


def make_server_certificate(directory: Path) -> ServerCertificate:
    """Write ca.pem, cert.pem and key.pem (mode 600) into ``directory``."""
    pki = make_ca(directory / "ca")
    paths = ServerCertificate(directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
    shutil.copyfile(pki.ca_cert, paths.ca)
    shutil.copyfile(pki.server_cert, paths.cert)
    shutil.copyfile(pki.server_key, paths.key)
    paths.key.chmod(0o600)
    return paths
