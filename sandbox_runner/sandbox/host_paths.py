"""The host side of a sandbox: the workspace and plan directory checked and resolved, the
user the container runs as, and the mounts below the workspace."""

from __future__ import annotations

import os
import re
from pathlib import Path

from sandbox_runner.errors import WorkspaceError

# The unprivileged uid of the image's `planrun` user, used when planrun itself runs as root.
SANDBOX_UID = 10001
SANDBOX_GID = 10001


def resolve_workspace(path: str | os.PathLike[str]) -> Path:
    """Return the absolute, symlink-free workspace path, or raise WorkspaceError."""
    if not os.fspath(path).strip():
        # Path("") is ".", which would plan the current directory without saying so.
        raise WorkspaceError("the workspace path is empty; give a directory (--repo .)")
    candidate = Path(path).expanduser()
    if not candidate.exists():
        raise WorkspaceError(f"workspace {candidate} does not exist")
    if not candidate.is_dir():
        raise WorkspaceError(f"workspace {candidate} is not a directory")
    if not os.access(candidate, os.R_OK | os.X_OK):
        raise WorkspaceError(f"workspace {candidate} is not readable")
    return candidate.resolve()


def prepare_plan_dir(path: str | os.PathLike[str], workspace: Path | None = None) -> Path:
    """Create the plan directory if needed and return its absolute path.

    Raises:
        WorkspaceError: it cannot be created, is not a directory, or lies inside the
            workspace (which is mounted read-only, so the plan could not be written).
    """
    plan_dir = Path(path).expanduser()
    if plan_dir.is_symlink():
        raise WorkspaceError(f"plan directory {plan_dir} is a symbolic link; give a real directory")
    try:
        plan_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise WorkspaceError(f"plan directory {plan_dir} exists and is not a directory") from None
    except OSError as error:
        reason = error.strerror or str(error)
        raise WorkspaceError(f"cannot create plan directory {plan_dir}: {reason}") from None
    plan_dir = plan_dir.resolve()
    if workspace is not None and plan_dir.is_relative_to(workspace):
        raise WorkspaceError(
            f"plan directory {plan_dir} is inside the workspace {workspace}, which is read-only"
        )
    return plan_dir


def sandbox_user(workspace: Path | None = None) -> tuple[int, int]:
    """The uid:gid the container runs as: the invoking user's, never root.

    As root, the workspace owner's (so that a repository of owner-only files stays
    readable), or the image's unprivileged user when root owns the workspace too.
    """
    uid, gid = os.getuid(), os.getgid()
    if uid != 0:
        return uid, gid if gid != 0 else uid
    try:
        owner = os.stat(workspace) if workspace is not None else None
    except OSError:
        owner = None
    if owner is not None and owner.st_uid != 0:
        return owner.st_uid, owner.st_gid if owner.st_gid != 0 else owner.st_uid
    return SANDBOX_UID, SANDBOX_GID


def submounts(path: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> list[str]:
    """Mount points strictly below path: Docker before 25 leaves them writable in a
    read-only bind mount, so they must not exist under the workspace."""
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return []
    below = []
    for line in lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        # mountinfo escapes space, tab, newline and backslash as octal.
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        if Path(point) != path and Path(point).is_relative_to(path):
            below.append(point)
    return below


def work_owner_problem(workspace: Path) -> str | None:
    """Why no work sandbox can write WORKSPACE, or None: root owns it and planrun runs as
    root (a work container never runs as root, and its own user could not write there)."""
    if sandbox_user(workspace)[0] != SANDBOX_UID:
        return None
    return (
        f"{workspace} belongs to root; a work session never runs as root in its container: "
        "run planrun as the repository's owner, or chown the repository to a regular user "
        "(`planrun plan` works on it as it is)"
    )
