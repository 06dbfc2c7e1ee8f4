"""The before/after workspace check: the per-path difference of two file trees, what
could not be compared and why, the before-state taken beside the first model call, and
what the reports say."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox_runner.batch.driver import BatchDriver
from sandbox_runner.batch.setup import batch_jobs, decide_all, prepare_tasks
from sandbox_runner.batch.tasks_file import load_batch_file
from sandbox_runner.runs import workspace_check
from sandbox_runner.runs.executor import ThreadExecutor
from sandbox_runner.runs.workspace_check import (
    BeforeCheck,
    RepositoryTrees,
    Taken,
    WorkspaceState,
    take_after,
    take_files,
    take_git_status,
)
from sandbox_runner.sandbox.host_walk import (
    FileTree,
    find,
    legacy_fingerprint,
    same_tree,
    tree_fingerprint,
)
from sandbox_runner.sandbox.host_walk import shared as shared_walks
from sandbox_runner.sandbox.host_walk import tree as file_tree
from sandbox_runner.sandbox.host_walk.find import walk
from sandbox_runner.types import ModelRequest, ModelResponse
from tests.unit.test_batch import FakeWork, write
from tests.unit.test_synthesis import Run, plan_script, run, workspace  # noqa: F401  (fixtures)


def make_tree(root: Path) -> Path:
    for path in ("src/app.py", "src/util.py", "docs/a.md", "docs/deep/b.md", ".git/index"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(path)
    return root


def later(path: Path) -> None:
    """Give path an mtime no earlier walk can have seen."""
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))


def compare(root: Path, change: Callable[[], None]) -> tuple[WorkspaceState, WorkspaceState]:
    """The states before and after `change` (files only: git status is not taken here)."""
    before = WorkspaceState(take_files(root, None), Taken(""))
    change()
    return before, take_after(before, root, None, None, git_missing="not here")


def test_a_digest_an_earlier_version_wrote_is_still_recognised(tmp_path: Path) -> None:
    """run.json and a batch's job keys hold the digest: a new walk must not make an older
    run look changed (its digest is made again the earlier way)."""
    root = make_tree(tmp_path / "repo")
    (root / "link").symlink_to("src/app.py")
    hasher, stack = hashlib.sha256(), [str(root)]
    while stack:  # the walk as planrun 0.x wrote it, entry by entry
        with os.scandir(stack.pop()) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
        subdirs = []
        for entry in entries:
            info = entry.stat(follow_symlinks=False)
            link = os.readlink(entry.path) if stat.S_ISLNK(info.st_mode) else ""
            fields = (os.path.relpath(entry.path, root), info.st_mode, info.st_size)
            line = "\0".join(map(str, (*fields, info.st_mtime_ns, link))) + "\n"
            hasher.update(os.fsencode(line))
            if stat.S_ISDIR(info.st_mode):
                subdirs.append(entry.path)
        stack.extend(reversed(subdirs))
    earlier = hasher.hexdigest()
    assert legacy_fingerprint(root) == earlier
    assert same_tree(root, earlier) and same_tree(root, tree_fingerprint(root) or "")
    assert (tree_fingerprint(root) or "").startswith("v2:")
    later(root / "src" / "app.py")
    assert not same_tree(root, earlier)


def test_added_removed_and_modified_paths_are_named(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "repo")

    def change() -> None:
        (root / "src" / "new.py").write_text("x")
        (root / "docs" / "a.md").unlink()
        (root / ".git" / "index").write_text("rewritten by git gc")
        later(root / ".git" / "index")

    before, after = compare(root, change)
    comparison = before.compare(after)
    assert comparison.changed == (
        ".git/index (modified)",
        "docs/a.md (removed)",
        "src/new.py (added)",
    )
    assert comparison.problem.startswith("files changed outside the sandbox")
    assert "cannot write to the repository" in comparison.problem
    assert comparison.problem.endswith(": .git/index (modified), docs/a.md (removed), "
                                       "src/new.py (added)")  # fmt: skip


def test_a_removed_directory_is_one_path_and_a_touched_one_is_named(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "repo")

    def change() -> None:
        for path in sorted((root / "docs").rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        (root / "docs").rmdir()
        later(root / "src")  # e.g. a file made and removed again

    before, after = compare(root, change)
    assert before.compare(after).changed == ("docs (removed)", "src (modified)")


def test_the_list_is_bounded_and_the_rest_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_tree, "WORKSPACE_CHECK_LISTED_PATHS", 3)
    root = make_tree(tmp_path / "repo")

    def change() -> None:
        for n in range(7):
            (root / "src" / f"new{n}.py").write_text("x")

    before, after = compare(root, change)
    comparison = before.compare(after)
    assert comparison.changed == ("src/new0.py (added)", "src/new1.py (added)",
                                  "src/new2.py (added)")  # fmt: skip
    assert comparison.changed_more == 4
    assert comparison.problem.endswith("src/new2.py (added), +4 more")


def test_the_records_are_kept_compressed(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "repo")
    for n in range(300):
        (root / "src" / f"module_{n:04d}.py").write_text("x")
    tree = walk(root).tree
    raw = len(zlib.decompress(b"".join(tree.stream)))
    assert tree.entries == 310 and tree.memory_bytes < raw / 3  # the workspace is one


def test_a_walk_past_its_time_limit_says_so_and_compares_git_status_only(
    tmp_path: Path,
) -> None:
    root = make_tree(tmp_path / "repo")
    before = WorkspaceState(take_files(root, None, time_limit=0), Taken(" M a.py"))
    after = WorkspaceState(take_files(root, None), Taken(" M a.py"))
    comparison = before.compare(after)
    assert comparison.check == "git_status_only" and comparison.problem == ""
    assert comparison.note.startswith("files were not compared: listing them before the run "
                                      "took over 0 s")  # fmt: skip


def test_git_status_that_fails_or_hangs_is_named_not_silently_dropped(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "repo")
    failed = take_git_status(root, None, lambda command: None, when="before the run")
    assert failed.note == (
        "`git status` was not compared: it could not run before the run (in its sandbox)"
    )
    release = threading.Event()
    hanging = BeforeCheck(root, None, lambda command: "" if release.wait(5) else None)
    state = hanging.settle(git_wait=0.05)
    release.set()
    assert (
        state.git_status.note == "`git status` was not compared: it took over 0.05 s before the run"
    )
    comparison = state.compare(take_after(state, root, None, lambda command: ""))
    assert comparison.check == "files_only"
    assert comparison.note == state.git_status.note
    assert set(comparison.timings_ms) == {
        "before_files", "before_git_status", "after_files", "after_git_status"
    }  # fmt: skip
    assert comparison.timings_ms["before_git_status"] is None
    assert isinstance(comparison.timings_ms["after_files"], int)


def test_a_git_directory_leading_outside_is_not_compared_and_says_so(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".git").write_text(f"gitdir: {tmp_path / 'elsewhere'}\n")
    taken = take_git_status(root, None, lambda command: "", when="before the run")
    assert taken.value is None and "points outside the repository" in taken.note
    assert take_git_status(tmp_path, None, lambda command: None, when="x") == Taken("")


def test_directories_that_cannot_be_listed_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_tree(tmp_path / "repo")
    real_scandir = os.scandir

    def refuse(path: str) -> object:
        if path.endswith("/docs/deep"):
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", refuse)
    monkeypatch.setattr(find, "gnu_find", lambda: None)  # root lists anything find asks
    state = WorkspaceState(take_files(root, None), Taken(""))
    comparison = state.compare(take_after(state, root, None, lambda command: ""))
    assert comparison.problem == "" and comparison.check == "full"
    assert comparison.note == (
        "the contents of directories planrun cannot list were not compared: docs/deep"
    )


@pytest.mark.parametrize("walker", ["find", "python"])
@pytest.mark.parametrize("how", ["moved away", "a file now"])
def test_a_workspace_gone_during_the_run_is_a_change_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walker: str, how: str
) -> None:
    """The repository moved away (or replaced) while the plans ran: the walk after lists
    nothing there and says so; `plans resume` finds it changed."""
    root = make_tree(tmp_path / "repo")
    if walker == "python":
        monkeypatch.setattr(find, "gnu_find", lambda: None)

    def change() -> None:
        root.rename(tmp_path / "moved")
        if how == "a file now":
            root.write_text("")

    before, after = compare(root, change)
    comparison = before.compare(after)
    assert comparison.problem.startswith("files changed outside the sandbox")
    assert {"src (removed)", "docs (removed)", ".git (removed)"} <= set(comparison.changed)
    assert comparison.note == "the contents of directories planrun cannot list were not compared: ."
    recorded = before.files.value
    assert recorded is not None and not same_tree(root, recorded.digest)
    assert walk(root, seed=True).seed is None  # and no seed for the guard


def test_the_first_model_request_goes_out_while_the_walk_runs(
    run: Run,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fingerprint was taken before anything started: on a big repository, the
    model's first call waited for it."""
    asked = threading.Event()
    seen: list[bool] = []
    real_take_files = workspace_check.take_files

    def slow_take_files(*args: object, **kwargs: object) -> Taken[FileTree]:
        if "walked" in kwargs:  # the walk before the run
            seen.append(asked.wait(10))
        return real_take_files(*args, **kwargs)  # type: ignore[arg-type]

    def first(request: ModelRequest) -> ModelResponse:
        asked.set()
        return plan_script("simplicity")[0]  # type: ignore[return-value]

    monkeypatch.setattr(workspace_check, "take_files", slow_take_files)
    outcome, _ = run({"simplicity": [first, *plan_script("simplicity")[1:]]},
                     perspectives=["simplicity"])  # fmt: skip
    assert seen == [True]
    document = outcome.report.document
    assert document["workspace_check"] == "full", document["workspace_check_note"]
    assert document["workspace_unchanged"]
    run_json = json.loads((outcome.record.out_dir / "run.json").read_text())
    assert run_json["tree"] == tree_fingerprint(
        Path(document["repository"]), exclude=outcome.record.out_dir
    )
    assert all(isinstance(document["workspace_check_ms"][key], int)
               for key in ("before_files", "after_files"))  # fmt: skip


