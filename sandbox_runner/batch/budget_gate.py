"""The cost budget of a batch whose jobs run on other machines (Ray): each job charges its
own copy of the budget, and the driver learns what it spent only when it finishes. So the
driver admits a job only with a share of what is left, which the job may not pass:

- what finished jobs spent (the ledger) plus the shares of the jobs in flight never
  passes the budget: a job is started only while some of it is neither spent nor held by
  a job in flight, with that rest split evenly across the free slots;
- a job stops once it has spent its share (its model call under way finishes), so the
  batch ends at most one model call per job in flight above its budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sandbox_runner.spend import Spend


@dataclass
class BudgetGate:
    """Which jobs may start under the batch's budget, and each one's share of it."""

    spend: Spend
    """The batch's budget, charged with what finished jobs cost (the driver's ledger)."""
    slots: int
    """Jobs in flight at most (the engine's); the rest of the budget is split across them."""
    held: dict[str, float] = field(default_factory=dict)
    """The share of each job in flight, by key."""

    def admit(self, key: str, waiting: int, own_cap: float | None = None) -> Spend | None:
        """The budget job KEY runs with (its share of what is left), or None: it may not
        start now (every slot is taken, or the rest is spent or held by jobs in flight).
        WAITING counts the jobs waiting to start, this one included; OWN_CAP is the job's
        own cap (per plan), when it is lower than its share.
        """
        cap = self.spend.max_usd
        free = self.slots - len(self.held)
        if cap is None or free < 1 or waiting < 1:
            return None
        left = cap - self.spend.spent - sum(self.held.values())
        if left <= 0:
            return None
        share = left / min(free, waiting)
        self.held[key] = min(share, own_cap) if own_cap is not None else share
        return self.spend.share(share)

    def release(self, key: str) -> None:
        """Job KEY finished (its cost is in the budget now) or never ran: its share is free."""
        self.held.pop(key, None)

    @property
    def in_flight(self) -> int:
        return len(self.held)
