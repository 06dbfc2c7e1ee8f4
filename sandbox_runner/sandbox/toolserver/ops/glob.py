"""glob: files matching a pattern, newest first; past the cap, the first ones by path."""

from __future__ import annotations

import os
import re
import time

from ..arguments import opt_str_arg, printable, str_arg
from ..protocol import JsonDict, Outcome, ToolError
from .glob_pattern import GlobMatcher

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

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
    walk = GlobWalk(matcher, max_depth, time.monotonic() + timeout)
    walk.run(base)
    if not walk.found:
        if walk.timed_out:
            raise ToolError(
                f"glob timed out after {timeout:g} s before a match; "
                "narrow it with path= or a more specific pattern",
                timed_out=True,
            )
        return Outcome("No files found", meta={"matches": 0})
    complete = not (walk.more or walk.timed_out)
    paths = newest_first(walk.found) if complete else walk.found
    lines = [printable(path) for path in paths]
    if walk.more:
        lines.append(
            f"[showing the first {len(paths)} matches by path; there are more: "
            "narrow with path= or a more specific pattern]"
        )
    elif walk.timed_out:
        lines.append(
            f"[glob timed out after {timeout:g} s: the {len(paths)} matches found so far, "
            "by path; narrow with path= or a more specific pattern]"
        )
    meta: JsonDict = {"matches": len(paths), "complete": complete}
    return Outcome("\n".join(lines), truncated=not complete, meta=meta)


def newest_first(paths: list[str]) -> list[str]:
    """PATHS by modification time, newest first, then by path (a link's own time)."""

    def key(path: str) -> tuple[int, str]:
        try:
            return -os.lstat(path).st_mtime_ns, path
        except OSError:
            return 0, path

    return sorted(paths, key=key)


class GlobWalk:
    """A depth-first walk in path order that stops at the first GLOB_MAX_RESULTS + 1
    matches, so its cost follows the matches shown, not the size of the tree.

    Names are sorted in each directory, so a capped page is the same on every run.
    """

    def __init__(self, matcher: GlobMatcher, max_depth: int | None, deadline: float) -> None:
        self.matcher = matcher
        self.max_depth = max_depth
        self.deadline = deadline
        self.found: list[str] = []
        self.more = False
        """Whether more matches exist than were kept (the walk stopped at the cap)."""
        self.timed_out = False

    def run(self, base: str) -> None:
        stack: list[tuple[str, Iterator[os.DirEntry[str]]]] = [("", sorted_entries(base))]
        while stack:
            rel_dir, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                continue
            if time.monotonic() > self.deadline:
                self.timed_out = True
                return
            relative = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            # A link to a directory is neither listed nor followed (as os.walk does); a
            # link loop or a dangling link is listed like a file.
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                depth = len(stack)
                descend = self.max_depth is None or depth < self.max_depth
                if descend and not entry.is_symlink() and entry.name != ".git":
                    stack.append((relative, sorted_entries(entry.path)))
                continue
            if not self.matcher.matches(relative):
                continue
            if len(self.found) == GLOB_MAX_RESULTS:
                self.more = True
                return
            self.found.append(entry.path)


def sorted_entries(directory: str) -> Iterator[os.DirEntry[str]]:
    """A directory's entries by name; an unreadable directory has none."""
    try:
        with os.scandir(directory) as scan:
            entries = list(scan)
    except OSError:
        return iter(())
    entries.sort(key=lambda entry: entry.name)
    return iter(entries)
