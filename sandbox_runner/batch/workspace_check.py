"""That a batch changed none of its repositories: each one's files (walked once, when the
jobs were keyed) and `git status` (taken in a throwaway sandbox, in the background) before
the first job, compared after the last."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from sandbox_runner.runs.workspace import GitStatusRunner
from sandbox_runner.runs.workspace_check import (
    BeforeCheck,
    RepositoryTrees,
    WorkspaceComparison,
    take_after,
)

NO_GIT_NOTE = "it is not taken here (the jobs ran on other machines)"
NOT_COMPARED_YET = (
    "nothing was compared yet: the check runs when the batch ends, and a batch that was "
    "stopped does not compare"
)
GitFor = Callable[[Path], GitStatusRunner | None]


class WorkspaceCheck:
    """The repositories of one batch run, taken before and compared after."""

    def __init__(self, out_dir: Path, git_for: GitFor, trees: RepositoryTrees) -> None:
        self.out_dir = out_dir
        self.git_for = git_for
        self.trees = trees

    def before(self, workspaces: Iterable[Path]) -> dict[Path, BeforeCheck]:
        """Each repository's state as the batch starts: the tree walked when the jobs were
        keyed (or walked now), and its `git status` taken in the background."""
        return {
            path: BeforeCheck(
                path,
                self._exclude(path),
                self.git_for(path),
                git_missing=NO_GIT_NOTE,
                files=self.trees.get(path),
            )
            for path in dict.fromkeys(workspaces)
        }

    def compare(self, before: dict[Path, BeforeCheck]) -> dict[Path, WorkspaceComparison]:
        """What changed in each repository since the batch started, and how it was compared."""
        checks = {}
        for path, check in before.items():
            state = check.settle()
            after = take_after(
                state, path, self._exclude(path), self.git_for(path), git_missing=NO_GIT_NOTE
            )
            checks[path] = state.compare(after)
        return checks

    def _exclude(self, workspace: Path) -> Path | None:
        return self.out_dir if self.out_dir.is_relative_to(workspace) else None


def not_compared_yet() -> WorkspaceComparison:
    """A task's check while its batch runs (or after it was stopped)."""
    return WorkspaceComparison("", "none", NOT_COMPARED_YET)


def summary_entry(repository: Path, check: WorkspaceComparison) -> dict[str, Any]:
    """A repository's workspace check as summary.json gives it."""
    return {
        "repository": str(repository),
        "check": check.check,
        "problem": check.problem,
        "note": check.note,
        "changed_paths": list(check.changed),
        "changed_more": check.changed_more,
        "check_ms": check.timings_ms,
    }
