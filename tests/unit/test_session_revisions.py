"""A session's plan keeps its revisions: each Write and Edit of the plan agent, each "keep
planning" round and each $EDITOR edit; `planrun plans history` and `plans diff` show them."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from sandbox_runner.cli import Services, cli
from sandbox_runner.plans.revisions import load_revisions
from sandbox_runner.session.session import PlanReview
from sandbox_runner.tools.permissions import PermissionMode
from sandbox_runner.types import ModelResponse
from tests.support.scripted_model import reply, use
from tests.unit.test_session import FakeUI, Models, open_session, workspace

__all__ = ["workspace"]  # the fixture, used by name

PLAN_TEXT = "# Plan: greet\n\n## Approach\nSay hello.\n\n## Steps\n1. Print it.\n"


def _edit(target: str, old: str, new: str) -> ModelResponse:
    return reply(use("Edit", {"file_path": target, "old_string": old, "new_string": new}))


def test_two_edits_and_a_keep_planning_round_keep_revisions(
    workspace: Path, tmp_path: Path
) -> None:
    ui = FakeUI()
    ui.reviews = [
        PlanReview(False, feedback="add tests"),
        PlanReview(True, PermissionMode.DEFAULT),
    ]
    models = Models({"plan": [], "work": []})
    made = open_session(workspace, tmp_path, models, ui)
    try:
        made.enter_plan()
        target = made.plan_file.container_path
        models.scripts["plan"] = [
            reply(use("Write", {"file_path": target, "content": PLAN_TEXT})),
            _edit(target, "Say hello.", "Say hello politely."),
            reply(use("ExitPlanMode", {})),
            _edit(target, "1. Print it.", "1. Print it.\n2. Test it."),
            reply(use("ExitPlanMode", {})),
        ]
        made.send("plan a greeting")
        plan = Path(made.state.plan_file or "")
    finally:
        made.close()
    log = load_revisions(plan)
    assert [(rev.number, rev.source) for rev in log.revisions] == [
        (1, "agent-write"),
        (2, "agent-edit"),
        (3, "agent-edit"),
    ]
    assert log.revisions[1].again == ["keep-planning"]  # the text the user sent back
    assert log.text(log.revisions[-1]) == plan.read_text()

    history = CliRunner().invoke(cli, ["plans", "history", plan.stem])
    assert history.exit_code == 0, history.output
    lines = history.output.splitlines()
    assert len(lines) == 3
    assert lines[0].split()[0] == "1" and "agent-write" in lines[0] and "+7 -0" in lines[0]
    assert "agent-edit" in lines[1] and "+1 -1" in lines[1]
    assert "(again: keep-planning)" in lines[1]
    assert "+1 -0" in lines[2]

    diff = CliRunner().invoke(cli, ["plans", "diff", plan.stem])
    assert diff.exit_code == 0, diff.output
    assert diff.output.splitlines()[:2] == ["--- revision 2", "+++ revision 3"]
    assert "+2. Test it." in diff.output and "\x1b[" not in diff.output
    first_to_last = CliRunner().invoke(cli, ["plans", "diff", plan.stem, "1", "3"])
    assert "-Say hello." in first_to_last.output
    assert "+Say hello politely." in first_to_last.output


def test_editor_edits_and_a_reject_are_revisions(workspace: Path, tmp_path: Path) -> None:
    made = open_session(workspace, tmp_path, Models({}), FakeUI())
    try:
        made.enter_plan()
        plan = made.plan_file.host_path
        plan.write_text("# Plan\n\nWritten by hand.\n")
        made.plan_file.edited_by_user()  # what the review does after $EDITOR
        assert made.plan_file.staged.read_text() == "# Plan\n\nWritten by hand.\n"
        made.exit_plan()
        made.enter_plan()
        plan.write_text("# Plan\n\nRewritten.\n")
        made.plan_file.edited_by_user()
        made.reject()  # the plan goes back to the snapshot taken on entering
    finally:
        made.close()
    log = load_revisions(plan)
    assert [rev.source for rev in log.revisions] == ["editor", "editor", "restore"]
    assert log.revisions[0].again == []  # entering plan mode on it again is no event
    assert log.text(log.revisions[-1]) == "# Plan\n\nWritten by hand.\n"


def test_plans_diff_colours_on_a_terminal_unless_no_color(planrun_home: Path) -> None:
    from sandbox_runner.plans.revisions import record_revision

    plan = planrun_home / "plans" / "calm-lake.md"
    plan.parent.mkdir(parents=True, exist_ok=True)
    plan.write_text("b\n")
    record_revision(plan, "a\n", "agent-write")
    record_revision(plan, "b\n", "agent-edit")
    terminal = Services(stdout_is_terminal=lambda: True)
    coloured = CliRunner().invoke(cli, ["plans", "diff", "calm-lake"], obj=terminal)
    assert "\x1b[32m+b" in coloured.output and "\x1b[31m-a" in coloured.output
    plain = CliRunner(env={"NO_COLOR": "1"}).invoke(
        cli, ["plans", "diff", "calm-lake"], obj=Services(stdout_is_terminal=lambda: True)
    )
    assert "\x1b[" not in plain.output and "+b" in plain.output


def test_usage_errors_exit_2_with_one_line(planrun_home: Path) -> None:
    from sandbox_runner.plans.revisions import record_revision

    plan = planrun_home / "plans" / "calm-lake.md"
    plan.parent.mkdir(parents=True, exist_ok=True)
    plan.write_text("a\n")
    for args in (
        ["plans", "history", "no-such-plan"],
        ["plans", "diff", "calm-lake"],  # no revisions yet
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1
    record_revision(plan, "a\n", "agent-write")
    one = CliRunner().invoke(cli, ["plans", "diff", "calm-lake"])
    assert one.exit_code == 2 and "nothing to compare" in one.output
    missing = CliRunner().invoke(cli, ["plans", "diff", "calm-lake", "7"])
    assert missing.exit_code == 2 and "no revision 7 (kept: 1-1)" in missing.output


def test_a_plan_edited_by_hand_between_sessions_is_kept_before_the_agent_changes_it(
    workspace: Path, tmp_path: Path
) -> None:
    made = open_session(workspace, tmp_path, Models({}), FakeUI())
    try:
        made.enter_plan()
        plan = made.plan_file.host_path
        plan.write_text("# Plan\n\nBy the agent.\n")
        made.plan_file.keep_revision("agent-write")
        made.exit_plan()
        plan.write_text("# Plan\n\nBy hand, outside planrun.\n")
        made.enter_plan()
    finally:
        made.close()
    log = load_revisions(plan)
    assert [rev.source for rev in log.revisions] == ["agent-write", "found"]
    assert log.text(log.revisions[-1]) == "# Plan\n\nBy hand, outside planrun.\n"


def test_plans_history_says_how_many_revisions_were_pruned(planrun_home: Path) -> None:
    from sandbox_runner.plans.revisions import record_revision

    plan = planrun_home / "plans" / "calm-lake.md"
    plan.parent.mkdir(parents=True, exist_ok=True)
    plan.write_text("x\n")
    for number in range(5):
        record_revision(plan, f"text {number}\n", "agent-edit", keep=2)
    history = CliRunner().invoke(cli, ["plans", "history", "calm-lake"])
    assert history.output.splitlines()[0] == "(3 older revisions pruned)"
    assert [line.split()[0] for line in history.output.splitlines()[1:]] == ["4", "5"]
    pruned = CliRunner().invoke(cli, ["plans", "diff", "calm-lake", "1"])
    assert pruned.exit_code == 2 and "no revision 1 (kept: 4-5)" in pruned.output
