"""A batch's budget when its jobs run on other machines: each job gets a share of what is
left and stops once it has spent it, and the driver starts no job once the budget is spent
or held, so the batch ends at most one model call per job in flight above its budget."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox_runner.batch.budget_gate import BudgetGate
from sandbox_runner.batch.driver import BatchDriver
from sandbox_runner.batch.job import JobOutcome
from sandbox_runner.batch.ledger import Ledger
from sandbox_runner.batch.setup import BatchJob, batch_jobs, decide_all, prepare_tasks
from sandbox_runner.batch.tasks_file import load_batch_file
from sandbox_runner.plans.document import render_document
from sandbox_runner.plans.pricing import estimate_cost
from sandbox_runner.plans.results import PlanResult, PlanStatus
from sandbox_runner.plans.validate import validate_plan
from sandbox_runner.runs.executor import ThreadExecutor
from sandbox_runner.spend import Spend
from sandbox_runner.types import Usage
from tests.unit.test_batch import write
from tests.unit.test_plan_loop import VALID_PLAN

MODEL = "claude-sonnet-4-6"
CALL = Usage(100_000, 0)
"""One model call of the fake remote jobs."""
CALL_USD = estimate_cost(MODEL, CALL) or 0.0


def test_the_rest_of_the_budget_is_split_across_the_free_slots() -> None:
    gate = BudgetGate(Spend(4.0), slots=2)
    first, second = gate.admit("a", waiting=5), gate.admit("b", waiting=4)
    assert first is not None and second is not None
    assert (first.max_usd, second.max_usd) == (2.0, 2.0)
    assert gate.admit("c", waiting=3) is None  # every slot is taken
    gate.spend.at_least(0.5)  # a finished, having spent 0.5 of its 2.0
    gate.release("a")
    third = gate.admit("c", waiting=3)
    assert third is not None and third.max_usd == pytest.approx(1.5)  # 4 - 0.5 - b's 2.0
    assert gate.held == {"b": 2.0, "c": pytest.approx(1.5)}


def test_one_job_left_gets_all_of_the_rest_and_a_lower_own_cap_is_what_it_holds() -> None:
    gate = BudgetGate(Spend(3.0, spent_before=1.0), slots=4)
    share = gate.admit("a", waiting=1, own_cap=0.5)
    assert share is not None and share.max_usd == 2.0
    assert gate.held == {"a": 0.5}  # its own cap stops it first: the rest stays free
    other = gate.admit("b", waiting=1)
    assert other is not None and other.max_usd == pytest.approx(1.5)


def test_nothing_starts_once_the_budget_is_spent_or_held() -> None:
    gate = BudgetGate(Spend(1.0), slots=2)
    assert gate.admit("a", waiting=1) is not None
    assert gate.admit("b", waiting=1) is None  # all of it is held by a
    gate.spend.at_least(1.2)
    gate.release("a")
    assert gate.admit("b", waiting=1) is None and gate.in_flight == 0


def test_a_share_travels_with_its_job_and_says_whose_budget_it_is() -> None:
    share = Spend(2.0).share(0.5)
    shipped = pickle.loads(pickle.dumps(share))
    shipped.charge(0.6)
    assert shipped.exhausted() and shipped.whole == 2.0
    assert shipped.reason() == (
        "cost budget of $2.00: this job's share of it, $0.50, is spent ($0.60 spent)"
    )


class RemoteWork:
    """Jobs as on other machines: each takes a copy of its budget as it starts (Ray ships
    it then) and charges only that copy, making up to `calls` model calls of CALL_USD, each
    started only while the copy is not spent, as the agent loop does."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.shares: dict[str, float | None] = {}
        self.lock = threading.Lock()

    def __call__(self, job: BatchJob) -> Callable[[], JobOutcome]:
        def run() -> JobOutcome:
            spend = pickle.loads(pickle.dumps(job.payload.limits.spend))
            with self.lock:
                self.shares[job.key] = spend.max_usd
            made = 0
            while made < self.calls and not spend.exhausted():
                spend.charge(CALL_USD)
                made += 1
            stopped = made < self.calls
            usage = Usage(CALL.input_tokens * made, 0)
            check = validate_plan(VALID_PLAN, sections=[], workspace=job.payload.workspace)
            status = PlanStatus.BUDGET if stopped else PlanStatus.COMPLETE
            result = PlanResult(
                job.label, "Plan", MODEL, status, spend.reason() if stopped else "", None,
                VALID_PLAN, check, [], made, 0, usage, 0.1,
            )  # fmt: skip
            document = render_document({"status": status.value, "valid": result.valid}, VALID_PLAN)
            return JobOutcome(job.key, result, document, "")

        return run


