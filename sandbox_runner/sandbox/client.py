"""Host side of the tool server protocol: JSON lines over a container's attach stream."""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sandbox_runner.errors import SandboxDiedError, SandboxError, ToolTimeoutError
from sandbox_runner.limits import TOOL_TIMEOUT_SECONDS
from sandbox_runner.types import ExecResult, ToolRequest

# Docker multiplexes stdout and stderr on an attach stream when there is no TTY: every
# frame starts with 8 bytes, the stream number, three zero bytes and a big-endian size.
FRAME_HEADER = struct.Struct(">BxxxI")
STDOUT, STDERR = 1, 2
# The host waits this long beyond a request's own timeout, which the server enforces.
REPLY_GRACE_SECONDS = 10.0
STDERR_TAIL_BYTES = 4096
# Everything from the container is hostile: a process in it can write to the server's
# output. A real reply holds at most 256 KiB of text (JSON-escaped, a few times that).
MAX_LINE_BYTES = 8 * 1024 * 1024
MAX_TEXT_CHARS = 512 * 1024


class ByteStream(Protocol):
    """The part of a socket the client needs; tests pass a socketpair."""

    def sendall(self, data: bytes, /) -> None: ...

    def recv(self, size: int, /) -> bytes: ...

    def shutdown(self, how: int, /) -> None: ...

    def close(self) -> None: ...


