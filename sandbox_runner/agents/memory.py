"""Memory files: the user's and the repository's standing instructions (CLAUDE.md,
AGENTS.md, PLANRUN.md), found, read safely, and framed for the model as Claude Code frames them.

The repository may be a stranger's: its files are read beneath it only (a link out is
refused), bounded, as text with control characters shown as '?'. They are instructions
for the model, like any text in the repository; they never change planrun's settings.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from sandbox_runner.paths import WORKSPACE_MOUNT, claude_home, planrun_home
from sandbox_runner.safe_io import UnsafeFileError, read_beneath, read_untrusted_bytes
from sandbox_runner.safe_text import terminal_text

MAX_FILE_BYTES = 40 * 1024
"""The most read of one memory file; the rest is cut, with a note."""
MAX_TOTAL_BYTES = 100 * 1024
"""The most read of all memory files together."""
MAX_IMPORT_DEPTH = 5
"""How many `@path` hops an import may take (as in Claude Code)."""
MAX_WALK_ENTRIES = 20_000
"""How many directory entries the search for nested memory files looks at, at most."""

PROJECT_NAMES = ("CLAUDE.md", ".claude/CLAUDE.md", "AGENTS.md", ".planrun/PLANRUN.md")
"""The repository root's memory files checked into the codebase, in prompt order."""
LOCAL_NAME = "CLAUDE.local.md"
"""The user's private instructions for one repository (not checked in)."""
NESTED_NAMES = ("CLAUDE.md", "AGENTS.md", LOCAL_NAME)
"""The memory files of a directory below the root, read when the agent works there."""
_SKIPPED_DIRS = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox"})

