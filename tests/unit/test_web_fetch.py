"""WebFetch as the model sees it: a local web server on a loopback address, granted
explicitly, and the refusals an attacker's URLs, redirects and DNS answers meet."""

from __future__ import annotations

import gzip
import json
import threading
import time
from pathlib import Path

import pytest

from sandbox_runner.agents.web_tools import WebTools
from sandbox_runner.limits import WebLimits
from sandbox_runner.types import ToolCall, ToolResult
from sandbox_runner.web_grant import WebGrant
from tests.support.scripted_model import ScriptedModel
from tests.support.web_server import (
    Route,
    WebServer,
    page,
    redirect,
    self_signed,
    stub_resolver,
)

ARTICLE = """<!doctype html><html><head><title>Guide</title>
<style>body { color: red }</style><script>stealCookies()</script></head>
<body><h1>Installing</h1><p>Run <code>pip install thing</code>, then read
<a href="/api">the API</a>.</p><ul><li>one</li><li>two</li></ul></body></html>"""


def web_fetch(
    url: str,
    *entries: str,
    limits: WebLimits | None = None,
    resolver: dict[str, list[str]] | None = None,
) -> ToolResult:
    tools = WebTools(WebGrant.of(entries), ScriptedModel([]), "claude-test")
    if limits is not None:
        tools.limits = limits
    if resolver is not None:
        tools.resolver = stub_resolver(resolver)
    call = ToolCall("toolu_1", "WebFetch", {"url": url, "prompt": "How do I install it?"})
    return tools.web_fetch(call, threading.Event())


def test_an_html_page_comes_back_as_markdown_headed_by_the_prompt() -> None:
    with WebServer({"/guide": page(ARTICLE)}) as server:
        result = web_fetch(server.url("/guide"), "127.0.0.1")
    assert not result.is_error, result.content
    assert result.content.startswith(f"Content of {server.url('/guide')}, as Markdown")
    assert "Your prompt for it: How do I install it?" in result.content
    assert "# Installing" in result.content
    assert "`pip install thing`" in result.content and "[the API](/api)" in result.content
    assert "- one\n- two" in result.content
    assert "stealCookies" not in result.content and "color: red" not in result.content


def test_only_planruns_own_headers_are_sent_and_no_proxy_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("http_proxy", "http://user:secret@proxy.invalid:3128")
    with WebServer({"/": page("<p>hi</p>")}) as server:
        result = web_fetch(server.url("/"), "127.0.0.1")
    assert not result.is_error, result.content
    [request] = server.seen
    assert request.headers["host"] == f"127.0.0.1:{server.port}"
    assert request.headers["user-agent"].startswith("planrun/")
    assert not {"cookie", "authorization", "proxy-authorization"} & set(request.headers)


def test_a_host_outside_the_grant_is_refused_before_any_request() -> None:
    with WebServer({"/": page("<p>hi</p>")}) as server:
        result = web_fetch(server.url("/"), "docs.python.org")
    assert result.is_error
    assert "The host 127.0.0.1 is not in the web grant (docs.python.org)" in result.content
    assert server.seen == []


def test_a_redirect_to_another_host_names_its_target_and_is_not_followed() -> None:
    target = "https://elsewhere.example/secret?x=1"
    with WebServer({"/moved": redirect(target)}) as server:
        result = web_fetch(server.url("/moved"), "127.0.0.1")
    assert result.is_error
    assert f"redirects to {target}" in result.content
    assert "call WebFetch with that URL" in result.content
    assert [seen.path for seen in server.seen] == ["/moved"]


def test_a_redirect_within_the_grant_is_followed_and_said() -> None:
    with WebServer({"/old": redirect("/new", 301), "/new": page("<h2>New home</h2>")}) as server:
        result = web_fetch(server.url("/old"), "127.0.0.1")
    assert not result.is_error, result.content
    assert f"Content of {server.url('/new')} (redirected from {server.url('/old')})" in (
        result.content
    )
    assert "## New home" in result.content


def test_a_redirect_to_loopback_is_refused_when_only_host_names_are_granted() -> None:
    """api.docs.test is served from 127.0.0.2 (named in the grant); its redirect to
    internal.docs.test, granted by the wildcard, resolves to 127.0.0.1, which no entry
    names."""
    resolver = {"api.docs.test": ["127.0.0.2"], "internal.docs.test": ["127.0.0.1"]}
    with (
        WebServer({"/": redirect("http://internal.docs.test/admin")}, host="127.0.0.2") as server,
        WebServer({"/admin": page("<p>admin</p>")}) as internal,
    ):
        url = server.url("/", "api.docs.test")
        result = web_fetch(url, "*.docs.test", "127.0.0.2", resolver=resolver)
    assert result.is_error
    assert "internal.docs.test resolves to 127.0.0.1, a loopback address" in result.content
    assert internal.seen == []


