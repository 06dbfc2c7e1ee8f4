"""What a session plugs into its two agent loops: planrun's notes for the model (the mode
changed, plan mode was entered), and the user's "always" approvals, kept for good."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sandbox_runner.agents.hooks import LoopHooks
from sandbox_runner.agents.memory import NestedMemory
from sandbox_runner.plans.plan_meta import set_meta
from sandbox_runner.plans.proposed_patches import keep, patches_from
from sandbox_runner.session.state import SessionState
from sandbox_runner.tools.permissions import Approval, Ask
from sandbox_runner.tools.policy import ToolKind

if TYPE_CHECKING:
    from sandbox_runner.agents.loop import AgentLoop
    from sandbox_runner.plans.proposed_patches import ProposedPatch


class Notes:
    """Notes for the model, waiting for the next call of the work or the plan session."""

    def __init__(self) -> None:
        self._waiting: dict[str, list[str]] = {"work": [], "plan": []}

    def add(self, which: str, text: str) -> None:
        self._waiting[which].append(text)

    def take(self, which: str) -> list[str]:
        """The notes waiting for WHICH ("work" or "plan"), which then has none."""
        notes, self._waiting[which] = self._waiting[which], []
        return notes


class SessionHooks(LoopHooks):
    """The hooks of the work or the plan loop (WHICH) of a session."""

    def __init__(
        self,
        which: str,
        notes: Notes,
        state: SessionState,
        save: Callable[[], None],
        nested: NestedMemory | None = None,
    ) -> None:
        self.which, self.notes, self.state, self.save = which, notes, state, save
        self.nested = nested

    def notes_before_call(self, loop: AgentLoop) -> list[str]:
        """planrun's waiting notes, and the nested memory files the last tool calls reached."""
        found = self.nested.notes_for(loop.state.messages) if self.nested else []
        return [*self.notes.take(self.which), *found]

    def on_approval(self, loop: AgentLoop, ask: Ask, approval: Approval) -> None:
        """An "always" answer becomes a rule of the session: every edit, or commands
        with the asked-about prefix, approved from now on (and after a resume)."""
        if not approval.always or ask.once_only:
            return
        state = self.state
        if ask.kind is ToolKind.EDIT:
            state.approve_edits = True
        elif ask.prefix:
            state.approved_prefixes = sorted({*state.approved_prefixes, ask.prefix})
        else:
            return  # no prefix is safe to approve for good: this once only
        self.save()

    def on_proposed_patch(self, loop: AgentLoop, patch: ProposedPatch) -> None:
        """A refused edit of the plan session: kept in the session (with its input, for
        /apply-patches) and beside the plan file (without)."""
        if self.which != "plan":
            return
        record_patch(self.state, patch)
        self.save()


def record_patch(state: SessionState, patch: ProposedPatch) -> None:
    """Keep PATCH among the session plan's proposed patches (bounded, no duplicates)."""
    patches = patches_from(state.proposed_patches)
    if not keep(patches, patch):
        return
    state.proposed_patches = [kept.to_dict(with_input=True) for kept in patches]
    if state.plan_file:
        summary = [kept.to_dict() for kept in patches]
        set_meta(Path(state.plan_file), "proposed_patches", summary)
