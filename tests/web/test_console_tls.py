"""``sheetsync web --ssl-certfile --ssl-keyfile``: the console over HTTPS only, and a
one-line refusal of TLS files it cannot use."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.console import free_port, running_console
from support.https_certificates import make_server_certificate

SHEETSYNC = str(Path(sys.executable).with_name("sheetsync"))


def test_the_console_serves_https_only(pipeline_env, tmp_path):
    certificate = make_server_certificate(tmp_path)
    args = ("--ssl-certfile", str(certificate.cert), "--ssl-keyfile", str(certificate.key))
    with running_console(pipeline_env(), args=args, tls=certificate.client_context()) as console:
        assert console.url.startswith("https://")
        assert console.request("/").status == 200  # the certificate verified
        assert console.request("/", auth=None).status == 401

        port = int(console.url.rsplit(":", 1)[1])
        plain = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        with pytest.raises((OSError, http.client.HTTPException)):
            plain.request("GET", "/", headers={"Authorization": f"Bearer {console.token}"})
            plain.getresponse()
        plain.close()


def _start(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SHEETSYNC, "web", "--port", str(free_port()), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_tls_files_it_cannot_use_stop_it_with_one_line(pipeline_env, tmp_path):
    certificate = make_server_certificate(tmp_path)
    (tmp_path / "other").mkdir()
    other = make_server_certificate(tmp_path / "other")
    env = pipeline_env()
    cases = {
        "a certificate without its key": ("--ssl-certfile", str(certificate.cert)),
        "a key without its certificate": ("--ssl-keyfile", str(certificate.key)),
        "a missing file": (
            "--ssl-certfile",
            str(tmp_path / "missing.pem"),
            "--ssl-keyfile",
            str(certificate.key),
        ),
        "another certificate's key": (
            "--ssl-certfile",
            str(certificate.cert),
            "--ssl-keyfile",
            str(other.key),
        ),
        "not PEM": ("--ssl-certfile", str(certificate.key), "--ssl-keyfile", str(certificate.key)),
    }
    for case, args in cases.items():
        result = _start(env, *args)
        assert result.returncode == 2, (case, result)
        [line] = result.stderr.splitlines()
        assert "--ssl-certfile/--ssl-keyfile: " in line, (case, line)
        assert "Traceback" not in result.stdout + result.stderr
