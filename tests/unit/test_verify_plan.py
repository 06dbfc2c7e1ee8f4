"""What verify reads from a plan, and how it judges a change against it (no git here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox_runner.config import load_settings
from sandbox_runner.errors import ConfigError
from sandbox_runner.verify.changes import BaseCheck, Change
from sandbox_runner.verify.check import ignored_by, judge
from sandbox_runner.verify.plan_refs import covers, mentioned_paths, plan_refs
from sandbox_runner.verify.plan_source import plan_file
from sandbox_runner.verify.report import report_lines

BASE = "a" * 40
PLAN = f"""---
base_commit: {BASE}
git_head: {"b" * 40}
---
# Add due dates

## Detailed Steps
1. Add the field in `todo/model.py:12`.
2. Print it from /workspace/todo/cli.py.
3. Explain it in the README (see https://example.com/a/b.py for the format).

## Test Plan
- Add tests/test_due.py covering todo/model.py.

## Critical Files for Implementation
- todo/model.py - the field
- todo/cli.py - printing
- README.md - the docs
"""


def change(*files: str, moved: bool = False, plan_commit: str | None = BASE) -> Change:
    check = BaseCheck(plan_commit, known=plan_commit is not None, moved=moved, in_history=True)
    return Change("c" * 40, None, None, (), tuple(files), check)


def test_the_plan_names_its_files_steps_tests_and_base(tmp_path: Path) -> None:
    refs = plan_refs(PLAN, tmp_path)
    assert refs.base_commit == BASE and refs.base_source == "base_commit"
    assert refs.critical_files == ("todo/model.py", "todo/cli.py", "README.md")
    assert [step.paths for step in refs.steps] == [("todo/model.py",), ("todo/cli.py",), ()]
    assert refs.test_files == ("tests/test_due.py",)
    assert "example.com/a/b.py" not in refs.mentioned and "a/b.py" not in refs.mentioned


def test_an_older_plan_falls_back_to_git_head_and_a_bare_one_has_no_base(tmp_path: Path) -> None:
    older = PLAN.replace(f"base_commit: {BASE}\n", "")
    assert plan_refs(older, tmp_path).base_source == "git_head"
    assert plan_refs("# Plan\n", tmp_path).base_commit is None


def test_mentions_cover_paths_suffixes_names_and_directories() -> None:
    assert mentioned_paths("edit `./src/a.py#L3-L9`, then 1.2.3 and v3.5") == {"src/a.py"}
    assert covers("plans/verify.py", "sandbox_runner/plans/verify.py")
    assert covers("config.py", "sandbox_runner/config.py")
    assert covers("docs/", "docs/verify.md")
    assert not covers("src/a.py", "src/ab.py")
    assert not covers("verify.py", "sandbox_runner/verify.pyc")


def test_a_change_that_follows_the_plan_has_no_drift(tmp_path: Path) -> None:
    verdict = judge(
        plan_refs(PLAN, tmp_path),
        change("todo/model.py", "todo/cli.py", "README.md", "tests/test_due.py"),
        (),
        strict=True,
    )
    assert not verdict.drift and verdict.reasons == []


def test_an_unnamed_file_is_drift_and_missing_work_only_under_strict(tmp_path: Path) -> None:
    refs = plan_refs(PLAN, tmp_path)
    loose = judge(refs, change("todo/model.py", "setup.py"), (), strict=False)
    assert loose.drift
    assert [(r.kind, r.subject) for r in loose.reasons if r.drift] == [("unnamed_file", "setup.py")]
    kinds = {r.kind for r in loose.reasons}
    assert {"critical_file_untouched", "step_unmatched", "test_file_untouched"} <= kinds
    strict = judge(refs, change("todo/model.py"), (), strict=True)
    assert {r.kind for r in strict.reasons if r.drift} == {
        "critical_file_untouched",
        "step_unmatched",
        "test_file_untouched",
    }
    assert not judge(refs, change("todo/model.py"), (), strict=False).drift


def test_head_moved_is_said_and_is_drift_only_under_strict(tmp_path: Path) -> None:
    refs = plan_refs(PLAN, tmp_path)
    files = ("todo/model.py", "todo/cli.py", "README.md", "tests/test_due.py")
    loose = judge(refs, change(*files, moved=True), (), strict=False)
    assert [r.kind for r in loose.reasons] == ["head_moved"] and not loose.drift
    assert "HEAD moved since the plan was written" in loose.reasons[0].line()
    assert judge(refs, change(*files, moved=True), (), strict=True).drift
    bare = judge(plan_refs("# Plan\n", tmp_path), change(plan_commit=None), (), strict=True)
    assert "the plan does not record its base commit" in [r.message for r in bare.reasons]


def test_ignore_globs_match_names_at_any_depth_but_never_planrun_files() -> None:
    assert ignored_by("web/yarn.lock", ("*.lock",))
    assert ignored_by("gen/api.pb.go", ("gen/*",))
    assert not ignored_by("src/lock.py", ("*.lock",))
    assert not ignored_by(".planrun/config.yaml", ("*",))


def test_ignored_files_are_not_held_to_the_plan(tmp_path: Path) -> None:
    verdict = judge(
        plan_refs(PLAN, tmp_path), change("todo/model.py", "go.sum"), ("go.sum",), strict=False
    )
    assert verdict.ignored == ["go.sum"] and not verdict.drift


def test_verify_ignore_setting_defaults_to_lockfiles_and_reads_a_project_file(
    tmp_path: Path,
) -> None:
    assert "package-lock.json" in load_settings(tmp_path).settings.verify
    (tmp_path / ".planrun").mkdir()
    (tmp_path / ".planrun" / "config.yaml").write_text("verify:\n  ignore: ['gen/*']\n")
    assert load_settings(tmp_path).settings.verify == ["gen/*"]
    (tmp_path / ".planrun" / "config.yaml").write_text("verify:\n  skip: ['gen/*']\n")
    with pytest.raises(ConfigError, match="one key, ignore"):
        load_settings(tmp_path)


def test_plan_names_resolve_to_files_runs_and_session_plans(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "report.json").write_text("{}")
    (run / "report.md").write_text("report")
    (run / "fast.md").write_text(PLAN)
    assert plan_file(str(run)) == run / "fast.md"
    (run / "safe.md").write_text(PLAN)
    with pytest.raises(ConfigError, match="2 plans"):
        plan_file(str(run))
    (run / "recommended.md").write_text(PLAN)
    assert plan_file(str(run)) == run / "recommended.md"
    with pytest.raises(ConfigError, match="is not a plan file"):
        plan_file("no-such-plan")


def test_a_base_that_moved_on_is_a_note_and_a_missing_one_strict_drift(tmp_path: Path) -> None:
    refs = plan_refs(PLAN, tmp_path)
    files = ("todo/model.py", "todo/cli.py", "README.md", "tests/test_due.py")
    moved = BaseCheck(BASE, True, True, True, moved_files=("todo/model.py", "setup.py"))
    moved_on = Change("c" * 40, "origin/main", "d" * 40, files, (), moved)
    verdict = judge(refs, moved_on, (), strict=True)
    assert [(r.kind, r.subject) for r in verdict.reasons] == [("base_moved_on", "todo/model.py")]
    assert not verdict.drift
    elsewhere_only = Change(
        "c" * 40,
        "origin/main",
        "d" * 40,
        files,
        (),
        BaseCheck(BASE, True, True, True, moved_files=("setup.py",)),
    )
    assert judge(refs, elsewhere_only, (), strict=True).reasons == []
    elsewhere = Change("c" * 40, None, None, (), files, BaseCheck(BASE, True, True, False))
    verdict = judge(refs, elsewhere, (), strict=True)
    assert verdict.drift and "not in HEAD's history" in verdict.reasons[0].message
    unknown = Change("c" * 40, None, None, (), files, BaseCheck(BASE, False, True, False))
    verdict = judge(refs, unknown, (), strict=False)
    assert [r.kind for r in verdict.reasons] == ["base_commit_unknown"] and not verdict.drift
    assert judge(refs, unknown, (), strict=True).drift


def test_file_names_print_inert_on_the_terminal_and_in_a_ci_log(tmp_path: Path) -> None:
    """A pull request names its files: an escape sequence, a line break (a forged
    `::error::` workflow command, a closed code fence in a job summary) prints as '?'."""
    hostile = "todo/\x1b]0;owned\x07x.py\n::error::fake\n```\u202eyp.txt"
    verdict = judge(plan_refs(PLAN, tmp_path), change("todo/model.py", hostile), (), strict=False)
    lines = report_lines(Path("plan.md"), change("todo/model.py", hostile), verdict)
    assert all(line.isprintable() for line in lines)
    assert "drift: todo/?]0;owned?x.py?::error::fake?```?yp.txt: " in "\n".join(lines)
