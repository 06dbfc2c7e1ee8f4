"""What a session's conversations have cost so far, and compacting one that grows too
large for the model's context window."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from sandbox_runner.limits import RunLimits
from sandbox_runner.session.state import SessionState
from sandbox_runner.types import Usage

if TYPE_CHECKING:
    from sandbox_runner.agents.loop import AgentLoop

COMPACT_AT = 0.8
"""Compact when a call's input reaches this share of the context budget."""
SUMMARY_REQUEST = (
    "Summarise this conversation for yourself so that you can continue the work: the "
    "task, what was decided, what was done, what is left, and file paths that matter."
)


def account(state: SessionState, loops: Iterable[AgentLoop]) -> None:
    """Keep the tokens and the estimated cost of the conversations in the state."""
    # The price list loads with the first turn, not before the session's prompt is drawn.
    from sandbox_runner.plans.pricing import estimate_cost

    usage = Usage()
    for loop in loops:
        usage.add(loop.state.usage)
    state.tokens = usage.total
    state.cost_usd = round(estimate_cost(state.model, usage) or 0.0, 6)


def too_large(loop: AgentLoop, limits: RunLimits) -> bool:
    """Whether the conversation's last call came close enough to the context budget to
    compact it now."""
    return loop.state.last_call_tokens > COMPACT_AT * limits.context_budget


def compact(loop: AgentLoop) -> None:
    """Replace the conversation with the model's summary of it, asked for without tools
    (the transcript keeps the full history).

    Raises:
        LimitReached: a limit, or the user, stopped the call for the summary.
        PlanrunError: the model failed.
    """
    loop.add_user(SUMMARY_REQUEST)
    response = loop.turn(replace(loop.request(), tool_choice="none"))
    loop.compact(response.text)
