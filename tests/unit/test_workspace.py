"""Facts about the workspace: the before/after comparison and what the sandbox user can read."""

from __future__ import annotations

from sandbox_runner.plans.workspace import WorkspaceState


def test_a_git_status_that_could_not_run_makes_the_check_files_only() -> None:
    """Issue 10 item 10: a failed `git status` was reported as "unchanged"."""
    before, after = WorkspaceState("tree", None), WorkspaceState("tree", "?? new.py")
    comparison = before.compare(after)
    assert comparison.problem == ""
    assert comparison.check == "files_only"
    assert comparison.note == "`git status` could not run before the run"


def test_both_snapshots_compared_is_a_full_check() -> None:
    comparison = WorkspaceState("tree", "").compare(WorkspaceState("tree", ""))
    assert (comparison.problem, comparison.check, comparison.note) == ("", "full", "")


def test_a_fingerprint_that_could_not_be_taken_is_no_check() -> None:
    comparison = WorkspaceState("tree", "").compare(WorkspaceState(None, None))
    assert comparison.check == "none" and comparison.problem == ""
