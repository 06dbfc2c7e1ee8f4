"""Unified diffs of the files a session changes: built against the file's real content
(so the hunk headers carry the right line numbers), with repository-relative paths, and
drawn in colour or plain, whole or collapsed."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.paths import WORKSPACE_MOUNT
from sandbox_runner.safe_io import UnsafeFileError, read_beneath
from sandbox_runner.types import ToolRequest

CONTEXT_LINES = 3
COLLAPSE_LINES = 20
"""A diff shown after an edit longer than this shows its first lines and a count."""
MAX_DIFF_BYTES = 2 * 1024 * 1024
"""A file larger than this is not read for a diff (its change is said in words)."""
NO_NEWLINE = "\\ No newline at end of file"


@dataclass(frozen=True)
class DiffLine:
    """One line of a diff: KIND is file (a --- or +++ header), hunk (@@ … @@), del,
    add, context or note; TEXT is the line as shown, its sign included."""

    kind: str
    text: str


@dataclass(frozen=True)
class FileDiff:
    """The change of one file, as a unified diff."""

    path: str
    """Relative to the repository."""
    lines: tuple[DiffLine, ...]
    added: int
    removed: int
    created: bool = False
    deleted: bool = False

    def summary(self) -> str:
        """`src/app.py: 1 line added, 1 removed` (new file, deleted)."""
        what = "new file, " if self.created else "deleted, " if self.deleted else ""
        added = f"{self.added} line{'s' if self.added != 1 else ''} added"
        return f"{self.path}: {what}{added}, {self.removed} removed"


def build_diff(path: str, old: str | None, new: str | None) -> FileDiff:
    """The unified diff (3 lines of context) of PATH from OLD to NEW; None is a file that
    does not exist (/dev/null). CRLF line ends are not shown when both sides use them
    throughout; otherwise a carriage return shows as a character of its line."""
    before = (old or "").splitlines(keepends=True)
    after = (new or "").splitlines(keepends=True)
    crlf = _all_crlf(before + after)
    source = "/dev/null" if old is None else f"a/{path}"
    target = "/dev/null" if new is None else f"b/{path}"
    lines: list[DiffLine] = []
    added = removed = 0
    diff = list(difflib.unified_diff(before, after, source, target, n=CONTEXT_LINES, lineterm=""))
    lines += [DiffLine("file", header.rstrip("\n")) for header in diff[:2]]
    for raw in diff[2:]:
        if raw.startswith("@@"):
            lines.append(DiffLine("hunk", raw.rstrip("\n")))
            continue
        sign, body = raw[0], raw[1:]
        kind = {"-": "del", "+": "add"}.get(sign, "context")
        added += kind == "add"
        removed += kind == "del"
        ended = body.endswith("\n")
        body = body.removesuffix("\r\n") if crlf else body.removesuffix("\n")
        lines.append(DiffLine(kind, sign + body.removesuffix("\n")))
        if not ended:
            lines.append(DiffLine("note", NO_NEWLINE))
    return FileDiff(path, tuple(lines), added, removed, old is None, new is None)


def _all_crlf(lines: list[str]) -> bool:
    ended = [line for line in lines if line.endswith("\n")]
    return bool(ended) and all(line.endswith("\r\n") for line in ended)


def relative_path(container_path: str) -> str | None:
    """The repository-relative path of a path in the work container; None outside it."""
    prefix = WORKSPACE_MOUNT.rstrip("/") + "/"
    if not container_path.startswith(prefix):
        return None
    relative = container_path[len(prefix) :].strip("/")
    return relative or None


def read_text(workspace: Path, relative: str) -> str | None:
    """The file's text, read beneath the repository (no link out of it followed, no FIFO,
    bounded); None when it does not exist.

    Raises:
        UnsafeFileError: it cannot be read safely, is too large, or is not text.
    """
    data = read_beneath(workspace, relative, MAX_DIFF_BYTES)
    if data is None:
        return None
    if b"\0" in data[:8192]:
        raise UnsafeFileError(f"{relative} is a binary file")
    return data.decode("utf-8", errors="replace")


def edit_preview(workspace: Path, request: ToolRequest) -> FileDiff | str:
    """What a Write or Edit request will change, against the file as it is now; or one
    line saying why no diff can be shown (the edit's old_string is not in the file, say)."""
    raw_path = str(request.args.get("file_path", ""))
    relative = relative_path(raw_path)
    if relative is None:
        return f"{raw_path} is not in the repository"
    try:
        current = read_text(workspace, relative)
    except UnsafeFileError as error:
        return f"no diff: {error}"
    if request.op == "write":
        return build_diff(relative, current, str(request.args.get("content", "")))
    if current is None:
        return f"{relative} does not exist: the edit will fail"
    new = edited(current, request.args)
    if isinstance(new, WontApply):
        return f"{relative}: {new.reason}"
    return build_diff(relative, current, new)


@dataclass(frozen=True)
class WontApply:
    """Why an Edit will fail on the file as it is."""

    reason: str


def edited(current: str, args: dict[str, object]) -> str | WontApply:
    """CURRENT after the Edit ARGS, replaced as the tool server replaces it."""
    old, new = str(args.get("old_string", "")), str(args.get("new_string", ""))
    count = current.count(old) if old else 0
    if count == 0:
        return WontApply("old_string is not in the file: the edit will fail")
    if count > 1 and not args.get("replace_all"):
        return WontApply(f"old_string is in the file {count} times: the edit will fail")
    return current.replace(old, new, -1 if args.get("replace_all") else 1)


def collapse(
    lines: tuple[DiffLine, ...], limit: int = COLLAPSE_LINES
) -> tuple[list[DiffLine], int]:
    """The first lines of a diff (headers not counted) and how many more it has."""
    body = [line for line in lines if line.kind != "file"]
    if len(body) <= limit:
        return body, 0
    return body[:limit], len(body) - limit


def more_note(hidden: int, path: str) -> str:
    """The line that stands for what a collapsed diff leaves out, and how to see it."""
    return f"… {hidden} more line{'s' if hidden != 1 else ''} (/diff {path} shows all of it)"
