"""The batch driver: runs the jobs on an executor and is the only writer of the output
directory (plans, ledger, reports, summary), committing each job as it finishes."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from sandbox_runner.batch.commit import adopted_record, commit, write_task_report
from sandbox_runner.batch.directory import SCRATCH
from sandbox_runner.batch.job import JobOutcome
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
from sandbox_runner.plans.results import PlanResult
from sandbox_runner.runs.attempts import AttemptNote, earlier_attempt, move_aside
from sandbox_runner.runs.executor import Announced, Executor
from sandbox_runner.runs.workspace import GitStatusRunner
from sandbox_runner.runs.workspace_check import (
    BeforeCheck,
    RepositoryTrees,
    WorkspaceComparison,
    take_after,
)
from sandbox_runner.spend import Spend

EXIT_OK, EXIT_FAILED, EXIT_WORKSPACE_CHANGED, EXIT_INTERRUPTED = 0, 1, 3, 130
GOING_ON = "goes on with its earlier conversation"
NO_GIT_NOTE = "it is not taken here (the jobs ran on other machines)"
NOT_COMPARED_YET = (
    "nothing was compared yet: the check runs when the batch ends, and a batch that was "
    "stopped does not compare"
)
INTERRUPT_GRACE_SECONDS = 1.0
WorkFor = Callable[[BatchJob], Callable[[], JobOutcome]]
"""Turns a job into the unit of work an executor runs (engine-specific)."""


class BatchEvents(Protocol):
    """Job-level progress: what the driver tells the display."""

    def job_started(self, key: str, note: str = "") -> None: ...

    def job_finished(self, key: str, status: str, cost_usd: float | None) -> None: ...


class NoEvents:
    """Progress that shows nothing (--json, tests, benchmarks)."""

    def job_started(self, key: str, note: str = "") -> None:
        pass

    def job_finished(self, key: str, status: str, cost_usd: float | None) -> None:
        pass


@dataclass
class BatchOutcome:
    """How a batch run ended."""

    exit_code: int
    summary: dict[str, Any]
    interrupted: bool = False


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
    trees: RepositoryTrees = field(default_factory=RepositoryTrees)
    """The repositories' trees walked already (to key the jobs): the check starts from them."""
    checks: dict[Path, WorkspaceComparison] = field(default_factory=dict)
    ledger: Ledger = field(init=False)
    records: dict[str, LedgerRecord] = field(init=False)
    committed: dict[str, PlanResult] = field(default_factory=dict)
    """The results this run committed, by job key: its reports need not read them back."""
    attempts: dict[str, int] = field(init=False)
    running: set[str] = field(default_factory=set)
    ledger_cost: float = field(init=False)
    """What every attempt the ledger records cost, earlier runs of the batch included."""
    started: float = field(default_factory=time.monotonic)
    earlier_wall_seconds: float = field(init=False)
    """The wall time of this batch's earlier runs: the summary adds up every run."""

    def __post_init__(self) -> None:
        self.earlier_wall_seconds = earlier_wall_seconds(self.out_dir)
        self.ledger = Ledger(self.out_dir)
        found = self.ledger.last_by_key()
        self.records = {key: record for key, (record, _) in found.items()}
        self.attempts = {key: count for key, (_, count) in found.items()}
        self.ledger_cost = sum(record.cost_usd or 0.0 for record in self.ledger.read())
        if self.spend is not None:
            self.spend.at_least(self.ledger_cost)

    def run(self) -> BatchOutcome:
        """Run every job that is to run; Ctrl-C (KeyboardInterrupt) ends it with 130."""
        self._tidy()
        before = self._before()
        self._set_aside_and_adopt()
        self._go_on_where_possible()
        self._write_summary(None, "running")
        to_run = [job for job in self.jobs if job.decision.action in RUNS]
        for job in to_run:
            limits = replace(job.payload.limits, spend=self.spend)
            job.payload = replace(job.payload, limits=limits)
        futures: dict[Future[JobOutcome], BatchJob] = {}
        interrupted = False
        try:
            for job in to_run:
                futures[self.executor.submit(job.key, self._started(job))] = job
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in done:
                    self._finish(futures[future], future)
        except (KeyboardInterrupt, SystemExit):
            interrupted = True
            self._interrupt(futures)
        problem = ""
        if not interrupted:
            # Every task's report says what the comparison of its repository found.
            self.checks = self._compare(before)
            problem = "; ".join(c.problem for c in self.checks.values() if c.problem)
            for task_id in dict.fromkeys(job.payload.task_id for job in self.jobs):
                self._task_report(task_id)
        code = self._exit_code(interrupted, problem)
        summary = self._write_summary(code, "interrupted" if interrupted else "finished")
        return BatchOutcome(code, summary, interrupted)

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
            record, committed = commit(job, outcome, self.out_dir)
            record = replace(record, status="error")
        else:
            record, committed = commit(job, future.result(), self.out_dir)
        self.committed[job.key] = committed
        self._record(record)
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

    def _set_aside_and_adopt(self) -> None:
        for job in self.jobs:
            decision = job.decision
            directory = task_dir(self.out_dir, job.payload.task_id)
            if decision.move_aside:
                previous = max(decision.attempt - 1, 1)
                tag = f"superseded-{previous}" if decision.action is Action.REDO else str(previous)
                move_aside(directory, job.label, tag, self._note(job))
            if decision.action is Action.ADOPT:
                self._record(adopted_record(job, self.out_dir))
                self._task_report(job.payload.task_id)
        for task_id in dict.fromkeys(job.payload.task_id for job in self.jobs):
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

    def _go_on_where_possible(self) -> None:
        """A job about to run goes on with the conversation of its newest attempt, when
        that stopped for a reason outside it (interrupted, the API, the sandbox)."""
        for job in self.jobs:
            if job.decision.action is Action.REDO or job.decision.action not in RUNS:
                continue
            directory = task_dir(self.out_dir, job.payload.task_id)
            earlier = earlier_attempt(directory, job.label, job.fingerprint)
            if earlier is not None:
                job.payload = replace(job.payload, earlier=earlier)

    def _task_report(self, task_id: str) -> None:
        """Rewrite a task's report once every job of it has a record."""
        jobs = [job for job in self.jobs if job.payload.task_id == task_id]
        for job in jobs:
            record = self.records.get(job.key)
            if record is None or record.fingerprint != job.fingerprint:
                return
        workspace = jobs[0].payload.workspace
        check = self.checks.get(workspace) or WorkspaceComparison("", "none", NOT_COMPARED_YET)
        task = jobs[0].task
        write_task_report(task, jobs, self.records, self.committed, self.out_dir, check)

    def rows(self) -> list[JobRow]:
        """The summary's row of every job, in batch-file order."""
        rows = []
        for job in self.jobs:
            record = self.records.get(job.key)
            current = record is not None and record.fingerprint == job.fingerprint
            if job.key in self.running:
                status = "running"
            elif current and record is not None:
                status = record.status
            else:
                status = "pending"
            attempts = self.attempts.get(job.key, 0)
            rows.append(JobRow(job.key, job.payload.job.perspective, status, attempts, record))
        return rows

    def _write_summary(self, exit_code: int | None, state: str) -> dict[str, Any]:
        keys = {job.key for job in self.jobs}
        document = summary_document(
            self.name,
            self.out_dir,
            self.rows(),
            exit_code=exit_code,
            state=state,
            not_in_batch=sorted(set(self.records) - keys),
            wall_seconds=time.monotonic() - self.started,
            earlier_wall_seconds=self.earlier_wall_seconds,
            workspaces=[_check_entry(path, check) for path, check in self.checks.items()],
        )
        write_summary(self.out_dir, document)
        return document

    def _exit_code(self, interrupted: bool, workspace_problem: str) -> int:
        if interrupted:
            return EXIT_INTERRUPTED
        if workspace_problem:
            return EXIT_WORKSPACE_CHANGED
        statuses = [row.status for row in self.rows()]
        return EXIT_OK if all(status == "complete" for status in statuses) else EXIT_FAILED

    def _before(self) -> dict[Path, BeforeCheck]:
        """Each repository's state as the batch starts: the tree walked when the jobs were
        keyed (or walked now), and its `git status` taken in the background."""
        before: dict[Path, BeforeCheck] = {}
        for job in self.jobs:
            # Every repository, those of tasks with nothing left to run too: after a resume
            # each task's report says what this run's check found, not an older run's.
            path = job.payload.workspace
            if path not in before:
                exclude = self._exclude(path)
                before[path] = BeforeCheck(
                    path,
                    exclude,
                    self.git_for(path),
                    git_missing=NO_GIT_NOTE,
                    files=self.trees.get(path),
                )
        return before

    def _compare(self, before: dict[Path, BeforeCheck]) -> dict[Path, WorkspaceComparison]:
        """What changed in each repository since the batch started, and how it was compared."""
        checks = {}
        for path, check in before.items():
            state = check.settle()
            after = take_after(
                state, path, self._exclude(path), self.git_for(path), git_missing=NO_GIT_NOTE
            )
            checks[path] = state.compare(after)
        return checks

    def _exclude(self, workspace: Path) -> Path | None:
        return self.out_dir if self.out_dir.is_relative_to(workspace) else None

    def _tidy(self) -> None:
        """Remove what a dead driver left half-written (temporary files); keep the
        conversations of the jobs it had in flight, to go on with."""
        for stale in self.out_dir.glob(".tmp-*"):
            stale.unlink(missing_ok=True)
        jobs = {
            job.key: (task_dir(self.out_dir, job.payload.task_id), job.label) for job in self.jobs
        }
        salvage_scratch(self.scratch or self.out_dir / SCRATCH, jobs)


def _check_entry(repository: Path, check: WorkspaceComparison) -> dict[str, Any]:
    """A repository's workspace check as summary.json gives it."""
    return {
        "repository": str(repository),
        "check": check.check,
        "problem": check.problem,
        "note": check.note,
        "changed_paths": list(check.changed),
        "changed_more": check.changed_more,
        "check_ms": check.timings_ms,
    }
