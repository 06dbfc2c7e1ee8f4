"""A budget in US dollars that many agent loops spend from: a run's perspectives, a batch's
jobs, a session's turns and Task subagents. Costs are list-price estimates (plans/pricing
makes them; the agent loop charges them here)."""

from __future__ import annotations

import math
import threading
from typing import Any


class Spend:
    """What the model calls under one budget have cost so far, and the cap on it.

    Thread-safe: the perspectives of a run (and the jobs of a batch) charge it from their
    own threads. Calls to a model the price table does not know cost nothing here, so a
    budget never stops them (they are counted in `unpriced_calls`, for the report).
    """

    def __init__(self, max_usd: float | None, *, spent_before: float = 0.0) -> None:
        """A budget of MAX_USD (None: no cap), SPENT_BEFORE of which is already gone (the
        jobs of a batch that finished before a resume)."""
        self.max_usd = max_usd
        self._spent = spent_before
        self.unpriced_calls = 0
        self.whole: float | None = None
        """The budget this one is a share of (see share), None when it is not one."""
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # A job shipped to another machine takes the budget as it stands (its lock stays).
        return {
            "max_usd": self.max_usd,
            "spent": self.spent,
            "unpriced": self.unpriced_calls,
            "whole": self.whole,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.max_usd = state["max_usd"]
        self._spent = state["spent"]
        self.unpriced_calls = state["unpriced"]
        self.whole = state.get("whole")
        self._lock = threading.Lock()

    def share(self, amount: float) -> Spend:
        """A budget of AMOUNT out of this one, for a job on another machine, which cannot
        charge this one: the job stops once it has spent its share (see batch.budget_gate)."""
        part = Spend(amount)
        part.whole = self.max_usd
        return part

    def at_least(self, total: float) -> None:
        """Count TOTAL as spent unless more already is: what jobs on other machines spent
        (their copies of the budget were charged, not this one)."""
        with self._lock:
            self._spent = max(self._spent, total)

    def charge(self, cost: float | None) -> None:
        """Add the estimated COST of a model call (None: its model has no list price)."""
        with self._lock:
            if cost is None:
                self.unpriced_calls += 1
            else:
                self._spent += cost

    @property
    def spent(self) -> float:
        """Estimated USD spent so far."""
        with self._lock:
            return self._spent

    def left(self) -> float | None:
        """USD left before the cap (never below 0), or None without a cap."""
        if self.max_usd is None:
            return None
        return max(0.0, self.max_usd - self.spent)

    def exhausted(self) -> bool:
        """Whether the cap is reached: no further model call may start."""
        return self.max_usd is not None and self.spent >= self.max_usd

    def reason(self) -> str:
        """Why the budget stops the run, for the plan's reason and the report."""
        if self.whole is not None:
            return (
                f"cost budget of {usd(self.whole)}: this job's share of it, "
                f"{usd(self.max_usd or 0.0)}, is spent ({usd(self.spent)} spent)"
            )
        return f"cost budget of {usd(self.max_usd or 0.0)} reached ({usd(self.spent)} spent)"


def usd(amount: float) -> str:
    """A cost as users read it: $0.0123 below a dollar (unless cents say it all: $0.50),
    $1.23 above."""
    return f"${amount:.4f}" if amount < 1 and round(amount, 2) != amount else f"${amount:,.2f}"


def cost_cap(value: object) -> float | None:
    """A cost cap as a setting gives it: an amount in USD above 0 (a number, or the text of
    an environment variable), or None for no cap.

    Raises:
        ValueError: anything else.
    """
    if value is None:
        return None
    if isinstance(value, str):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"not an amount: {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"not above 0: {value!r}")
    return float(value)
