"""Fetching one web page for WebFetch, on the host, within the user's web grant.

Every hop (the URL, then each redirect) is checked before a byte is sent: http or https
only, no credentials in the URL, a host the grant allows, and every address the name
resolves to a public one (unless the grant names the address itself). The connection then
goes to the address that was checked, so a DNS answer that changes in between (DNS
rebinding) cannot lead it elsewhere; TLS still verifies the certificate against the host
name. No proxy, cookie or credential of the host is ever sent, and the response is bounded
in bytes and time (limits.WebLimits).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from typing import Any
from urllib.parse import urljoin, urlsplit

from sandbox_runner import __version__
from sandbox_runner.limits import WebLimits
from sandbox_runner.web_grant import IPAddress, WebGrant, refused_address

Resolver = Callable[[str, int], list[str]]
"""The addresses a host name resolves to (the system resolver; tests pass a stub)."""
USER_AGENT = f"planrun/{__version__} (WebFetch; +https://github.com/planrun)"
REDIRECTS = frozenset({301, 302, 303, 307, 308})
CHUNK_BYTES = 64 * 1024
_Until = tuple[float, Callable[[], bool]]
"""When a fetch must end: its deadline (time.monotonic()), and whether it was stopped."""


class FetchRefused(Exception):
    """The fetch was refused or failed; the message is for the model, one line."""


@dataclass(frozen=True)
class Page:
    """What a fetch brought back: the final URL, its headers and (part of) its body."""

    url: str
    status: int
    headers: Message
    body: bytes
    cut: bool
    """Whether the body was longer than the limit (and only its start was read)."""

    @property
    def content_type(self) -> str:
        """The media type, lower case, without parameters ("" when the server sent none)."""
        return self.headers.get_content_type() if self.headers.get("content-type") else ""


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for HOST."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise FetchRefused(f"cannot resolve {host}: {error}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def fetch(
    url: str,
    grant: WebGrant,
    *,
    limits: WebLimits | None = None,
    resolver: Resolver = system_resolver,
    stopped: Callable[[], bool] = lambda: False,
) -> Page:
    """GET URL, following redirects that stay within the grant; STOPPED, checked between
    hops and reads, ends it early (the user interrupted).

    Raises:
        FetchRefused: the URL, a redirect or an address is outside the grant, the server
            failed or did not answer in time; the message says which, and what to do.
    """
    limits = limits or WebLimits()
    deadline = time.monotonic() + limits.total_seconds
    current = url
    for hop in range(limits.max_redirects + 1):
        host, port, addresses = _checked_target(current, grant, resolver, first=hop == 0)
        page, location = _get(current, host, port, addresses, limits, (deadline, stopped))
        if location is None:
            return page
        target = urljoin(current, location)
        if not grant.allows_host(urlsplit(target).hostname or ""):
            raise FetchRefused(
                f"{current} redirects to {target}, whose host is not in the web grant "
                f"({grant.describe()}), so it was not followed. If you need it, call "
                "WebFetch with that URL; it works only if the user grants that host."
            )
        current = target
    raise FetchRefused(f"{url}: more than {limits.max_redirects} redirects; not followed further")


def _checked_target(
    url: str, grant: WebGrant, resolver: Resolver, *, first: bool
) -> tuple[str, int, list[str]]:
    """The host, port and the addresses to connect to, once every check has passed."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as error:
        raise FetchRefused(f"{url!r} is not a valid URL: {error}") from None
    if parts.scheme not in ("http", "https"):
        raise FetchRefused(f"{url!r}: WebFetch reads http and https URLs only")
    if parts.username is not None or parts.password is not None:
        raise FetchRefused(f"{url!r}: URLs with a user name or password are refused")
    host = parts.hostname or ""
    if not host:
        raise FetchRefused(f"{url!r} has no host")
    if not grant.allows_host(host):
        what = "The host" if first else "The redirect's host"
        raise FetchRefused(
            f"{what} {host} is not in the web grant ({grant.describe()}); planrun fetches "
            "only hosts the user allowed (the `web` setting or --allow-web)."
        )
    addresses = _addresses(host, port, resolver)
    for address in addresses:
        why = refused_address(address)
        if why and not grant.names_address(address):
            raise FetchRefused(
                f"{host} resolves to {address}, {why}; planrun never fetches such addresses "
                "unless the grant names the address itself"
            )
    return host, port, [str(address) for address in addresses]


def _addresses(host: str, port: int, resolver: Resolver) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    found: list[IPAddress] = []
    for text in resolver(host, port):
        try:
            found.append(ipaddress.ip_address(text.split("%", 1)[0]))
        except ValueError:
            raise FetchRefused(f"{host} resolved to {text!r}, which is not an address") from None
    if not found:
        raise FetchRefused(f"cannot resolve {host}: no address")
    return found