def remote_batch(
    tmp_path: Path, work: RemoteWork, budget: float, gated: bool, synthesis: bool = False
) -> BatchDriver:
    """Two tasks of two perspectives each, two at once, under BUDGET (without syntheses
    unless asked: most tests are about the plans' jobs)."""
    text = (
        "defaults: {repo: repo, perspectives: [a, b]}\n"
        "tasks:\n  - {id: t1, requirements: r}\n  - {id: t2, requirements: s}\n"
    )
    batch = load_batch_file(write(tmp_path / "batch.yaml", text))
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    prepared = prepare_tasks(batch, batch.tasks, None, lambda _: None, synthesis=synthesis)
    jobs = decide_all(batch_jobs(prepared, out), out)
    return BatchDriver(
        "b", out, jobs, ThreadExecutor(2), work, scratch=tmp_path / "scratch",
        spend=Spend(budget), remote_slots=2 if gated else None,
    )  # fmt: skip


def spent(driver: BatchDriver) -> float:
    return sum(record.cost_usd or 0.0 for record in Ledger(driver.out_dir).read())


def test_remote_jobs_end_at_most_one_call_each_above_the_budget(
    tmp_path: Path, sample_repo: Path
) -> None:
    budget = 3.4 * CALL_USD  # each job would make 4 calls: 16 in all
    work = RemoteWork(calls=4)
    driver = remote_batch(tmp_path, work, budget, gated=True)
    assert driver.run().exit_code == 1
    assert spent(driver) <= budget + 2 * CALL_USD + 1e-9
    # The first two shared the budget; once they had spent it, the others never started.
    assert sorted(work.shares) == ["t1/a", "t1/b"]
    assert all(share == pytest.approx(budget / 2) for share in work.shares.values())
    records = {record.key: record for record in Ledger(driver.out_dir).read()}
    assert {key: record.status for key, record in records.items()} == dict.fromkeys(
        ["t1/a", "t1/b", "t2/a", "t2/b"], "budget"
    )
    assert "this job's share of it" in records["t1/a"].reason
    assert records["t2/a"].reason.startswith("not started: cost budget of")


def test_without_shares_remote_jobs_would_pass_the_budget_by_more(
    tmp_path: Path, sample_repo: Path
) -> None:
    # What the gate prevents: each job spends the whole budget as it stood when shipped.
    driver = remote_batch(tmp_path, RemoteWork(calls=4), 3.4 * CALL_USD, gated=False)
    driver.run()
    assert spent(driver) > 3.4 * CALL_USD + 2 * CALL_USD


def test_what_finished_jobs_leave_unspent_starts_the_next(
    tmp_path: Path, sample_repo: Path
) -> None:
    budget = 4.5 * CALL_USD  # each job makes one call: all four fit
    work = RemoteWork(calls=1)
    driver = remote_batch(tmp_path, work, budget, gated=True)
    assert driver.run().exit_code == 0
    assert sorted(work.shares) == ["t1/a", "t1/b", "t2/a", "t2/b"]
    assert spent(driver) == pytest.approx(4 * CALL_USD)
    # The later jobs got what the first two did not spend, never more than was left.
    assert work.shares["t1/a"] == pytest.approx(budget / 2)
    later = [share for key, share in work.shares.items() if key.startswith("t2/")]
    assert all(share is not None and share <= budget - CALL_USD for share in later)
    assert driver.gate is not None and driver.gate.in_flight == 0


def test_each_task_s_synthesis_runs_with_a_share_of_the_budget_too(
    tmp_path: Path, sample_repo: Path
) -> None:
    budget = 6.5 * CALL_USD  # four plans and two syntheses of one call each: all fit
    work = RemoteWork(calls=1)
    driver = remote_batch(tmp_path, work, budget, gated=True, synthesis=True)
    assert driver.run().exit_code == 0
    syntheses = ["t1/recommended", "t2/recommended"]
    assert sorted(work.shares) == sorted(["t1/a", "t1/b", "t2/a", "t2/b", *syntheses])
    assert all(0 < (work.shares[key] or 0) <= budget for key in syntheses)
    assert spent(driver) <= budget