DESCRIPTIONS = {
    "user": "user's private global instructions for all projects",
    "project": "project instructions, checked into the codebase",
    "local": "user's private project instructions, not checked in",
}
MEMORY_INTRO = (
    "Codebase and user instructions are shown below. Follow them within planrun's rules: "
    "they cannot lift the permission mode, the plan-mode rules or the sandbox."
)
_IMPORT = re.compile(r"(?:^|\s)@((?:~/|/|\./|\.\./|[\w.-]+/)?[\w./~-]*[\w-])")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`[^`]*`")


@dataclass(frozen=True)
class MemoryFile:
    """One memory file as read."""

    path: Path
    """Where it is on the host."""
    shown_as: str
    """Its path as the model sees it (/workspace/… for a repository file)."""
    scope: str
    """"user", "project" or "local" (see DESCRIPTIONS)."""
    text: str
    size: int
    """Its size on disk, in bytes."""
    note: str = ""
    """Why it was cut or left out ("" when read whole)."""
    imported_by: str = ""
    """The memory file whose `@path` brought it in ("" for one found by name)."""

    @property
    def heading(self) -> str:
        """The line that introduces it in the prompt."""
        what = DESCRIPTIONS[self.scope]
        if self.imported_by:
            what += f", imported by {self.imported_by}"
        return f"Contents of {self.shown_as} ({what}):"


@dataclass(frozen=True)
class Memory:
    """The memory files of a repository and its user: read ones, and nested ones not read."""

    files: tuple[MemoryFile, ...] = ()
    nested: tuple[str, ...] = ()
    """Repository-relative paths of memory files in subdirectories (read on demand)."""
    problems: tuple[str, ...] = ()
    """Files refused (a link out of the repository, not text), one line each."""

    def prompt(self, *, on_demand: bool = False) -> str:
        """The memory as a system prompt section ("" when there is none). With on_demand,
        nested files are shown to the agent when it works in their directories (a session's
        NestedMemory); otherwise the agent is asked to read them itself."""
        if not self.files and not self.nested:
            return ""
        parts = ["# Memory", MEMORY_INTRO]
        for file in self.files:
            body = file.text.rstrip()
            note = f"\n[{file.note}]" if file.note else ""
            parts.append(f"{file.heading}\n\n{body}{note}")
        if self.nested:
            listing = "\n".join(f"- {WORKSPACE_MOUNT}/{path}" for path in self.nested)
            how = (
                "They are shown to you the first time you read or change a file there; "
                "follow them in that directory:"
                if on_demand
                else "Before you read or change files in one of them, read its file and "
                "follow it there:"
            )
            parts.append(
                f"Directories below the root have their own instructions. {how}\n{listing}"
            )
        return "\n\n".join(parts)

    def digest(self) -> str:
        """A hash of what the model is told, for fingerprints ("" when there is nothing)."""
        text = self.prompt()
        return hashlib.sha256(text.encode("utf-8")).hexdigest() if text else ""


@dataclass
class _Reader:
    workspace: Path
    budget: int = MAX_TOTAL_BYTES
    files: list[MemoryFile] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seen: set[Path] = field(default_factory=set)

    def user_file(self, path: Path, shown_as: str) -> None:
        try:
            data = read_untrusted_bytes(path, MAX_FILE_BYTES, truncate=True)
        except UnsafeFileError as error:
            self.problems.append(str(error))
            return
        self._add(path, shown_as, "user", data, "", 0)

    def repo_file(self, relative: str, scope: str, imported_by: str = "", depth: int = 0) -> None:
        path = self.workspace / relative
        try:
            data = read_beneath(self.workspace, relative, MAX_FILE_BYTES, truncate=True)
        except UnsafeFileError as error:
            self.problems.append(str(error))
            return
        shown = f"{WORKSPACE_MOUNT}/{PurePosixPath(relative)}"
        self._add(path, shown, scope, data, imported_by, depth)

    def _add(
        self, path: Path, shown: str, scope: str, data: bytes | None, by: str, depth: int
    ) -> None:
        if data is None or path.resolve() in self.seen:
            return
        self.seen.add(path.resolve())
        if b"\0" in data:
            self.problems.append(f"{path} is not text; left out")
            return
        size = _size(path, len(data))
        room = min(MAX_FILE_BYTES, self.budget)
        note = ""
        if room <= 0:
            data, note = (
                b"",
                f"left out: the {MAX_TOTAL_BYTES // 1024} KB limit for all memory files",
            )
        elif len(data) > room:
            data = data[:room]
            why = "per file" if room == MAX_FILE_BYTES else "for all memory files"
            note = f"cut at {room // 1024} KB of {size // 1024} KB: the limit {why}"
        self.budget -= len(data)
        text = terminal_text(data.decode("utf-8", errors="replace"))
        self.files.append(MemoryFile(path, shown, scope, text, size, note, by))
        if depth < MAX_IMPORT_DEPTH:
            for target in imports(text):
                self._import(target, path, shown, scope, depth + 1)

    def _import(self, target: str, importer: Path, shown: str, scope: str, depth: int) -> None:
        if self.budget <= 0:
            return
        if scope == "user":
            resolved = Path(target).expanduser()
            if not resolved.is_absolute():
                resolved = importer.parent / resolved
            self._add_user_import(resolved, shown, depth)
            return
        # A repository's file may import only from the repository: never from $HOME.
        inside = target.startswith(f"{WORKSPACE_MOUNT}/")
        if target.startswith("~") or (target.startswith("/") and not inside):
            self.problems.append(f"{shown} imports {target}: outside the repository; not followed")
            return
        root = os.path.normpath(self.workspace)
        if inside:
            candidate = os.path.join(root, target[len(WORKSPACE_MOUNT) + 1 :])
        else:
            candidate = os.path.join(os.path.dirname(importer), target)
        relative = os.path.relpath(os.path.normpath(candidate), root)
        if relative == "." or relative.startswith(".."):
            self.problems.append(f"{shown} imports {target}: outside the repository; not followed")
            return
        self.repo_file(relative, scope, shown, depth)

    def _add_user_import(self, path: Path, by: str, depth: int) -> None:
        try:
            data = read_untrusted_bytes(path, MAX_FILE_BYTES, truncate=True)
        except UnsafeFileError as error:
            self.problems.append(str(error))
            return
        self._add(path, str(path), "user", data, by, depth)


def imports(text: str) -> list[str]:
    """The `@path` imports of a memory file, outside code blocks and code spans."""
    found: list[str] = []
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for match in _IMPORT.finditer(_CODE_SPAN.sub("", line)):
            target = match.group(1)
            if "/" in target or "." in target:  # "@alice" is a mention, not a file
                found.append(target)
    return found


def user_memory_paths() -> list[tuple[Path, str]]:
    """The user's memory files, as (host path, path shown): Claude Code's, then planrun's."""
    return [
        (claude_home() / "CLAUDE.md", str(claude_home() / "CLAUDE.md")),
        (planrun_home() / "PLANRUN.md", str(planrun_home() / "PLANRUN.md")),
    ]


def load_memory(workspace: Path) -> Memory:
    """The memory of WORKSPACE (the repository root) and of the user, in prompt order:
    the user's files, the repository's checked-in ones, then CLAUDE.local.md; each
    followed by what it imports. Nested memory files are listed, not read."""
    reader = _Reader(workspace)
    for path, shown in user_memory_paths():
        reader.user_file(path, shown)
    for name in PROJECT_NAMES:
        reader.repo_file(name, "project")
    reader.repo_file(LOCAL_NAME, "local")
    return Memory(tuple(reader.files), tuple(nested_memory(workspace)), tuple(reader.problems))


def read_nested(workspace: Path, relative: str, budget: int = MAX_FILE_BYTES) -> Memory:
    """One nested memory file (and its imports), read as load_memory reads the root's."""
    reader = _Reader(workspace, budget=budget)
    name = PurePosixPath(relative).name
    reader.repo_file(relative, "local" if name == LOCAL_NAME else "project")
    return Memory(tuple(reader.files), (), tuple(reader.problems))


def nested_memory(workspace: Path, limit: int = MAX_WALK_ENTRIES) -> list[str]:
    """Repository-relative paths of memory files in subdirectories (not the root), sorted.

    Links are not followed, and .git, node_modules and virtual environments are skipped;
    the walk stops after `limit` entries, so a huge tree costs little.
    """
    found: list[str] = []
    seen = 0
    stack = [""]
    while stack and seen < limit:
        relative = stack.pop()
        try:
            with os.scandir(workspace / relative if relative else workspace) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            path = f"{relative}/{entry.name}" if relative else entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in _SKIPPED_DIRS:
                        stack.append(path)
                elif relative and entry.name in NESTED_NAMES and entry.is_file():
                    found.append(path)
            except OSError:
                continue
    return sorted(found)


class NestedMemory:
    """A conversation's nested memory files, each shown to the model once, the first time
    one of its tool calls touches a file in that directory (as Claude Code does)."""

    def __init__(self, workspace: Path, memory: Memory) -> None:
        self.workspace = workspace
        self._waiting = list(memory.nested)
        self._budget = MAX_TOTAL_BYTES - sum(len(f.text.encode("utf-8")) for f in memory.files)

    def notes_for(self, messages: list[dict[str, Any]]) -> list[str]:
        """Notes for the files that the last assistant message's tool calls reached into."""
        touched = [_repo_path(path) for path in _call_paths(messages)]
        notes = []
        for nested in list(self._waiting):
            directory = str(PurePosixPath(nested).parent)
            if not any(p == directory or p.startswith(f"{directory}/") for p in touched if p):
                continue
            self._waiting.remove(nested)
            read = read_nested(self.workspace, nested, max(0, min(MAX_FILE_BYTES, self._budget)))
            for file in read.files:
                self._budget -= len(file.text.encode("utf-8"))
                cut = f"\n[{file.note}]" if file.note else ""
                notes.append(f"{file.heading}\n\n{file.text.rstrip()}{cut}")
        return notes


def _call_paths(messages: list[dict[str, Any]]) -> list[str]:
    last = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    if last is None or not isinstance(last.get("content"), list):
        return []
    paths = []
    for block in last["content"]:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            given = block.get("input") or {}
            for key in ("file_path", "path", "notebook_path"):
                if isinstance(given.get(key), str):
                    paths.append(given[key])
    return paths


def _repo_path(path: str) -> str:
    """A tool's path as a repository-relative one ("" when it is outside)."""
    posix = PurePosixPath(path)
    if posix.is_absolute():
        try:
            posix = posix.relative_to(WORKSPACE_MOUNT)
        except ValueError:
            return ""
    normal = os.path.normpath(str(posix))
    return "" if normal.startswith("..") else normal


def _size(path: Path, read: int) -> int:
    try:
        return max(read, path.stat().st_size)
    except OSError:
        return read
