"""A private git directory, and git run against it on the host with nothing configured by
the user, the system or a repository: nothing a repository configures may run here
(core.fsmonitor, hooks, aliases, filter and diff drivers, an editor, a pager).

Both of planrun's host-side git stores are made here: verify's copy of a repository's
metadata (verify/git_copy.py) and the /undo checkpoint store (session/shadow_git.py).
What they share: no user or system config or attributes are read, the config is written
whole (the caller's keys, then fsmonitor, hooks, gc and every transport switched off),
`info/attributes` is the caller's (switching filters off), a missing object is an error
and never fetched, and git is found on PATH's absolute entries only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.errors import PlanrunError
from sandbox_runner.safe_io import UnsafeFileError, read_beneath

__all__ = ["GitError", "PrivateGit", "check_alternates", "make_private_git"]

GIT_TIMEOUT_SECONDS = 120
FORCED_CONFIG = (
    "[core]\n\tfsmonitor = false\n\thooksPath = /dev/null\n\tuntrackedCache = false\n"
    "\tquotePath = false\n[gc]\n\tauto = 0\n[protocol]\n\tallow = never\n"
)
"""Written after the caller's keys, so these win. protocol.allow = never: a repository
claiming to be a partial clone would have git fetch the objects it lacks from a remote it
names (ssh to any host); neither store uses a transport."""
MAX_ALTERNATES_BYTES = 64 * 1024
ALTERNATES_DEPTH = 5
"""How deep git follows alternates of alternates."""


class GitError(PlanrunError):
    """git cannot run, or failed, against a private git directory."""


@dataclass(frozen=True)
class PrivateGit:
    """git commands against GIT_DIR, with WORK_TREE as their working tree."""

    git_dir: Path
    work_tree: Path

    def run(
        self,
        *args: str,
        work: bool = True,
        stdin: bytes | None = None,
        allowed: tuple[int, ...] = (0,),
    ) -> tuple[int, bytes]:
        """git ARGS (in the working tree, or beside the git directory without WORK):
        its exit status and standard output.

        Raises:
            GitError: git is not on PATH, could not run, or exited with a status not
                in `allowed`.
        """
        env = self.env(work=work)
        program = shutil.which("git", path=env["PATH"])
        if program is None:
            raise GitError("git is not installed (no git on PATH)")
        try:
            done = subprocess.run(
                [program, "--no-pager", *args],
                input=stdin,
                capture_output=True,
                env=env,
                cwd=self.work_tree if work else self.git_dir.parent,
                timeout=GIT_TIMEOUT_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise GitError(f"git {args[0]} failed: {error}") from None
        if done.returncode not in allowed:
            lines = done.stderr.decode(errors="replace").strip().splitlines()
            raise GitError(f"git {args[0]} failed: {lines[-1] if lines else done.returncode}")
        return done.returncode, done.stdout

    def env(self, *, work: bool = True) -> dict[str, str]:
        """The environment git runs in: the caller's, without any GIT_* variable, PATH
        without its relative entries, and no config but the git directory's own."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
        env |= {
            "PATH": _absolute_path(),
            "GIT_DIR": str(self.git_dir),
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_NO_LAZY_FETCH": "1",
            "GIT_PAGER": "cat",
            "LC_ALL": "C",
        }
        if work:
            env["GIT_WORK_TREE"] = str(self.work_tree)
        return env


def make_private_git(
    git_dir: Path, work_tree: Path, *, config: str, attributes: str, alternate: Path | None
) -> PrivateGit:
    """Make GIT_DIR a git directory of its own, or make it one again: its config is
    rewritten (CONFIG, then FORCED_CONFIG), its `info/attributes` too, and its only
    alternate is ALTERNATE (another object store git reads and never writes; none when
    None). HEAD is written only where there is none.
    """
    (git_dir / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (git_dir / "refs").mkdir(exist_ok=True)
    (git_dir / "info").mkdir(exist_ok=True)
    if not (git_dir / "HEAD").exists():
        (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
    (git_dir / "config").write_text(config + FORCED_CONFIG)
    (git_dir / "info" / "attributes").write_text(attributes)
    alternates = git_dir / "objects" / "info" / "alternates"
    if alternate is not None:
        alternates.write_text(f"{alternate}\n")
    else:
        alternates.unlink(missing_ok=True)
    return PrivateGit(git_dir, work_tree)


def check_alternates(root: Path, objects: Path, depth: int = 0) -> None:
    """Refuse an object store whose alternates (which git follows from it, up to 5 deep)
    lead outside ROOT: git would read another repository's objects.

    Raises:
        GitError: an alternate leads outside ROOT, or its file is unsafe to read.
    """
    try:
        data = read_beneath(root, objects / "info" / "alternates", MAX_ALTERNATES_BYTES)
    except UnsafeFileError as error:
        raise GitError(f"git metadata not read: {error}") from None
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        target = (objects / entry).resolve()
        if entry.startswith('"') or not target.is_relative_to(root) or depth >= ALTERNATES_DEPTH:
            raise GitError(
                f"{objects}/info/alternates leads outside the repository; it is not read"
            )
        check_alternates(root, target, depth + 1)


def _absolute_path() -> str:
    """PATH without its empty and relative entries: git runs in the repository, where
    such an entry would find a `git` (or a program git runs) the repository holds."""
    return os.pathsep.join(entry for entry in os.get_exec_path() if os.path.isabs(entry))
