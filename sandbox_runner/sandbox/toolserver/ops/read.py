"""read: numbered lines of a text file, streamed, with long lines and binary files handled."""

from __future__ import annotations

import os
import stat
import time

from ..arguments import file_type, int_arg, printable, str_arg
from ..protocol import MAX_OUTPUT_BYTES, JsonDict, Outcome, ToolError

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

    from ..server import ToolServer


READ_DEFAULT_LIMIT = 2000
READ_MAX_LINE_CHARS = 2000
# More than 4 bytes per allowed character: a probe that fills up is always an over-long line.
READ_LINE_PROBE_BYTES = 8192
READ_SKIP_CHUNK = 1 << 20
READ_COUNT_REST_MAX = 8 * 1024 * 1024
BINARY_PROBE_BYTES = 8192


def open_regular_file(path: str) -> BinaryIO:
    """Open PATH for reading, refusing directories, FIFOs and devices before they can block."""
    shown = printable(path)
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise ToolError(f"Path is a directory, not a file: {shown} (use ls to list it)")
    if not stat.S_ISREG(mode):
        raise ToolError(f"Not a regular file ({file_type(mode)}): {shown}")
    # O_NONBLOCK: if the path was swapped for a FIFO since the stat, open must not hang.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolError(f"Not a regular file: {shown}")
    return os.fdopen(fd, "rb", buffering=65536)


def op_read(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    path = server.resolve(str_arg(args, "file_path"))
    offset = max(1, int_arg(args, "offset", 1, minimum=-(2**62)))
    limit = int_arg(args, "limit", READ_DEFAULT_LIMIT, minimum=1)
    deadline = time.monotonic() + timeout
    with open_regular_file(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        head = handle.read(BINARY_PROBE_BYTES)
        if b"\0" in head:
            raise ToolError(f"Cannot read binary file: {printable(path)} ({size} bytes)")
        meta: JsonDict = {"path": path, "size": size, "start_line": offset}
        if not head:
            return Outcome(f"The file exists but is empty: {printable(path)}", meta=meta)
        handle.seek(0)
        lines, next_line, budget_hit = read_numbered_lines(handle, offset, limit, deadline)
        meta["lines"] = len(lines)
        if not lines:
            message = f"The file has only {next_line - 1} lines; offset {offset} is past the end."
            return Outcome(message, meta=meta)
        note = read_tail_note(handle, size, next_line, budget_hit, len(lines) == limit)
        if note:
            lines.append(note)
        return Outcome("\n".join(lines), truncated=bool(note), meta=meta)


def read_numbered_lines(
    handle: BinaryIO, offset: int, limit: int, deadline: float
) -> tuple[list[str], int, bool]:
    """Stream lines in `cat -n` style; return them, the next line number, and whether the
    output budget stopped us. Over-long lines are skipped, never held in memory."""
    lines: list[str] = []
    budget = MAX_OUTPUT_BYTES
    line_no = 0
    while len(lines) < limit:
        raw = handle.readline(READ_LINE_PROBE_BYTES)
        if not raw:
            break
        line_no += 1
        overflow = 0
        if len(raw) == READ_LINE_PROBE_BYTES and not raw.endswith(b"\n"):
            overflow = skip_rest_of_line(handle, deadline)
        if (line_no & 0xFFF == 0 or overflow) and time.monotonic() > deadline:
            raise ToolError("read timed out", timed_out=True)
        if line_no < offset:
            continue
        text = format_line(line_no, raw, overflow)
        budget -= (len(text) if text.isascii() else len(text.encode("utf-8"))) + 1
        if budget < 0:
            return lines, line_no, True
        lines.append(text)
    return lines, line_no + 1, False


def skip_rest_of_line(handle: BinaryIO, deadline: float) -> int:
    """Consume the rest of an over-long line; return how many bytes it still had."""
    skipped = 0
    while True:
        chunk = handle.readline(READ_SKIP_CHUNK)
        if not chunk:
            return skipped
        if chunk.endswith(b"\n"):
            return skipped + len(chunk) - 1
        skipped += len(chunk)
        if time.monotonic() > deadline:
            raise ToolError("read timed out while skipping an over-long line", timed_out=True)


def format_line(number: int, raw: bytes, overflow: int) -> str:
    text = raw.decode("utf-8", "replace")
    if text.endswith("\n"):
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
    if overflow or len(text) > READ_MAX_LINE_CHARS:
        shown = text[:READ_MAX_LINE_CHARS]
        hidden = len(text.encode("utf-8", "replace")) + overflow - len(shown.encode("utf-8"))
        text = f"{shown}... [line truncated: {hidden} more bytes]"
    return f"{number:>6}\t{text}"


def read_tail_note(
    handle: BinaryIO, size: int, next_line: int, budget_hit: bool, limit_hit: bool
) -> str:
    """Say what was not shown: the rest after the output budget or after `limit` lines."""
    if budget_hit:
        return (
            f"... [output truncated at {MAX_OUTPUT_BYTES} bytes; "
            f"use offset={next_line} to continue]"
        )
    first = handle.read(1) if limit_hit else b""
    if not first:
        return ""
    if size - handle.tell() > READ_COUNT_REST_MAX:
        return f"... [more lines follow; use offset={next_line} to continue]"
    rest = first + handle.read()
    count = rest.count(b"\n") + (0 if rest.endswith(b"\n") else 1)
    return f"... [{count} more lines not shown; use offset={next_line}/limit to read them]"
