"""Facts about the repository, read without running anything it could control."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from sandbox_runner.safe_io import UnsafeFileError, read_beneath
from sandbox_runner.sandbox.host_walk import tree_fingerprint

__all__ = [
    "GIT_STATUS_COMMAND",
    "GitStatusRunner",
    "filter_status",
    "git_dir",
    "git_head",
    "git_metadata_problem",
    "tree_fingerprint",
    "workspace_git_status",
]

HEX_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
SAFE_REF = re.compile(r"refs/[A-Za-z0-9._/-]+")
MAX_REF_BYTES = 4096


def git_dir(workspace: Path) -> Path | None:
    """The repository's git directory (a .git folder, or the target of a .git file).

    None outside git, and when .git (or its `gitdir:`) leads outside the workspace:
    the repository's metadata must not make the host read its other files.
    """
    return _locate_git_dir(workspace)[0]


def git_metadata_problem(workspace: Path) -> str:
    """Why the repository's git metadata is not read ("" when it is, or there is none)."""
    return _locate_git_dir(workspace)[1]


def _locate_git_dir(workspace: Path) -> tuple[Path | None, str]:
    dot_git = workspace / ".git"
    if not os.path.lexists(dot_git):
        return None, ""
    if not _beneath(workspace, dot_git):
        return None, f"{dot_git} leads outside the repository; git HEAD is not read"
    if dot_git.is_dir():
        return dot_git, ""
    text = _small_text(workspace, dot_git)
    if not text or not text.startswith("gitdir:"):
        return None, ""
    target = workspace / text.split(":", 1)[1].strip()
    if not _beneath(workspace, target):
        return None, (
            f"{dot_git} points outside the repository (gitdir: {target}); git HEAD is not read"
        )
    return target, ""


def _beneath(workspace: Path, path: Path) -> bool:
    try:
        return path.resolve().is_relative_to(workspace.resolve())
    except (OSError, RuntimeError):
        return False


def git_head(workspace: Path) -> str | None:
    """The commit HEAD points at, read from the files; git itself is never run on the host.

    Running git on the host against an untrusted repository could execute what its
    config names (core.fsmonitor, filter and diff drivers), so the few files needed are
    parsed instead, and `git status` runs only inside a sandbox (see snapshot). Every
    file is read beneath the workspace: a link or `commondir` leading out is ignored.
    """
    directory = git_dir(workspace)
    if directory is None:
        return None
    head = _small_text(workspace, directory / "HEAD")
    if head is None:
        return None
    if HEX_SHA.match(head):
        return head
    if not head.startswith("ref:"):
        return None
    ref = head.split(":", 1)[1].strip()
    if not SAFE_REF.fullmatch(ref) or ".." in ref.split("/"):
        return None
    common = _common_dir(workspace, directory)
    for base in (directory, common):
        value = _small_text(workspace, base / ref)
        if value and HEX_SHA.match(value):
            return value
    packed = _small_text(workspace, common / "packed-refs", limit=16 * 1024 * 1024) or ""
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name == ref and HEX_SHA.match(sha):
            return sha
    return None


def _common_dir(workspace: Path, directory: Path) -> Path:
    common = _small_text(workspace, directory / "commondir")
    if not common:
        return directory
    return directory / common


def _small_text(workspace: Path, path: Path, limit: int = MAX_REF_BYTES) -> str | None:
    # A repository is untrusted: a FIFO or /dev/zero in place of HEAD must not hang or
    # exhaust the host, a link must not lead to a host file, and anything odd simply
    # means "no HEAD known".
    try:
        data = read_beneath(workspace, path, limit)
    except UnsafeFileError:
        return None
    return data.decode("utf-8", "replace").strip() if data is not None else None


GitStatusRunner = Callable[[str], "str | None"]
"""Runs a git command line in the workspace (inside a sandbox): its output, None on failure."""

# Submodules are compared by their commit only: looking at their files would start git in
# each of them, under its own config (the tool server neutralises those too).
GIT_STATUS_COMMAND = (
    "git -c core.fsmonitor=false -c core.untrackedCache=false --no-optional-locks "
    "status --porcelain=v1 -z --untracked-files=all --ignore-submodules=dirty"
)


def workspace_git_status(
    workspace: Path, exclude: Path | None, run_git: GitStatusRunner | None
) -> str | None:
    """`git status` of the workspace ("" outside git, None when it could not be taken)."""
    if run_git is None or git_dir(workspace) is None:
        return ""
    output = run_git(GIT_STATUS_COMMAND)
    return None if output is None else filter_status(output, workspace, exclude)


def filter_status(porcelain: str, workspace: Path, exclude: Path | None) -> str:
    """`git status -z` entries, sorted, without planrun's own output directory."""
    entries = porcelain.split("\0")
    if exclude is not None and exclude.is_relative_to(workspace):
        prefix = exclude.relative_to(workspace).as_posix().rstrip("/") + "/"
        entries = [e for e in entries if not e[3:].startswith(prefix) and e[3:] != prefix[:-1]]
    return "\0".join(sorted(entries))
