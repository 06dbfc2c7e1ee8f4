"""A batch from its file to its summary, the entry point `planrun batch` calls: the tasks
prepared, the directory locked, the jobs decided, the engine (local or Ray) set up for the
jobs to run, the driver run; a dry run and a batch's status beside it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.batch.budget import batch_spend, check_budget, spent_earlier
from sandbox_runner.batch.directory import open_batch_dir, record_run, scratch_root
from sandbox_runner.batch.driver import BatchDriver
from sandbox_runner.batch.engines import (
    BatchHost,
    local_engine,
    ray_engine,
    require_ray,
    stdout_to_stderr,
)
from sandbox_runner.batch.events import BatchEvents, BatchOutcome, NoEvents
from sandbox_runner.batch.ledger import Ledger, batch_lock
from sandbox_runner.batch.resume import RUNS, Action, Decision
from sandbox_runner.batch.salvage import would_go_on
from sandbox_runner.batch.setup import (
    BatchJob,
    PreparedTask,
    batch_jobs,
    decide_all,
    prepare_tasks,
    select_tasks,
    task_dir,
)
from sandbox_runner.batch.summary import read_status
from sandbox_runner.batch.synthesis import planned_syntheses, synthesis_estimate, tasks_of
from sandbox_runner.batch.tasks_file import BatchFile, load_batch_file
from sandbox_runner.errors import ConfigError
from sandbox_runner.model import check_model_options
from sandbox_runner.plans.history import batches_dir, remember_run
from sandbox_runner.runs.estimate import PlanEstimate, estimate_plan
from sandbox_runner.runs.preflight import AccessCheck, preflight
from sandbox_runner.runs.prepare import Warn
from sandbox_runner.runs.workspace_check import RepositoryTrees
from sandbox_runner.spend import Spend

BATCH_MODEL_HINT = "set it with the task's `model`, or planning_model in the config"
"""How a task's model is chosen, said when the API does not know it."""


@dataclass(frozen=True)
class BatchOptions:
    """What `planrun batch FILE` is asked to do: its flags."""

    file: Path
    """The batch file (YAML or JSONL)."""
    out_dir: Path | None = None
    """The batch directory (--out); None: a new one under batches/."""
    engine: Literal["local", "ray"] = "local"
    address: str | None = None
    """The Ray cluster's address (--address); None: RAY_ADDRESS."""
    parallel: int | None = None
    """Jobs running at once; None: the settings' `parallel`."""
    retry_failed: bool = False
    """Run failed jobs again (their old attempt is kept)."""
    redo: tuple[str, ...] = ()
    """Task ids to run again although they changed."""
    only: str | None = None
    """A regular expression: only the tasks whose id matches it."""
    allow_web: tuple[str, ...] = ()
    """Hosts the web tools may reach, besides the `web` setting's (--allow-web)."""
    scratch: bool = False
    """Every task's commands may write, into a throw-away layer (`--scratch`)."""
    image: str | None = None
    """Every task's sandboxes run on this toolchain image (`--image`); None: the configured
    one."""
    budget: Mapping[str, object] = field(default_factory=dict)
    """The cost caps the flags set (`max_cost_usd` for the whole batch, across its jobs and
    runs; `max_cost_usd_per_plan` for each job)."""
    synthesis: bool = True
    """Merge each task's valid plans into a recommended plan (False: `--no-synthesis`)."""


@dataclass(frozen=True)
class BatchStart:
    """What a batch is about to do, once its jobs are decided."""

    name: str
    out_dir: Path
    to_run: int
    skipped: int
    """Jobs done or skipped earlier."""
    syntheses: int = 0
    """Syntheses that may join the jobs to run (a task's runs once its plans are done, if
    two or more are valid); not in `to_run`."""


class BatchWatch(BatchEvents, Protocol):
    """A display of a running batch, shown from enter to exit: the driver's job events,
    and the agent events of the local engine's jobs."""

    def agent_event(self, key: str, event: AgentEvent) -> None: ...

    def stopping(self) -> None: ...

    def __enter__(self) -> object: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@dataclass(frozen=True)
class PlannedJob:
    """A job as a dry run reports it: what running the batch would do with it."""

    key: str
    action: Action
    goes_on: bool
    """Whether it would go on with an earlier conversation (see salvage.would_go_on)."""
    estimate: PlanEstimate | None = None
    """Its tokens and cost, estimated from its prompt (None: it would not run)."""
    when: str = ""
    """The condition it runs on ("" when none): a synthesis needs two valid plans."""

    @property
    def runs(self) -> bool:
        return self.action in RUNS

    def to_dict(self) -> dict[str, Any]:
        estimate = self.estimate.to_dict() if self.estimate is not None else None
        return {
            "key": self.key,
            "action": self.action.value,
            "goes_on": self.goes_on,
            "estimate": estimate,
            "when": self.when or None,
        }


