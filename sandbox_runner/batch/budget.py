"""A batch's cost budget: its cap, what earlier runs of the batch spent of it, and the
refusal to run jobs under a budget already spent."""

from __future__ import annotations

from pathlib import Path

from sandbox_runner.batch.ledger import Ledger
from sandbox_runner.batch.resume import RUNS
from sandbox_runner.batch.setup import BatchJob, PreparedTask
from sandbox_runner.errors import ConfigError
from sandbox_runner.spend import Spend, usd


def batch_spend(prepared: list[PreparedTask]) -> Spend | None:
    """The batch's cost budget: the lowest `max_cost_usd` of its tasks' settings (the
    `--max-cost-usd` flag sets it for every task; a repository's file may only lower it)."""
    caps = [task.settings.settings.max_cost_usd for task in prepared]
    known = [cap for cap in caps if cap is not None]
    return Spend(min(known)) if known else None


def spent_earlier(out_dir: Path | None) -> float:
    """What earlier runs of the batch in OUT_DIR spent (its ledger's costs); 0 for none."""
    if out_dir is None or not out_dir.is_dir():
        return 0.0
    return sum(record.cost_usd or 0.0 for record in Ledger(out_dir).read())


def check_budget(out_dir: Path, jobs: list[BatchJob], spend: Spend | None) -> None:
    """Refuse to run jobs under a budget that earlier runs of the batch spent already.

    Raises:
        ConfigError: they did, and some job is still to run.
    """
    if (
        spend is None
        or spend.max_usd is None
        or not any(job.decision.action in RUNS for job in jobs)
    ):
        return
    spent = spent_earlier(out_dir)
    if spent >= spend.max_usd:
        raise ConfigError(
            f"batch {out_dir.name} has spent {usd(spent)} already, and its budget is "
            f"{usd(spend.max_usd)}: run it again with a higher --max-cost-usd"
        )
