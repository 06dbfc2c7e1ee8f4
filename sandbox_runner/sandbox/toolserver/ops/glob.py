"""glob: files matching a pattern, newest first, walked under a deadline."""

from __future__ import annotations

import heapq
import os
import re
import time

from ..arguments import check_deadline, opt_str_arg, printable, str_arg
from ..protocol import JsonDict, Outcome, ToolError
from .glob_pattern import GlobMatcher

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..server import ToolServer


GLOB_MAX_RESULTS = 100
# What makes a path component a pattern rather than a literal name.
GLOB_MAGIC = frozenset("*?[{\\")


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
        matcher = GlobMatcher(rest)
    except re.error as exc:
        raise ToolError(f"Invalid glob pattern {printable(pattern)!r}: {exc}") from None
    max_depth = None if "**" in rest else rest.count("/") + 1
    deadline = time.monotonic() + timeout
    newest, total = walk_glob(base, matcher, max_depth, (deadline, timeout))
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
    base: str, matcher: GlobMatcher, max_depth: int | None, limit: tuple[float, float]
) -> tuple[list[tuple[int, str]], int]:
    """Walk BASE (any depth, never through a link); keep the newest matches, count all.

    The deadline is checked for every entry, so a slow pattern ends with the request.
    """
    newest: list[tuple[int, str]] = []
    total = 0
    stack = [("", base)]
    while stack:
        rel_dir, directory = stack.pop()
        check_deadline(limit[0], "glob", limit[1])
        depth = rel_dir.count("/") + 1 if rel_dir else 0
        descend = max_depth is None or depth + 1 < max_depth
        try:
            with os.scandir(directory) as scan:
                entries = list(scan)
        except OSError:
            continue
        for entry in entries:
            check_deadline(limit[0], "glob", limit[1])
            relative = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            # A link to a directory is neither listed nor followed (as os.walk does); a
            # link loop or a dangling link is listed like a file.
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            is_link = entry.is_symlink()
            if is_dir:
                if descend and not is_link and entry.name != ".git":
                    stack.append((relative, entry.path))
                continue
            if not matcher.matches(relative):
                continue
            try:
                mtime = entry.stat(follow_symlinks=False).st_mtime_ns
            except OSError:
                mtime = 0
            total += 1
            if len(newest) < GLOB_MAX_RESULTS:
                heapq.heappush(newest, (mtime, entry.path))
            else:
                heapq.heappushpop(newest, (mtime, entry.path))
    newest.sort(key=lambda item: (-item[0], item[1]))
    return newest, total
