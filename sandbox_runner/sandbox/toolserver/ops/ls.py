"""ls: a directory tree sorted by name, hidden entries and ignore patterns left out, capped."""

from __future__ import annotations

import fnmatch
import heapq
import os
import time

from ..arguments import check_deadline, opt_str_arg, printable, safe_readlink
from ..protocol import JsonDict, Outcome, ToolError

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from ..server import ToolServer


LS_MAX_ENTRIES = 1000
LS_SKIPPED_NAMES = frozenset({"__pycache__"})


def op_ls(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    root = server.resolve(opt_str_arg(args, "path") or server.workspace)
    server.require_directory(root)
    raw_ignore = args.get("ignore") or []
    ignore = [raw_ignore] if isinstance(raw_ignore, str) else raw_ignore
    if not isinstance(ignore, list) or not all(isinstance(item, str) for item in ignore):
        raise ToolError("Invalid argument 'ignore': expected a list of glob patterns")
    patterns = [item.rstrip("/") for item in ignore if item.rstrip("/")]
    deadline = time.monotonic() + timeout
    listing = TreeListing(patterns, (deadline, timeout))
    lines, more = listing.lines(root)
    header = f"- {printable(root.rstrip('/'))}/"
    cut = bool(more or listing.unopened)
    if cut:
        lines.append(
            f"[listing cut at {LS_MAX_ENTRIES} entries; {left_out(more, listing.unopened)}; "
            "pass a deeper path, or use Glob or Grep to find files]"
        )
    return Outcome("\n".join([header, *lines]), truncated=cut, meta={"more": more})


def left_out(more: int, unopened: bool) -> str:
    """What a cut listing left out: entries counted, and directories it did not read."""
    if not unopened:
        return f"{more} more"
    inside = "what the directories not opened hold"
    return f"{more} more, and {inside}" if more else inside


class TreeListing:
    """A depth-first listing sorted by name, with an explicit stack so depth cannot
    overflow. No directory is held in full: of each, only the entries that can still be
    shown are kept (the rest are counted), so a directory of a million names costs one
    read of it and LS_MAX_ENTRIES entries of memory."""

    def __init__(self, ignore: list[str], limit: tuple[float, float]) -> None:
        self.ignore = ignore
        self.limit = limit
        self.unshown = 0
        """Entries read but left out: past the cap in a directory already listed."""
        self.unopened = False
        """Whether a directory left unread holds entries (so `unshown` is a lower bound)."""
        self.seen = 0

    def lines(self, root: str) -> tuple[list[str], int]:
        """The listing's lines, and how many entries at least were left out (0: none)."""
        lines: list[str] = []
        stack: list[tuple[list[os.DirEntry[str]], int, str]] = []
        stack.append((self.entries(root, "", lines, 1), 1, ""))
        while stack:
            entries, depth, rel_dir = stack[-1]
            if not entries:
                stack.pop()
                continue
            if len(lines) >= LS_MAX_ENTRIES:
                left = [entry for entries, _, _ in stack for entry in entries]
                self.unopened |= any(entry.is_dir(follow_symlinks=False) for entry in left)
                return lines[:LS_MAX_ENTRIES], len(left) + self.unshown
            entry = entries.pop()
            check_deadline(self.limit[0], "ls", self.limit[1])
            indent = "  " * depth
            name = printable(entry.name)
            if entry.is_dir(follow_symlinks=False):
                lines.append(f"{indent}- {name}/")
                rel = f"{rel_dir}{entry.name}/"
                stack.append((self.entries(entry.path, rel, lines, depth + 1), depth + 1, rel))
            elif entry.is_symlink():
                lines.append(f"{indent}- {name} -> {printable(safe_readlink(entry.path))}")
            else:
                lines.append(f"{indent}- {name}")
        return lines, self.unshown

    def entries(
        self, path: str, rel_dir: str, lines: list[str], depth: int
    ) -> list[os.DirEntry[str]]:
        """The visible entries of one directory that can still be shown, last name first
        (popped from the end); an unreadable directory is noted in the listing."""
        room = max(0, LS_MAX_ENTRIES - len(lines))
        try:
            with os.scandir(path) as scan:
                self.seen = 0
                visible = self.visible(scan, rel_dir)
                if not room:  # nothing more can be shown: only whether there was more
                    self.unopened |= next(visible, None) is not None
                    return []
                kept = heapq.nsmallest(room, visible, key=lambda entry: entry.name)
                self.unshown += self.seen - len(kept)
        except OSError as exc:
            lines.append(f"{'  ' * depth}[cannot list: {exc.strerror or exc}]")
            return []
        kept.reverse()
        return kept

    def visible(self, scan: Iterator[os.DirEntry[str]], rel_dir: str) -> Iterator[os.DirEntry[str]]:
        """The entries not hidden nor ignored, counted in `seen`."""
        for count, entry in enumerate(scan):
            if count & 0x3FF == 0:
                check_deadline(self.limit[0], "ls", self.limit[1])
            if not ls_skipped(entry.name, rel_dir, self.ignore):
                self.seen += 1
                yield entry


def ls_skipped(name: str, rel_dir: str, ignore: list[str]) -> bool:
    if name.startswith(".") or name in LS_SKIPPED_NAMES:
        return True
    if not ignore:
        return False
    rel = rel_dir + name
    return any(
        fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(rel, pattern)
        for pattern in ignore
    )
