"""In-container tool server: answers JSON-line tool requests on stdin/stdout, one thread each.

This file is bind-mounted read-only into the sandbox and started there as the main process
(``python3 -I -S toolserver.py --workspace /workspace --plan-dir /plan``), so it uses the
standard library only and never imports from ``sandbox_runner``. The host writes one
request per line, ``{"id", "op", "args", "timeout"}``, and reads one response per line,
``{"id", "ok", "output", "exit_code", "timed_out", "truncated", "error", "meta"}``.

The ops are shaped like the Claude Code tools models are trained on: read, glob, grep, ls,
bash, write, edit, plus ping and stat for the host. Every output is bounded and says when
it was cut; every failure is a one-line message for the model, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fnmatch
import heapq
import json
import os
import re
import signal
import stat
import sys
import threading
import time

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Iterator
    from typing import IO, BinaryIO, NoReturn

JsonDict = dict[str, object]

PROTOCOL_VERSION = 1
DEFAULT_TIMEOUT = 120.0
MIN_TIMEOUT = 0.1
MAX_TIMEOUT = 600.0
MAX_OUTPUT_BYTES = 256 * 1024
DEFAULT_MAX_PLAN_BYTES = 64 * 1024 * 1024

READ_DEFAULT_LIMIT = 2000
READ_MAX_LINE_CHARS = 2000
# More than 4 bytes per allowed character: a probe that fills up is always an over-long line.
READ_LINE_PROBE_BYTES = 8192
READ_SKIP_CHUNK = 1 << 20
READ_COUNT_REST_MAX = 8 * 1024 * 1024
BINARY_PROBE_BYTES = 8192

GLOB_MAX_RESULTS = 100
LS_MAX_ENTRIES = 1000
LS_SKIPPED_NAMES = frozenset({"__pycache__"})
GLOB_MAGIC = frozenset("*?[{\\")

BASH_STREAM_LIMIT = 30000
GREP_STDOUT_LIMIT = 16 * 1024 * 1024
GREP_STDERR_LIMIT = 64 * 1024
READER_JOIN_SECONDS = 2.0
TOKEN_KILL_ROUNDS = 5
GREP_MODES = ("files_with_matches", "content", "count")
CONTEXT_FLAGS = (("-C", "--context"), ("-A", "--after-context"), ("-B", "--before-context"))

COMMAND_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ToolError(Exception):
    """A tool failure the model should see: becomes ok=false with a one-line message."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.timed_out = timed_out


class Outcome:
    """What an op produced; the dispatcher turns it into a response line."""

    __slots__ = ("exit_code", "meta", "output", "timed_out", "truncated")

    def __init__(
        self,
        output: str,
        *,
        truncated: bool = False,
        exit_code: int | None = None,
        timed_out: bool = False,
        meta: JsonDict | None = None,
    ) -> None:
        self.output = output
        self.truncated = truncated
        self.exit_code = exit_code
        self.timed_out = timed_out
        self.meta: JsonDict = meta if meta is not None else {}

    def response(self, request_id: object) -> JsonDict:
        return {
            "id": request_id,
            "ok": True,
            "output": self.output,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "truncated": self.truncated,
            "error": None,
            "meta": self.meta,
        }


def failure(request_id: object, message: str, *, timed_out: bool = False) -> JsonDict:
    """Build an ok=false response; the message is folded onto one line for the model."""
    return {
        "id": request_id,
        "ok": False,
        "output": "",
        "exit_code": None,
        "timed_out": timed_out,
        "truncated": False,
        "error": " ".join(message.split("\n")),
        "meta": {},
    }


# ---------------------------------------------------------------------------------------
# Small helpers: display of names, arguments, error messages, output caps


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


def cap_output(text: str, *, extra_bytes: int = 0) -> tuple[str, bool]:
    """Cut TEXT at a line boundary within MAX_OUTPUT_BYTES and say how much was left out."""
    more = extra_bytes
    data = text.encode("utf-8", "replace")
    if len(data) > MAX_OUTPUT_BYTES:
        cut = data.rfind(b"\n", 0, MAX_OUTPUT_BYTES)
        cut = cut if cut > 0 else MAX_OUTPUT_BYTES
        more += len(data) - cut
        text = data[:cut].decode("utf-8", "ignore")
    if not more:
        return text, False
    return f"{text.rstrip()}\n... [output truncated: {more} more bytes]", True


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


# ---------------------------------------------------------------------------------------
# Subprocesses: bounded capture, process-group and token based cleanup


