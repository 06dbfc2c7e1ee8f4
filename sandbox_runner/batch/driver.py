"""The batch driver: runs the jobs on an executor and is the only writer of the output
directory (plans, ledger, reports, summary), committing each job as it finishes."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sandbox_runner.batch.budget_gate import BudgetGate
from sandbox_runner.batch.commit import adopted_record, commit, write_task_report
from sandbox_runner.batch.directory import SCRATCH
from sandbox_runner.batch.events import BatchEvents, BatchOutcome, NoEvents
from sandbox_runner.batch.job import JobOutcome, budget_outcome, not_started
from sandbox_runner.batch.ledger import Ledger, LedgerRecord
from sandbox_runner.batch.resume import RUNS, Action
from sandbox_runner.batch.salvage import salvage_scratch
from sandbox_runner.batch.setup import BatchJob, task_dir
from sandbox_runner.batch.summary import (
    JobRow,
    earlier_wall_seconds,
    summary_document,
    write_summary,
)
from sandbox_runner.batch.synthesis import (
    TaskPlans,
    decide_synthesis,
    synthesis_job,
    synthesis_key,
    synthesis_outcome,
    tasks_of,
    with_sources,
)
from sandbox_runner.batch.workspace_check import WorkspaceCheck, not_compared_yet, summary_entry
from sandbox_runner.plans.results import PlanResult, Synthesis
from sandbox_runner.runs.attempts import AttemptNote, earlier_attempt, move_aside
from sandbox_runner.runs.executor import Announced, Executor
from sandbox_runner.runs.synthesis_step import SYNTHESIS_LABEL
from sandbox_runner.runs.workspace import GitStatusRunner
from sandbox_runner.runs.workspace_check import RepositoryTrees, WorkspaceComparison
from sandbox_runner.spend import Spend

EXIT_OK, EXIT_FAILED, EXIT_WORKSPACE_CHANGED, EXIT_INTERRUPTED = 0, 1, 3, 130
GOING_ON = "goes on with its earlier conversation"
INTERRUPT_GRACE_SECONDS = 1.0
WorkFor = Callable[[BatchJob], Callable[[], JobOutcome]]
"""Turns a job into the unit of work an executor runs (engine-specific)."""


@dataclass
class BatchDriver:
    """One run of a batch over its jobs (decided already; see setup.decide_all)."""

    name: str
    out_dir: Path
    jobs: list[BatchJob]
    executor: Executor
    work_for: WorkFor
    events: BatchEvents = field(default_factory=NoEvents)
    stop_sandboxes: Callable[[], object] = lambda: None
    on_stop: Callable[[], object] = lambda: None
    scratch: Path | None = None
    """Where this machine's jobs keep their files while they run (None: out_dir/.scratch)."""
    git_for: Callable[[Path], GitStatusRunner | None] = lambda path: None
    """How `git status` of a repository is taken (None: the check compares files only)."""
    spend: Spend | None = None
    """The batch's cost budget, over every attempt of every job (the ledger's costs count)."""
    remote_slots: int | None = None
    """Jobs run on other machines, each charging its own copy of the budget, at most this
    many at once: a budget is then held by a BudgetGate (None: jobs charge `spend`)."""
    gate: BudgetGate | None = field(init=False, default=None)
    retry_failed: bool = False
    """Whether a synthesis that failed for good runs again (the plans' jobs are decided)."""
    trees: RepositoryTrees = field(default_factory=RepositoryTrees)
    """The repositories' trees walked already (to key the jobs): the check starts from them."""
    checks: dict[Path, WorkspaceComparison] = field(default_factory=dict)
    ledger: Ledger = field(init=False)
    records: dict[str, LedgerRecord] = field(init=False)
    committed: dict[str, PlanResult] = field(default_factory=dict)
    """The results this run committed, by job key: its reports need not read them back."""
    attempts: dict[str, int] = field(init=False)
    running: set[str] = field(default_factory=set)
    tasks: dict[str, TaskPlans] = field(init=False)
    syntheses: dict[str, BatchJob] = field(default_factory=dict)
    """Each task's synthesis job as this run decided it, by task id (none: not yet, or
    the task has none)."""
    futures: dict[Future[JobOutcome], BatchJob] = field(default_factory=dict)
    pending: set[Future[JobOutcome]] = field(default_factory=set)
    waiting: list[BatchJob] = field(default_factory=list)
    """Jobs to run that the budget has not let start yet (all are submitted without one)."""
    ledger_cost: float = field(init=False)
    """What every attempt the ledger records cost, earlier runs of the batch included."""
    started: float = field(default_factory=time.monotonic)
    earlier_wall_seconds: float = field(init=False)
    """The wall time of this batch's earlier runs: the summary adds up every run."""

    def __post_init__(self) -> None:
        self.earlier_wall_seconds = earlier_wall_seconds(self.out_dir)
        self.tasks = tasks_of(self.jobs)
        self.ledger = Ledger(self.out_dir)
        found = self.ledger.last_by_key()
        self.records = {key: record for key, (record, _) in found.items()}
        self.attempts = {key: count for key, (_, count) in found.items()}
        self.ledger_cost = sum(record.cost_usd or 0.0 for record in self.ledger.read())
        if self.spend is not None:
            self.spend.at_least(self.ledger_cost)
        if self.spend is not None and self.spend.max_usd is not None and self.remote_slots:
            self.gate = BudgetGate(self.spend, self.remote_slots)

    def run(self) -> BatchOutcome:
        """Run every job that is to run, and each task's synthesis once its plans are done;
        Ctrl-C (KeyboardInterrupt) ends it with 130."""
        self._tidy()
        # Every repository, those of tasks with nothing left to run too: after a resume
        # each task's report says what this run's check found, not an older run's.
        workspaces = WorkspaceCheck(self.out_dir, self.git_for, self.trees)
        before = workspaces.before(job.payload.workspace for job in self.jobs)
        for job in self.jobs:
            self._set_aside(job)
        self._report_missing()
        for job in self.jobs:
            self._go_on(job)
        self._write_summary(None, "running")
        self.waiting = [job for job in self.jobs if job.decision.action in RUNS]
        interrupted = False
        try:
            for task_id in self.tasks:
                self._synthesise(task_id)  # tasks whose plans were all done before
            while self.waiting or self.pending:
                self._submit_waiting()
                if not self.pending:
                    # Nothing may start, and no job in flight can give any budget back.
                    self._not_started()
                    continue
                done, self.pending = wait(self.pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in done:
                    self._finish(self.futures[future], future)
        except (KeyboardInterrupt, SystemExit):
            interrupted = True
            self._interrupt(self.futures)
        problem = ""
        if not interrupted:
            # Every task's report says what the comparison of its repository found.
            self.checks = workspaces.compare(before)
            problem = "; ".join(c.problem for c in self.checks.values() if c.problem)
            for task_id in self.tasks:
                self._task_report(task_id)
        code = self._exit_code(interrupted, problem)
        summary = self._write_summary(code, "interrupted" if interrupted else "finished")
        return BatchOutcome(code, summary, interrupted)

    def _submit_waiting(self) -> None:
        """Submit the waiting jobs the budget lets start (all of them without a gate), each
        with its budget: the batch's own, or its share of it. Those submitted leave WAITING."""
        while self.waiting:
            job = self.waiting[0]
            spend = self.spend
            if self.gate is not None:
                own_cap = job.payload.limits.max_cost_usd
                spend = self.gate.admit(job.key, len(self.waiting), own_cap)
                if spend is None:
                    break
            self.waiting.pop(0)
            self._submit(job, spend)

    def _submit(self, job: BatchJob, spend: Spend | None) -> None:
        """Give a job its budget and hand it to the executor."""
        limits = replace(job.payload.limits, spend=spend)
        job.payload = replace(job.payload, limits=limits)
        future = self.executor.submit(job.key, self._started(job))
        self.futures[future] = job
        self.pending.add(future)

    def _not_started(self) -> None:
        """Record the waiting jobs the spent budget keeps from starting (status budget)."""
        assert self.spend is not None  # only a budget keeps a job waiting
        jobs, self.waiting = self.waiting, []
        for job in jobs:
            future: Future[JobOutcome] = Future()
            future.set_result(budget_outcome(job.payload, self.spend))
            self._finish(job, future)

    def _synthesise(self, task_id: str) -> None:
        """Decide a task's synthesis once every plan of it has finished in this run (or
        before), and queue it when it is to run: once per run."""
        plans = self.tasks[task_id]
        if (
            self.executor.cancelled.is_set()
            or task_id in self.syntheses
            or any(self._unsettled(job) for job in plans.jobs)
        ):
            return
        job = synthesis_job(plans, self.records)
        if job is None:
            return
        last, count = self.records.get(job.key), self.attempts.get(job.key, 0)
        job.decision = decide_synthesis(
            job, last, count, self.out_dir, retry_failed=self.retry_failed
        )
        job.payload = replace(job.payload, attempt=job.decision.attempt)
        self.syntheses[task_id] = job
        self._set_aside(job)
        if job.decision.action not in RUNS:
            return
        made = with_sources(job, plans, self.records, self.committed, self.out_dir)
        if not isinstance(made, BatchJob):
            del self.syntheses[task_id]  # a plan no longer passes its check: the report says so
            return
        self._go_on(made)
        self.events.job_queued(made.key)
        limits = replace(made.payload.limits, spend=self.spend)
        if (skipped := not_started(replace(made.payload, limits=limits))) is not None:
            # Not even shipped: the budget is spent (a resume with a higher one runs it).
            self._commit(made, skipped)
        else:
            self.waiting.append(made)
        self._write_summary(None, "running")

    def _unsettled(self, job: BatchJob) -> bool:
        """Whether a plan job has yet to finish in this run (or has no current record)."""
        record = self.records.get(job.key)
        if record is None or record.fingerprint != job.fingerprint:
            return True
        return job.decision.action in RUNS and record.attempt < job.decision.attempt

    def _started(self, job: BatchJob) -> Announced[JobOutcome]:
        """The job's work; marking it running stays here (a remote engine ships only work)."""

        def started() -> None:
            self.running.add(job.key)
            going_on = job.payload.earlier is not None
            self.events.job_started(job.key, GOING_ON if going_on else "")

        return Announced(self.work_for(job), started)

    def _finish(self, job: BatchJob, future: Future[JobOutcome]) -> None:
        self.running.discard(job.key)
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            from sandbox_runner.runs.plan_job import failed_result

            reason = f"the engine gave up: {type(error).__name__}: {error}"
            outcome = JobOutcome(job.key, failed_result(job.payload.job, "", reason), None, "")
            self._commit(job, outcome, status="error")
        else:
            self._commit(job, future.result())
        self._synthesise(job.payload.task_id)

    def _commit(self, job: BatchJob, outcome: JobOutcome, status: str = "") -> None:
        """Commit a job's files and its ledger line, then rewrite its task's report."""
        record, committed = commit(job, outcome, self.out_dir)
        record = replace(record, status=status or record.status)
        self.committed[job.key] = committed
        self._record(record)
        if self.gate is not None:
            self.gate.release(job.key)
        self.events.job_finished(job.key, record.status, record.cost_usd)
        self._task_report(job.payload.task_id)
        self._write_summary(None, "running")

    def _record(self, record: LedgerRecord) -> None:
        self.ledger_cost += record.cost_usd or 0.0
        if self.spend is not None:
            # A job in another process (Ray) charged its own copy of the budget; one in
            # this process charged this one as it ran, so this changes nothing for it.
            self.spend.at_least(self.ledger_cost)
        self.ledger.append(record)
        self.records[record.key] = record
        self.attempts[record.key] = self.attempts.get(record.key, 0) + 1

    def _interrupt(self, futures: dict[Future[JobOutcome], BatchJob]) -> None:
        """Keep what finished before the signal; the rest stays pending for the next run."""
        finished_before = [f for f in futures if f.done() and not f.cancelled()]
        self.executor.cancel()
        self.on_stop()
        self.stop_sandboxes()
        for future in finished_before:
            if self._unrecorded(futures[future]):
                self._finish(futures[future], future)
        wait(list(futures), timeout=INTERRUPT_GRACE_SECONDS)
        self.running.clear()

    def _unrecorded(self, job: BatchJob) -> bool:
        record = self.records.get(job.key)
        return record is None or record.attempt < job.decision.attempt

    def _set_aside(self, job: BatchJob) -> None:
        """Move the files of a job's earlier attempt aside, or adopt its committed plan."""
        decision = job.decision
        directory = task_dir(self.out_dir, job.payload.task_id)
        if decision.move_aside:
            previous = max(decision.attempt - 1, 1)
            tag = f"superseded-{previous}" if decision.action is Action.REDO else str(previous)
            move_aside(directory, job.label, tag, self._note(job))
        if decision.action is Action.ADOPT:
            self._record(adopted_record(job, self.out_dir))
            self._task_report(job.payload.task_id)

    def _report_missing(self) -> None:
        for task_id in self.tasks:
            # The driver may have died between a task's last ledger line and its report.
            if not (task_dir(self.out_dir, task_id) / "report.json").exists():
                self._task_report(task_id)

    def _note(self, job: BatchJob) -> AttemptNote:
        """What is known of the attempt whose files a job moves aside: a failed attempt
        recorded as resumable may be gone on with."""
        record = self.records.get(job.key)
        if record is None or job.decision.action is not Action.RETRY:
            return AttemptNote(job.fingerprint, False, "set aside unrecorded")
        return AttemptNote(
            record.fingerprint, record.result.get("resumable") is True, record.reason
        )

    def _go_on(self, job: BatchJob) -> None:
        """A job about to run goes on with the conversation of its newest attempt, when
        that stopped for a reason outside it (interrupted, the API, the sandbox)."""
        if job.decision.action is Action.REDO or job.decision.action not in RUNS:
            return
        directory = task_dir(self.out_dir, job.payload.task_id)
        earlier = earlier_attempt(directory, job.label, job.fingerprint)
        if earlier is not None:
            job.payload = replace(job.payload, earlier=earlier)

    def _task_report(self, task_id: str) -> None:
        """Rewrite a task's report once every job of it has a record."""
        plans, synthesis = self.tasks[task_id], self.syntheses.get(task_id)
        jobs = plans.jobs
        for job in jobs:
            record = self.records.get(job.key)
            if record is None or record.fingerprint != job.fingerprint:
                return
        workspace = jobs[0].payload.workspace
        check = self.checks.get(workspace) or not_compared_yet()
        records, committed, out_dir = self.records, self.committed, self.out_dir

        def synthesis_of(results: list[PlanResult]) -> Synthesis:
            return synthesis_outcome(plans, results, synthesis, records, committed, out_dir)

        task = jobs[0].task
        write_task_report(task, jobs, records, committed, out_dir, check, synthesis_of)

    def rows(self) -> list[JobRow]:
        """The summary's row of every job, in batch-file order, each task's synthesis
        after its plans."""
        rows = []
        for task_id, plans in self.tasks.items():
            synthesis = self.syntheses.get(task_id)
            for job in [*plans.jobs, *([synthesis] if synthesis is not None else [])]:
                running, attempts = job.key in self.running, self.attempts.get(job.key, 0)
                record = self.records.get(job.key)
                rows.append(JobRow.of(job, record, running, attempts, synthesis=job is synthesis))
        return rows

    def _write_summary(self, exit_code: int | None, state: str) -> dict[str, Any]:
        keys = {job.key for job in self.jobs} | {synthesis_key(task) for task in self.tasks}
        document = summary_document(
            self.name,
            self.out_dir,
            self.rows(),
            exit_code=exit_code,
            state=state,
            not_in_batch=sorted(set(self.records) - keys),
            wall_seconds=time.monotonic() - self.started,
            earlier_wall_seconds=self.earlier_wall_seconds,
            workspaces=[summary_entry(path, check) for path, check in self.checks.items()],
        )
        write_summary(self.out_dir, document)
        return document

    def _exit_code(self, interrupted: bool, workspace_problem: str) -> int:
        if interrupted:
            return EXIT_INTERRUPTED
        if workspace_problem:
            return EXIT_WORKSPACE_CHANGED
        # A synthesis that failed never fails its task: the plans stand.
        statuses = [row.status for row in self.rows() if not row.synthesis]
        return EXIT_OK if all(status == "complete" for status in statuses) else EXIT_FAILED

    def _tidy(self) -> None:
        """Remove what a dead driver left half-written (temporary files); keep the
        conversations of the jobs it had in flight, to go on with."""
        for stale in self.out_dir.glob(".tmp-*"):
            stale.unlink(missing_ok=True)
        jobs = {
            job.key: (task_dir(self.out_dir, job.payload.task_id), job.label) for job in self.jobs
        }
        for task_id in self.tasks:
            jobs[synthesis_key(task_id)] = (task_dir(self.out_dir, task_id), SYNTHESIS_LABEL)
        salvage_scratch(self.scratch or self.out_dir / SCRATCH, jobs)
