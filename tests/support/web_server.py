"""A small web server on a loopback address for WebFetch tests: each path answers as
its route says (a page, a redirect, a slow or endless body), and every request is kept."""

from __future__ import annotations

import contextlib
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Self


@dataclass(frozen=True)
class Route:
    """How one path answers: status, headers and body, sent after `delay` seconds; with
    `drip`, the body goes out one byte every `drip` seconds."""

    body: bytes = b""
    content_type: str | None = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drip: float = 0.0


def page(html: str) -> Route:
    """An HTML page."""
    return Route(html.encode())


def redirect(location: str, status: int = 302) -> Route:
    """A redirect to LOCATION."""
    return Route(b"", None, status, {"Location": location})


@dataclass(frozen=True)
class Seen:
    """A request the server received: its path and headers (names lower-cased)."""

    path: str
    headers: dict[str, str]


class WebServer:
    """Serves ROUTES on HOST (127.0.0.1 unless another loopback address is given)."""

    def __init__(
        self, routes: dict[str, Route], host: str = "127.0.0.1", tls: ssl.SSLContext | None = None
    ) -> None:
        self.routes = routes
        self.seen: list[Seen] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.seen.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}))
                route = server.routes.get(self.path, Route(b"not found", "text/plain", 404))
                if server.stopping.wait(route.delay):
                    return
                self.send_response(route.status)
                if route.content_type:
                    self.send_header("Content-Type", route.content_type)
                for name, value in route.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(route.body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client gave up, as it should
                    self._body(route)

            def _body(self, route: Route) -> None:
                if not route.drip:
                    self.wfile.write(route.body)
                    return
                for index in range(len(route.body)):
                    if server.stopping.wait(route.drip):
                        return
                    self.wfile.write(route.body[index : index + 1])
                    self.wfile.flush()

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: the tests read `seen`."""

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self.host = host
        self.port = int(self._server.server_address[1])

    def url(self, path: str, host: str | None = None) -> str:
        """The URL of PATH on this server (by another name with HOST)."""
        return f"{self.scheme}://{host or self.host}:{self.port}{path}"

    def __enter__(self) -> Self:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()


def self_signed(directory: Path, name: str) -> tuple[Path, ssl.SSLContext]:
    """A certificate for NAME (made by openssl, as on any Debian) and a server context
    presenting it; the certificate doubles as the only CA a client should trust."""
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return cert, context


def stub_resolver(names: dict[str, list[str]]) -> Callable[[str, int], list[str]]:
    """A resolver that knows only NAMES (the outermost edge: no DNS in tests)."""

    def resolve(host: str, port: int) -> list[str]:
        from sandbox_runner.tools.web_fetch import FetchRefused

        if host not in names:
            raise FetchRefused(f"cannot resolve {host}: unknown name")
        return names[host]

    return resolve


def elapsed(started: float) -> float:
    """Seconds since STARTED (time.monotonic())."""
    return time.monotonic() - started