class BoundedCapture:
    """Drain one pipe in a thread, keeping the first LIMIT bytes and counting the rest."""

    def __init__(self, pipe: IO[bytes], limit: int) -> None:
        self._pipe = pipe
        self._limit = limit
        self._chunks: list[bytes] = []
        self._lock = threading.Lock()
        self.kept = 0
        self.dropped = 0
        self.dropped_lines = 0
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        fd = self._pipe.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                room = max(0, self._limit - self.kept)
                if room:
                    self._chunks.append(chunk[:room])
                    self.kept += min(room, len(chunk))
                rest = chunk[room:]
                self.dropped += len(rest)
                self.dropped_lines += rest.count(b"\n")

    def finish(self, timeout: float) -> None:
        """Wait for EOF; a pipe still held open by an escaped process is left to its thread."""
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._pipe.close()

    def data(self) -> bytes:
        with self._lock:
            return b"".join(self._chunks)


class ProcessResult:
    """The captured streams and exit status of one finished or killed command."""

    __slots__ = ("returncode", "stderr", "stdout", "timed_out")

    def __init__(
        self, stdout: BoundedCapture, stderr: BoundedCapture, returncode: int, timed_out: bool
    ) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.returncode = returncode
        self.timed_out = timed_out


def command_env(token: str) -> dict[str, str]:
    """A fresh environment: nothing of the server's own environment leaks into commands."""
    return {
        "PATH": COMMAND_PATH,
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "safe.directory",
        "GIT_CONFIG_VALUE_0": "*",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "TERM": "dumb",
        "PLANRUN_CMD": token,
    }


def new_token() -> str:
    return f"{os.getpid()}-{os.urandom(8).hex()}"


def kill_token_holders(token: str) -> int:
    """SIGKILL every process whose initial environment carries TOKEN.

    This catches what the process group misses: `setsid`, double forks, daemons.
    """
    marker = b"PLANRUN_CMD=" + token.encode() + b"\0"
    own_pid = os.getpid()
    killed_total = 0
    for _ in range(TOKEN_KILL_ROUNDS):
        killed = 0
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == own_pid:
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as environ:
                    found = marker in environ.read()
                if found:
                    os.kill(int(name), signal.SIGKILL)
                    killed += 1
            except OSError:
                continue
        if not killed:
            break
        killed_total += killed
    return killed_total


def kill_command(proc: subprocess.Popen[bytes], token: str | None) -> None:
    """Kill the command's whole process group, then anything else carrying its token."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    if token:
        kill_token_holders(token)


def run_process(
    server: ToolServer,
    argv: list[str],
    *,
    timeout: float,
    limits: tuple[int, int],
    cwd: str,
    token: str | None = None,
) -> ProcessResult:
    """Run ARGV in its own session with bounded capture; kill everything it left behind."""
    import subprocess  # deferred: see warm_up_imports

    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=command_env(token or new_token()),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    server.register(proc, token)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        stdout = BoundedCapture(proc.stdout, limits[0])
        stderr = BoundedCapture(proc.stderr, limits[1])
        timed_out = False
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
    finally:
        kill_command(proc, token)
        proc.wait()
        server.unregister(proc)
    join_until = time.monotonic() + READER_JOIN_SECONDS
    for capture in (stdout, stderr):
        capture.finish(max(0.0, join_until - time.monotonic()))
    return ProcessResult(stdout, stderr, proc.returncode, timed_out)


# ---------------------------------------------------------------------------------------
# read


def op_ping(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    return Outcome("pong", meta={"workspace": server.workspace, "plan_dir": server.plan_dir})


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


# ---------------------------------------------------------------------------------------
# glob


def glob_to_regex(pattern: str) -> str:
    """Translate a glob with `**`, `*`, `?`, `[...]` and `{a,b}` into a regular expression."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        index += 1
        if char == "*" and pattern.startswith("*", index):
            index += 1
            # `**/` may match no directory at all, so `**/x` also finds a top-level x.
            if pattern.startswith("/", index):
                index += 1
                out.append("(?:.*/)?")
            else:
                out.append(".*")
        elif char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "\\" and index < len(pattern):
            out.append(re.escape(pattern[index]))
            index += 1
        elif char == "[":
            translated, index = _translate_class(pattern, index)
            out.append(translated)
        elif char == "{":
            translated, index = _translate_braces(pattern, index)
            out.append(translated)
        else:
            out.append(re.escape(char))
    return "".join(out)


def _translate_class(pattern: str, start: int) -> tuple[str, int]:
    end = start
    if end < len(pattern) and pattern[end] in "!^":
        end += 1
    if end < len(pattern) and pattern[end] == "]":
        end += 1
    end = pattern.find("]", end)
    if end < 0:
        return re.escape("["), start
    body = pattern[start:end]
    negate = body[:1] in ("!", "^")
    body = body[1:] if negate else body
    escaped = "".join("\\" + char if char in "\\[]^&~|" else char for char in body)
    return ("[^/" + escaped + "]" if negate else "[" + escaped + "]"), end + 1


