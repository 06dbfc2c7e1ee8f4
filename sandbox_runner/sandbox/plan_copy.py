"""Copying a sandbox's /plan (a tmpfs inside the container) out to the host, bounded.

Everything in /plan was written by code the host does not trust, so names are checked
component by component, only regular files are copied, sizes and counts are capped, and
the host directory is one that no sandbox can write to (nothing there can be a planted
symlink).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sandbox_runner.types import ExecResult, ToolRequest

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_TOTAL_BYTES = 16 * 1024 * 1024
MAX_FILES = 1000
MAX_NAME_BYTES = 255
MAX_NAME_PARTS = 64
"""The most directory levels a copied file's name may have: making and removing its
directories (Path.mkdir, shutil.rmtree) recurses once per level."""

Call = Callable[[ToolRequest], ExecResult]


def safe_relative(name: str) -> str | None:
    """NAME if it is a harmless relative path (printable components, no . or .., at most
    MAX_NAME_PARTS of them), else None."""
    parts = name.split("/")
    if len(parts) > MAX_NAME_PARTS:
        return None
    for part in parts:
        if part in ("", ".", "..") or len(part.encode("utf-8", "replace")) > MAX_NAME_BYTES:
            return None
        if not part.isprintable():
            return None
    return name


class CopyProblem(Exception):
    """One file could not be copied out; the message says which and why."""


class HostCopy:
    """The host copy of one sandbox's /plan (plan_dir), and a running count of its bytes.

    The count is taken once, at the first copy, from the files plan_dir already holds;
    from then on each copy adds its file's size and takes off the size of the file it
    replaces, so a write walks no directory. Every byte the sandbox sends is counted;
    files the host itself removed (a session's staging copy) are found by a recount,
    done only when a copy would otherwise be refused. No other sandbox may copy into
    plan_dir.
    """

    def __init__(self, plan_dir: Path) -> None:
        self.plan_dir = plan_dir
        self._sizes: dict[str, int] | None = None
        """Bytes of each regular file under plan_dir, by relative name; None: not counted."""
        self._total = 0
        self._lock = threading.Lock()

    @property
    def total(self) -> int:
        """Bytes of the regular files under plan_dir, as counted."""
        with self._lock:
            self._count_once()
            return self._total

    def put(self, relative: str, data: bytes) -> None:
        """Write DATA as plan_dir/RELATIVE (a harmless name), replacing what was there.

        The copy never holds more than MAX_TOTAL_BYTES, however often the sandbox
        deletes and rewrites its files.

        Raises:
            CopyProblem: the copy would pass MAX_TOTAL_BYTES, or the host cannot write it.
        """
        target = self.plan_dir / relative
        with self._lock:
            self._count_once()
            if self._total_with(relative, len(data)) > MAX_TOTAL_BYTES:
                self._recount()
            if self._total_with(relative, len(data)) > MAX_TOTAL_BYTES:
                raise CopyProblem(
                    f"{relative}: the plan directory's copy would pass {MAX_TOTAL_BYTES} bytes"
                )
            try:
                write_atomically(target, data)
            except OSError as error:
                raise CopyProblem(f"{relative}: {error.strerror or error}") from None
            self._set(relative, len(data))

    def _count_once(self) -> None:
        if self._sizes is None:
            self._recount()

    def _recount(self) -> None:
        self._sizes = {
            relative: _regular_size(path)
            for relative, path in _host_files(self.plan_dir, limit=None)
        }
        self._total = sum(self._sizes.values())

    def _total_with(self, relative: str, size: int) -> int:
        """The total were RELATIVE to hold SIZE bytes."""
        assert self._sizes is not None
        return self._total - self._sizes.get(relative, 0) + size

    def _set(self, relative: str, size: int) -> None:
        self._total = self._total_with(relative, size)
        assert self._sizes is not None
        self._sizes[relative] = size


def _regular_size(path: Path) -> int:
    """The size of PATH if it is a regular file (no link followed), else 0."""
    try:
        status = path.stat(follow_symlinks=False)
    except OSError:
        return 0
    return status.st_size if stat.S_ISREG(status.st_mode) else 0


def copy_file(call: Call, relative: str, host: HostCopy, deadline: float) -> int:
    """Copy one file of /plan to the same place in the host copy; return the bytes copied.

    Raises:
        CopyProblem: the file could not be read back or written on the host, or the
            host copy would pass its limit.
    """
    chunks: list[bytes] = []
    offset = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CopyProblem(f"{relative}: no time left to copy it")
        request = ToolRequest("plan_read", {"path": relative, "offset": offset}, remaining)
        result = call(request)
        if not result.ok:
            raise CopyProblem(f"{relative}: {result.error}")
        try:
            data = base64.b64decode(result.output, validate=True)
        except (binascii.Error, ValueError):
            raise CopyProblem(f"{relative}: the sandbox's answer is not base64") from None
        chunks.append(data)
        offset += len(data)
        if offset > MAX_FILE_BYTES:
            raise CopyProblem(f"{relative}: over {MAX_FILE_BYTES} bytes")
        if result.meta.get("eof") is True or not data:
            break
    host.put(relative, b"".join(chunks))
    return offset


def copy_all(call: Call, host: HostCopy, deadline: float) -> list[str]:
    """Copy every regular file of /plan within the caps; return what was left out."""
    listing = call(ToolRequest("plan_files", {}, max(0.1, deadline - time.monotonic())))
    if not listing.ok:
        return [f"cannot list the plan directory: {listing.error}"]
    entries = listing.meta.get("files")
    left_out: list[str] = []
    total = 0
    for entry in entries[:MAX_FILES] if isinstance(entries, list) else []:
        relative = _entry_name(entry)
        size = entry.get("size") if isinstance(entry, dict) else None
        if relative is None or not isinstance(size, int):
            left_out.append("a file with an unusable name")
            continue
        if size > MAX_FILE_BYTES or total + size > MAX_TOTAL_BYTES:
            left_out.append(f"{relative} ({size} bytes: over the copy limits)")
            continue
        try:
            total += copy_file(call, relative, host, deadline)
        except CopyProblem as problem:
            left_out.append(str(problem))
    return left_out


def _entry_name(entry: object) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
        return None
    try:
        name = bytes.fromhex(entry["path"]).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    return safe_relative(name)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace path with data: a new file beside it, renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A short name of its own: one derived from the file's could pass NAME_MAX.
    temporary = path.with_name(f".planrun-{os.getpid()}-{threading.get_ident()}.copy")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    descriptor = os.open(temporary, flags, 0o644)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        # Left behind, it would hold bytes that the host copy's count does not know of.
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def seed(call: Call, plan_dir: Path, deadline: float) -> list[str]:
    """Write the text files already in plan_dir into /plan (a plan file from an earlier
    session, say); return what was left out. Bounded like a copy out."""
    left_out: list[str] = []
    total = 0
    for relative, path in _host_files(plan_dir):
        size = path.stat().st_size
        if size > MAX_FILE_BYTES or total + size > MAX_TOTAL_BYTES:
            left_out.append(f"{relative} ({size} bytes: over the copy limits)")
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            left_out.append(f"{relative} (not UTF-8 text)")
            continue
        total += size
        remaining = max(0.1, deadline - time.monotonic())
        request = ToolRequest("write", {"file_path": f"/plan/{relative}", "content": text})
        result = call(ToolRequest(request.op, request.args, remaining))
        if not result.ok:
            left_out.append(f"{relative} ({result.error})")
    return left_out


def _host_files(plan_dir: Path, limit: int | None = MAX_FILES) -> list[tuple[str, Path]]:
    """Regular files under plan_dir (no links followed), at most LIMIT (None: all)."""
    found: list[tuple[str, Path]] = []
    stack = [plan_dir]
    while stack and (limit is None or len(found) < limit):
        directory = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                relative = safe_relative(os.path.relpath(entry.path, plan_dir))
                if relative is not None:
                    found.append((relative, Path(entry.path)))
    return found[:limit]