class FrameDecoder:
    """Splits a multiplexed attach stream into (stream number, payload) frames."""

    def __init__(self, multiplexed: bool = True) -> None:
        self._buffer = bytearray()
        self._multiplexed = multiplexed

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Add received bytes; return the frames that are now complete."""
        if not self._multiplexed:
            return [(STDOUT, data)] if data else []
        self._buffer += data
        frames: list[tuple[int, bytes]] = []
        while len(self._buffer) >= FRAME_HEADER.size:
            stream, size = FRAME_HEADER.unpack_from(self._buffer)
            end = FRAME_HEADER.size + size
            if len(self._buffer) < end:
                break
            frames.append((stream, bytes(self._buffer[FRAME_HEADER.size : end])))
            del self._buffer[:end]
        return frames


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    reply: dict[str, Any] | None = None


class ToolServerClient:
    """Sends requests to the in-container tool server and matches replies by id.

    One reader thread owns the receiving side; any number of threads may call
    `request` at once. When the stream ends, every waiting call fails with the cause
    that `explain_death` gives (for example "OOM-killed").
    """

    def __init__(
        self,
        stream: ByteStream,
        *,
        multiplexed: bool = True,
        explain_death: Callable[[], str] | None = None,
    ) -> None:
        self._stream = stream
        self._decoder = FrameDecoder(multiplexed)
        self._explain_death = explain_death or (lambda: "the tool server stopped")
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ready = threading.Event()
        self._ready_info: dict[str, Any] = {}
        self._closed_cause: str | None = None
        self._closing = False
        self._stdout_line = bytearray()
        self._discarding = False
        self.stderr_tail = bytearray()
        self._reader = threading.Thread(
            target=self._read_loop, name="toolserver-reader", daemon=True
        )
        self._reader.start()

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        """Block until the server announced itself; return its ready message."""
        if not self._ready.wait(timeout):
            if self._closed_cause is not None:
                raise SandboxDiedError(self._closed_cause)
            raise SandboxError(f"the tool server did not start within {timeout:.0f} s")
        if self._closed_cause is not None and not self._ready_info:
            raise SandboxDiedError(self._closed_cause)
        return self._ready_info

    def request(self, request: ToolRequest) -> ExecResult:
        """Send one request and wait for its reply."""
        timeout = request.timeout if request.timeout is not None else TOOL_TIMEOUT_SECONDS
        request_id = next(self._ids)
        pending = _Pending()
        with self._lock:
            if self._closed_cause is not None:
                raise SandboxDiedError(self._closed_cause)
            self._pending[request_id] = pending
        message = {"id": request_id, "op": request.op, "args": request.args, "timeout": timeout}
        try:
            self._send(json.dumps(message, ensure_ascii=False).encode() + b"\n")
            waited = timeout + REPLY_GRACE_SECONDS
            if not pending.done.wait(waited):
                raise ToolTimeoutError(
                    f"no reply from the sandbox to {request.op} within {waited:.0f} s"
                )
        finally:
            with self._lock:
                self._pending.pop(request_id, None)
        if pending.reply is None:
            raise SandboxDiedError(self._closed_cause or "the tool server stopped")
        return _to_result(pending.reply)

    def close(self) -> None:
        """End the conversation: the server sees end of input and exits."""
        self._closing = True
        with contextlib.suppress(OSError):
            self._stream.shutdown(socket.SHUT_WR)
        self._reader.join(timeout=2.0)
        with contextlib.suppress(OSError):
            self._stream.close()

    def _send(self, data: bytes) -> None:
        with self._send_lock:
            try:
                self._stream.sendall(data)
            except OSError as error:
                raise SandboxDiedError(
                    self._closed_cause or f"cannot reach the tool server ({error})"
                ) from error

    def _read_loop(self) -> None:
        try:
            while True:
                data = self._stream.recv(1 << 16)
                if not data:
                    break
                for stream, payload in self._decoder.feed(data):
                    if stream == STDERR:
                        self.stderr_tail = (self.stderr_tail + payload)[-STDERR_TAIL_BYTES:]
                    else:
                        self._take_stdout(payload)
        except OSError:
            pass
        finally:
            self._fail_all()

    def _take_stdout(self, payload: bytes) -> None:
        self._stdout_line += payload
        while (newline := self._stdout_line.find(b"\n")) >= 0:
            line = bytes(self._stdout_line[:newline])
            del self._stdout_line[: newline + 1]
            if self._discarding:
                self._discarding = False
            else:
                self._dispatch(line)
        if len(self._stdout_line) > MAX_LINE_BYTES:
            # Drop the over-long line up to its end instead of buffering it.
            self._stdout_line.clear()
            self._discarding = True

    def _dispatch(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        if message.get("event") == "ready":
            self._ready_info = message
            self._ready.set()
            return
        with self._lock:
            pending = self._pending.get(message.get("id"))  # type: ignore[arg-type]
        if pending is not None:
            pending.reply = message
            pending.done.set()

    def _fail_all(self) -> None:
        try:
            cause = "the sandbox was stopped" if self._closing else self._explain_death()
        except Exception as error:
            cause = f"the tool server stopped ({error})"
        with self._lock:
            self._closed_cause = cause
            waiting = list(self._pending.values())
        for pending in waiting:
            pending.done.set()
        self._ready.set()


def _to_result(reply: dict[str, Any]) -> ExecResult:
    """A reply as a value: types checked, text bounded and valid UTF-8, whatever was sent."""
    meta = reply.get("meta")
    exit_code = reply.get("exit_code")
    error = reply.get("error")
    output, cut = _clean_text(reply.get("output"))
    return ExecResult(
        ok=reply.get("ok") is True,
        output=output,
        exit_code=exit_code
        if isinstance(exit_code, int) and not isinstance(exit_code, bool)
        else None,
        timed_out=reply.get("timed_out") is True,
        truncated=reply.get("truncated") is True or cut,
        error=_clean_text(error)[0] if error is not None else None,
        meta=meta if isinstance(meta, dict) else {},
    )


def _clean_text(value: object) -> tuple[str, bool]:
    text = value if isinstance(value, str) else ""
    cut = len(text) > MAX_TEXT_CHARS
    if cut:
        text = (
            text[:MAX_TEXT_CHARS]
            + f"\n... [reply cut: {len(text) - MAX_TEXT_CHARS} more characters]"
        )
    # json.loads accepts lone surrogates; they must not reach files or the API.
    return text.encode("utf-8", "replace").decode("utf-8"), cut
