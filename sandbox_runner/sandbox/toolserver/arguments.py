"""Small helpers of every op: arguments, display of names, error messages, output caps."""

from __future__ import annotations

import errno
import os
import stat
import time

from .protocol import (
    DEFAULT_TIMEOUT,
    MAX_OUTPUT_BYTES,
    MAX_TIMEOUT,
    MIN_TIMEOUT,
    JsonDict,
    ToolError,
)


def printable(name: str) -> str:
    """Escape undecodable bytes (surrogateescape) and control characters for one-line display."""
    if name.isprintable():
        return name
    return "".join(char if char.isprintable() else _escape_char(char) for char in name)


def _escape_char(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return repr(char)[1:-1]


def str_arg(args: JsonDict, key: str, *, allow_empty: bool = False) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolError(f"Missing or invalid argument {key!r}: expected a string")
    if not value and not allow_empty:
        raise ToolError(f"Argument {key!r} must not be empty")
    return value


def opt_str_arg(args: JsonDict, key: str) -> str | None:
    value = args.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ToolError(f"Invalid argument {key!r}: expected a string")
    return value


def int_arg(args: JsonDict, key: str, default: int, *, minimum: int = 0) -> int:
    value = args.get(key)
    number: int | None = None
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float | str) and _looks_integral(value):
        number = int(value)
    if number is None or number < minimum:
        raise ToolError(f"Invalid argument {key!r}: expected an integer >= {minimum}")
    return number


def _looks_integral(value: float | str) -> bool:
    if isinstance(value, float):
        return value.is_integer()
    return value.strip().lstrip("-").isdigit()


def bool_arg(args: JsonDict, key: str, default: bool) -> bool:
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ToolError(f"Invalid argument {key!r}: expected true or false")


def clamp_timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return DEFAULT_TIMEOUT
    return min(max(float(value), MIN_TIMEOUT), MAX_TIMEOUT)


def describe_os_error(exc: OSError, path: str) -> str:
    """Turn an OSError into the one-line message a model can act on."""
    shown = printable(path)
    messages = {
        errno.ENOENT: "File does not exist",
        errno.EISDIR: "Path is a directory, not a file",
        errno.EACCES: "Permission denied",
        errno.EPERM: "Permission denied",
        errno.ELOOP: "Too many levels of symbolic links",
        errno.ENOTDIR: "Not a directory (a component of the path is a file)",
        errno.ENAMETOOLONG: "File name too long",
        errno.ENOSPC: "No space left on device",
        errno.EDQUOT: "Disk quota exceeded",
        errno.EROFS: "Read-only file system",
        errno.ENXIO: "Not a regular file",
    }
    prefix = messages.get(exc.errno or 0) or exc.strerror or type(exc).__name__
    return f"{prefix}: {shown}" if shown else prefix


def cap_output(
    text: str, *, extra_bytes: int = 0, limit: int = MAX_OUTPUT_BYTES
) -> tuple[str, bool]:
    """Cut TEXT at a line boundary within LIMIT bytes and say how much was left out."""
    more = extra_bytes
    data = text.encode("utf-8", "replace")
    if len(data) > limit:
        cut = data.rfind(b"\n", 0, limit)
        cut = cut if cut > 0 else limit
        more += len(data) - cut
        text = data[:cut].decode("utf-8", "ignore")
    if not more:
        return text, False
    return f"{text.rstrip()}\n... [output truncated: {more} more bytes]", True


def human_size(size: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return plural(size, "byte")


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def check_deadline(deadline: float, what: str, timeout: float) -> None:
    if time.monotonic() > deadline:
        raise ToolError(f"{what} timed out after {timeout:g} s", timed_out=True)


def file_type(mode: int) -> str:
    kinds = (
        (stat.S_ISREG, "file"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISLNK, "symlink"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "char_device"),
        (stat.S_ISBLK, "block_device"),
    )
    return next((name for test, name in kinds if test(mode)), "other")


def is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def safe_readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"