def test_the_connection_goes_to_the_checked_address_under_the_hosts_name() -> None:
    """DNS rebinding: the name is resolved once per hop, and the connection opens the
    address that was checked, while the Host header still names the host."""
    calls: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.2"] if len(calls) == 1 else ["169.254.169.254"]

    with WebServer({"/": page("<p>docs</p>")}, host="127.0.0.2") as server:
        tools = WebTools(WebGrant.of(["docs.test", "127.0.0.2"]), ScriptedModel([]), "m")
        tools.resolver = resolver
        call = ToolCall("t", "WebFetch", {"url": server.url("/", "docs.test"), "prompt": "p"})
        result = tools.web_fetch(call, threading.Event())
    assert not result.is_error, result.content
    assert calls == ["docs.test"]
    assert server.seen[0].headers["host"] == f"docs.test:{server.port}"


@pytest.mark.parametrize(
    ("addresses", "kind"),
    [
        (["10.1.2.3"], "a private address"),
        (["169.254.169.254"], "a link-local (cloud metadata) address"),
        (["93.184.216.34", "127.0.0.1"], "a loopback address"),
        (["::ffff:127.0.0.1"], "a loopback address"),
        (["fd00:ec2::254"], "a private address"),
        (["64:ff9b::a9fe:a9fe"], "a link-local (cloud metadata) address"),
        (["100.100.100.200"], "a non-public address"),
    ],
)
def test_names_resolving_to_private_addresses_are_refused(addresses: list[str], kind: str) -> None:
    result = web_fetch("https://docs.test/page", "docs.test", resolver={"docs.test": addresses})
    assert result.is_error
    assert "docs.test resolves to" in result.content and kind in result.content


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc/passwd", "http and https URLs only"),
        ("ftp://127.0.0.1/x", "http and https URLs only"),
        ("http://user:pass@127.0.0.1/", "user name or password"),
        ("http://127.0.0.1:99999/", "not a valid URL"),
        ("http://[::1]/", "The host ::1 is not in the web grant"),
    ],
)
def test_other_schemes_credentials_and_bad_urls_are_refused(url: str, message: str) -> None:
    result = web_fetch(url, "127.0.0.1")
    assert result.is_error and message in result.content


def test_a_huge_page_is_cut_with_a_note() -> None:
    body = ("A line of the page that goes on.\n" * 40_000).encode()
    with WebServer({"/big": Route(body, "text/plain")}) as server:
        result = web_fetch(server.url("/big"), "127.0.0.1", limits=WebLimits(max_bytes=200_000))
    assert not result.is_error
    assert "[Output too long:" in result.content
    assert "The page is larger than 200,000 bytes: only its start was read." in result.content
    assert len(result.content) < 32_000


def test_a_server_that_does_not_answer_times_out() -> None:
    limits = WebLimits(read_seconds=0.5, total_seconds=5)
    with WebServer({"/slow": Route(b"late", delay=3)}) as server:
        started = time.monotonic()
        result = web_fetch(server.url("/slow"), "127.0.0.1", limits=limits)
    assert result.is_error and "did not answer within 0.5 s" in result.content
    assert time.monotonic() - started < 2.5


def test_a_body_that_trickles_stops_at_the_total_deadline() -> None:
    limits = WebLimits(read_seconds=1, total_seconds=1.5)
    with WebServer({"/drip": Route(b"x" * 100, "text/plain", drip=0.1)}) as server:
        started = time.monotonic()
        result = web_fetch(server.url("/drip"), "127.0.0.1", limits=limits)
    assert result.is_error and "took longer than the 1.5 s a fetch may take" in result.content
    assert time.monotonic() - started < 4


