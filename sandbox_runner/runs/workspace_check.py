"""The before/after workspace check of a plan run or a batch: the file tree and `git status`
taken before (in the background, beside the plans' first model calls) and after, compared;
what changed (by path), what could not be compared and why, and how long each part took.

Every sandbox of a plan run mounts the repository read-only, so a change the check finds
was made outside the sandboxes: an editor, a build, git's own upkeep (`git gc --auto`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from sandbox_runner.limits import (
    WORKSPACE_CHECK_LISTED_PATHS,
    WORKSPACE_GIT_STATUS_SECONDS,
    WORKSPACE_WALK_SECONDS,
)
from sandbox_runner.plans.report import WORKSPACE_CHECK_PARTS
from sandbox_runner.runs.git_probe import in_background
from sandbox_runner.runs.workspace import (
    GIT_STATUS_COMMAND,
    GitStatusRunner,
    filter_status,
    git_dir,
    git_metadata_problem,
)
from sandbox_runner.sandbox.host_walk import FileTree, PathChange, TreeChanges
from sandbox_runner.sandbox.host_walk.find import Walk, walk
from sandbox_runner.sandbox.host_walk.shared import begin_walk, claim_walk

T = TypeVar("T")

__all__ = [
    "BeforeCheck",
    "RepositoryTrees",
    "Taken",
    "WorkspaceComparison",
    "WorkspaceState",
    "take_after",
    "take_files",
    "take_files_before",
    "take_git_status",
]

CHANGED_OUTSIDE = (
    "changed outside the sandbox (the sandboxes cannot write to the repository, so this "
    "was done on the host)"
)
FILES_NOT_COMPARED = "files were not compared"
GIT_NOT_COMPARED = "`git status` was not compared"
TIMINGS = WORKSPACE_CHECK_PARTS
"""The parts of a check whose time report.json gives (`workspace_check_ms`)."""


@dataclass(frozen=True)
class Taken(Generic[T]):
    """One part of a workspace state: what was taken (None: nothing), why it was not, and
    how long taking it took (None: it did not run)."""

    value: T | None
    note: str = ""
    ms: int | None = None


@dataclass(frozen=True)
class WorkspaceComparison:
    """What a before/after comparison found, and how much of the workspace it covered."""

    problem: str
    """What changed ("" when nothing that was compared did)."""
    check: str
    """"full" (files and `git status`), "files_only", "git_status_only" or "none"."""
    note: str = ""
    """What could not be compared, and why ("" for a full check)."""
    changed: tuple[str, ...] = ()
    """The changed paths, each with how it changed; at most WORKSPACE_CHECK_LISTED_PATHS."""
    changed_more: int = 0
    """How many more paths changed than `changed` lists."""
    timings_ms: dict[str, int | None] = field(default_factory=dict)
    """How long each part took, by the names in TIMINGS (None: it did not run)."""


@dataclass(frozen=True)
class WorkspaceState:
    """The workspace's file tree and `git status` at one moment, or why either is missing."""

    files: Taken[FileTree]
    git_status: Taken[str]

    @property
    def fingerprint(self) -> str | None:
        """The tree's digest (None when the walk did not finish)."""
        return self.files.value.digest if self.files.value is not None else None

    def compare(self, later: WorkspaceState) -> WorkspaceComparison:
        """What changed between this state and a later one, and what could be compared."""
        problems, missing = [], []
        changes = TreeChanges((), 0)
        before_tree, after_tree = self.files.value, later.files.value
        files = before_tree is not None and after_tree is not None
        if before_tree is not None and after_tree is not None:
            changes = before_tree.changes(after_tree)
            if changes.listed:
                problems.append("files")
            missing += _unreadable_note(before_tree, after_tree)
        else:
            missing.append(self.files.note or later.files.note)
        before_status, after_status = self.git_status.value, later.git_status.value
        git = before_status is not None and after_status is not None
        if before_status is not None and after_status is not None:
            if before_status != after_status:
                problems.append("`git status`")
                if not changes.listed:
                    changes = _status_changes(before_status, after_status)
        else:
            missing.append(self.git_status.note or later.git_status.note)
        check = {(True, True): "full", (True, False): "files_only", (False, True): ""}.get(
            (files, git), "none"
        ) or "git_status_only"
        problem = ""
        if problems:
            listed = f": {changes.words()}" if changes.listed else ""
            problem = f"{' and '.join(problems)} {CHANGED_OUTSIDE}{listed}"
        return WorkspaceComparison(
            problem,
            check,
            "; ".join(note for note in missing if note),
            tuple(map(str, changes.listed)),
            changes.more,
            timings(self, later),
        )


