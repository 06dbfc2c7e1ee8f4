"""Line mode's input, which tells the lines typed before a question from those typed after
it: a message typed ahead is never taken for an answer."""

from __future__ import annotations

import os
import select
from collections import deque
from typing import IO, Any

CHUNK = 65536


class LineInput:
    """The lines of a stream (standard input), read from its file descriptor without
    Python's buffering, so that what has already arrived can be told from what comes next."""

    def __init__(self, stream: IO[Any]) -> None:
        self.stream = stream
        """Its descriptor is taken at the first read: a session that ends sooner (no
        Docker engine) never reads, and then the stream need not have one."""
        self.queued: deque[str] = deque()
        """Lines that arrived before a question: messages, for after the turn."""
        self._pending = b""
        self._ended = False
        self._started_early = False
        """The line now arriving was begun before the question: it is no answer."""

    def next_line(self) -> str | None:
        """The next message or command, those set aside first; None at the end."""
        return self.queued.popleft() if self.queued else self._read()

    def set_aside(self) -> int:
        """Put every line that has arrived by now aside as a message; how many there were."""
        before = len(self.queued)
        while not self._ended and self._arrived():
            self._fill()
        while (line := self._complete_line()) is not None:
            self.queued.append(line)
        if self._ended and self._pending:
            self.queued.append(self._decode(self._pending))
            self._pending = b""
        self._started_early = bool(self._pending)
        return len(self.queued) - before

    def answer(self) -> str | None:
        """The next line begun after the last set_aside; None at the end of the input."""
        if self._started_early:
            self._started_early = False
            early = self._read()
            if early is not None:
                self.queued.append(early)
        return self._read()

    def _read(self) -> str | None:
        while (line := self._complete_line()) is None:
            if self._ended:
                rest, self._pending = self._pending, b""
                return self._decode(rest) if rest else None
            self._fill()
        return line

    def _complete_line(self) -> str | None:
        line, newline, rest = self._pending.partition(b"\n")
        if not newline:
            return None
        self._pending = rest
        return self._decode(line)

    def _arrived(self) -> bool:
        readable, _, _ = select.select([self.stream.fileno()], [], [], 0)
        return bool(readable)

    def _fill(self) -> None:
        chunk = os.read(self.stream.fileno(), CHUNK)
        self._pending += chunk
        self._ended = not chunk

    @staticmethod
    def _decode(line: bytes) -> str:
        return line.decode("utf-8", errors="replace")