def _get(
    url: str, host: str, port: int, addresses: list[str], limits: WebLimits, until: _Until
) -> tuple[Page, str | None]:
    """One GET for URL to one of ADDRESSES (the checked ones); a redirect's Location, if
    it is one."""
    parts = urlsplit(url)
    connection = _connection(parts.scheme, host, port, addresses, limits)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    try:
        connection.request("GET", path, headers=_headers())
        _bound(connection, limits.read_seconds, until)
        response = connection.getresponse()
        location = response.getheader("location")
        if response.status in REDIRECTS and location:
            return Page(url, response.status, response.msg, b"", False), location
        if response.status >= 400:
            reason = f"{response.status} {response.reason}".strip()
            raise FetchRefused(f"{url} answered HTTP {reason}")
        body, cut = _read(connection, response, limits, until)
        body, cut = _inflated(url, response.getheader("content-encoding"), body, cut, limits)
        return Page(url, response.status, response.msg, body, cut), None
    except TimeoutError:
        raise FetchRefused(_timeout(url, limits, until[0])) from None
    except ssl.SSLError as error:
        raise FetchRefused(f"{url}: TLS failed: {error.reason or error}") from None
    except (OSError, http.client.HTTPException) as error:
        reason = " ".join(str(error).split()) or type(error).__name__
        raise FetchRefused(f"{url}: the request failed: {reason}") from None
    finally:
        connection.close()


def _connection(
    scheme: str, host: str, port: int, addresses: list[str], limits: WebLimits
) -> http.client.HTTPConnection:
    """A connection that names HOST (Host header, TLS server name) but opens one of
    ADDRESSES, in turn until one answers."""
    connection: http.client.HTTPConnection
    if scheme == "https":
        context = ssl.create_default_context()
        connection = http.client.HTTPSConnection(
            host, port, timeout=limits.connect_seconds, context=context
        )
    else:
        connection = http.client.HTTPConnection(host, port, timeout=limits.connect_seconds)

    def pinned(_: Any, timeout: float, source: Any = None) -> socket.socket:
        failure: OSError = OSError(f"no address to connect to for {host}")
        for address in addresses:
            try:
                return socket.create_connection((address, port), timeout, source)
            except OSError as error:
                failure = error
        raise failure

    connection._create_connection = pinned  # type: ignore[attr-defined]
    return connection


def _headers() -> dict[str, str]:
    """Only these are sent: no cookie, no authorization, nothing of the host's environment."""
    return {
        "User-Agent": USER_AGENT,
        "Accept": "text/markdown, text/html;q=0.9, text/plain;q=0.8, */*;q=0.1",
        # Compressed bodies would have to be inflated under a limit of their own.
        "Accept-Encoding": "identity",
        "Connection": "close",
    }


def _bound(connection: http.client.HTTPConnection, read_seconds: float, until: _Until) -> None:
    """The socket's timeout: the read timeout, or less when the deadline is nearer."""
    deadline, stopped = until
    if stopped():
        raise FetchRefused("the fetch was interrupted")
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    if connection.sock is not None:
        connection.sock.settimeout(min(read_seconds, remaining))


def _read(
    connection: http.client.HTTPConnection,
    response: http.client.HTTPResponse,
    limits: WebLimits,
    until: _Until,
) -> tuple[bytes, bool]:
    """The body up to the byte limit, read piece by piece so the deadline holds."""
    chunks: list[bytes] = []
    size = 0
    while size <= limits.max_bytes:
        _bound(connection, limits.read_seconds, until)
        chunk = response.read1(CHUNK_BYTES)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[: limits.max_bytes], True


def _inflated(
    url: str, encoding: str | None, body: bytes, cut: bool, limits: WebLimits
) -> tuple[bytes, bool]:
    """The body a server compressed although asked not to, inflated up to the byte limit
    (a small bomb cannot become gigabytes)."""
    encoding = (encoding or "identity").strip().lower()
    if encoding == "identity":
        return body, cut
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise FetchRefused(f"{url} came compressed as {encoding!r}, which WebFetch cannot read")
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, by their header
    try:
        inflated = inflater.decompress(body, limits.max_bytes)
    except zlib.error as error:
        raise FetchRefused(f"{url}: its {encoding} body is damaged: {error}") from None
    return inflated, cut or bool(inflater.unconsumed_tail)


def _timeout(url: str, limits: WebLimits, deadline: float) -> str:
    if time.monotonic() >= deadline - 0.5:
        return f"{url} took longer than the {limits.total_seconds:g} s a fetch may take"
    return (
        f"{url} did not answer within {limits.read_seconds:g} s "
        f"(or could not be reached within {limits.connect_seconds:g} s)"
    )
