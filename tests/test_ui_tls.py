"""The UI's session cookie behind TLS: ``Secure``, ``__Host-`` prefixed, ``HttpOnly`` and
``SameSite=Strict``, on a real ``memdir serve --ssl-certfile`` process."""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from _server import create_key, launched

READY = re.compile(r"memdir serve: listening on (https://\S+)")


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, and its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, str]]:
    folder = tmp_path_factory.mktemp("tls")
    ws = str(folder / "ws")
    key = create_key(ws, "acme", "read")["key"]
    cert, private = _certificate(folder)
    args = ["serve", "-w", ws, "--port", "0", "--no-maintenance",
            "--ssl-certfile", str(cert), "--ssl-keyfile", str(private)]  # fmt: skip
    with launched(args, READY) as url:
        yield url, cert, str(key)


def test_behind_tls_the_session_cookie_is_secure_and_host_only(
    tls_server: tuple[str, Path, str],
) -> None:
    url, cert, key = tls_server
    with httpx.Client(base_url=url, verify=ssl.create_default_context(cafile=str(cert))) as client:
        answer = client.post("/ui/login", data={"key": key}, follow_redirects=False)
        assert answer.status_code == 303
        cookie = answer.headers["set-cookie"]
        assert cookie.startswith("__Host-memdir_ui=")
        attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"secure", "httponly", "samesite=strict", "path=/"} <= attributes
        assert not any(a.startswith("domain") for a in attributes)
        overview = client.get("/ui/", follow_redirects=False)
        assert overview.status_code == 200  # the __Host- cookie is the session
        plain = httpx.Client(base_url=url, verify=ssl.create_default_context(cafile=str(cert)))
        plain.cookies.set("memdir_ui", key)  # the plain-HTTP cookie is not read over TLS
        assert plain.get("/ui/", follow_redirects=False).status_code == 303
        plain.close()