def test_text_and_json_pass_through_and_binary_is_refused() -> None:
    data = json.dumps({"version": "1.2.3"})
    routes = {
        "/notes.txt": Route(b"plain *text*", "text/plain"),
        "/data.json": Route(data.encode(), "application/json"),
        "/logo.png": Route(b"\x89PNG\r\n\x1a\n\0\0", "image/png"),
        "/unnamed": Route(b"\0\x01\x02binary", None),
    }
    with WebServer(routes) as server:
        text = web_fetch(server.url("/notes.txt"), "127.0.0.1")
        document = web_fetch(server.url("/data.json"), "127.0.0.1")
        image = web_fetch(server.url("/logo.png"), "127.0.0.1")
        unnamed = web_fetch(server.url("/unnamed"), "127.0.0.1")
    assert text.content.endswith("plain *text*") and "as text/plain" in text.content
    assert document.content.endswith(data)
    assert image.is_error and "is image/png (10 bytes), not text or HTML" in image.content
    assert unnamed.is_error and "application/octet-stream" in unnamed.content


def test_an_http_error_is_said() -> None:
    with WebServer({}) as server:
        result = web_fetch(server.url("/missing"), "127.0.0.1")
    assert result.is_error and "answered HTTP 404" in result.content


def test_a_credential_on_the_page_is_redacted_before_the_model_sees_it() -> None:
    key = "sk-ant-api03-" + "a" * 40
    with WebServer({"/leak": Route(f"token: {key}".encode(), "text/plain")}) as server:
        result = web_fetch(server.url("/leak"), "127.0.0.1")
    assert key not in result.content and "[REDACTED" in result.content


def test_a_compressed_body_sent_anyway_is_inflated_only_up_to_the_limit() -> None:
    bomb = gzip.compress(b"all work and no play\n" * 2_000_000)  # 42 MB inflated
    route = Route(bomb, "text/plain", headers={"Content-Encoding": "gzip"})
    with WebServer({"/bomb": route}) as server:
        result = web_fetch(server.url("/bomb"), "127.0.0.1", limits=WebLimits(max_bytes=100_000))
    assert not result.is_error, result.content
    assert "all work and no play" in result.content
    assert "The page is larger than 100,000 bytes" in result.content


def test_an_interrupt_ends_a_fetch_between_reads() -> None:
    stop = threading.Event()
    with WebServer({"/drip": Route(b"x" * 100, "text/plain", drip=0.1)}) as server:
        tools = WebTools(WebGrant.of(["127.0.0.1"]), ScriptedModel([]), "claude-test")
        call = ToolCall("t", "WebFetch", {"url": server.url("/drip"), "prompt": "p"})
        threading.Timer(0.5, stop.set).start()
        started = time.monotonic()
        result = tools.web_fetch(call, stop)
    assert result.is_error and "the fetch was interrupted" in result.content
    assert time.monotonic() - started < 5


def test_https_verifies_the_hosts_certificate_at_the_pinned_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection goes to the checked address, yet TLS still checks the host's name:
    a certificate for docs.test is accepted (its CA trusted here), one for another name
    is not."""
    cert, good = self_signed(tmp_path, "docs.test")
    _, other = self_signed(tmp_path, "other.test")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    resolver = {"docs.test": ["127.0.0.2"]}
    with WebServer({"/": page("<h1>Secure</h1>")}, host="127.0.0.2", tls=good) as server:
        fine = web_fetch(server.url("/", "docs.test"), "docs.test", "127.0.0.2", resolver=resolver)
    with WebServer({"/": page("<h1>Spoofed</h1>")}, host="127.0.0.2", tls=other) as server:
        spoofed = web_fetch(
            server.url("/", "docs.test"), "docs.test", "127.0.0.2", resolver=resolver
        )
    assert not fine.is_error, fine.content
    assert "# Secure" in fine.content
    assert spoofed.is_error and "TLS failed" in spoofed.content


def test_a_page_nested_too_deeply_for_markdown_comes_back_as_text() -> None:
    deep = "<div>" * 20_000 + "<script>x()</script>deep text" + "</div>" * 20_000
    with WebServer({"/deep": page(deep)}) as server:
        result = web_fetch(server.url("/deep"), "127.0.0.1")
    assert not result.is_error, result.content
    assert result.content.endswith("deep text") and "x()" not in result.content


def test_only_the_start_of_a_large_html_page_is_converted_and_that_is_said() -> None:
    section = "<h2>Part</h2><p>Some <em>text</em> in it.</p>"
    html = "<html><body>" + section * 2_000 + "<p>THE END</p></body></html>"
    limits = WebLimits(max_html_bytes=20_000)
    with WebServer({"/long": page(html)}) as server:
        result = web_fetch(server.url("/long"), "127.0.0.1", limits=limits)
    assert not result.is_error, result.content
    assert "[Only the first 20,000 bytes of its HTML were turned into Markdown.]" in (
        result.content
    )
    assert "## Part" in result.content and "THE END" not in result.content
