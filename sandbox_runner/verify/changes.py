"""What changed in a repository: the working tree against HEAD, and with a base revision
the commits since it too, read through a private git directory (git_copy)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.runs.workspace import HEX_SHA
from sandbox_runner.verify.git_copy import GitError, RepositoryGit, private_git

__all__ = ["BaseCheck", "Change", "GitError", "read_change"]

DIFF = ("diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv")
SUBMODULES = "--ignore-submodules=dirty"
"""A submodule counts when its commit changes; its own working tree is never looked into
(that would run git with the submodule's config)."""


@dataclass(frozen=True)
class BaseCheck:
    """Where the plan was written compared with the change's starting point."""

    plan_commit: str | None
    """The commit the plan records (None: it records none)."""
    known: bool
    """Whether that commit is in the repository."""
    moved: bool
    """Whether the change starts from another commit than the plan's."""
    in_history: bool
    """Whether the plan's commit is an ancestor of HEAD."""
    moved_files: tuple[str, ...] = ()
    """With a base: the files changed between the plan's commit and where the change
    starts, when the plan's commit is an ancestor of it."""


@dataclass(frozen=True)
class Change:
    """The files an implementation changed, by repository-relative path."""

    head: str
    base_rev: str | None
    """--base as given (None: the working tree against HEAD)."""
    base_commit: str | None
    """Where the comparison starts: the merge base of --base and HEAD."""
    committed: tuple[str, ...]
    uncommitted: tuple[str, ...]
    """Tracked files changed in the index or working tree, and untracked files not ignored."""
    base_check: BaseCheck

    @property
    def files(self) -> list[str]:
        """Every changed path, once, sorted."""
        return sorted({*self.committed, *self.uncommitted})


def read_change(workspace: Path, base_rev: str | None, plan_commit: str | None) -> Change:
    """The change in the repository at workspace (since base_rev, when given).

    Raises:
        GitError: not a git repository, no commit yet, or base_rev names no commit.
    """
    if base_rev is not None and (not base_rev or base_rev.startswith("-") or "\0" in base_rev):
        raise GitError(f"--base {base_rev!r} is not a revision")
    with private_git(workspace) as git:
        head = _commit(git, "HEAD")
        if head is None:
            raise GitError(f"{workspace} has no commit yet (HEAD is unborn)")
        committed: list[str] = []
        start = head
        if base_rev is not None:
            base = _commit(git, base_rev)
            if base is None:
                raise GitError(f"--base {base_rev!r} names no commit in {workspace}")
            status, out = git.run("merge-base", base, head, allowed=(0, 1))
            if status != 0:
                raise GitError(f"--base {base_rev!r} shares no history with HEAD")
            start = out.strip()
            committed = git.paths(*DIFF, SUBMODULES, start, head)
        uncommitted = git.paths(*DIFF, SUBMODULES, "HEAD")
        untracked = git.paths("ls-files", "-z", "--others", "--exclude-standard")
        return Change(
            head=head,
            base_rev=base_rev,
            base_commit=start if base_rev is not None else None,
            committed=tuple(committed),
            uncommitted=tuple(sorted({*uncommitted, *untracked})),
            base_check=_base_check(git, plan_commit, start, head),
        )


def _commit(git: RepositoryGit, revision: str) -> str | None:
    status, out = git.run(
        "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}",
        allowed=(0, 1, 128),
    )  # fmt: skip
    commit = out.strip()
    return commit if status == 0 and HEX_SHA.match(commit) else None


def _base_check(git: RepositoryGit, plan_commit: str | None, start: str, head: str) -> BaseCheck:
    if plan_commit is None:
        return BaseCheck(None, known=False, moved=False, in_history=False)
    if _commit(git, plan_commit) is None:
        return BaseCheck(plan_commit, known=False, moved=True, in_history=False)
    status, _ = git.run("merge-base", "--is-ancestor", plan_commit, head, allowed=(0, 1))
    moved_files: list[str] = []
    if plan_commit != start and start != head:
        behind, _ = git.run("merge-base", "--is-ancestor", plan_commit, start, allowed=(0, 1))
        if behind == 0:
            moved_files = git.paths(*DIFF, SUBMODULES, plan_commit, start)
    return BaseCheck(
        plan_commit,
        known=True,
        moved=plan_commit != start,
        in_history=status == 0,
        moved_files=tuple(moved_files),
    )