def _translate_braces(pattern: str, start: int) -> tuple[str, int]:
    depth = 1
    alternatives: list[str] = []
    piece_start = start
    index = start
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                alternatives.append(pattern[piece_start:index])
                translated = "|".join(glob_to_regex(alt) for alt in alternatives)
                return f"(?:{translated})", index + 1
        elif char == "," and depth == 1:
            alternatives.append(pattern[piece_start:index])
            piece_start = index + 1
        index += 1
    return re.escape("{"), start


def split_glob(root: str, pattern: str) -> tuple[str, str]:
    """Move the pattern's leading literal directories into the base directory of the walk."""
    parts = pattern.split("/")
    literal = 0
    while literal < len(parts) and not GLOB_MAGIC.intersection(parts[literal]):
        literal += 1
    if literal == len(parts):
        return os.path.normpath(os.path.join(root, pattern)), ""
    if literal == 0:
        return root, pattern
    prefix = "/".join(parts[:literal]) or "/"
    return os.path.normpath(os.path.join(root, prefix)), "/".join(parts[literal:])


def op_glob(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    pattern = str_arg(args, "pattern")
    root = server.resolve(opt_str_arg(args, "path") or server.workspace)
    server.require_directory(root)
    base, rest = split_glob(root, pattern)
    if not rest:
        if os.path.lexists(base) and not os.path.isdir(base):
            return Outcome(printable(base), meta={"matches": 1})
        return Outcome("No files found", meta={"matches": 0})
    if not os.path.isdir(base):
        return Outcome("No files found", meta={"matches": 0})
    try:
        regex = re.compile(glob_to_regex(rest), re.DOTALL)
    except re.error as exc:
        raise ToolError(f"Invalid glob pattern {pattern!r}: {exc}") from None
    max_depth = None if "**" in rest else rest.count("/") + 1
    deadline = time.monotonic() + timeout
    newest, total = walk_glob(base, regex, max_depth, (deadline, timeout))
    lines = [printable(path) for _, path in newest]
    if not lines:
        return Outcome("No files found", meta={"matches": 0})
    truncated = total > len(lines)
    if truncated:
        lines.append(
            f"[showing {len(lines)} of {total} matches, newest first; "
            "use a more specific pattern or path]"
        )
    return Outcome("\n".join(lines), truncated=truncated, meta={"matches": total})


def walk_glob(
    base: str, regex: re.Pattern[str], max_depth: int | None, limit: tuple[float, float]
) -> tuple[list[tuple[int, str]], int]:
    """Walk BASE without following links; keep the newest matches and count all of them."""
    newest: list[tuple[int, str]] = []
    total = 0
    prefix_len = len(base.rstrip("/")) + 1
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        check_deadline(limit[0], "glob", limit[1])
        rel_dir = dirpath[prefix_len:]
        depth = rel_dir.count("/") + 1 if rel_dir else 0
        if max_depth is not None and depth + 1 >= max_depth:
            dirnames.clear()
        else:
            dirnames[:] = [name for name in dirnames if name != ".git"]
        for name in filenames:
            if not regex.fullmatch(f"{rel_dir}/{name}" if rel_dir else name):
                continue
            full = os.path.join(dirpath, name)
            try:
                mtime = os.lstat(full).st_mtime_ns
            except OSError:
                mtime = 0
            total += 1
            if len(newest) < GLOB_MAX_RESULTS:
                heapq.heappush(newest, (mtime, full))
            else:
                heapq.heappushpop(newest, (mtime, full))
    newest.sort(key=lambda item: (-item[0], item[1]))
    return newest, total


# ---------------------------------------------------------------------------------------
# grep


def rg_argv(args: JsonDict, mode: str, pattern: str, root: str) -> list[str]:
    """Build ripgrep's argument list; the pattern goes after -e so a leading '-' is safe."""
    argv = ["rg", "--no-config", "--color", "never", "--hidden"]
    argv += ["--max-columns", "500", "--max-columns-preview"]
    if bool_arg(args, "-i", False):
        argv.append("--ignore-case")
    if bool_arg(args, "multiline", False):
        argv += ["--multiline", "--multiline-dotall"]
    globs = args.get("glob")
    for glob in [globs] if isinstance(globs, str) else globs if isinstance(globs, list) else []:
        if isinstance(glob, str) and glob:
            argv += ["--glob", glob]
    file_type_name = opt_str_arg(args, "type")
    if file_type_name:
        argv += ["--type", file_type_name]
    # Last, so that no user glob can re-include the repository's .git directory.
    argv += ["--glob", "!.git"]
    if mode == "files_with_matches":
        argv.append("--files-with-matches")
    elif mode == "count":
        # No --sort here: it makes rg single-threaded; the lines are sorted afterwards.
        argv += ["--count", "--with-filename"]
    else:
        argv += ["--sort", "path"]
        argv.append("--line-number" if bool_arg(args, "-n", True) else "--no-line-number")
        for key, flag in CONTEXT_FLAGS:
            lines = int_arg(args, key, 0)
            if lines:
                argv += [flag, str(lines)]
    return [*argv, "-e", pattern, "--", root]


def op_grep(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    pattern = str_arg(args, "pattern", allow_empty=True)
    root = server.resolve(opt_str_arg(args, "path") or server.workspace)
    os.stat(root)
    mode = opt_str_arg(args, "output_mode") or "files_with_matches"
    if mode not in GREP_MODES:
        raise ToolError(f"Invalid output_mode {mode!r}: expected one of {', '.join(GREP_MODES)}")
    head_limit = int_arg(args, "head_limit", 0)
    argv = rg_argv(args, mode, pattern, root)
    try:
        result = run_process(
            server, argv, timeout=timeout, limits=(GREP_STDOUT_LIMIT, GREP_STDERR_LIMIT), cwd="/"
        )
    except FileNotFoundError:
        raise ToolError("ripgrep (rg) is not installed in the sandbox") from None
    if result.timed_out:
        raise ToolError(f"grep timed out after {timeout:g} s", timed_out=True)
    stdout = result.stdout.data()
    errors = result.stderr.data().decode("utf-8", "replace").strip().splitlines()
    code = result.returncode
    meta: JsonDict = {"rg_exit": code}
    if not stdout:
        if code == 1 or (code == 0 and not errors):
            return Outcome("No matches found", exit_code=code, meta=meta)
        raise ToolError("rg: " + " / ".join(line.strip() for line in errors[:6] if line.strip()))
    text, truncated = format_grep(mode, stdout, result.stdout, head_limit)
    if code == 2 and errors:
        text += f"\n[some files could not be searched: {errors[0].strip()}]"
    return Outcome(text, truncated=truncated, exit_code=code, meta=meta)


def format_grep(
    mode: str, stdout: bytes, capture: BoundedCapture, head_limit: int
) -> tuple[str, bool]:
    """Shape rg's output per mode, apply head_limit and the overall output cap."""
    if mode == "files_with_matches":
        paths = sorted_by_mtime([os.fsdecode(line) for line in stdout.splitlines()])
        total = len(paths) + capture.dropped_lines
        lines = [printable(path) for path in paths]
        header = f"Found {plural(total, 'file')}"
        unit = "files"
    else:
        lines = stdout.decode("utf-8", "replace").splitlines()
        total = len(lines) + capture.dropped_lines
        header = ""
        unit = "lines"
        if mode == "count":
            lines.sort()
            counts = [int(line.rpartition(":")[2] or 0) for line in lines if line[-1:].isdigit()]
            header = (
                f"Found {plural(sum(counts), 'matching line')} in {plural(len(counts), 'file')}"
            )
    cut = bool(head_limit) and total > head_limit
    if cut:
        lines = lines[:head_limit]
        lines.append(f"[showing first {head_limit} of {total} {unit} (head_limit)]")
    elif capture.dropped:
        lines.append(f"[rg output exceeded {GREP_STDOUT_LIMIT} bytes; {capture.dropped} dropped]")
    body = "\n".join([header, *lines] if mode == "files_with_matches" else lines)
    if mode == "count":
        body += f"\n\n{header}"
    text, capped = cap_output(body)
    return text, cut or capped or bool(capture.dropped)


def sorted_by_mtime(paths: list[str]) -> list[str]:
    """Newest first, then by path, as Claude Code's Grep lists files."""

    def key(path: str) -> tuple[int, str]:
        try:
            return -os.stat(path).st_mtime_ns, path
        except OSError:
            return 0, path

    return sorted(paths, key=key)


# ---------------------------------------------------------------------------------------
# ls


def op_ls(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    root = server.resolve(opt_str_arg(args, "path") or server.workspace)
    server.require_directory(root)
    raw_ignore = args.get("ignore") or []
    ignore = [raw_ignore] if isinstance(raw_ignore, str) else raw_ignore
    if not isinstance(ignore, list) or not all(isinstance(item, str) for item in ignore):
        raise ToolError("Invalid argument 'ignore': expected a list of glob patterns")
    patterns = [item.rstrip("/") for item in ignore if item.rstrip("/")]
    deadline = time.monotonic() + timeout
    lines, truncated = tree_lines(root, patterns, (deadline, timeout))
    header = f"- {printable(root.rstrip('/'))}/"
    if truncated:
        lines.append(
            f"[listing cut at {LS_MAX_ENTRIES} entries; "
            "pass a deeper path, or use glob/grep to find files]"
        )
    return Outcome("\n".join([header, *lines]), truncated=truncated)


def tree_lines(root: str, ignore: list[str], limit: tuple[float, float]) -> tuple[list[str], bool]:
    """Depth-first listing, sorted by name, with an explicit stack so depth cannot overflow."""
    lines: list[str] = []
    stack: list[tuple[Iterator[os.DirEntry[str]], int, str]] = []
    stack.append((listed_entries(root, "", ignore, lines, 1), 1, ""))
    while stack:
        entries, depth, rel_dir = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        if len(lines) >= LS_MAX_ENTRIES:
            return lines[:LS_MAX_ENTRIES], True
        check_deadline(limit[0], "ls", limit[1])
        indent = "  " * depth
        name = printable(entry.name)
        if entry.is_dir(follow_symlinks=False):
            lines.append(f"{indent}- {name}/")
            rel = f"{rel_dir}{entry.name}/"
            children = listed_entries(entry.path, rel, ignore, lines, depth + 1)
            stack.append((children, depth + 1, rel))
        elif entry.is_symlink():
            lines.append(f"{indent}- {name} -> {printable(safe_readlink(entry.path))}")
        else:
            lines.append(f"{indent}- {name}")
    return lines, False


def listed_entries(
    path: str, rel_dir: str, ignore: list[str], lines: list[str], depth: int
) -> Iterator[os.DirEntry[str]]:
    """The visible entries of one directory; an unreadable one is noted in the listing."""
    try:
        with os.scandir(path) as scan:
            entries = [entry for entry in scan if not ls_skipped(entry.name, rel_dir, ignore)]
    except OSError as exc:
        lines.append(f"{'  ' * depth}[cannot list: {exc.strerror or exc}]")
        return iter(())
    entries.sort(key=lambda entry: entry.name)
    return iter(entries)


def ls_skipped(name: str, rel_dir: str, ignore: list[str]) -> bool:
    if name.startswith(".") or name in LS_SKIPPED_NAMES:
        return True
    rel = rel_dir + name
    return any(
        fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(rel, pattern)
        for pattern in ignore
    )


def safe_readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


# ---------------------------------------------------------------------------------------
# bash


def op_bash(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    command = str_arg(args, "command")
    timeout_ms = args.get("timeout")
    # Claude-Code style args.timeout is in milliseconds and wins over the request's seconds.
    if isinstance(timeout_ms, int | float) and not isinstance(timeout_ms, bool) and timeout_ms > 0:
        timeout = clamp_timeout(timeout_ms / 1000)
    token = new_token()
    oom_kills_before = oom_kill_count()
    try:
        result = run_process(
            server,
            ["/bin/bash", "-c", command],
            timeout=timeout,
            limits=(BASH_STREAM_LIMIT, BASH_STREAM_LIMIT),
            cwd=server.workspace,
            token=token,
        )
    except OSError as exc:
        where = exc.filename if isinstance(exc.filename, str) else ""
        raise ToolError(f"Could not start the command: {describe_os_error(exc, where)}") from None
    text, truncated = bash_output(result, timeout)
    if oom_kill_count() > oom_kills_before:
        text += (
            "\n[a process was killed by the kernel: out of memory "
            "(the sandbox's memory limit was reached)]"
        )
    code = result.returncode
    return Outcome(
        text,
        truncated=truncated,
        exit_code=code if code >= 0 else 128 - code,
        timed_out=result.timed_out,
        meta={"token": token, "timeout": timeout},
    )


OOM_COUNTER_FILES = (
    ("/sys/fs/cgroup/memory.events", "oom_kill"),  # cgroup v2
    ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),  # cgroup v1
)


def oom_kill_count() -> int:
    """How many processes the kernel's OOM killer has killed in this container so far."""
    for path, key in OOM_COUNTER_FILES:
        try:
            with open(path, encoding="ascii") as handle:
                for line in handle:
                    name, _, value = line.partition(" ")
                    if name == key:
                        return int(value)
        except (OSError, ValueError):
            continue
    return 0


def bash_output(result: ProcessResult, timeout: float) -> tuple[str, bool]:
    """stdout, then stderr under its own heading, each with a note if it was cut."""
    pieces: list[str] = []
    stdout = result.stdout.data().decode("utf-8", "replace").rstrip("\n")
    if stdout:
        pieces.append(stdout)
    if result.stdout.dropped:
        pieces.append(f"... [stdout truncated: {result.stdout.dropped} more bytes]")
    stderr = result.stderr.data().decode("utf-8", "replace").rstrip("\n")
    if stderr or result.stderr.dropped:
        pieces += ["[stderr]", stderr] if stderr else ["[stderr]"]
    if result.stderr.dropped:
        pieces.append(f"... [stderr truncated: {result.stderr.dropped} more bytes]")
    if result.timed_out:
        pieces.append(f"[command timed out after {timeout:g} s and was killed]")
    return "\n".join(pieces), bool(result.stdout.dropped or result.stderr.dropped)


# ---------------------------------------------------------------------------------------
# write and edit: only inside the plan directory, never through a symlink


def plan_target(server: ToolServer, raw: str) -> tuple[str, list[str]]:
    path = server.resolve(raw)
    prefix = server.plan_dir.rstrip("/") + "/"
    if not path.startswith(prefix):
        raise ToolError(
            f"Write is only allowed in the plan directory {server.plan_dir}: {printable(path)}"
        )
    return path, path[len(prefix) :].split("/")


def open_in_plan(server: ToolServer, path: str, parts: list[str], *, create: bool) -> int:
    """Open PATH component by component from the plan directory with O_NOFOLLOW.

    Walking with directory descriptors means a symlink swapped in at any level is refused
    rather than followed, whatever happens between our checks.
    """
    dir_fd = os.open(server.plan_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    walked = server.plan_dir.rstrip("/")
    try:
        for part in parts[:-1]:
            walked = f"{walked}/{part}"
            next_fd = open_plan_dir(dir_fd, part, walked, create)
            os.close(dir_fd)
            dir_fd = next_fd
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(parts[-1], flags | (os.O_CREAT if create else 0), 0o644, dir_fd=dir_fd)
        except OSError as exc:
            raise ToolError(plan_open_error(exc, dir_fd, parts[-1], path)) from None
    finally:
        os.close(dir_fd)
    info = os.fstat(fd)
    problem = "" if stat.S_ISREG(info.st_mode) else "Not a regular file"
    if info.st_nlink > 1 and not problem:
        problem = "Refusing to write to a file with several hard links"
    if problem:
        os.close(fd)
        raise ToolError(f"{problem}: {printable(path)}")
    return fd


def open_plan_dir(dir_fd: int, name: str, shown: str, create: bool) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    for attempt in (1, 2):
        try:
            return os.open(name, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create or attempt == 2:
                raise ToolError(f"File does not exist: {printable(shown)}") from None
        except OSError as exc:
            raise ToolError(plan_open_error(exc, dir_fd, name, shown)) from None
        try:
            os.mkdir(name, 0o755, dir_fd=dir_fd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise ToolError(describe_os_error(exc, shown)) from None
    raise ToolError(f"Could not create directory: {printable(shown)}")


def plan_open_error(exc: OSError, dir_fd: int, name: str, shown: str) -> str:
    """Name the symlink when that is why O_NOFOLLOW refused, else describe the error."""
    if exc.errno == errno.ENOENT:
        return f"File does not exist: {printable(shown)}"
    try:
        is_link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        is_link = False
    if is_link:
        return f"Refusing to follow a symbolic link in the plan directory: {printable(shown)}"
    return describe_os_error(exc, shown)


def plan_usage(server: ToolServer, deadline: float) -> int:
    total = 0
    for dirpath, _dirnames, filenames in os.walk(server.plan_dir):
        if time.monotonic() > deadline:
            raise ToolError("Timed out measuring the plan directory", timed_out=True)
        for name in filenames:
            try:
                info = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return total


def check_plan_size(server: ToolServer, delta: int, deadline: float) -> None:
    after = plan_usage(server, deadline) + delta
    if after > server.max_plan_bytes:
        raise ToolError(
            f"Plan directory size limit exceeded: {server.plan_dir} would hold {after} bytes, "
            f"the limit is {server.max_plan_bytes} bytes"
        )


def replace_contents(fd: int, data: bytes, path: str) -> None:
    try:
        os.ftruncate(fd, 0)
        view = memoryview(data)
        position = 0
        while position < len(view):
            position += os.pwrite(fd, view[position:], position)
    except OSError as exc:
        raise ToolError(describe_os_error(exc, path)) from None


def op_write(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    path, parts = plan_target(server, str_arg(args, "file_path"))
    data = str_arg(args, "content", allow_empty=True).encode("utf-8", "replace")
    deadline = time.monotonic() + timeout
    with server.plan_lock:
        try:
            info = os.lstat(path)
            existing = info.st_size if stat.S_ISREG(info.st_mode) else 0
        except OSError:
            existing = 0
        check_plan_size(server, len(data) - existing, deadline)
        fd = open_in_plan(server, path, parts, create=True)
        try:
            replace_contents(fd, data, path)
        finally:
            os.close(fd)
    shown = printable(path)
    return Outcome(f"File written: {shown} ({len(data)} bytes)", meta={"bytes": len(data)})


def read_plan_text(server: ToolServer, fd: int, path: str) -> str:
    size = os.fstat(fd).st_size
    if size > server.max_plan_bytes:
        raise ToolError(f"File is larger than the plan size limit: {printable(path)}")
    chunks: list[bytes] = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"File is not valid UTF-8 text: {printable(path)}") from None


def op_edit(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    path, parts = plan_target(server, str_arg(args, "file_path"))
    old = str_arg(args, "old_string", allow_empty=True)
    new = str_arg(args, "new_string", allow_empty=True)
    replace_all = bool_arg(args, "replace_all", False)
    if not old:
        raise ToolError("old_string must not be empty; use write to create or overwrite a file")
    if old == new:
        raise ToolError("old_string and new_string are identical; nothing to change")
    deadline = time.monotonic() + timeout
    with server.plan_lock:
        fd = open_in_plan(server, path, parts, create=False)
        try:
            text = read_plan_text(server, fd, path)
            count = text.count(old)
            if count == 0:
                raise ToolError(f"old_string not found in file: {printable(path)}")
            if count > 1 and not replace_all:
                raise ToolError(
                    f"old_string is not unique in file ({count} occurrences); "
                    "give more context or set replace_all"
                )
            data = text.replace(old, new, -1 if replace_all else 1).encode("utf-8", "replace")
            check_plan_size(server, len(data) - len(text.encode("utf-8")), deadline)
            replace_contents(fd, data, path)
        finally:
            os.close(fd)
    done = count if replace_all else 1
    message = f"File edited: {printable(path)} ({plural(done, 'replacement')})"
    return Outcome(message, meta={"replacements": done})


# ---------------------------------------------------------------------------------------
# stat


def op_stat(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    path = server.resolve(str_arg(args, "path"))
    info = os.lstat(path)
    details: JsonDict = {
        "path": printable(path),
        "type": file_type(info.st_mode),
        "size": info.st_size,
        "mtime": info.st_mtime,
        "mode": oct(stat.S_IMODE(info.st_mode)),
        "uid": info.st_uid,
        "nlink": info.st_nlink,
    }
    if stat.S_ISLNK(info.st_mode):
        details["target"] = printable(safe_readlink(path))
    return Outcome(json.dumps(details, ensure_ascii=False), meta=details)


# ---------------------------------------------------------------------------------------
# The server: request lines in, one thread per request, response lines out


class ToolServer:
    """Holds the configuration and the running commands, and answers request lines."""

    def __init__(
        self, workspace: str, plan_dir: str, extra_dirs: list[str], max_plan_bytes: int
    ) -> None:
        self.workspace = os.path.normpath(os.path.abspath(workspace))
        self.plan_dir = os.path.normpath(os.path.abspath(plan_dir))
        self.extra_dirs = [os.path.normpath(os.path.abspath(path)) for path in extra_dirs]
        self.max_plan_bytes = max_plan_bytes
        # A JSON-escaped write may be several times its content; anything far beyond is junk.
        self.max_request_bytes = 6 * max_plan_bytes + (1 << 20)
        self.plan_lock = threading.Lock()
        self._out_lock = threading.Lock()
        self._running_lock = threading.Lock()
        self._running: dict[int, tuple[subprocess.Popen[bytes], str | None]] = {}

    def resolve(self, raw: str) -> str:
        if "\0" in raw:
            raise ToolError("Path contains a NUL character")
        return os.path.normpath(os.path.join(self.workspace, raw))

    def require_directory(self, path: str) -> None:
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            raise ToolError(f"Directory does not exist: {printable(path)}") from None
        if not stat.S_ISDIR(mode):
            raise ToolError(f"Path is not a directory: {printable(path)}")

    def register(self, proc: subprocess.Popen[bytes], token: str | None) -> None:
        with self._running_lock:
            self._running[proc.pid] = (proc, token)

    def unregister(self, proc: subprocess.Popen[bytes]) -> None:
        with self._running_lock:
            self._running.pop(proc.pid, None)

    def send(self, payload: JsonDict) -> None:
        # backslashreplace only matters for a stray lone surrogate; the JSON stays valid.
        data = (json.dumps(payload, ensure_ascii=False) + "\n").encode("utf-8", "backslashreplace")
        with self._out_lock:
            try:
                sys.stdout.buffer.write(data)
                sys.stdout.buffer.flush()
            except (OSError, ValueError):
                # The host is gone: nobody can read results, so stop everything.
                self.shutdown(locked=True)

    def handle_line(self, line: bytes) -> None:
        started = time.perf_counter()
        try:
            request = json.loads(line)
        except Exception as exc:
            self.send(failure(None, f"Invalid request: not valid JSON ({exc})"))
            return
        if not isinstance(request, dict):
            self.send(failure(None, "Invalid request: expected a JSON object"))
            return
        request_id = request.get("id")
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            request_id = None
        op = request.get("op")
        handler = OPS.get(op) if isinstance(op, str) else None
        args = request.get("args")
        args = {} if args is None else args
        if handler is None:
            self.send(failure(request_id, f"Unknown op: {op!r} (known: {', '.join(OPS)})"))
        elif not isinstance(args, dict):
            self.send(failure(request_id, "Invalid request: args must be a JSON object"))
        else:
            job = (request_id, handler, args, clamp_timeout(request.get("timeout")), started)
            try:
                threading.Thread(target=self.run_request, args=job, daemon=True).start()
            except RuntimeError as exc:
                self.send(failure(request_id, f"Server busy: cannot start a thread ({exc})"))

    def run_request(
        self,
        request_id: object,
        handler: Callable[[ToolServer, JsonDict, float], Outcome],
        args: JsonDict,
        timeout: float,
        started: float,
    ) -> None:
        try:
            response = handler(self, args, timeout).response(request_id)
        except ToolError as exc:
            response = failure(request_id, exc.message, timed_out=exc.timed_out)
        except OSError as exc:
            filename = exc.filename if isinstance(exc.filename, str) else ""
            response = failure(request_id, describe_os_error(exc, filename))
        except Exception as exc:
            import traceback

            traceback.print_exc(file=sys.stderr)
            response = failure(request_id, f"Internal error: {type(exc).__name__}: {exc}")
        meta = response["meta"]
        if isinstance(meta, dict):
            meta["server_ms"] = round((time.perf_counter() - started) * 1000, 3)
        self.send(response)

    def serve(self) -> NoReturn:
        self.send({"event": "ready", "pid": os.getpid(), "protocol": PROTOCOL_VERSION})
        threading.Thread(target=warm_up_imports, daemon=True).start()
        stdin = sys.stdin.buffer
        while line := stdin.readline(self.max_request_bytes):
            if len(line) >= self.max_request_bytes and not line.endswith(b"\n"):
                while (rest := stdin.readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass
                self.send(failure(None, f"Request too long (over {self.max_request_bytes} bytes)"))
            elif line.strip():
                self.handle_line(line)
        self.shutdown()

    def shutdown(self, *, locked: bool = False) -> NoReturn:
        """Kill every running command (whole process groups and token holders), then exit."""
        with self._running_lock:
            running = list(self._running.values())
        for proc, token in running:
            kill_command(proc, token)
        # Hold the output lock so no response line is cut off half-written.
        if locked or self._out_lock.acquire(timeout=1.0):
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.buffer.flush()
        os._exit(0)


OPS: dict[str, Callable[[ToolServer, JsonDict, float], Outcome]] = {
    "ping": op_ping,
    "read": op_read,
    "glob": op_glob,
    "grep": op_grep,
    "ls": op_ls,
    "bash": op_bash,
    "write": op_write,
    "edit": op_edit,
    "stat": op_stat,
}


def warm_up_imports() -> None:
    """Import what only commands need after the ready line, so time-to-ready stays low."""
    __import__("subprocess")


def help_formatter(prog: str) -> argparse.HelpFormatter:
    # A fixed width keeps argparse from importing shutil (and bz2, lzma) at start-up.
    return argparse.HelpFormatter(prog, width=100)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="planrun in-container tool server", formatter_class=help_formatter
    )
    parser.add_argument("--workspace", default="/workspace")
    parser.add_argument("--plan-dir", default="/plan")
    parser.add_argument("--extra-dir", action="append", default=[])
    parser.add_argument("--max-plan-bytes", type=int, default=DEFAULT_MAX_PLAN_BYTES)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    options = parse_args(argv)
    os.umask(0o022)
    server = ToolServer(
        options.workspace, options.plan_dir, options.extra_dir, options.max_plan_bytes
    )
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda _signum, _frame: server.shutdown())
    server.serve()


if __name__ == "__main__":
    main()
