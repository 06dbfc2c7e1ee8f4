"""Before a batch starts: every task prepared and checked, every job keyed, fingerprinted and
given its resume decision. Nothing here starts a container or writes a file."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from sandbox_runner.batch.job import JobPayload
from sandbox_runner.batch.ledger import Ledger
from sandbox_runner.batch.resume import (
    Action,
    Decision,
    decide,
    fingerprint,
    plan_on_disk,
)
from sandbox_runner.batch.tasks_file import BatchFile, BatchFileError, BatchTask
from sandbox_runner.config import LoadedSettings
from sandbox_runner.errors import ConfigError, PlanrunError
from sandbox_runner.runs.prepare import PlanRequest, Warn, prepare
from sandbox_runner.runs.run_spec import PlanRunSpec
from sandbox_runner.runs.workspace_check import RepositoryTrees
from sandbox_runner.sandbox.host_walk import legacy_fingerprint

TASKS_DIR = "tasks"


class ChangedTaskError(ConfigError):
    """Tasks whose inputs changed since their plans were written (exit 2)."""

    def __init__(self, task_ids: list[str]) -> None:
        names = ", ".join(task_ids)
        super().__init__(
            f"task {names} changed since its plan was written; use a new --out, or "
            + " ".join(f"--redo {task_id}" for task_id in task_ids)
        )
        self.task_ids = task_ids


@dataclass
class PreparedTask:
    """A task of the batch file, prepared as `planrun plan` would prepare it."""

    task: BatchTask
    spec: PlanRunSpec
    settings: LoadedSettings
    """The settings its sandboxes and model are made with."""


@dataclass
class BatchJob:
    """One job (task x perspective): what to run and what to do with it this time."""

    payload: JobPayload
    task: PreparedTask
    fingerprint: str
    decision: Decision = field(default_factory=lambda: Decision(Action.RUN))
    earlier: Callable[[], str] | None = None
    """The fingerprint as a planrun before its walks went through find made it (the
    repository's digest made the earlier way): what its ledger may hold."""

    @property
    def key(self) -> str:
        return self.payload.key

    @property
    def label(self) -> str:
        return self.payload.label


def select_tasks(batch: BatchFile, only: str | None) -> list[BatchTask]:
    """The tasks whose id matches --only (all without it)."""
    if only is None:
        return list(batch.tasks)
    try:
        pattern = re.compile(only)
    except re.error as error:
        raise ConfigError(f"--only {only!r} is not a regular expression: {error}") from None
    chosen = [task for task in batch.tasks if pattern.search(task.id)]
    if not chosen:
        raise ConfigError(f"--only {only!r} matches no task id of {batch.path}")
    return chosen


def prepare_tasks(
    batch: BatchFile,
    tasks: list[BatchTask],
    parallel: int | None,
    warn: Warn,
    allow_web: Sequence[str] = (),
    *,
    scratch: bool = False,
    image: str | None = None,
    budget: Mapping[str, object] | None = None,
    synthesis: bool = True,
) -> list[PreparedTask]:
    """Prepare every task; the first bad one is an error naming it. Without SYNTHESIS
    (`--no-synthesis`), no task's plans are merged into a recommended plan.

    Raises:
        BatchFileError: a task's repository, perspectives, agent, template, context or
            overrides are wrong.
    """
    prepared = []
    for task in tasks:
        request = PlanRequest(
            requirements=task.requirements,
            repo=task.repo,
            perspectives=task.perspectives,
            agent=task.agent,
            model=task.model,
            template=task.template,
            context_files=task.context,
            parallel=parallel,
            overrides={
                **task.overrides,
                **({"plan_commands": "scratch"} if scratch else {}),
                **({"image": image} if image else {}),
                **(budget or {}),
            },
            allow_web=allow_web,
            synthesis=None if synthesis else False,
        )
        try:
            spec, settings = prepare(request, _prefixed(warn, task.id))
        except PlanrunError as error:
            raise BatchFileError(batch.path, str(error), task.id) from None
        if synthesis and not spec.synthesis and "synthesis" in task.overrides:
            # An override takes a flag's place; the report names the batch file instead.
            spec = replace(
                spec, synthesis_note=f"turned off by {batch.path.name} (the task's overrides)"
            )
        prepared.append(PreparedTask(task, spec, settings))
    return prepared


def _prefixed(warn: Warn, task_id: str) -> Warn:
    def say(message: object) -> None:
        warn(f"{task_id}: {message}")

    return say


def batch_jobs(
    tasks: list[PreparedTask], out_dir: Path | None, trees: RepositoryTrees | None = None
) -> list[BatchJob]:
    """Every job with its key and fingerprint (each repository's tree is walked once, and
    kept in `trees` for the batch's workspace check to start from)."""
    trees = trees or RepositoryTrees()
    earlier_digests: dict[Path, str] = {}

    def earlier(parts: dict[str, object], workspace: Path, exclude: Path | None) -> str:
        if workspace not in earlier_digests:
            earlier_digests[workspace] = legacy_fingerprint(workspace, exclude=exclude)
        return fingerprint({**parts, "repository": earlier_digests[workspace]})

    jobs = []
    for prepared_task in tasks:
        spec = prepared_task.spec
        workspace = spec.workspace
        exclude = out_dir if out_dir is not None and out_dir.is_relative_to(workspace) else None
        tree = trees.take(workspace, exclude).value
        agent = spec.agent
        settings = prepared_task.settings.settings
        for job in spec.jobs():
            parts: dict[str, object] = {
                "requirements": job.requirements,
                "context": job.context,
                "repository": tree.digest if tree is not None else None,
                "agent": [agent.name, agent.system_prompt, list(agent.tools)],
                "model": spec.model_id,
                "sections": job.sections,
                "perspective": job.perspective,
                "limits": [
                    spec.limits.max_turns,
                    spec.limits.max_output_tokens,
                    spec.limits.max_total_tokens,
                ],
                "allowed_tools": sorted(spec.allowed_tools or []),
            }
            if spec.web:
                parts["web"] = list(spec.web.entries)
            if job.scratch:
                parts["scratch"] = True  # its commands ran: not the same plan as without
            if settings.image:
                parts["image"] = settings.image  # another toolchain: another plan
            if job.memory:
                # The user's memory files lie outside the repository's tree fingerprint.
                parts["memory"] = hashlib.sha256(job.memory.encode("utf-8")).hexdigest()
            payload = JobPayload(
                key=f"{prepared_task.task.id}/{job.label}",
                task_id=prepared_task.task.id,
                job=job,
                workspace=workspace,
                model_id=spec.model_id,
                limits=spec.limits,
                allowed_tools=spec.allowed_tools,
                web=spec.web,
                api_timeout=settings.api_timeout,
                api_retries=settings.api_retries,
                fingerprint=fingerprint(parts),
            )
            recorded_earlier = functools.partial(earlier, parts, workspace, exclude)
            jobs.append(BatchJob(payload, prepared_task, payload.fingerprint,
                                 earlier=recorded_earlier))  # fmt: skip
    return jobs


def task_dir(out_dir: Path, task_id: str) -> Path:
    """The ordinary run directory of one task."""
    return out_dir / TASKS_DIR / task_id


def decide_all(
    jobs: list[BatchJob],
    out_dir: Path,
    *,
    retry_failed: bool = False,
    redo: Collection[str] = (),
) -> list[BatchJob]:
    """Give each job its resume decision from the ledger and the files on disk.

    Raises:
        ChangedTaskError: a recorded job's fingerprint differs and its task is not in redo.
        ConfigError: --redo names a task that is not in the batch.
    """
    unknown = sorted(set(redo) - {job.payload.task_id for job in jobs})
    if unknown:
        raise ConfigError(f"--redo {unknown[0]}: no such task in this batch (or not --only)")
    records = Ledger(out_dir).last_by_key()
    changed: list[str] = []
    for job in jobs:
        last, attempts = records.get(job.key, (None, 0))
        directory = task_dir(out_dir, job.payload.task_id)
        plan_file = directory / f"{job.label}.md"
        transcript = directory / f"{job.label}.transcript.jsonl"
        if last is not None and _recorded_earlier(job, last.fingerprint):
            job.fingerprint = last.fingerprint
            job.payload = replace(job.payload, fingerprint=last.fingerprint)
        settled = last is not None and last.complete and last.fingerprint == job.fingerprint
        redone = job.payload.task_id in redo
        # A complete job's plan is the recorded attempt's: its front matter need not be
        # parsed (10,000 finished jobs are decided in well under a second).
        disk = None if settled and not redone else plan_on_disk(plan_file)
        job.decision = decide(
            job.fingerprint,
            last,
            attempts,
            disk,
            leftovers=not settled and (plan_file.exists() or transcript.exists()),
            retry_failed=retry_failed,
            redo=job.payload.task_id in redo,
        )
        job.payload = replace(job.payload, attempt=job.decision.attempt)
        if job.decision.action is Action.REFUSED and job.payload.task_id not in changed:
            changed.append(job.payload.task_id)
    if changed:
        raise ChangedTaskError(changed)
    return jobs


def _recorded_earlier(job: BatchJob, recorded: str) -> bool:
    """Whether RECORDED is JOB's fingerprint as an earlier planrun made it (the repository
    unchanged since)."""
    return recorded != job.fingerprint and job.earlier is not None and job.earlier() == recorded
