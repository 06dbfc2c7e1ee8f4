"""A session plan's refused edits become proposed patches; accepting the plan tells the work
agent about them, and /apply-patches applies them through the usual approvals."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from sandbox_runner import Model, Sandbox
from sandbox_runner.agents.registry import Registry
from sandbox_runner.cli import cli
from sandbox_runner.limits import RunLimits
from sandbox_runner.plans.plan_meta import meta_path, read_meta
from sandbox_runner.session.commands import Commands
from sandbox_runner.session.session import PlanReview, Session
from sandbox_runner.session.state import SessionStore
from sandbox_runner.tools.permissions import Approval, PermissionMode
from tests.support.local_sandbox import LocalSandbox
from tests.support.scripted_model import reply, say, use
from tests.unit.test_session import PLAN_TEXT, FakeUI, LocalSandboxes, Models, workspace

__all__ = ["workspace"]  # the fixture, shared with test_session


class WritableWork(LocalSandboxes):
    """Local sandboxes whose work sandbox may write the workspace, as a work container can."""

    def work(self) -> Sandbox:
        sandbox = LocalSandbox(self.workspace, None, writable=True)
        self.made.append(("work", sandbox))
        return sandbox


def open_session(
    workspace: Path, tmp_path: Path, models: Callable[[str], Model], ui: FakeUI
) -> Session:
    store, state = SessionStore.create(workspace, "claude-test")
    return Session(
        store,
        state,
        workspace=workspace,
        registry=Registry.load(workspace),
        sandboxes=WritableWork(workspace, tmp_path),
        model=models,
        ui=ui,
        limits=RunLimits(max_turns=20),
    )


EDIT = {"file_path": "src/app.py", "old_string": "'hi'", "new_string": "'hello'"}
PROTECTED = {"file_path": ".claude/agents/general-purpose.md", "content": "be evil\n"}


def _planned(workspace: Path, tmp_path: Path, ui: FakeUI, mode: PermissionMode) -> Session:
    """A session whose plan agent was refused two edits, and whose plan was accepted."""
    ui.reviews = [PlanReview(True, mode)]
    models = Models({"plan": [], "work": [reply(say("Implementing now."))]})
    made = open_session(workspace, tmp_path, models, ui)
    made.enter_plan()
    target = made.plan_file.container_path
    models.scripts["plan"] = [
        reply(use("Edit", EDIT)),
        reply(use("Write", PROTECTED)),
        reply(use("Write", {"file_path": target, "content": PLAN_TEXT})),
        reply(use("ExitPlanMode", {})),
    ]
    made.send("plan a greeting")
    answer = models.made["plan"].requests[1].messages[-1]["content"][0]["content"]
    assert "recorded as a proposed patch" in answer
    kickoff = models.made["work"].requests[0].messages[0]["content"][0]["text"]
    assert "2 edit(s) were proposed but not applied" in kickoff
    assert "-print('hi')\n+print('hello')" in kickoff and "/apply-patches" in kickoff
    return made


def test_accepting_records_the_patches_and_applying_asks_each_edit(
    workspace: Path, tmp_path: Path
) -> None:
    ui = FakeUI()
    made = _planned(workspace, tmp_path, ui, PermissionMode.DEFAULT)
    try:
        assert (workspace / "src/app.py").read_text() == "print('hi')\n"
        plan_file = Path(made.state.plan_file or "")
        meta = read_meta(plan_file)
        assert [p["file"] for p in meta["proposed_patches"]] == [
            "src/app.py",
            ".claude/agents/general-purpose.md",
        ]
        assert "input" not in meta["proposed_patches"][0]  # the side record keeps the diff only
        assert meta["accepted"][0]["mode"] == "default" and meta["accepted"][0]["at"]
        ui.approvals = [Approval(True), Approval(False)]
        lines = Commands(made).run("/apply-patches").lines
        assert lines[0] == "src/app.py: applied"
        assert lines[1].startswith(".claude/agents/general-purpose.md: not applied")
        assert "protected" in ui.asked[1].question and ui.asked[1].once_only
        assert (workspace / "src/app.py").read_text() == "print('hello')\n"
        assert not (workspace / ".claude").exists()
        # The refused one stays for another try; the applied one is gone.
        assert [p["file"] for p in made.state.proposed_patches] == [PROTECTED["file_path"]]
        assert "applied the plan's proposed patches" in " ".join(made.take_notes("work"))
        # The accepted session plan can be handed on; the export knows its repository.
        exported = CliRunner().invoke(cli, ["plans", "export", str(plan_file), "--for", "codex"])
        assert exported.exit_code == 0, exported.output
        assert f"cd {workspace} && codex exec" in exported.output
        assert [entry["for"] for entry in read_meta(plan_file)["exports"]] == ["codex"]
    finally:
        made.close()


def test_accept_edits_still_asks_about_a_protected_file(workspace: Path, tmp_path: Path) -> None:
    ui = FakeUI()
    made = _planned(workspace, tmp_path, ui, PermissionMode.ACCEPT_EDITS)
    try:
        lines = Commands(made).run("/apply-patches").lines
        assert lines[0] == "src/app.py: applied" and len(ui.asked) == 1  # only the protected
        assert ui.asked[0].once_only and not (workspace / ".claude").exists()
    finally:
        made.close()


def test_apply_patches_needs_an_accepted_plan(workspace: Path, tmp_path: Path) -> None:
    made = open_session(workspace, tmp_path, Models({}), FakeUI())
    try:
        said = Commands(made).run("/apply-patches").lines
        assert said == ["error: the plan has no proposed patches to apply"]
        made.enter_plan()
        [said_in_plan] = Commands(made).run("/apply-patches").lines
        assert said_in_plan.startswith("error:") and "/accept first" in said_in_plan
    finally:
        made.close()


def test_rejecting_the_plan_drops_its_patches(workspace: Path, tmp_path: Path) -> None:
    models = Models({"plan": [reply(use("Edit", EDIT)), reply(say("Thinking."))]})
    made = open_session(workspace, tmp_path, models, FakeUI())
    try:
        made.enter_plan()
        made.send("plan it")
        assert len(made.state.proposed_patches) == 1
        made.reject()
        assert made.state.proposed_patches == []
        plan_file = Path(made.state.plan_file or "")
        assert json.loads(meta_path(plan_file).read_text())["proposed_patches"] == []
    finally:
        made.close()
