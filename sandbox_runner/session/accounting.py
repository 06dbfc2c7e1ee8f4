"""What a session's conversations have cost so far, and compacting one that grows too
large for the model's context window."""

from __future__ import annotations

from collections.abc import Mapping
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


class Ledger:
    """What each conversation has cost, every stretch priced at the model it ran on (the
    session's model can change: /model)."""

    def __init__(self) -> None:
        self._settled: dict[str, tuple[Usage, float]] = {}
        """Per conversation: the usage already priced, and its cost."""

    def cost(self, which: str, usage: Usage, model: str) -> float:
        """What WHICH has cost: the settled part, and the rest at MODEL's price."""
        settled, cost = self._settled.get(which, (Usage(), 0.0))
        return cost + _estimate(model, _minus(usage, settled))

    def settle(self, which: str, usage: Usage, model: str) -> None:
        """Price WHICH's usage so far at MODEL, before the model changes."""
        self._settled[which] = (replace(usage), self.cost(which, usage, model))


def account(state: SessionState, ledger: Ledger, loops: Mapping[str, AgentLoop]) -> None:
    """Keep the tokens and the estimated cost of the conversations in the state."""
    usage = Usage()
    cost = 0.0
    for which, loop in loops.items():
        usage.add(loop.state.usage)
        cost += ledger.cost(which, loop.state.usage, state.model)
    state.tokens = usage.total
    state.cost_usd = round(cost, 6)


def _estimate(model: str, usage: Usage) -> float:
    # The price list loads with the first turn, not before the session's prompt is drawn.
    from sandbox_runner.plans.pricing import estimate_cost

    return estimate_cost(model, usage) or 0.0


def _minus(usage: Usage, settled: Usage) -> Usage:
    return Usage(
        usage.input_tokens - settled.input_tokens,
        usage.output_tokens - settled.output_tokens,
        usage.cache_creation_input_tokens - settled.cache_creation_input_tokens,
        usage.cache_read_input_tokens - settled.cache_read_input_tokens,
    )


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
