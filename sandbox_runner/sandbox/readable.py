"""What the sandbox user can read of a workspace, checked before a run starts."""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.errors import WorkspaceError
from sandbox_runner.sandbox.host_paths import sandbox_user
from sandbox_runner.tree_walk import walk

READ, READ_AND_LIST = 4, 5
"""Permission bits needed: r for a file, r and x for a directory."""


@dataclass(frozen=True)
class Readability:
    """How much of the workspace a uid:gid without supplementary groups can read."""

    root_readable: bool
    checked: int
    """Files and directories checked (symbolic links and special files are not)."""
    unreadable: int
    examples: list[str]
    """Up to five unreadable paths, relative to the workspace."""
    complete: bool
    """Whether the whole tree was checked, or only a sample (entry or time cap)."""

    def summary(self, uid: int) -> str:
        """E.g. "412 of 500 files and directories checked are not readable by ... (uid 10001)"."""
        sample = "" if self.complete else f" (a sample of the first {self.checked})"
        text = (
            f"{self.unreadable} of {self.checked} files and directories checked{sample} are "
            f"not readable by the sandbox user (uid {uid})"
        )
        return text + (f", e.g. {', '.join(self.examples)}" if self.examples else "")


def check_readable(
    workspace: Path,
    uid: int,
    gid: int,
    *,
    max_entries: int = 5000,
    time_limit: float = 1.0,
) -> Readability:
    """Which files and directories uid:gid could read, judged from their mode bits.

    The sandbox has no capabilities and no supplementary groups, so owner, group and
    other bits decide (ACLs are not read). Bounded for huge trees: at most max_entries
    entries and time_limit seconds, walking top-down; .git is checked but not entered.
    """
    deadline = time.monotonic() + time_limit
    checked = unreadable = 0
    examples: list[str] = []
    root_readable = _may(os.stat(workspace), uid, gid, READ_AND_LIST)
    for directory in walk(workspace, skip_unlistable=True):
        kept = []
        for entry in directory.entries:
            if checked >= max_entries or time.monotonic() > deadline:
                return Readability(root_readable, checked, unreadable, examples, False)
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            is_dir = stat.S_ISDIR(info.st_mode)
            if not is_dir and not stat.S_ISREG(info.st_mode):
                continue
            checked += 1
            if _may(info, uid, gid, READ_AND_LIST if is_dir else READ):
                if is_dir and entry.name != ".git":
                    kept.append(entry)
                continue
            unreadable += 1
            if len(examples) < 5:
                examples.append(directory.relative_of(entry))
        directory.below = kept
    return Readability(root_readable, checked, unreadable, examples, True)


def _may(info: os.stat_result, uid: int, gid: int, need: int) -> bool:
    if uid == info.st_uid:
        bits = info.st_mode >> 6
    elif gid == info.st_gid:
        bits = info.st_mode >> 3
    else:
        bits = info.st_mode
    return bits & need == need


def require_readable(workspace: Path) -> str:
    """Check that the sandbox user can read the workspace; a warning when it cannot read all.

    Returns:
        "" when everything checked is readable, else a one-line warning.

    Raises:
        WorkspaceError: the sandbox user can read nothing: not the workspace directory,
            or none of the files and directories checked.
    """
    uid, gid = sandbox_user(workspace)
    found = check_readable(workspace, uid, gid)
    advice = f"make them readable (chmod -R a+rX {workspace}) or run planrun as their owner"
    if not found.root_readable:
        raise WorkspaceError(
            f"the sandbox user (uid {uid}) cannot read the workspace {workspace}; {advice}"
        )
    if found.unreadable and found.unreadable == found.checked:
        raise WorkspaceError(f"{found.summary(uid)}: the agent could read nothing; {advice}")
    if found.unreadable:
        return f"{found.summary(uid)}: the agent cannot read them; {advice}"
    return ""
