"""How much of a run's turns, tokens and cost is left: when to warn the model, when to end it."""

from __future__ import annotations

from dataclasses import dataclass

from sandbox_runner.limits import RunLimits
from sandbox_runner.plans.pricing import estimate_cost
from sandbox_runner.spend import usd
from sandbox_runner.types import Usage

WARN_TURNS_LEFT = 3
"""The model is told once when this many turns remain before its final one."""
WARN_TOKEN_SHARE = 0.75
"""The model is told once when this share of the token budget is spent."""
FINAL_TURN_CALLS = 2
"""The final turn comes while the budget still holds this many calls of the last size."""


@dataclass(frozen=True)
class Budget:
    """A run's limits against what it has used so far."""

    max_turns: int
    max_tokens: int
    turns: int
    """Model calls made."""
    tokens: int
    """Tokens used over all calls."""
    last_call_tokens: int
    """Tokens of the latest call: about what the next one will cost, and more."""

    def final_turn_reason(self) -> str:
        """Why the next call must be the last one, without tools ("" when it need not be)."""
        if self.turns >= self.max_turns - 1:
            return f"turn limit of {self.max_turns} reached"
        if self.tokens + FINAL_TURN_CALLS * self.last_call_tokens > self.max_tokens:
            return f"token limit of {self.max_tokens} nearly reached"
        return ""

    def turns_left(self) -> int:
        """Turns before the final one."""
        return self.max_turns - 1 - self.turns

    def low_on_turns(self) -> bool:
        return self.turns_left() <= WARN_TURNS_LEFT

    def low_on_tokens(self) -> bool:
        return self.tokens >= WARN_TOKEN_SHARE * self.max_tokens


def low_budget_note(budget: Budget, plan_file: str) -> str:
    """What the model is told when its turns or tokens run low."""
    if budget.low_on_turns():
        left = f"{budget.turns_left()} turns left" if budget.turns_left() != 1 else "1 turn left"
    else:
        left = f"{budget.tokens:,} of {budget.max_tokens:,} tokens used"
    return (
        f"[planrun] {left} before your final turn, which has no tools. Finish exploring "
        f"and write your plan to {plan_file} now."
    )


def final_turn_note(reason: str, plan_file: str) -> str:
    """What the model is told before its final turn."""
    return (
        f"[planrun] The {reason}: this is your final turn and tools are disabled. Write the "
        "complete plan now, in Markdown, as your answer, with every required section; it "
        f"replaces {plan_file} and is kept as an incomplete plan."
    )


def charge(limits: RunLimits, model: str, usage: Usage) -> None:
    """Charge a model call's USAGE to the budget the run shares, if it has one."""
    if limits.spend is not None:
        limits.spend.charge(estimate_cost(model, usage))


def cost_stop_reason(limits: RunLimits, model: str, run_usage: Usage) -> str:
    """Why no further model call may start for cost ("" when one may): the shared budget
    is spent, or this run's own cost (RUN_USAGE of MODEL) reached its cap."""
    if limits.spend is not None and limits.spend.exhausted():
        return limits.spend.reason()
    cap = limits.max_cost_usd
    cost = estimate_cost(model, run_usage) if cap is not None else None
    if cap is not None and cost is not None and cost >= cap:
        return f"cost budget of {usd(cap)} per plan reached ({usd(cost)} spent)"
    return ""
