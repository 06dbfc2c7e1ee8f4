"""Every sandbox reads the repository's git config files without their credentials.

actions/checkout leaves the job's token in `.git/config` (an `http.extraheader`), a
submodule's in `.git/modules/<name>/config`; users keep `https://user:token@` remotes.
A sandbox sees, over each of these files, a copy holding only the keys git needs to read
the repository (the same rebuild the Ray tarball ships), mounted read-only.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

from sandbox_runner.errors import SandboxError
from sandbox_runner.git_config import safe_git_config
from sandbox_runner.paths import WORKSPACE_MOUNT, planrun_home
from sandbox_runner.safe_io import UnsafeFileError, read_untrusted_bytes

CONFIG_NAMES = ("config", "config.worktree")
MAX_CONFIG_BYTES = 1024 * 1024
GIT_INTERNALS = frozenset({"objects", "refs", "logs", "hooks", "info", "lfs", "rr-cache"})
"""Directories of a git directory that hold no config file: not looked into."""
MAX_GIT_DIRECTORIES = 1000
"""Submodules and worktrees looked at, at most (a repository with more is odd)."""


def clean_config_copies(workspace: Path) -> list[tuple[Path, str]]:
    """(host copy, container target) for every git config file of the repository."""
    copies = []
    for config in _config_files(workspace):
        try:
            data = read_untrusted_bytes(config, MAX_CONFIG_BYTES, follow_symlinks=False)
        except UnsafeFileError:
            data = b""
        if data is None:
            continue
        clean = safe_git_config(data.decode("utf-8", "replace"))
        target = f"{WORKSPACE_MOUNT}/{config.relative_to(workspace).as_posix()}"
        try:
            copies.append((_stored(clean), target))
        except OSError as error:
            raise SandboxError(
                f"cannot keep a clean copy of {config.name} in planrun's cache: "
                f"{error.strerror or error}"
            ) from None
    return copies


def _config_files(workspace: Path) -> list[Path]:
    git = workspace / ".git"
    if not _is_directory(git):
        return []  # a `gitdir:` file points outside the workspace, which no sandbox sees
    found = [git / name for name in CONFIG_NAMES if _is_file(git / name)]
    # Only real directories: a link here would lead the look out of the repository.
    pending = [path for path in (git / "modules", git / "worktrees") if _is_directory(path)]
    looked = 0
    while pending and looked < MAX_GIT_DIRECTORIES:
        directory = pending.pop()
        looked += 1
        try:
            with os.scandir(directory) as entries:
                children = [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        found += [directory / name for name in CONFIG_NAMES if _is_file(directory / name)]
        # A submodule's own submodules live in its modules/ directory.
        pending += [child for child in children if child.name not in GIT_INTERNALS]
    return found


def _stored(text: str) -> Path:
    """The clean copy in planrun's cache (content-addressed: nothing secret is in it)."""
    data = text.encode()
    digest = hashlib.sha256(data).hexdigest()
    directory = planrun_home() / "cache" / "git-config"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{digest[:32]}.config"
    # Written again unless it holds the copy: a file planted under the name (PLANRUN_HOME
    # in a workspace that a sandbox writes) is never mounted. Several sandboxes start at
    # once (a session's work and plan containers): each replaces it whole.
    if _content(path) != data:
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=".partial-")
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    return path


def _content(path: Path) -> bytes | None:
    """The regular file at PATH, as it is; None if it is no regular file."""
    try:
        return read_untrusted_bytes(path, MAX_CONFIG_BYTES + 1, follow_symlinks=False)
    except (UnsafeFileError, OSError):
        return None


def _is_directory(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
