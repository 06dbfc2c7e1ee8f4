"""What a session's conversations have cost so far, and compacting one that grows too
large for the model's context window."""

from __future__ import annotations

import threading
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


class Tally:
    """The session's one count of tokens and cost, which the spinner, the toolbar, /cost
    and `sessions list` all show: what the session had counted when it was opened (the
    state's, so a resumed session goes on counting), plus every loop of this process (the
    work and plan conversations, and the Task subagents they launched)."""

    def __init__(self, state: SessionState) -> None:
        self.earlier_tokens = state.tokens
        self.earlier_cost = state.cost_usd
        """What the state held when the session was opened (0 for a new session)."""
        self.ledger = Ledger()
        self._loops: dict[str, AgentLoop] = {}
        self._lock = threading.Lock()

    def track(self, key: str, loop: AgentLoop) -> None:
        """Count LOOP's usage from now on, under KEY ("work", "plan", "work/task-1-Explore";
        a key already taken by another loop gets a number)."""
        with self._lock:
            if self._loops.get(key, loop) is not loop:
                key = f"{key}#{len(self._loops)}"
            self._loops[key] = loop

    def loops(self) -> dict[str, AgentLoop]:
        """Every loop counted, by key: the conversations, then their Task subagents."""
        with self._lock:
            return dict(self._loops)

    def totals(self, model: str) -> tuple[int, float]:
        """Tokens and estimated cost so far, this process's stretches priced at the model
        each ran on (the rest at MODEL)."""
        with self._lock:
            loops = list(self._loops.items())
        tokens, cost = self.earlier_tokens, self.earlier_cost
        for key, loop in loops:
            tokens += loop.state.usage.total
            cost += self.ledger.cost(key, loop.state.usage, model)
        return tokens, round(cost, 6)

    def update(self, state: SessionState) -> None:
        """Write the totals into STATE (to be saved)."""
        state.tokens, state.cost_usd = self.totals(state.model)

    def settle(self, model: str) -> None:
        """Price every loop's usage so far at MODEL, before the session's model changes."""
        with self._lock:
            loops = list(self._loops.items())
        for key, loop in loops:
            self.ledger.settle(key, loop.state.usage, model)


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
    try:
        response = loop.turn(replace(loop.request(), tool_choice="none"), quiet=True)
    except BaseException:
        # The request for a summary is planrun's, not the user's: it must not stay behind
        # to be sent with the next message.
        loop.withdraw(SUMMARY_REQUEST)
        raise
    loop.compact(response.text)
