"""The synthesis of each task of a batch: one more job, `<task>/recommended`, run once every
perspective of the task has finished and two or more of its plans are valid, by the
built-in Synthesis agent, as `planrun plan` runs it. It has ledger lines of its own; its
fingerprint names the plans it merges (their keys, fingerprints and attempts), so a task
whose plans change gets a new synthesis and a finished one is never made again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from sandbox_runner.agents.synthesis import SourcePlan, synthesis_sections, synthesis_task
from sandbox_runner.batch.commit import reported_result
from sandbox_runner.batch.job import NOT_STARTED
from sandbox_runner.batch.ledger import LedgerRecord
from sandbox_runner.batch.resume import RUNS, Action, Decision, decide, fingerprint, plan_on_disk
from sandbox_runner.batch.setup import BatchJob, PreparedTask, task_dir
from sandbox_runner.plans.results import PlanResult, PlanStatus, Synthesis, SynthesisState
from sandbox_runner.runs.estimate import PlanEstimate, estimate_plan
from sandbox_runner.runs.plan_job import PlanJob
from sandbox_runner.runs.synthesis_step import (
    MIN_VALID_PLANS,
    SYNTHESIS_LABEL,
    plan_synthesis,
    skip_note,
    synthesis_off,
    synthesis_ran,
)

PENDING_NOTE = (
    "not made yet: the batch makes it once the task's plans are done "
    "(run the batch again if it stopped)"
)
ASSUMED_PLAN_TOKENS = 2_500
"""What a dry run assumes each plan given to a synthesis takes (the plans are not written yet)."""
CONDITIONAL = "if two or more of its plans are valid"
"""When a synthesis whose task's plans are still to run will run (for --dry-run)."""
TRANSIENT_STATUSES = frozenset({"error", PlanStatus.BUDGET.value})


def synthesis_key(task_id: str) -> str:
    """The key of a task's synthesis job."""
    return f"{task_id}/{SYNTHESIS_LABEL}"


@dataclass(frozen=True)
class TaskPlans:
    """A task of the batch and its perspective jobs, in batch-file order."""

    task: PreparedTask
    jobs: list[BatchJob]

    @property
    def task_id(self) -> str:
        return self.task.task.id

    @property
    def synthesised(self) -> bool:
        """Whether the task may have a synthesis: it is on, and there are plans to merge."""
        return self.task.spec.synthesis and len(self.jobs) >= MIN_VALID_PLANS


def tasks_of(jobs: list[BatchJob]) -> dict[str, TaskPlans]:
    """The batch's tasks, by id, in the order their first job comes."""
    tasks: dict[str, TaskPlans] = {}
    for job in jobs:
        task_id = job.payload.task_id
        if task_id not in tasks:
            tasks[task_id] = TaskPlans(job.task, [])
        tasks[task_id].jobs.append(job)
    return tasks


def _stub(plans: TaskPlans, sources: tuple[str, ...], key_fingerprint: str) -> BatchJob:
    """The task's synthesis job with its sources named but their plans not read yet."""
    spec = plans.task.spec
    job = PlanJob(
        requirements=spec.requirements,
        perspective=None,
        agent=spec.synthesiser,
        context=spec.context,
        sections=synthesis_sections(spec.sections),
        name=SYNTHESIS_LABEL,
        sources=sources,
        memory=spec.memory,
    )
    first = plans.jobs[0].payload
    payload = replace(
        first,
        key=synthesis_key(plans.task_id),
        job=job,
        fingerprint=key_fingerprint,
        attempt=1,
        earlier=None,
    )
    return BatchJob(payload, plans.task, key_fingerprint)


def slot(plans: TaskPlans) -> BatchJob:
    """A stand-in for a synthesis whose sources are not known yet: what an engine is set
    up with (its task's sandboxes, its repository shipped)."""
    return _stub(plans, (), "")


def synthesis_job(plans: TaskPlans, records: Mapping[str, LedgerRecord]) -> BatchJob | None:
    """The task's synthesis as the ledger stands: it merges the perspectives whose current
    record is complete (valid). None when the synthesis is off, a perspective has no
    current record yet, or fewer than two plans are valid."""
    if not plans.synthesised:
        return None
    sources: list[tuple[BatchJob, LedgerRecord]] = []
    for job in plans.jobs:
        record = records.get(job.key)
        if record is None or record.fingerprint != job.fingerprint:
            return None
        if record.complete:
            sources.append((job, record))
    if len(sources) < MIN_VALID_PLANS:
        return None
    spec, settings = plans.task.spec, plans.task.settings.settings
    agent = spec.synthesiser
    parts: dict[str, object] = {
        "synthesis": [agent.name, agent.system_prompt, list(agent.tools)],
        "model": spec.model_id,
        "sections": spec.sections,
        "limits": [
            spec.limits.max_turns,
            spec.limits.max_output_tokens,
            spec.limits.max_total_tokens,
        ],
        "allowed_tools": sorted(spec.allowed_tools or []),
        # What the plans were made from is in their own fingerprints.
        "sources": [[job.key, record.fingerprint, record.attempt] for job, record in sources],
    }
    if spec.web:
        parts["web"] = list(spec.web.entries)
    if settings.image:
        parts["image"] = settings.image
    labels = tuple(job.label for job, _ in sources)
    return _stub(plans, labels, fingerprint(parts))


