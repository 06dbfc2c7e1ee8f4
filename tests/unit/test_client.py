"""The host side of the tool server protocol, against a scripted peer on a socketpair."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sandbox_runner.errors import SandboxDiedError, SandboxError
from sandbox_runner.sandbox.client import FrameDecoder, ToolServerClient
from sandbox_runner.types import ToolRequest


def frame(stream: int, payload: bytes) -> bytes:
    return struct.pack(">BxxxI", stream, len(payload)) + payload


# One JSON line of the tool server protocol, as the test's fake container reads or writes it.
Message = dict[str, Any]


class ScriptedServer:
    """Plays the container side: reads request lines, answers through a handler."""

    def __init__(self, sock: socket.socket, handler: Callable[[Message], Message | None]) -> None:
        self.sock = sock
        self.handler = handler
        self.thread = threading.Thread(target=self.serve, daemon=True)

    def send(self, message: Message, stream: int = 1) -> None:
        data = json.dumps(message).encode() + b"\n"
        # Split every reply across two frames to prove reassembly works.
        half = len(data) // 2
        self.sock.sendall(frame(stream, data[:half]) + frame(stream, data[half:]))

    def serve(self) -> None:
        # The test may close its end first: then there is nothing more to serve.
        with contextlib.suppress(OSError):
            self._serve()

    def _serve(self) -> None:
        self.send({"event": "ready", "pid": 7, "protocol": 1})
        buffer = b""
        while True:
            data = self.sock.recv(4096)
            if not data:
                break
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                reply = self.handler(json.loads(line))
                if reply is not None:
                    self.send(reply)
        self.sock.close()


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    host, container = socket.socketpair()
    yield host, container
    host.close()
    container.close()


def echo(request: Message) -> Message:
    return {"id": request["id"], "ok": True, "output": f"{request['op']}:{request['args']}"}


def test_frame_decoder_reassembles_split_headers_and_payloads() -> None:
    data = frame(1, b"hello ") + frame(2, b"oops") + frame(1, b"world")
    decoder = FrameDecoder()
    frames = []
    for byte in data:
        frames += decoder.feed(bytes([byte]))
    assert frames == [(1, b"hello "), (2, b"oops"), (1, b"world")]


def test_request_gets_its_own_reply(pair: tuple[socket.socket, socket.socket]) -> None:
    host, container = pair
    ScriptedServer(container, echo).thread.start()
    client = ToolServerClient(host)
    assert client.wait_ready(5)["pid"] == 7
    result = client.request(ToolRequest("read", {"file_path": "a.py"}))
    assert result.ok
    assert result.output == "read:{'file_path': 'a.py'}"
    client.close()


def test_concurrent_requests_are_matched_by_id(pair: tuple[socket.socket, socket.socket]) -> None:
    host, container = pair
    held: list[Message] = []
    lock = threading.Lock()

    def answer_in_reverse(request: Message) -> Message | None:
        with lock:
            held.append(request)
            if len(held) < 8:
                return None
        for waiting in reversed(held[:-1]):
            server.send(echo(waiting))
        return echo(request)

    server = ScriptedServer(container, answer_in_reverse)
    server.thread.start()
    client = ToolServerClient(host)
    client.wait_ready(5)
    results: dict[int, str] = {}

    def call(n: int) -> None:
        results[n] = client.request(ToolRequest("op", {"n": n}, timeout=5)).output

    threads = [threading.Thread(target=call, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results == {n: f"op:{{'n': {n}}}" for n in range(8)}


def test_tool_error_is_a_result_not_an_exception(pair: tuple[socket.socket, socket.socket]) -> None:
    host, container = pair
    ScriptedServer(
        container, lambda r: {"id": r["id"], "ok": False, "error": "File does not exist: x"}
    ).thread.start()
    client = ToolServerClient(host)
    client.wait_ready(5)
    result = client.request(ToolRequest("read", {"file_path": "x"}))
    assert not result.ok
    assert result.text == "File does not exist: x"


def test_server_death_fails_waiting_calls_with_the_cause(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    host, container = pair

    def die(request: Message) -> None:
        container.shutdown(socket.SHUT_RDWR)

    ScriptedServer(container, die).thread.start()
    client = ToolServerClient(host, explain_death=lambda: "OOM-killed (memory limit 64 MB)")
    client.wait_ready(5)
    with pytest.raises(SandboxDiedError, match="sandbox died: OOM-killed"):
        client.request(ToolRequest("bash", {"command": "hog"}, timeout=5))
    with pytest.raises(SandboxDiedError, match="OOM-killed"):
        client.request(ToolRequest("ping"))


def test_stream_ending_before_ready_is_reported(pair: tuple[socket.socket, socket.socket]) -> None:
    host, container = pair
    container.close()
    client = ToolServerClient(host, explain_death=lambda: "the container exited with code 127")
    with pytest.raises(SandboxDiedError, match="exited with code 127"):
        client.wait_ready(5)


def test_silent_server_times_out_on_ready(pair: tuple[socket.socket, socket.socket]) -> None:
    host, _ = pair
    client = ToolServerClient(host)
    with pytest.raises(SandboxError, match="did not start"):
        client.wait_ready(0.2)


def test_stderr_is_kept_apart_from_replies(pair: tuple[socket.socket, socket.socket]) -> None:
    host, container = pair
    container.sendall(frame(2, b"warning: noise\n"))
    server = ScriptedServer(container, echo)
    server.thread.start()
    client = ToolServerClient(host)
    client.wait_ready(5)
    assert client.request(ToolRequest("ping")).ok
    assert b"warning: noise" in client.stderr_tail


def test_hostile_replies_are_bounded_and_cleaned(pair: tuple[socket.socket, socket.socket]) -> None:
    host, container = pair

    def hostile(request: Message) -> Message:
        return {
            "id": request["id"],
            "ok": "yes",
            "output": "x" * 600_000 + "\udc80",
            "exit_code": "7",
            "error": None,
        }

    ScriptedServer(container, hostile).thread.start()
    client = ToolServerClient(host)
    client.wait_ready(5)
    result = client.request(ToolRequest("read", {"file_path": "a"}))
    assert result.ok is False  # only a real true counts
    assert result.exit_code is None
    assert result.truncated and "reply cut" in result.output
    assert len(result.output) < 600_000
    result.output.encode("utf-8")  # no lone surrogates left


def test_an_over_long_line_is_dropped_and_the_next_reply_still_arrives(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    host, container = pair
    from sandbox_runner.sandbox import client as client_module

    def flood_then_answer(request: Message) -> Message:
        junk = b"A" * (client_module.MAX_LINE_BYTES + 10) + b"\n"
        for start in range(0, len(junk), 1 << 20):
            container.sendall(frame(1, junk[start : start + (1 << 20)]))
        return echo(request)

    ScriptedServer(container, flood_then_answer).thread.start()
    client = ToolServerClient(host)
    client.wait_ready(5)
    assert client.request(ToolRequest("ping", timeout=20)).ok
