"""ls: a directory tree sorted by name, hidden entries and ignore patterns left out, capped."""

from __future__ import annotations

import fnmatch
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
