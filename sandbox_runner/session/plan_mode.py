"""Changing a session's permission mode, plan mode above all: entering and leaving it, the
plan accepted or rejected (by a command, or in the review ExitPlanMode asks for), and the
kickoff message that starts the work session on an accepted plan."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sandbox_runner.agents.cancel import Cancel
from sandbox_runner.agents.run_state import TurnEnded
from sandbox_runner.errors import ConfigError
from sandbox_runner.plans.plan_meta import add_entry, set_meta
from sandbox_runner.plans.proposed_patches import patches_from
from sandbox_runner.session import prompts
from sandbox_runner.session.todos import plain_lines, plan_steps
from sandbox_runner.session.ui import PlanReview
from sandbox_runner.tools.permissions import PermissionMode
from sandbox_runner.types import ToolCall, ToolResult

if TYPE_CHECKING:
    from sandbox_runner.session.session import Session


class PlanAccepted(TurnEnded):
    """Control flow: the user accepted the plan in ExitPlanMode's review, which ends the
    plan turn; the session then switches to the work session, which starts on the plan."""

    def __init__(self, result: ToolResult, review: PlanReview) -> None:
        super().__init__(result)
        self.review = review


class PlanMode:
    """The mode changes of SESSION: the plan session and its plan file go with plan mode."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._kickoff: str | None = None
        """The first message of the work session after a plan was accepted."""

    def switch(self, mode: PermissionMode) -> None:
        """Switch to MODE; into or out of plan mode, the active session changes too."""
        session = self.session
        state = session.state
        old = state.permission_mode
        if mode is old:
            return
        if mode is PermissionMode.PLAN:
            self.enter()
            return
        if old is PermissionMode.PLAN:
            self._leave(mode, event="plan_mode_exited")
            return
        state.mode = mode.value
        session.notes.add("work", prompts.mode_changed(mode.value))
        session.store.event("mode_changed", mode=mode.value, previous=old.value)
        session.save()

    def enter(self) -> None:
        """Switch to the plan session; the plan file is chosen once, and snapshotted."""
        session = self.session
        state, plan_file = session.state, session.plan_file
        if state.permission_mode is PermissionMode.PLAN:
            return
        again = state.plan_file is not None
        plan_file.choose()
        state.snapshot = plan_file.read()
        if state.snapshot is not None:
            # A plan written before revisions were kept, or edited by hand since the last
            # one: kept first, so that the agent's changes never lose it.
            plan_file.keep_revision("found")
        state.previous_mode, state.mode, state.active = state.mode, "plan", "plan"
        plan_file.stage()
        session.conversations.push_plan()
        exists = state.snapshot is not None
        note = prompts.entered_plan_mode(plan_file.container_path, exists, again)
        session.notes.add("plan", note)
        session.store.event("mode_changed", mode="plan", previous=state.previous_mode)
        session.store.event("plan_mode_entered", plan_file=state.plan_file)
        session.save()

    def exit(self) -> None:
        """/exit-plan: back to the previous mode, the plan untouched, nothing injected."""
        self._require("/exit-plan")
        self._leave(PermissionMode(self.session.state.previous_mode), event="plan_mode_exited")

    def accept(self, note: str = "", mode: PermissionMode | None = None) -> None:
        """/accept, /apply-plan: keep the plan, switch to the work session, start on it."""
        self._require("/accept")
        session = self.session
        session.plan_file.sync_out()
        text = session.plan_file.read() or ""
        target = mode or PermissionMode(session.state.previous_mode)
        if target is PermissionMode.PLAN:
            raise ConfigError("the plan can be applied in default or acceptEdits, not plan")
        self._leave(target, event="")
        path = str(session.plan_file.host_path)
        # A new plan, a new checklist: its steps (none: the agent makes one, if it may).
        steps = plan_steps(text) if session.conversations.has_checklist() else []
        session.state.todos = [step.to_saved() for step in steps]
        patches = patches_from(session.state.proposed_patches)
        kickoff = prompts.kickoff(path, text, note, "\n".join(plain_lines(steps)))
        self._kickoff = kickoff + prompts.proposed_patches(patches)
        add_entry(
            session.plan_file.host_path, "accepted", {"mode": target.value, "where": "session"}
        )
        set_meta(session.plan_file.host_path, "repository", session.state.repo)
        session.store.event("plan_accepted", plan_file=path, mode=target.value)
        session.save()

    def reject(self) -> None:
        """/reject: restore the plan file from the snapshot, leave plan mode, no trace."""
        self._require("/reject")
        session = self.session
        state, plan_file = session.state, session.plan_file
        plan_file.sync_out()
        rejected = plan_file.read()
        session.store.event("plan_rejected", plan_file=state.plan_file, rejected=rejected)
        plan_file.restore(state.snapshot)
        state.proposed_patches = []  # they belonged to the rejected plan
        if state.plan_file:
            set_meta(plan_file.host_path, "proposed_patches", [])
        session.conversations.push_plan()
        self._leave(PermissionMode(state.previous_mode), event="")

    def take_kickoff(self) -> str | None:
        """The work session's first message on an accepted plan, once."""
        kickoff, self._kickoff = self._kickoff, None
        return kickoff

    def review(self, call: ToolCall, stop: Cancel) -> ToolResult:
        """ExitPlanMode: the plan agent says the plan is ready, and the user reviews it.

        Raises:
            PlanAccepted: the user accepted it; the plan turn ends there.
        """
        session = self.session
        plan_file = session.plan_file
        plan_file.sync_out()
        text = plan_file.read()
        if not text or not text.strip():
            message = f"The plan file {plan_file.container_path} is empty; write the plan."
            return ToolResult(call.id, message, True)
        session.store.event("plan_ready", plan_file=session.state.plan_file)
        review = session.ui.review_plan(plan_file.host_path, text)
        if not review.accept:
            plan_file.keep_revision("keep-planning")
            return ToolResult(call.id, prompts.keep_planning(review.feedback))
        result = ToolResult(call.id, "The user accepted the plan; implementation starts now.")
        raise PlanAccepted(result, review)

    def remind(self) -> None:
        """Tell the plan session again that it is in plan mode (its conversation was
        compacted, and the note with it)."""
        plan_file = self.session.plan_file
        note = prompts.entered_plan_mode(plan_file.container_path, plan_file.exists(), True)
        self.session.notes.add("plan", note)

    def _leave(self, mode: PermissionMode, *, event: str) -> None:
        """Back to the work session. It was never in plan mode (the plan session was), so
        nothing is injected there; the plan session hears "Re-entering" if it comes back."""
        session = self.session
        state = session.state
        state.mode, state.active = mode.value, "work"
        state.snapshot = None
        session.store.event("mode_changed", mode=mode.value, previous="plan")
        if event:
            session.store.event(event, plan_file=state.plan_file)
        session.save()

    def _require(self, command: str) -> None:
        if self.session.state.permission_mode is not PermissionMode.PLAN:
            raise ConfigError(f"{command} works in plan mode; enter it with /plan")