def decide_synthesis(
    job: BatchJob,
    last: LedgerRecord | None,
    attempts: int,
    out_dir: Path,
    *,
    retry_failed: bool = False,
) -> Decision:
    """The resume decision of a synthesis job: done -> skipped; stopped for a reason
    outside its conversation (the API, the sandbox, the budget) -> run again, going on
    with it; failed for good -> skipped unless --retry-failed; made from other plans
    than the task's now -> its files moved aside and made again."""
    directory = task_dir(out_dir, job.payload.task_id)
    plan_file = directory / f"{job.label}.md"
    transcript = directory / f"{job.label}.transcript.jsonl"
    settled = last is not None and last.complete and last.fingerprint == job.fingerprint
    disk = None if settled else plan_on_disk(plan_file)
    newer_on_disk = disk is not None and disk.fingerprint == job.fingerprint
    changed = last is not None and last.fingerprint != job.fingerprint and not newer_on_disk
    transient = last is not None and (
        last.result.get("resumable") is True or last.status in TRANSIENT_STATUSES
    )
    return decide(
        job.fingerprint,
        last,
        attempts,
        disk,
        leftovers=not settled and (plan_file.exists() or transcript.exists()),
        retry_failed=retry_failed or transient,
        redo=changed,
    )


def with_sources(
    job: BatchJob,
    plans: TaskPlans,
    records: Mapping[str, LedgerRecord],
    committed: Mapping[str, PlanResult],
    out_dir: Path,
) -> BatchJob | Synthesis:
    """The synthesis job with its task: the requirements and every plan it merges, read
    as committed. A plan that no longer passes its check leaves the outcome that says why."""
    chosen = [plan for plan in plans.jobs if plan.label in job.payload.job.sources]
    results = [
        reported_result(plan, records.get(plan.key), out_dir, committed.get(plan.key))
        for plan in chosen
    ]
    spec = plans.task.spec
    made = plan_synthesis(
        spec.requirements,
        agent=spec.synthesiser,
        context=spec.context,
        sections=spec.sections,
        jobs=[plan.payload.job for plan in chosen],
        results=results,
        memory=spec.memory,
    )
    if isinstance(made, Synthesis):
        return made
    job.payload = replace(job.payload, job=made)
    return job


def synthesis_outcome(
    plans: TaskPlans,
    results: list[PlanResult],
    job: BatchJob | None,
    records: Mapping[str, LedgerRecord],
    committed: Mapping[str, PlanResult],
    out_dir: Path,
) -> Synthesis:
    """The task's synthesis as its report shows it: the recommended plan, or why there is
    none (turned off, too few valid plans, not made yet, not started for the budget)."""
    spec = plans.task.spec
    if not spec.synthesis:
        return synthesis_off(spec.synthesis_note)
    if note := skip_note(results):
        return Synthesis(SynthesisState.SKIPPED, note=note)
    record = records.get(job.key) if job is not None else None
    if job is None or record is None or record.fingerprint != job.fingerprint:
        return Synthesis(SynthesisState.SKIPPED, note=PENDING_NOTE)
    if record.status == PlanStatus.BUDGET and record.reason.startswith(NOT_STARTED):
        return Synthesis(SynthesisState.SKIPPED, note=record.reason)
    result = reported_result(job, record, out_dir, committed.get(job.key))
    return synthesis_ran(job.payload.job, result, spec.synthesis_agent_override)


def planned_syntheses(
    tasks: Mapping[str, TaskPlans],
    records: Mapping[str, LedgerRecord],
    attempts: Mapping[str, int],
    out_dir: Path | None,
    *,
    retry_failed: bool = False,
) -> dict[str, tuple[BatchJob, Decision, str]]:
    """What running the batch would do with each task's synthesis, by task id: the job
    (a stand-in while its plans are to run), its decision and the condition it runs on
    ("" when none). Tasks without one (off, or too few valid plans) are left out."""
    planned: dict[str, tuple[BatchJob, Decision, str]] = {}
    for task_id, plans in tasks.items():
        if not plans.synthesised:
            continue
        if any(job.decision.action in (*RUNS, Action.ADOPT) for job in plans.jobs):
            planned[task_id] = (slot(plans), Decision(Action.RUN), CONDITIONAL)
            continue
        job = synthesis_job(plans, records)
        if job is None or out_dir is None:
            continue
        last, count = records.get(job.key), attempts.get(job.key, 0)
        decision = decide_synthesis(job, last, count, out_dir, retry_failed=retry_failed)
        planned[task_id] = (job, decision, "")
    return planned


def synthesis_estimate(plans: TaskPlans) -> PlanEstimate:
    """A synthesis's prompt, estimated as if every plan of its task were valid and took
    ASSUMED_PLAN_TOKENS."""
    spec = plans.task.spec
    sources = [SourcePlan(job.label, job.payload.job.perspective, "") for job in plans.jobs]
    job = replace(slot(plans).payload.job, requirements=synthesis_task(spec.requirements, sources))
    estimate = estimate_plan(job, SYNTHESIS_LABEL, spec.model_id, spec.limits)
    extra = len(sources) * ASSUMED_PLAN_TOKENS
    return replace(estimate, prompt_tokens=estimate.prompt_tokens + extra)
