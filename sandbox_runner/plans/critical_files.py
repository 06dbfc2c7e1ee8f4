"""A plan's critical files: each entry's path and reason, checked against the workspace."""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.paths import WORKSPACE_MOUNT
from sandbox_runner.plans.text import shorten

__all__ = [
    "CRITICAL_FILES_TITLE",
    "MAX_CRITICAL_FILES",
    "MAX_ENTRIES",
    "MIN_CRITICAL_FILES",
    "CriticalFile",
    "check_critical_files",
]

CRITICAL_FILES_TITLE = "Critical Files for Implementation"
"""The title of the plan section that lists the critical files."""
MIN_CRITICAL_FILES = 3
MAX_CRITICAL_FILES = 5
"""How many critical files a plan lists, as the prompt asks and validation requires."""
MAX_ENTRIES = 50

_LINK = re.compile(r"\[([^\]\n]*)\]\(([^)\s]*)\)(.*)", re.DOTALL)
_CODE = re.compile(r"(`+)([^`]+)\1(.*)", re.DOTALL)
_BOLD = re.compile(r"(\*\*|__)(.+?)\1(.*)", re.DOTALL)
_LINE_SUFFIX = re.compile(r"(?::(\d+(?:-\d+)?)|#L(\d+)(?:-L?(\d+))?)$")
_EXTENSION = re.compile(r"\.\w")


@dataclass(frozen=True)
class CriticalFile:
    """One entry of "Critical Files for Implementation", its path relative to the repository."""

    path: str
    reason: str
    exists: bool
    line: str | None = None


def check_critical_files(
    entries: list[tuple[str, str]], workspace: Path, bounds: tuple[int, int]
) -> tuple[list[CriticalFile], list[str], list[str]]:
    """The critical files of a section's (item, continuation) entries, the problems, the notes."""
    root, prefixes = _workspace_root(workspace)
    files: list[CriticalFile] = []
    problems: list[str] = []
    notes: list[str] = []
    seen: set[str] = set()
    for text, continuation in entries[:MAX_ENTRIES]:
        entry = _read_entry(text, continuation, root, prefixes)
        if isinstance(entry, str):
            problems.append(entry)
            continue
        raw, relative, line, reason = entry
        if (relative or raw) in seen:
            problems.append(f"critical file listed more than once: {relative or raw}")
            continue
        seen.add(relative or raw)
        if relative is None:
            problems.append(f"critical file is outside the repository: {shorten(raw, 120)}")
            continue
        exists, is_dir = _exists_inside(root, relative)
        files.append(CriticalFile(relative, reason, exists, line))
        if not exists:
            problems.append(f"critical file does not exist in the repository: {relative}")
        elif is_dir:
            notes.append(f"critical file is a directory, accepted: {relative}/")
        if not reason:
            problems.append(f"critical file without a reason: {relative}")
    count = len(seen) + max(0, len(entries) - MAX_ENTRIES)
    if not bounds[0] <= count <= bounds[1]:
        required = f"{bounds[0]} to {bounds[1]}" if bounds[0] != bounds[1] else str(bounds[0])
        files_word = "file" if count == 1 else "files"
        problems.insert(
            0, f"{CRITICAL_FILES_TITLE} lists {count} {files_word}; {required} are required"
        )
    return files, problems, notes


def _read_entry(
    text: str, continuation: str, root: Path | None, prefixes: tuple[str, ...]
) -> tuple[str, str | None, str | None, str] | str:
    """(raw path, repository-relative path or None, line, reason), or a problem."""
    raw, rest, marked = _split_entry(text)
    raw = raw.strip("`*\"' ").rstrip(",;:")
    if not raw or len(raw) > 1024 or any(c.isspace() or not c.isprintable() for c in raw):
        return f"entry without a path: {shorten(text, 80)}"
    line: str | None = None
    if suffix := _LINE_SUFFIX.search(raw):
        line = suffix.group(1) or "-".join(filter(None, suffix.group(2, 3)))
        raw = raw[: suffix.start()]
    if raw.endswith(".") and not raw.endswith(".."):
        raw = raw[:-1]
    relative = _repo_relative(raw, prefixes) if raw else None
    # A bare first word is a path only if it looks like one ("Makefile" must exist).
    plausible = "/" in raw or _EXTENSION.search(raw) is not None or marked
    exists = relative is not None and _exists_inside(root, relative)[0]
    if not raw or not (plausible or exists):
        return f"entry without a path: {shorten(text, 80)}"
    reason = rest.strip().lstrip(":-–—|,> \t").strip()
    if reason.startswith("(") and reason.endswith(")"):
        reason = reason[1:-1].strip()
    return raw, relative, line, shorten(reason or continuation, 500)


def _split_entry(text: str) -> tuple[str, str, bool]:
    """Split a list item into its path, the rest, and whether markup set the path apart."""
    if link := _LINK.match(text):
        label = link.group(1).strip("`* ")
        target = link.group(2) if not label or " " in label else label
        return target, link.group(3), True
    for pattern in (_CODE, _BOLD):
        if marked := pattern.match(text):
            return marked.group(2), marked.group(3), True
    path, _, rest = text.replace("\t", " ").partition(" ")
    return path, rest, False


def _repo_relative(raw: str, prefixes: tuple[str, ...]) -> str | None:
    """The path relative to the repository root, or None when it points outside."""
    path = raw
    if path.startswith("~"):
        return None
    if path.startswith("/"):
        for prefix in prefixes:
            if path == prefix or path.startswith(prefix + "/"):
                path = path[len(prefix) :].lstrip("/") or "."
                break
        else:
            return None
    normal = posixpath.normpath(path)
    return None if normal == ".." or normal.startswith("../") else normal


def _workspace_root(workspace: Path) -> tuple[Path | None, tuple[str, ...]]:
    """The resolved workspace, and the absolute prefixes a plan may use for it."""
    try:
        root: Path | None = workspace.resolve()
    except (OSError, RuntimeError):
        root = None
    host = os.path.abspath(workspace)
    prefixes = {WORKSPACE_MOUNT, host, str(root) if root else host}
    return root, tuple(sorted((p.rstrip("/") for p in prefixes if p != "/"), key=len)[::-1])


def _exists_inside(root: Path | None, relative: str) -> tuple[bool, bool]:
    """(exists, is a directory); a symlink leading out of the workspace does not exist."""
    if root is None:
        return False, False
    try:
        resolved = (root / relative).resolve(strict=True)
        return (True, resolved.is_dir()) if resolved.is_relative_to(root) else (False, False)
    except (OSError, RuntimeError, ValueError):
        return False, False
