"""Proposed patches: an edit of a repository file that plan mode refused, kept as an entry of
the plan (the file, a unified diff against the file as it is, the tool and why it was refused)
instead of being applied or lost."""

from __future__ import annotations

import difflib
import os
import posixpath
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_runner.paths import WORKSPACE_MOUNT
from sandbox_runner.redact import redact
from sandbox_runner.safe_io import UnsafeFileError, read_beneath
from sandbox_runner.secret_names import looks_secret

MAX_PATCHES = 20
"""The most patches one plan keeps; later ones are dropped (the count says so)."""
MAX_DIFF_CHARS = 16_000
"""The longest diff kept of one patch; a longer one is cut, with a note."""
MAX_TOTAL_DIFF_CHARS = 64_000
"""The most diff text one plan keeps in all (its front matter stays readable)."""
MAX_INPUT_CHARS = 64_000
"""The longest tool input kept to apply a patch later (a session's /apply-patches)."""
MAX_FILE_BYTES = 1024 * 1024
"""The largest repository file a patch is made against."""
PATCH_TOOLS = frozenset({"Write", "Edit"})
CUT_NOTE = "\n... (the diff is cut here: it is longer than {limit} characters)\n"


@dataclass(frozen=True)
class ProposedPatch:
    """A change the model wanted to make while planning, kept for the plan."""

    file: str
    """The file, relative to the repository, with forward slashes."""
    diff: str
    """A unified diff of the file as it is against the file as the edit leaves it."""
    tool: str
    """The tool the model called (Write or Edit)."""
    reason: str
    """Why the policy refused it."""
    tool_input: dict[str, Any] = field(default_factory=dict)
    """The call's input, to apply it later through the normal approvals; empty when it was
    too large to keep (the diff is still shown)."""

    def to_dict(self, *, with_input: bool = False) -> dict[str, Any]:
        """A JSON-ready entry: {file, diff, tool, reason} (and `input` when asked)."""
        entry: dict[str, Any] = {
            "file": self.file,
            "diff": self.diff,
            "tool": self.tool,
            "reason": self.reason,
        }
        if with_input:
            entry["input"] = dict(self.tool_input)
        return entry

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProposedPatch | None:
        """The patch an entry describes; None when it is not one (edited metadata)."""
        file, diff, tool, reason = (data.get(key) for key in ("file", "diff", "tool", "reason"))
        if not (
            isinstance(file, str)
            and isinstance(diff, str)
            and isinstance(tool, str)
            and isinstance(reason, str)
        ):
            return None
        tool_input = data.get("input")
        kept = dict(tool_input) if isinstance(tool_input, Mapping) else {}
        return cls(file, diff, tool, reason, kept)


def propose(
    tool: str, tool_input: Mapping[str, Any], workspace_host: str | None, reason: str
) -> ProposedPatch | None:
    """The patch a refused Write or Edit of a repository file would have made.

    None when it is no such edit: another tool, a path outside the repository, an Edit
    whose old text is not in the file, no change at all, or a file planrun will not read
    (a link out of the repository, a device, larger than MAX_FILE_BYTES). The file is read
    on the host beneath the repository, never following a link out of it. A file that
    looks like it holds a secret (.env, *.pem, .ssh/...) makes no patch, and what looks
    like a credential in a diff is redacted. Nor does a file the sandbox is not shown:
    under `.git` (the sandbox reads a cleaned copy of its config), or one the sandbox user
    cannot read by its mode bits; the host user reads it here, and a Write's diff would
    copy it into the plan, an Edit's old text probe it.
    """
    relative = repository_path(str(tool_input.get("file_path", "")))
    if tool not in PATCH_TOOLS or relative is None or not workspace_host:
        return None
    if _secret_path(relative) or _hidden_from_sandbox(Path(workspace_host), relative):
        return None  # its diff would carry the secret into the plan and the report
    try:
        data = read_beneath(Path(workspace_host), relative, MAX_FILE_BYTES)
    except UnsafeFileError:
        return None
    try:
        current = None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    after = _after(tool, tool_input, current)
    if after is None or after == current:
        return None
    diff = redact(unified_diff(relative, current, after))
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + CUT_NOTE.format(limit=MAX_DIFF_CHARS)
    kept = dict(tool_input)
    kept["file_path"] = relative
    if sum(len(str(value)) for value in kept.values()) > MAX_INPUT_CHARS:
        kept = {}
    return ProposedPatch(relative, diff, tool, reason, kept)


def repository_path(path: str) -> str | None:
    """A container path under the repository as a path relative to it; None otherwise."""
    normal = posixpath.normpath(path) if path else ""
    if not normal.startswith(WORKSPACE_MOUNT + "/"):
        return None
    relative = normal[len(WORKSPACE_MOUNT) + 1 :]
    return relative if relative and not relative.startswith("..") else None


def unified_diff(relative: str, before: str | None, after: str) -> str:
    """The change as `git diff` shows it (a new file against /dev/null)."""
    old_name = f"a/{relative}" if before is not None else "/dev/null"
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=old_name,
        tofile=f"b/{relative}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def keep(patches: list[ProposedPatch], patch: ProposedPatch) -> bool:
    """Add PATCH to a plan's patches unless there are MAX_PATCHES already, or their diffs
    would pass MAX_TOTAL_DIFF_CHARS; whether it was. The same diff is not kept twice."""
    total = sum(len(kept.diff) for kept in patches) + len(patch.diff)
    if len(patches) >= MAX_PATCHES or total > MAX_TOTAL_DIFF_CHARS:
        return False
    if any(kept.diff == patch.diff for kept in patches):
        return False
    patches.append(patch)
    return True


def patches_from(data: Any) -> list[ProposedPatch]:
    """The patches of a metadata value (front matter, report, session state), bounded."""
    if not isinstance(data, list):
        return []
    found = [ProposedPatch.from_dict(entry) for entry in data if isinstance(entry, Mapping)]
    return [patch for patch in found if patch is not None][:MAX_PATCHES]


def _secret_path(relative: str) -> bool:
    """Whether the file, or a directory on its way, looks like it holds a secret."""
    *directories, name = relative.split("/")
    return looks_secret(name, False) or any(looks_secret(part, True) for part in directories)


def _hidden_from_sandbox(root: Path, relative: str) -> bool:
    """Whether the sandbox user (others, by the mode bits: no group, no capability) could
    not read the file as it is, or it lies under `.git`."""
    parts = relative.split("/")
    if ".git" in parts:
        return True
    path = root
    for index, part in enumerate(parts):
        path = path / part
        try:
            mode = os.stat(path).st_mode  # a link: what it leads to
        except OSError:
            return False  # a new file: nothing of the host is read
        last = index == len(parts) - 1
        if stat.S_ISDIR(mode) and not last and not mode & stat.S_IXOTH:
            return True
        if last and not mode & stat.S_IROTH:
            return True
    return False


def _after(tool: str, tool_input: Mapping[str, Any], current: str | None) -> str | None:
    if tool == "Write":
        content = tool_input.get("content")
        return content if isinstance(content, str) else None
    old, new = tool_input.get("old_string"), tool_input.get("new_string")
    if current is None or not isinstance(old, str) or not isinstance(new, str) or not old:
        return None
    if old not in current:
        return None
    if tool_input.get("replace_all") is True:
        return current.replace(old, new)
    return current.replace(old, new, 1)