def run_batch(
    options: BatchOptions,
    host: BatchHost,
    *,
    warn: Warn,
    watch: Callable[[BatchStart], BatchWatch | None] = lambda start: None,
) -> BatchOutcome:
    """Run (or resume) a batch: every job still to run, on the engine asked for; finished
    plans are never redone. `watch` is told what the batch is about to do, and may return
    a display of it.

    Raises:
        ConfigError: a bad batch file or option, a changed task, another driver of the
            same directory, no Docker, image, Ray or API key.
        PreflightError: (a ConfigError) the API refused the key or does not know a
            model, or no Docker engine answers, found before the batch directory is made.
    """
    batch_file, prepared = _prepared(options, warn)
    if options.engine == "local":
        # The API key is this machine's (with Ray, each node's own). It, the models and
        # Docker are checked before a batch directory is claimed.
        check_model_options(None, None, [], os.environ)
        models = [task.spec.model_id for task in prepared]
        preflight(host.docker, AccessCheck(models, BATCH_MODEL_HINT))
    out_dir = open_batch_dir(options.out_dir, _workspaces(prepared))
    with batch_lock(out_dir):
        trees = RepositoryTrees(seed=options.engine == "local")  # its sandboxes' seed
        jobs = decide_all(
            batch_jobs(prepared, out_dir, trees),
            out_dir,
            retry_failed=options.retry_failed,
            redo=options.redo,
        )
        spend = batch_spend(prepared)
        check_budget(out_dir, jobs, spend)
        record_run(out_dir, batch_file.path, batch_file.digest, options.engine)
        _remember(out_dir, prepared)
        with stdout_to_stderr() if options.engine == "ray" else contextlib.nullcontext():
            return _drive(options, host, warn, watch, out_dir, jobs, prepared, spend, trees)


@dataclass(frozen=True)
class DryRun:
    """What running a batch would do: each job, and the budget they would run under."""

    jobs: list[PlannedJob]
    max_cost_usd: float | None = None
    """The batch's budget (see batch_spend); None: no cap."""
    spent_usd: float = 0.0
    """What earlier runs of the batch spent of it."""


def dry_run(options: BatchOptions, *, warn: Warn) -> DryRun:
    """What running the batch would do with each job; nothing runs, nothing is written.

    Raises:
        ConfigError: a bad batch file or option, a changed task, no Ray for its engine.
    """
    _, prepared = _prepared(options, warn)
    requested = options.out_dir
    out_dir = requested.expanduser().resolve() if requested is not None else None
    jobs = batch_jobs(prepared, out_dir)
    going_on: set[str] = set()
    if out_dir is not None and out_dir.is_dir():
        jobs = decide_all(jobs, out_dir, retry_failed=options.retry_failed, redo=options.redo)
        going_on = _going_on(jobs, out_dir, [task.spec.workspace for task in prepared])
    syntheses = _syntheses(jobs, out_dir, options.retry_failed)
    planned = []
    for task_id, plans in tasks_of(jobs).items():
        for job in plans.jobs:
            estimate = _estimate(job)
            planned.append(PlannedJob(job.key, job.decision.action, job.key in going_on, estimate))
        if task_id in syntheses:
            synthesis, decision, when = syntheses[task_id]
            estimate = synthesis_estimate(plans) if decision.action in RUNS else None
            planned.append(PlannedJob(synthesis.key, decision.action, False, estimate, when))
    spend = batch_spend(prepared)
    return DryRun(planned, spend.max_usd if spend else None, spent_earlier(out_dir))


def _estimate(job: BatchJob) -> PlanEstimate | None:
    payload = job.payload
    if job.decision.action not in RUNS:
        return None
    return estimate_plan(payload.job, job.label, payload.model_id, payload.limits)


def batch_status(directory: Path) -> dict[str, Any]:
    """What a batch directory (or a batch's name under batches/) holds: counts by status,
    the failed jobs; no engine, no Docker.

    Raises:
        ConfigError: it is not a batch directory.
    """
    candidate = directory if directory.is_dir() else batches_dir() / str(directory)
    status = read_status(candidate.expanduser())
    if status is None:
        raise ConfigError(f"{directory} is not a batch directory (no summary.json, no ledger)")
    return status


