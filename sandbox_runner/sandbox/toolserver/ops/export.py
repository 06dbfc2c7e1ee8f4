"""plan_files and plan_read: how the host copies the plan directory (a tmpfs) out."""

from __future__ import annotations

import base64
import os
import time

from ..arguments import check_deadline, int_arg, str_arg
from ..protocol import JsonDict, Outcome
from .write import open_in_plan, plan_target

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..server import ToolServer


# What the host copies out of the plan directory: files listed per request, and bytes per read.
EXPORT_MAX_FILES = 1000
EXPORT_CHUNK_BYTES = 192 * 1024


def op_plan_files(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    """The regular files under the plan directory: hex-encoded relative names and sizes.

    Walked with an explicit stack (any depth), never through a symlink; other kinds of
    entries are only counted.
    """
    deadline = time.monotonic() + timeout
    files: list[JsonDict] = []
    skipped = 0
    stack = [b""]
    root = os.fsencode(server.plan_dir)
    while stack and len(files) < EXPORT_MAX_FILES:
        check_deadline(deadline, "plan_files", timeout)
        relative = stack.pop()
        try:
            with os.scandir(os.path.join(root, relative) if relative else root) as scan:
                entries = list(scan)
        except OSError:
            skipped += 1
            continue
        for entry in entries:
            name = os.path.join(relative, entry.name) if relative else entry.name
            if entry.is_dir(follow_symlinks=False):
                stack.append(name)
            elif entry.is_file(follow_symlinks=False):
                files.append(
                    {"path": name.hex(), "size": entry.stat(follow_symlinks=False).st_size}
                )
            else:
                skipped += 1
    listed = files[:EXPORT_MAX_FILES]
    more = bool(stack) or len(files) > EXPORT_MAX_FILES
    meta: JsonDict = {"files": listed, "skipped": skipped, "more": more}
    return Outcome(f"{len(listed)} files", meta=meta)


def op_plan_read(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    """Up to EXPORT_CHUNK_BYTES of one plan-directory file from OFFSET, base64-encoded."""
    raw = str_arg(args, "path")
    offset = int_arg(args, "offset", 0)
    path, parts = plan_target(server, os.path.join(server.plan_dir, raw))
    with server.write_lock:
        fd = open_in_plan(server, path, parts, create=False)
        try:
            size = os.fstat(fd).st_size
            data = os.pread(fd, EXPORT_CHUNK_BYTES, offset)
        finally:
            os.close(fd)
    eof = offset + len(data) >= size
    meta: JsonDict = {"size": size, "offset": offset, "eof": eof}
    return Outcome(base64.b64encode(data).decode("ascii"), meta=meta)
