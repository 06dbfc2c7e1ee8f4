"""Facts about the repository, read without running anything it could control."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.safe_io import UnsafeFileError, read_untrusted_bytes

HEX_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
SAFE_REF = re.compile(r"refs/[A-Za-z0-9._/-]+")
MAX_REF_BYTES = 4096


def git_dir(workspace: Path) -> Path | None:
    """The repository's git directory (a .git folder, or the target of a .git file)."""
    dot_git = workspace / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():
        text = _small_text(dot_git)
        if text and text.startswith("gitdir:"):
            target = Path(text.split(":", 1)[1].strip())
            return target if target.is_absolute() else (workspace / target)
    return None


def git_head(workspace: Path) -> str | None:
    """The commit HEAD points at, read from the files; git itself is never run on the host.

    Running git on the host against an untrusted repository could execute what its
    config names (core.fsmonitor, filter and diff drivers), so the few files needed are
    parsed instead, and `git status` runs only inside a sandbox (see snapshot).
    """
    directory = git_dir(workspace)
    if directory is None:
        return None
    head = _small_text(directory / "HEAD")
    if head is None:
        return None
    if HEX_SHA.match(head):
        return head
    if not head.startswith("ref:"):
        return None
    ref = head.split(":", 1)[1].strip()
    if not SAFE_REF.fullmatch(ref) or ".." in ref.split("/"):
        return None
    common = _common_dir(directory)
    for base in (directory, common):
        value = _small_text(base / ref)
        if value and HEX_SHA.match(value):
            return value
    packed = _small_text(common / "packed-refs", limit=16 * 1024 * 1024) or ""
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name == ref and HEX_SHA.match(sha):
            return sha
    return None


def _common_dir(directory: Path) -> Path:
    common = _small_text(directory / "commondir")
    if not common:
        return directory
    path = Path(common)
    return path if path.is_absolute() else directory / path


def _small_text(path: Path, limit: int = MAX_REF_BYTES) -> str | None:
    # A repository is untrusted: a FIFO or /dev/zero in place of HEAD must not hang or
    # exhaust the host, and anything odd simply means "no HEAD known".
    try:
        data = read_untrusted_bytes(path, limit)
    except UnsafeFileError:
        return None
    return data.decode("utf-8", "replace").strip() if data is not None else None


def tree_fingerprint(
    workspace: Path, *, exclude: Path | None = None, max_files: int = 200_000
) -> str:
    """A hash of every path, type, mode, size, mtime and link target under the workspace.

    Cheap enough to take before and after a run (no file contents are read), and any
    write, rename, chmod or link through the sandbox changes it. .git is included:
    a write there is a change too.
    """
    hasher = hashlib.sha256()
    seen = 0
    excluded = str(exclude) if exclude is not None else None
    for directory, subdirs, files in os.walk(workspace, followlinks=False):
        if excluded is not None:
            subdirs[:] = [d for d in subdirs if os.path.join(directory, d) != excluded]
        subdirs.sort()
        for name in sorted(files + subdirs):
            path = os.path.join(directory, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            seen += 1
            if seen > max_files:
                hasher.update(b"...truncated")
                return hasher.hexdigest()
            link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else ""
            relative = os.path.relpath(path, workspace)
            fields = (relative, info.st_mode, info.st_size, info.st_mtime_ns, link)
            hasher.update(os.fsencode("\0".join(map(str, fields)) + "\n"))
    return hasher.hexdigest()


@dataclass(frozen=True)
class WorkspaceState:
    """A snapshot that proves, compared with a later one, that nothing changed."""

    fingerprint: str
    git_status: str | None
    """`git status` output; None when it could not be taken (it is then not compared)."""

    def differences(self, later: WorkspaceState) -> str:
        """What changed between this snapshot and a later one ("" when nothing did)."""
        problems = []
        if self.fingerprint != later.fingerprint:
            problems.append("files, modes or timestamps under the workspace changed")
        both = self.git_status is not None and later.git_status is not None
        if both and self.git_status != later.git_status:
            problems.append("`git status` changed")
        return "; ".join(problems)


GitStatusRunner = Callable[[str], "str | None"]
"""Runs a git command line in the workspace (inside a sandbox): its output, None on failure."""

# Submodules are compared by their commit only: looking at their files would start git in
# each of them, under its own config (the tool server neutralises those too).
GIT_STATUS_COMMAND = (
    "git -c core.fsmonitor=false -c core.untrackedCache=false --no-optional-locks "
    "status --porcelain=v1 -z --untracked-files=all --ignore-submodules=dirty"
)


def snapshot(
    workspace: Path, exclude: Path | None = None, run_git: GitStatusRunner | None = None
) -> WorkspaceState:
    """The workspace's tree fingerprint, and its git status when run_git is given."""
    fingerprint = tree_fingerprint(workspace, exclude=exclude)
    return WorkspaceState(fingerprint, workspace_git_status(workspace, exclude, run_git))


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