def _prepared(options: BatchOptions, warn: Warn) -> tuple[BatchFile, list[PreparedTask]]:
    """The batch file, and its tasks (those --only chooses) prepared as `planrun plan` would."""
    batch_file = load_batch_file(options.file)
    tasks = select_tasks(batch_file, options.only)
    prepared = prepare_tasks(
        batch_file,
        tasks,
        options.parallel,
        warn,
        options.allow_web,
        scratch=options.scratch,
        image=options.image,
        budget=options.budget,
        synthesis=options.synthesis,
    )
    if options.engine == "ray":
        scratch_tasks = [task.task.id for task in prepared if task.spec.scratch]
        if scratch_tasks:
            raise ConfigError(
                f"scratch runs (task {scratch_tasks[0]!r}) are not available on Ray: its nodes' "
                "engines are not checked for the copy-on-write layer; use --engine local, or "
                "plan without --scratch (plan_commands: read-only)"
            )
        require_ray()
    return batch_file, prepared


def _workspaces(prepared: list[PreparedTask]) -> list[Path]:
    return sorted({task.spec.workspace for task in prepared})


def _drive(
    options: BatchOptions,
    host: BatchHost,
    warn: Warn,
    watch: Callable[[BatchStart], BatchWatch | None],
    out_dir: Path,
    jobs: list[BatchJob],
    prepared: list[PreparedTask],
    spend: Spend | None,
    trees: RepositoryTrees,
) -> BatchOutcome:
    to_run = [job for job in jobs if job.decision.action in RUNS]
    # The engine is set up for the syntheses that may run too: their tasks' sandboxes,
    # their repositories shipped (a task whose plans were all done before has no other job).
    syntheses = _syntheses(jobs, out_dir, options.retry_failed).values()
    may_synthesise = [job for job, decision, _ in syntheses if decision.action in RUNS]
    may_run = [*to_run, *may_synthesise]
    skipped = len(jobs) - len(to_run)
    display = watch(BatchStart(out_dir.name, out_dir, len(to_run), skipped, len(may_synthesise)))
    parallel = options.parallel or prepared[0].spec.parallel
    scratch = scratch_root(out_dir, _workspaces(prepared))
    with contextlib.ExitStack() as disconnect:
        if options.engine == "ray":
            engine = ray_engine(
                host, out_dir.name, may_run, out_dir, options.address, parallel, warn, disconnect
            )
        else:
            events = display.agent_event if display else None
            engine = local_engine(host, out_dir.name, may_run, scratch, parallel, events)
        driver = BatchDriver(
            out_dir.name,
            out_dir,
            jobs,
            engine.executor,
            engine.work_for,
            events=display or NoEvents(),
            stop_sandboxes=host.stop_sandboxes,
            on_stop=display.stopping if display else lambda: None,
            scratch=scratch,
            git_for=engine.git_for,
            spend=spend,
            remote_slots=engine.remote_slots,
            retry_failed=options.retry_failed,
            trees=trees,
        )
        with display or contextlib.nullcontext():
            return driver.run()


def _syntheses(
    jobs: list[BatchJob], out_dir: Path | None, retry_failed: bool
) -> dict[str, tuple[BatchJob, Decision, str]]:
    """What the batch would do with each task's synthesis (see planned_syntheses)."""
    found = Ledger(out_dir).last_by_key() if out_dir is not None and out_dir.is_dir() else {}
    records = {key: record for key, (record, _) in found.items()}
    attempts = {key: count for key, (_, count) in found.items()}
    tasks = tasks_of(jobs)
    return planned_syntheses(tasks, records, attempts, out_dir, retry_failed=retry_failed)


def _going_on(jobs: list[BatchJob], out_dir: Path, workspaces: list[Path]) -> set[str]:
    """The jobs that would go on with an earlier conversation (see salvage.would_go_on)."""
    records = Ledger(out_dir).last_by_key()
    scratch = scratch_root(out_dir, workspaces)
    keys = set()
    for job in jobs:
        if job.decision.action not in (Action.RUN, Action.RETRY):
            continue
        retry_resumable = None
        if job.decision.action is Action.RETRY:
            record = records.get(job.key, (None, 0))[0]
            retry_resumable = record is not None and record.result.get("resumable") is True
        directory = task_dir(out_dir, job.payload.task_id)
        if would_go_on(directory, job.label, job.fingerprint, retry_resumable, scratch):
            keys.add(job.key)
    return keys


def _remember(out_dir: Path, prepared: list[PreparedTask]) -> None:
    """Let `planrun plans list` find the batch's task directories."""
    if out_dir.parent == batches_dir():
        return
    for task in prepared:
        directory = task_dir(out_dir, task.task.id)
        if not directory.exists():
            directory.mkdir(parents=True)
            remember_run(directory)