def timings(before: WorkspaceState, after: WorkspaceState) -> dict[str, int | None]:
    """The ms each part of the check took, keyed as TIMINGS names them."""
    ms = [before.files.ms, before.git_status.ms, after.files.ms, after.git_status.ms]
    return dict(zip(TIMINGS, ms, strict=True))


def _unreadable_note(before: FileTree, after: FileTree) -> list[str]:
    unreadable = sorted(set(before.unreadable) | set(after.unreadable))
    if not unreadable:
        return []
    shown = ", ".join(unreadable[:WORKSPACE_CHECK_LISTED_PATHS])
    more = len(unreadable) - WORKSPACE_CHECK_LISTED_PATHS
    shown += f", +{more} more" if more > 0 else ""
    return [f"the contents of directories planrun cannot list were not compared: {shown}"]


def _status_changes(before: str, after: str) -> TreeChanges:
    """The paths whose `git status` entry differs (entries are "XY path")."""
    old, new = set(before.split("\0")) - {""}, set(after.split("\0")) - {""}
    changes = [PathChange(entry[3:], f"git status {entry[:2].strip()}") for entry in new - old]
    changes += [PathChange(entry[3:], f"was git status {entry[:2].strip()}") for entry in old - new]
    return TreeChanges.of(changes)


def take_files(
    workspace: Path,
    exclude: Path | None,
    *,
    when: str = "before the run",
    time_limit: float = WORKSPACE_WALK_SECONDS,
    walked: Future[Walk] | None = None,
) -> Taken[FileTree]:
    """The file tree: walked now, or the walk WALKED begun for it (in the background,
    beside what the run starts with)."""
    if walked is None:
        tree = walk(workspace, exclude=exclude, time_limit=time_limit).tree
    else:
        try:
            tree = walked.result().tree
        except Exception as error:  # the walk in the background could not run
            return Taken(None, f"{FILES_NOT_COMPARED}: listing them {when} failed ({error})")
    ms = round(tree.seconds * 1000)
    if tree.stopped:
        return Taken(None, f"{FILES_NOT_COMPARED}: listing them {when} stopped short "
                           f"({tree.stopped})", ms)  # fmt: skip
    if not tree.complete:
        note = (
            f"{FILES_NOT_COMPARED}: listing them {when} took over {time_limit:g} s "
            f"({tree.entries:,} files and directories by then)"
        )
        return Taken(None, note, ms)
    return Taken(tree, "", ms)


def take_files_before(
    workspace: Path, exclude: Path | None, *, seed: bool = False
) -> Taken[FileTree]:
    """The tree before a run or batch: the walk its sandboxes' seed is made from when one
    was begun for it lately (sandbox/host_walk/shared.py), else a walk of its own, which
    makes that seed too with SEED (a batch's: its sandboxes are made after it)."""
    walked = claim_walk(workspace, exclude)
    if walked is None:
        walked = begin_walk(workspace, exclude, seed=seed, claimed=True).future
    return take_files(workspace, exclude, walked=walked)


def take_git_status(
    workspace: Path, exclude: Path | None, run_git: GitStatusRunner, *, when: str
) -> Taken[str]:
    """`git status`, run in a sandbox ("" outside git: there is nothing to compare)."""
    if problem := git_metadata_problem(workspace):
        return Taken(None, f"{GIT_NOT_COMPARED}: {problem}")
    if git_dir(workspace) is None:
        return Taken("")
    started = time.monotonic()
    output = run_git(GIT_STATUS_COMMAND)
    ms = round((time.monotonic() - started) * 1000)
    if output is None:
        return Taken(None, f"{GIT_NOT_COMPARED}: it could not run {when} (in its sandbox)", ms)
    return Taken(filter_status(output, workspace, exclude), "", ms)


