"""Facts about the repository, read without running anything it could control."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

HEX_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
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
    """The commit HEAD points at, read from the files; git itself is never run.

    Running git on the host against an untrusted repository could execute what its
    config names (core.fsmonitor, for one), so the few files needed are parsed instead.
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
    try:
        with path.open("rb") as handle:
            return handle.read(limit).decode("utf-8", "replace").strip()
    except OSError:
        return None


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
    git_status: str

    def differences(self, later: WorkspaceState) -> str:
        """What changed between this snapshot and a later one ("" when nothing did)."""
        problems = []
        if self.fingerprint != later.fingerprint:
            problems.append("files, modes or timestamps under the workspace changed")
        if self.git_status != later.git_status:
            problems.append("`git status` changed")
        return "; ".join(problems)


def snapshot(workspace: Path, exclude: Path | None = None) -> WorkspaceState:
    """The workspace's tree fingerprint and git status now."""
    return WorkspaceState(
        tree_fingerprint(workspace, exclude=exclude), git_status(workspace, exclude=exclude)
    )


def git_status(workspace: Path, exclude: Path | None = None) -> str:
    """`git status --porcelain`, run so that it can neither write nor run repository hooks.

    Optional locks are off (status would otherwise refresh the index, a write), and the
    file-system monitor, which a repository's config could point at any program, is off.
    """
    if git_dir(workspace) is None or shutil.which("git") is None:
        return ""
    command = [
        "git", "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false",
        "--no-optional-locks", "-C", str(workspace), "status", "--porcelain=v1", "-z",
        "--untracked-files=all",
    ]  # fmt: skip
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}
    try:
        result = subprocess.run(command, capture_output=True, env=env, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"git status failed: {error}"
    if result.returncode != 0:
        return "git status failed: " + result.stderr.decode(errors="replace").strip()[:200]
    entries = result.stdout.decode(errors="surrogateescape").split("\0")
    if exclude is not None and exclude.is_relative_to(workspace):
        prefix = exclude.relative_to(workspace).as_posix().rstrip("/") + "/"
        entries = [e for e in entries if not e[3:].startswith(prefix) and e[3:] != prefix[:-1]]
    return "\0".join(sorted(entries))
