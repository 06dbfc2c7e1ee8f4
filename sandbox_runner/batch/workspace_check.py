"""That a batch changed none of its repositories: each one's tree fingerprint and `git
status` (taken in a throwaway sandbox) before the first job, compared after the last."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future
from pathlib import Path

from sandbox_runner.runs.git_probe import in_background, settled
from sandbox_runner.runs.multi import GIT_STATUS_WAIT_SECONDS
from sandbox_runner.runs.workspace import (
    GitStatusRunner,
    WorkspaceComparison,
    WorkspaceState,
    snapshot,
    tree_fingerprint,
    workspace_git_status,
)

FILES_ONLY_NOTE = "`git status` is not taken here (the jobs ran on other machines)"
Before = dict[Path, tuple[str | None, Future[str | None] | None]]
"""Each repository's tree fingerprint, and its `git status` being taken in the background."""
GitFor = Callable[[Path], GitStatusRunner | None]


class WorkspaceCheck:
    """The repositories of one batch run, taken before and compared after."""

    def __init__(self, out_dir: Path, git_for: GitFor) -> None:
        self.out_dir = out_dir
        self.git_for = git_for

    def before(self, workspaces: Iterable[Path]) -> Before:
        """Each repository's tree fingerprint, and its `git status` taken in the background."""
        taken: Before = {}
        for path in dict.fromkeys(workspaces):
            exclude, run_git = self._exclude(path), self.git_for(path)
            status = None
            if run_git is not None:
                status = in_background(workspace_git_status, path, exclude, run_git)
            taken[path] = (tree_fingerprint(path, exclude=exclude), status)
        return taken

    def compare(self, before: Before) -> dict[Path, WorkspaceComparison]:
        """What changed in each repository since `before`, and how it was compared."""
        checks = {}
        for path, (tree, status) in before.items():
            run_git = self.git_for(path)
            git_before = None if status is None else settled(status, GIT_STATUS_WAIT_SECONDS)
            if run_git is None:
                after = tree_fingerprint(path, exclude=self._exclude(path))
                checks[path] = files_only(tree, after)
                continue
            state = snapshot(path, self._exclude(path), run_git)
            checks[path] = WorkspaceState(tree, git_before).compare(state)
        return checks

    def _exclude(self, workspace: Path) -> Path | None:
        return self.out_dir if self.out_dir.is_relative_to(workspace) else None


def files_only(before: str | None, after: str | None) -> WorkspaceComparison:
    """The comparison of a repository whose `git status` cannot be taken here."""
    changed = before is not None and after is not None and before != after
    problem = "files, modes or timestamps under the workspace changed" if changed else ""
    return WorkspaceComparison(problem, "files_only", FILES_ONLY_NOTE)