def not_taken(note: str) -> Taken[T]:
    """A part of the check that did not run, and why."""
    return Taken(None, note)


def without_git(workspace: Path, why: str) -> Taken[str]:
    """`git status` when it is not taken: nothing to compare outside git, else missing."""
    if git_dir(workspace) is None and not git_metadata_problem(workspace):
        return Taken("")
    return not_taken(f"{GIT_NOT_COMPARED}: {why}")


class RepositoryTrees:
    """The file tree of each repository, walked once and shared: a batch's jobs are keyed
    by it, and its workspace check starts from it."""

    def __init__(self, *, seed: bool = False) -> None:
        self._trees: dict[Path, Taken[FileTree]] = {}
        self.seed = seed
        """Whether each walk makes the git guard's seed too (for sandboxes made after it:
        a local batch's)."""

    def take(self, workspace: Path, exclude: Path | None) -> Taken[FileTree]:
        """The repository's tree, walked on the first call only."""
        if workspace not in self._trees:
            self._trees[workspace] = take_files_before(workspace, exclude, seed=self.seed)
        return self._trees[workspace]

    def get(self, workspace: Path) -> Taken[FileTree] | None:
        """The tree walked already, if any."""
        return self._trees.get(workspace)


class BeforeCheck:
    """The workspace's state before a run, taken in two background threads (the walk, and
    `git status` in a sandbox of its own) while the plans start; settle() waits for it.

    run_git None: `git status` is not taken here (git_missing says why).
    """

    def __init__(
        self,
        workspace: Path,
        exclude: Path | None,
        run_git: GitStatusRunner | None,
        *,
        git_missing: str = "",
        on_files: Callable[[Taken[FileTree]], object] = lambda taken: None,
        files: Taken[FileTree] | None = None,
    ) -> None:
        def walk() -> Taken[FileTree]:
            taken = take_files_before(workspace, exclude) if files is None else files
            on_files(taken)
            return taken

        self._files: Future[Taken[FileTree]] = in_background(walk, name="workspace-walk")
        self._git: Future[Taken[str]] | None = None
        self._no_git = without_git(workspace, git_missing)
        if run_git is not None:
            self._git = in_background(
                lambda: take_git_status(workspace, exclude, run_git, when="before the run")
            )

    def settle(
        self,
        *,
        files_wait: float | None = None,
        git_wait: float = WORKSPACE_GIT_STATUS_SECONDS,
        why_late: str = "",
    ) -> WorkspaceState:
        """The state before the run, waiting files_wait (None: until the walk's own time
        limit) and git_wait seconds; what is not there by then is said to be missing
        (why_late: why, by default that it took too long)."""
        try:
            files = self._files.result(timeout=files_wait)
        except FutureTimeout:
            files = not_taken(f"{FILES_NOT_COMPARED}: {why_late or 'listing them took too long'}")
        if self._git is None:
            return WorkspaceState(files, self._no_git)
        try:
            status = self._git.result(timeout=git_wait)
        except FutureTimeout:
            late = why_late or f"it took over {git_wait:g} s before the run"
            status = not_taken(f"{GIT_NOT_COMPARED}: {late}")
        except Exception as error:
            status = not_taken(f"{GIT_NOT_COMPARED}: it failed before the run ({error})")
        return WorkspaceState(files, status)


def take_after(
    before: WorkspaceState,
    workspace: Path,
    exclude: Path | None,
    run_git: GitStatusRunner | None,
    *,
    git_missing: str = "",
    when: str = "after the run",
    time_limit: float = WORKSPACE_WALK_SECONDS,
) -> WorkspaceState:
    """The state after the run, keeping only the directories that differ from before
    (no walk at all when the files before are not known: they cannot be compared); the
    walk and `git status` run side by side."""
    status: Future[Taken[str]] | None = None
    if run_git is not None:
        status = in_background(
            lambda: take_git_status(workspace, exclude, run_git, when=when), name="git-status"
        )
    files: Taken[FileTree] = Taken(None)
    if before.files.value is not None:
        files = take_files(workspace, exclude, when=when, time_limit=time_limit)
    if status is None:
        return WorkspaceState(files, without_git(workspace, git_missing))
    return WorkspaceState(files, status.result())
