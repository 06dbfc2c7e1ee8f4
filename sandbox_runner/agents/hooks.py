"""What a use of the agent loop plugs into it: the hooks, and the approver of its Asks.

Apart from the loop, so that a session can define its own without loading the loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from sandbox_runner.tools.permissions import Approval, Ask

if TYPE_CHECKING:
    from sandbox_runner.agents.loop import AgentLoop
    from sandbox_runner.plans.proposed_patches import ProposedPatch


class Approver(Protocol):
    """Answers the calls the permission mode asks about."""

    def approve(self, ask: Ask) -> Approval:
        """The user's answer (a terminal asks; a headless run cannot)."""


class LoopHooks:
    """What a use of the loop adds; the defaults add nothing."""

    def notes_before_call(self, loop: AgentLoop) -> list[str]:
        """Notes for the model, added to the user turn the next call sends."""
        return []

    def on_stop(self, loop: AgentLoop) -> str | None:
        """The model answered without tool calls: a message to go on with, or None."""
        return None

    def on_budget_spent(self, loop: AgentLoop, reason: str) -> None:
        """The turns or tokens are about spent (a final turn without tools goes here)."""

    def on_approval(self, loop: AgentLoop, ask: Ask, approval: Approval) -> None:
        """An Ask was answered (a session keeps "always" answers in its rules)."""

    def on_proposed_patch(self, loop: AgentLoop, patch: ProposedPatch) -> None:
        """A refused edit was kept as a proposed patch (a session keeps it in its state)."""
