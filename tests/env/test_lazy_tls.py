"""A TLS context's certificate authorities loaded at its first use (harness/env/lazy_tls.py): a bundle is read
when the store is needed, not when the context is made; a handshake through a deferred context verifies
against exactly the bundle it was given (sync sockets and asyncio's memory BIOs), and fails against another;
what a context holds once used is what it would have held; a missing bundle still fails at once; and the
incarnations a fork server forks have it, an exec'd one does not."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import certifi
import httpx
import pytest

from killpoint.env import lazy_tls
from tests.helpers.python_workers import Workers


def _cert(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 whose subject's common name is `name`, and its key."""
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed (apt-get install openssl): it makes the test's certificates")
    folder = tmp_path_factory.mktemp("certs")
    return {name: _cert(folder, name) for name in ("kp-a", "kp-b")}


@pytest.fixture
def deferred() -> Iterator[None]:
    """`lazy_tls` installed for one test, then undone: this pytest process's other tests make their
    contexts the ordinary way."""
    lazy_tls.install()
    try:
        yield
    finally:
        lazy_tls.uninstall()


def _names(ctx: ssl.SSLContext) -> list[str]:
    return [value for cert in ctx.get_ca_certs() for rdn in cert["subject"] for key, value in rdn
            if key == "commonName"]


@pytest.mark.parametrize("lazy", [True, False], ids=["deferred", "at-once"])
def test_the_bundle_is_read_at_first_use_not_when_the_context_is_made(certs: dict, tmp_path: Path,
                                                                      lazy: bool) -> None:
    """The file is replaced between the context's making and its first use: a deferred context holds what
    the file held at the use, an ordinary one what it held at the making (the control)."""
    bundle = tmp_path / "bundle.pem"
    shutil.copy(certs["kp-a"][0], bundle)
    if lazy:
        lazy_tls.install()
    try:
        ctx = ssl.create_default_context(cafile=str(bundle))
        shutil.copy(certs["kp-b"][0], bundle)
        assert _names(ctx) == (["kp-b"] if lazy else ["kp-a"])
    finally:
        lazy_tls.uninstall()


def test_once_used_a_deferred_context_holds_what_an_ordinary_one_does(deferred: None) -> None:
    made = [ssl.create_default_context(cafile=certifi.where()), ssl.create_default_context()]
    lazy_tls.uninstall()
    ordinary = [ssl.create_default_context(cafile=certifi.where()), ssl.create_default_context()]
    assert [c.cert_store_stats() for c in made] == [c.cert_store_stats() for c in ordinary]
    assert made[0].cert_store_stats()["x509_ca"] > 100  # certifi's bundle, really loaded


def test_a_missing_bundle_still_fails_when_the_context_is_made(deferred: None, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ssl.create_default_context(cafile=str(tmp_path / "missing.pem"))


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = b"hello over tls"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def tls_server(certs: dict) -> Iterator[int]:
    """An HTTPS server on 127.0.0.1 presenting `kp-a`; its port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    side.load_cert_chain(*map(str, certs["kp-a"]))
    server.socket = side.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


async def _asyncio_get(port: int, ctx: ssl.SSLContext) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)  # a memory BIO: `_wrap_bio`
    writer.write(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
    data = await reader.read()
    writer.close()
    return data


def test_a_handshake_through_a_deferred_context_verifies_against_its_own_bundle(
        certs: dict, tls_server: int, deferred: None) -> None:
    url = f"https://127.0.0.1:{tls_server}/"
    with httpx.Client(verify=ssl.create_default_context(cafile=str(certs["kp-a"][0]))) as client:  # `_wrap_socket`
        assert client.get(url).text == "hello over tls"
    assert asyncio.run(_asyncio_get(tls_server, ssl.create_default_context(cafile=str(certs["kp-a"][0])))) \
        .endswith(b"hello over tls")
    with httpx.Client(verify=ssl.create_default_context(cafile=str(certs["kp-b"][0]))) as client, \
            pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        client.get(url)
    with pytest.raises(ssl.SSLCertVerificationError):
        asyncio.run(_asyncio_get(tls_server, ssl.create_default_context(cafile=str(certs["kp-b"][0]))))


def test_a_forked_incarnation_defers_and_an_exec_d_one_does_not(tmp_path: Path) -> None:
    """Through a black-box Python worker's fork server (the reference agent's and a step module's servers
    install it on the same line of `forkserver.serve`); nothing is left running."""
    w = Workers(tmp_path, {"_unused": ""},
                uses="getattr(__import__('ssl').SSLContext.load_verify_locations, '__module__', None)")
    try:
        forked = w.run()
        exec_d = w.run(LD_PRELOAD="")  # LD_PRELOAD differs from the servers': exec'd
    finally:
        assert not w.close()
    assert forked[3] and not exec_d[3]
    assert forked[0]["lib"] == "killpoint.env.lazy_tls"
    assert exec_d[0]["lib"] != "killpoint.env.lazy_tls"
