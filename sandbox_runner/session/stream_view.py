"""The answer streaming in, as the terminal shows it: raw text just above the prompt while
its block arrives, then, once the block is complete, printed above as Markdown (the way
Claude Code re-renders a finished block)."""

from __future__ import annotations

import itertools
import threading

from prompt_toolkit.utils import get_cwidth

from sandbox_runner.safe_text import terminal_text

CUT_MARK = "…"


class StreamView:
    """The text blocks not yet printed: the one arriving, and those ended whose Markdown is
    on its way to the screen (taken out once printed, so nothing shows twice or goes
    missing in between)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blocks: dict[int, str] = {}
        self._open: int | None = None
        self._ids = itertools.count(1)
        self._version = 0
        """Counts the changes: what was worked out for one is kept until the next."""
        self._text = (0, "")
        self._preview: tuple[tuple[int, int, int], str] = ((0, 0, 0), "")

    def add(self, text: str) -> None:
        """TEXT arrived: it goes on the open block, or starts one."""
        with self._lock:
            if self._open is None:
                self._open = next(self._ids)
                self._blocks[self._open] = ""
            self._blocks[self._open] += text
            self._version += 1

    def end(self) -> int | None:
        """The open block is complete; its id, for drop() once it is printed."""
        with self._lock:
            ended, self._open = self._open, None
            return ended

    def restart(self) -> None:
        """The answer starts over (a retry): the open block is void."""
        with self._lock:
            if self._open is not None:
                del self._blocks[self._open]
                self._open = None
                self._version += 1

    def drop(self, block: int | None) -> None:
        """BLOCK is printed above the prompt now: it leaves the preview."""
        if block is None:
            return
        with self._lock:
            self._blocks.pop(block, None)
            self._version += 1

    def clear(self) -> None:
        """Nothing streams any more (the session is over)."""
        with self._lock:
            self._blocks.clear()
            self._open = None
            self._version += 1

    @property
    def text(self) -> str:
        """The text not yet printed, as it arrived (safe to print)."""
        return self._current()[1]

    def _current(self) -> tuple[int, str]:
        """The text and the version it is of."""
        with self._lock:
            version = self._version
            if self._text[0] == version:
                return self._text
            text = "\n\n".join(block for block in self._blocks.values() if block)
        self._text = (version, terminal_text(text.replace("\r", "")))
        return self._text

    def preview(self, width: int, rows: int) -> str:
        """The text's last ROWS lines, wrapped at WIDTH; "" when nothing streams. Drawn
        several times a redraw, so only the end is wrapped, and the result is kept until
        the text or the size changes."""
        version, text = self._current()
        key = (version, width, rows)
        if self._preview[0] == key:
            return self._preview[1]
        lines: list[str] = []
        for line in reversed(text.split("\n")) if text else ():
            lines[:0] = wrap(line.replace("\t", "    "), max(1, width))
            if len(lines) > rows:
                lines = [CUT_MARK, *lines[len(lines) - max(1, rows - 1) :]]
                break
        self._preview = (key, "\n".join(lines))
        return self._preview[1]


def wrap(line: str, width: int) -> list[str]:
    """LINE cut into pieces of at most WIDTH columns (wide characters count twice)."""
    pieces, current, used = [], "", 0
    for char in line:
        size = get_cwidth(char)
        if used + size > width and current:
            pieces.append(current)
            current, used = "", 0
        current += char
        used += size
    pieces.append(current)
    return pieces
