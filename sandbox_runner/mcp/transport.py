"""The SDK's message streams over a container's attached stream: Docker's multiplexed
frames split into stdout lines (JSON-RPC messages) and a stderr tail, bounded against a
server that floods."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from sandbox_runner.sandbox.client import STDERR, STDOUT, ByteStream, FrameDecoder

MAX_LINE_BYTES = 4 * 1024 * 1024
"""A message longer than this ends the connection: the server floods."""
MAX_NOISE_LINES = 50
"""Lines that are not JSON-RPC tolerated on stdout (a banner, say) before giving up."""
STDERR_TAIL_BYTES = 2048
DELIVERY_SECONDS = 30.0

Incoming = SessionMessage | Exception


class AttachedStdio:
    """One server's stdin/stdout over STREAM; `problem` says why it ended, if it did."""

    def __init__(self, stream: ByteStream) -> None:
        self.stream = stream
        self.problem = ""
        """Why the connection was cut (a flood), "" when it was not."""
        self.stderr_tail = bytearray()
        self._noise = 0

    @asynccontextmanager
    async def open(
        self,
    ) -> AsyncIterator[
        tuple[MemoryObjectReceiveStream[Incoming], MemoryObjectSendStream[SessionMessage]]
    ]:
        """The (read, write) streams a ClientSession takes, while the stream is open."""
        to_session, from_server = anyio.create_memory_object_stream[Incoming](0)
        to_server, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
        loop = asyncio.get_running_loop()
        reader = threading.Thread(
            target=self._read, args=(to_session, loop), name="mcp-reader", daemon=True
        )
        reader.start()
        async with anyio.create_task_group() as group:
            group.start_soon(self._write, outgoing)
            try:
                yield from_server, to_server
            finally:
                group.cancel_scope.cancel()
                self.close()

    def close(self) -> None:
        """Close the stream: the server's stdin ends, and so does the reader."""
        with contextlib.suppress(OSError):
            self.stream.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.stream.close()

    async def _write(self, outgoing: MemoryObjectReceiveStream[SessionMessage]) -> None:
        async with outgoing:
            async for message in outgoing:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await anyio.to_thread.run_sync(self.stream.sendall, (data + "\n").encode())
                except OSError:
                    return

    def _read(
        self, to_session: MemoryObjectSendStream[Incoming], loop: asyncio.AbstractEventLoop
    ) -> None:
        decoder, line = FrameDecoder(), bytearray()
        try:
            while not self.problem:
                try:
                    data = self.stream.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                for number, payload in decoder.feed(data):
                    if number == STDERR:
                        self.stderr_tail = (self.stderr_tail + payload)[-STDERR_TAIL_BYTES:]
                    elif number == STDOUT:
                        line += payload
                        self._deliver_lines(line, to_session, loop)
        finally:
            # The session then sees the end of the stream; the loop may be gone already.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(to_session.close)

    def _deliver_lines(
        self,
        line: bytearray,
        to_session: MemoryObjectSendStream[Incoming],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        while (end := line.find(b"\n")) >= 0 and not self.problem:
            text = bytes(line[:end]).decode("utf-8", "replace").strip()
            del line[: end + 1]
            if not text:
                continue
            try:
                message = mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False)
            except ValueError:
                self._noise += 1
                if self._noise > MAX_NOISE_LINES:
                    self.problem = (
                        f"it wrote more than {MAX_NOISE_LINES} lines that are not MCP messages "
                        f"(such as {text[:60]!r})"
                    )
                continue
            if loop.is_closed():
                self.problem = "planrun stopped reading it"
                return
            future = asyncio.run_coroutine_threadsafe(
                to_session.send(SessionMessage(message)), loop
            )
            try:
                future.result(DELIVERY_SECONDS)
            except Exception:
                self.problem = self.problem or "planrun stopped reading it"
        if len(line) > MAX_LINE_BYTES:
            megabytes = MAX_LINE_BYTES // (1024 * 1024)
            self.problem = f"it wrote more than {megabytes} MiB in one message"
