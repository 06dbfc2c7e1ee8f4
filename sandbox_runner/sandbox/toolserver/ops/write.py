"""write and edit: only under a writable root (the plan directory), never through a symlink."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading

from ..arguments import (
    bool_arg,
    describe_os_error,
    file_type,
    human_size,
    plural,
    printable,
    str_arg,
)
from ..protocol import JsonDict, Outcome, ToolError

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..server import ToolServer


def writable_root(server: ToolServer, path: str) -> str | None:
    """The writable root PATH lies under: the plan directory, or one given by --writable."""
    for root in (server.plan_dir, *server.writable):
        if path.startswith(root.rstrip("/") + "/"):
            return root
    return None


def plan_target(server: ToolServer, raw: str) -> tuple[str, list[str]]:
    """The path a write may go to, and its components below its writable root."""
    path = server.resolve(raw)
    root = writable_root(server, path)
    if root is None:
        if not server.writable:
            where = f"the plan directory {server.plan_dir}"
        else:
            where = " and ".join([server.plan_dir, *server.writable])
        raise ToolError(f"Write is only allowed in {where}: {printable(path)}")
    parts = path[len(root.rstrip("/")) + 1 :].split("/")
    if ".git" in parts:
        # git would take it for a repository and obey its config; in the workspace, the
        # user's own git on the host would (hooks, filters).
        where = " in the plan directory" if root == server.plan_dir else ""
        raise ToolError(f"Refusing to write a .git path{where}: {printable(path)}")
    return path, parts


def open_in_plan(server: ToolServer, path: str, parts: list[str], *, create: bool) -> int:
    """Open PATH component by component from the plan directory with O_NOFOLLOW.

    Walking with directory descriptors means a symlink swapped in at any level is refused
    rather than followed, whatever happens between our checks.
    """
    dir_fd = open_plan_parent(server, parts, path, create=create)
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(parts[-1], flags | (os.O_CREAT if create else 0), 0o644, dir_fd=dir_fd)
        except OSError as exc:
            raise ToolError(plan_open_error(exc, dir_fd, parts[-1], path)) from None
    finally:
        os.close(dir_fd)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ToolError(f"Not a regular file: {printable(path)}")
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


FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def plan_full_message(server: ToolServer, path: str) -> str:
    return (
        f"Plan directory is full: {printable(path)} was not changed (the plan directory "
        f"holds at most {human_size(server.max_plan_bytes)} and "
        f"{server.max_plan_entries} files); write less, or remove files you do not need"
    )


def replace_in_plan(server: ToolServer, path: str, parts: list[str], data: bytes) -> None:
    """Write DATA to a new file beside PATH, then rename it over PATH.

    A write that fails half-way (the plan directory is full) leaves the old plan whole;
    a symlink or FIFO planted at PATH is replaced, never followed or opened.
    """
    in_plan = writable_root(server, path) == server.plan_dir
    if in_plan and len(data) > server.max_plan_bytes:
        raise ToolError(plan_full_message(server, path))
    dir_fd = open_plan_parent(server, parts, path, create=True)
    temporary = f".{parts[-1][:200]}.planrun-{threading.get_ident()}.tmp"
    try:
        try:
            fd = os.open(
                temporary,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=dir_fd,
            )
        except OSError as exc:
            raise ToolError(plan_write_error(server, exc, path)) from None
        try:
            view = memoryview(data)
            position = 0
            while position < len(view):
                position += os.write(fd, view[position:])
        except OSError as exc:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise ToolError(plan_write_error(server, exc, path)) from None
        os.close(fd)
        try:
            refuse_odd_target(dir_fd, parts[-1], path)
            os.rename(temporary, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except ToolError:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise ToolError(plan_write_error(server, exc, path)) from None
    finally:
        os.close(dir_fd)


def refuse_odd_target(dir_fd: int, name: str, path: str) -> None:
    """A symlink, FIFO or directory at the target is an error, not something to replace."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise ToolError(
            f"Refusing to follow a symbolic link in the plan directory: {printable(path)}"
        )
    if not stat.S_ISREG(mode):
        raise ToolError(f"Not a regular file ({file_type(mode)}): {printable(path)}")


def plan_write_error(server: ToolServer, exc: OSError, path: str) -> str:
    if exc.errno in FULL_ERRNOS and writable_root(server, path) == server.plan_dir:
        return plan_full_message(server, path)
    return describe_os_error(exc, path)


def open_plan_parent(server: ToolServer, parts: list[str], path: str, *, create: bool) -> int:
    """The directory that holds PATH, opened component by component with O_NOFOLLOW from
    its writable root."""
    root = writable_root(server, path) or server.plan_dir
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    walked = root.rstrip("/")
    try:
        for part in parts[:-1]:
            walked = f"{walked}/{part}"
            next_fd = open_plan_dir(dir_fd, part, walked, create)
            os.close(dir_fd)
            dir_fd = next_fd
    except BaseException:
        os.close(dir_fd)
        raise
    return dir_fd


def op_write(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    path, parts = plan_target(server, str_arg(args, "file_path"))
    data = str_arg(args, "content", allow_empty=True).encode("utf-8", "replace")
    with server.write_lock:
        replace_in_plan(server, path, parts, data)
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
    with server.write_lock:
        fd = open_in_plan(server, path, parts, create=False)
        try:
            text = read_plan_text(server, fd, path)
        finally:
            os.close(fd)
        count = text.count(old)
        if count == 0:
            raise ToolError(f"old_string not found in file: {printable(path)}")
        if count > 1 and not replace_all:
            raise ToolError(
                f"old_string is not unique in file ({count} occurrences); "
                "give more context or set replace_all"
            )
        data = text.replace(old, new, -1 if replace_all else 1).encode("utf-8", "replace")
        replace_in_plan(server, path, parts, data)
    done = count if replace_all else 1
    message = f"File edited: {printable(path)} ({plural(done, 'replacement')})"
    return Outcome(message, meta={"replacements": done})
