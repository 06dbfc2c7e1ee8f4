"""The driver's writes into a task's run directory: plans committed link-or-fail, earlier
attempts moved aside (never deleted), the ledger line, and the task's report."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from sandbox_runner.batch.job import JobOutcome
from sandbox_runner.batch.ledger import LedgerRecord
from sandbox_runner.batch.resume import ATTEMPT_KEY, FINGERPRINT_KEY
from sandbox_runner.batch.setup import BatchJob, PreparedTask, task_dir
from sandbox_runner.plans.document import document_body, render_document, split_document
from sandbox_runner.plans.files import write_new
from sandbox_runner.plans.pricing import estimate_cost
from sandbox_runner.plans.report import RunRecord, write_report
from sandbox_runner.plans.results import PlanResult, PlanStatus, Synthesis
from sandbox_runner.plans.revisions import keep_published
from sandbox_runner.plans.validate import PlanCheck, validate_plan
from sandbox_runner.runs.plan_job import failed_result, required_sections
from sandbox_runner.runs.workspace import git_head
from sandbox_runner.runs.workspace_check import WorkspaceComparison


def ledger_status(result: PlanResult) -> str:
    """complete (and valid), invalid, incomplete or failed."""
    if result.valid:
        return "complete"
    if result.status is PlanStatus.COMPLETE:
        return "invalid"
    return result.status.value


def commit(job: BatchJob, outcome: JobOutcome, out_dir: Path) -> tuple[LedgerRecord, PlanResult]:
    """Commit the outcome's transcript and plan into the task's directory (never over a
    file). The plan's front matter carries the job's fingerprint and attempt, so a plan
    whose ledger line was lost can be adopted.

    Returns:
        The ledger record to append, and the result as committed: its plan as the plan
        file holds it, and its files where the task's directory now holds them.
    """
    directory = task_dir(out_dir, job.payload.task_id)
    directory.mkdir(parents=True, exist_ok=True)
    plan_file = directory / f"{job.label}.md"
    transcript = directory / f"{job.label}.transcript.jsonl"
    if outcome.scratch is not None:
        plan_text = _commit_files(outcome, outcome.scratch, plan_file, transcript)
    else:
        plan_text = _commit_values(outcome, job, plan_file, transcript)
    result = outcome.result
    if plan_text.strip():
        # A retry's plan is a revision of the task's plan, as a resumed run's is.
        source = "retry" if job.decision.attempt > 1 else "plan"
        if problem := keep_published(plan_file, plan_text, source):
            result = replace(result, reason="; ".join(filter(None, [result.reason, problem])))
    cost = estimate_cost(result.model, result.usage)
    record = LedgerRecord(
        key=job.key,
        fingerprint=job.fingerprint,
        status=ledger_status(result),
        attempt=job.decision.attempt,
        reason=result.reason,
        node=outcome.node,
        started_at=outcome.started_at,
        finished_at=outcome.finished_at,
        tokens=result.usage.total,
        cost_usd=None if cost is None else round(cost, 6),
        wall_seconds=result.wall_seconds,
        result=replace(result, plan_path=None, transcript=None).to_dict(),
    )
    committed = replace(
        result,
        plan_text=plan_text,
        check=result.check if plan_text.strip() else None,
        plan_path=plan_file if plan_text.strip() else None,
        transcript=transcript if transcript.exists() else None,
    )
    return record, committed


def _commit_files(outcome: JobOutcome, scratch: Path, plan_file: Path, transcript: Path) -> str:
    """Link a job's plan and transcript from its scratch into the task's directory, as they
    are (its run stamped the plan's front matter), then remove the scratch; the plan as
    its file holds it below the front matter ("" when there is none)."""
    committed = []
    for target in (transcript, plan_file):
        source = scratch / target.name
        if source.is_file() and not source.is_symlink() and source.stat().st_size:
            _link_new(source, target)
            committed.append(target)
    shutil.rmtree(scratch, ignore_errors=True)
    return document_body(outcome.result.plan_text) if plan_file in committed else ""


def _link_new(source: Path, target: Path) -> None:
    """Give target the file at source, which must not exist yet; the source goes."""
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
        # The scratch lies on another file system (under ~/.planrun, for an --out inside
        # a repository): the file is copied instead.
        with source.open("rb") as reading, target.open("xb") as writing:
            shutil.copyfileobj(reading, writing)
    # A driver that dies now must not find the file in the scratch, as if still running.
    source.unlink()


def _commit_values(outcome: JobOutcome, job: BatchJob, plan_file: Path, transcript: Path) -> str:
    """Write a job's plan and transcript sent back as values, stamping the plan's front
    matter; the plan as its file holds it below the front matter ("" when there is none)."""
    if outcome.transcript:
        write_new(transcript, outcome.transcript)
    if not outcome.document:
        return ""
    metadata, body = split_document(outcome.document)
    metadata |= {FINGERPRINT_KEY: job.fingerprint, ATTEMPT_KEY: job.decision.attempt}
    write_new(plan_file, render_document(metadata, body))
    return document_body(body)


def adopted_record(job: BatchJob, out_dir: Path) -> LedgerRecord:
    """The ledger record of a complete plan committed before a crash took its line."""
    directory = task_dir(out_dir, job.payload.task_id)
    metadata, _ = split_document((directory / f"{job.label}.md").read_text(errors="replace"))
    return LedgerRecord(
        key=job.key,
        fingerprint=job.fingerprint,
        status="complete",
        attempt=job.decision.attempt,
        reason="adopted: committed before the driver stopped",
        finished_at=str(metadata.get("finished_at") or ""),
        wall_seconds=float(metadata.get("wall_seconds") or 0.0),
    )


def reported_result(
    job: BatchJob, record: LedgerRecord | None, out_dir: Path, committed: PlanResult | None
) -> PlanResult:
    """A job's result for its task's report: how its ledger record says it ended, with its
    plan as committed by this run, else as its plan file holds it."""
    payload = job.payload
    if record is None:
        return failed_result(payload.job, payload.model_id, "not run yet")
    directory = task_dir(out_dir, payload.task_id)
    plan_file = directory / f"{job.label}.md"
    transcript = directory / f"{job.label}.transcript.jsonl"
    if committed is not None:
        plan_text, check = committed.plan_text, committed.check
    else:
        plan_text, check = _plan_on_file(job, plan_file)
    # The ledger line says how the attempt ended (an adopted plan has no result in it);
    # the task's directory holds its files.
    status = "complete" if record.status in ("complete", "invalid") else record.status
    recorded = {
        **record.result,
        "label": job.label,
        "status": status,
        "reason": record.reason,
        "wall_seconds": record.wall_seconds,
        "plan_path": str(plan_file) if plan_text.strip() else None,
        "transcript": str(transcript) if transcript.exists() else None,
        # Not carried over into the task's report (the batch's status.json shows them).
        "resumable": False,
        "continued": False,
    }
    result = PlanResult.from_dict(recorded, plan_text=plan_text, check=check)
    agent, model = result.agent or payload.job.agent.name, result.model or payload.model_id
    return replace(result, agent=agent, model=model)


def _plan_on_file(job: BatchJob, plan_file: Path) -> tuple[str, PlanCheck | None]:
    """The plan a file of an earlier run holds, and its check."""
    try:
        plan_text = split_document(plan_file.read_text(errors="replace"))[1]
    except OSError:
        return "", None
    if not plan_text.strip():
        return plan_text, None
    sections = required_sections(job.payload.job)
    return plan_text, validate_plan(plan_text, sections=sections, workspace=job.payload.workspace)


def write_task_report(
    task: PreparedTask,
    jobs: list[BatchJob],
    records: Mapping[str, LedgerRecord],
    committed: Mapping[str, PlanResult],
    out_dir: Path,
    check: WorkspaceComparison,
    synthesis_of: Callable[[list[PlanResult]], Synthesis],
) -> None:
    """report.json/md/html of one task, as `planrun plan` writes them (rewritten after a
    retry and after its synthesis); `committed` holds the results this run committed, by
    job key, and `synthesis_of` says what became of the synthesis of these results."""
    spec = task.spec
    results = [
        reported_result(job, records.get(job.key), out_dir, committed.get(job.key)) for job in jobs
    ]
    valid = all(result.valid for result in results)
    now = datetime.now(UTC)
    started = min(
        (_parse_time(records[j.key].started_at) for j in jobs if j.key in records), default=now
    )
    record = RunRecord(
        name=task.task.id,
        out_dir=task_dir(out_dir, task.task.id),
        requirements=spec.requirements,
        repository=str(spec.workspace),
        git_head=git_head(spec.workspace),
        started_at=started,
        finished_at=now,
        results=results,
        perspectives=[job.payload.job.perspective for job in jobs],
        workspace_unchanged=not check.problem,
        workspace_problem=check.problem,
        workspace_check=check.check,
        workspace_check_note=check.note,
        workspace_changed_paths=list(check.changed),
        workspace_changed_more=check.changed_more,
        workspace_check_ms=check.timings_ms,
        exit_code=3 if check.problem else (0 if valid else 1),
        agent_override=spec.agent_override,
        scratch=spec.scratch,
        synthesis=synthesis_of(results),
    )
    write_report(record)


def _parse_time(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return datetime.now(UTC)