def test_a_change_during_the_run_is_reported_with_its_paths(
    run: Run,  # noqa: F811
    workspace: Path,  # noqa: F811
) -> None:
    script = plan_script("simplicity")

    def change(request: ModelRequest) -> ModelResponse:
        (workspace / "edited-on-the-host.txt").write_text("x")
        return script[1]  # type: ignore[return-value]

    outcome, _ = run({"simplicity": [script[0], change, script[2]]}, perspectives=["simplicity"])
    document = outcome.report.document
    assert outcome.record.exit_code == 3
    assert document["workspace_changed_paths"] == ["edited-on-the-host.txt (added)"]
    assert "changed outside the sandbox" in document["workspace_problem"]
    assert "edited-on-the-host.txt (added)" in outcome.report.to_markdown()


def test_a_batch_walks_each_repository_once_before_and_once_after(
    tmp_path: Path, sample_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keying the jobs and the check's state before walked the repository twice."""
    (sample_repo / ".git").mkdir()
    walks: list[Path] = []

    def counted(root: Path, **options: object) -> object:
        walks.append(Path(root))
        return walk(root, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(workspace_check, "walk", counted)
    monkeypatch.setattr(shared_walks, "walk", counted)
    tasks = "".join(f"  - {{id: t{n}, requirements: r{n}}}\n" for n in range(6))
    batch = load_batch_file(
        write(
            tmp_path / "batch.yaml", f"defaults: {{repo: repo, perspectives: [a]}}\ntasks:\n{tasks}"
        )
    )
    out = tmp_path / "out"
    out.mkdir()
    trees = RepositoryTrees()
    jobs = decide_all(batch_jobs(prepare_tasks(batch, batch.tasks, None, print), out, trees), out)
    driver = BatchDriver("b", out, jobs, ThreadExecutor(2), FakeWork(), trees=trees,
                         scratch=tmp_path / "scratch")  # fmt: skip
    started = time.monotonic()
    outcome = driver.run()
    assert time.monotonic() - started < 60
    assert walks == [sample_repo, sample_repo]
    [check] = outcome.summary["workspaces"]
    assert check["check"] == "files_only"
    assert check["note"] == (
        "`git status` was not compared: it is not taken here (the jobs ran on other machines)"
    )


def test_the_batch_terminal_names_a_changed_or_partly_checked_repository(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from sandbox_runner.cli.batch_cmd import _print_summary

    changed = {"repository": "/r1", "check": "full", "problem": "files changed outside the "
               "sandbox: a.py (added)", "note": ""}  # fmt: skip
    partial = {"repository": "/r2", "check": "files_only", "problem": "", "note": "`git status` "
               "was not compared: it is not taken here"}  # fmt: skip
    full = {"repository": "/r3", "check": "full", "problem": "", "note": ""}
    summary = {"jobs": [], "counts": {}, "batch": "b", "out_dir": "/out",
               "workspaces": [changed, partial, full]}  # fmt: skip
    _print_summary(summary)
    lines = capsys.readouterr().out.splitlines()
    assert "  WORKSPACE CHANGED: /r1: files changed outside the sandbox: a.py (added)" in lines
    assert (
        "  workspace not fully checked: /r2: `git status` was not compared: it is not taken here"
        in lines
    )
    assert not any("/r3" in line for line in lines)


def test_ctrl_c_before_the_walk_finished_says_what_was_not_compared(
    run: Run,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    released = threading.Event()
    real_take_files = workspace_check.take_files

    def stuck_take_files(*args: object, **kwargs: object) -> Taken[FileTree]:
        if kwargs.get("since") is None:
            released.wait(10)
        return real_take_files(*args, **kwargs)  # type: ignore[arg-type]

    def interrupt(request: ModelRequest) -> ModelResponse:
        signal.raise_signal(signal.SIGINT)
        released.wait(5)
        return plan_script("simplicity")[0]  # type: ignore[return-value]

    monkeypatch.setattr(workspace_check, "take_files", stuck_take_files)
    try:
        outcome, _ = run({"simplicity": [interrupt]}, perspectives=["simplicity"])
    finally:
        released.set()
    document = outcome.report.document
    # Outside git there is no `git status` to compare: only the files were missing.
    assert outcome.interrupted and document["workspace_check"] == "git_status_only"
    assert document["workspace_check_note"] == (
        "files were not compared: the run was interrupted before the check's first part finished"
    )
    assert "not fully checked: files were not compared" in outcome.report.to_markdown()


def test_the_check_after_a_large_repository_s_plans_is_said(tmp_path: Path) -> None:
    from sandbox_runner.agents.events import AgentEvent
    from sandbox_runner.runs import multi

    events: list[AgentEvent] = []
    for ms in (200, 4_300):
        before = WorkspaceState(Taken(None, "", ms), Taken(""))
        multi._say_checking(before, events.append)
    [said] = events
    assert said.kind == "notice" and said.label == "" and said.detail == multi.CHECKING_NOTICE
