"""The driver's writes into a task's run directory: plans committed link-or-fail, earlier
attempts moved aside (never deleted), the ledger line, and the task's report."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from sandbox_runner.batch.job import JobOutcome
from sandbox_runner.batch.ledger import LedgerRecord
from sandbox_runner.batch.resume import ATTEMPT_KEY, FINGERPRINT_KEY
from sandbox_runner.batch.setup import BatchJob, PreparedTask, task_dir
from sandbox_runner.plans.document import render_document, split_document
from sandbox_runner.plans.files import write_new
from sandbox_runner.plans.pricing import estimate_cost
from sandbox_runner.plans.report import RunRecord, write_report
from sandbox_runner.plans.results import PlanResult, PlanStatus
from sandbox_runner.plans.validate import validate_plan
from sandbox_runner.runs.plan_job import failed_result, required_sections
from sandbox_runner.runs.workspace import WorkspaceComparison, git_head


def ledger_status(result: PlanResult) -> str:
    """complete (and valid), invalid, incomplete or failed."""
    if result.valid:
        return "complete"
    if result.status is PlanStatus.COMPLETE:
        return "invalid"
    return result.status.value


def commit(job: BatchJob, outcome: JobOutcome, out_dir: Path) -> LedgerRecord:
    """Write the outcome's transcript and plan (never over a file), and the ledger record
    to append. The plan's front matter carries the job's fingerprint and attempt, so a
    plan whose ledger line was lost can be adopted."""
    directory = task_dir(out_dir, job.payload.task_id)
    directory.mkdir(parents=True, exist_ok=True)
    attempt = job.decision.attempt
    result = outcome.result
    if outcome.transcript:
        write_new(directory / f"{job.label}.transcript.jsonl", outcome.transcript)
    if outcome.document:
        metadata, body = split_document(outcome.document)
        metadata |= {FINGERPRINT_KEY: job.fingerprint, ATTEMPT_KEY: attempt}
        write_new(directory / f"{job.label}.md", render_document(metadata, body))
    cost = estimate_cost(result.model, result.usage)
    return LedgerRecord(
        key=job.key,
        fingerprint=job.fingerprint,
        status=ledger_status(result),
        attempt=attempt,
        reason=result.reason,
        node=outcome.node,
        started_at=outcome.started_at,
        finished_at=outcome.finished_at,
        tokens=result.usage.total,
        cost_usd=None if cost is None else round(cost, 6),
        wall_seconds=result.wall_seconds,
        result=result.to_dict(),
    )


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


def recorded_result(job: BatchJob, record: LedgerRecord | None, out_dir: Path) -> PlanResult:
    """A job's result for its task's report, rebuilt from its ledger record and plan file."""
    payload = job.payload
    if record is None:
        return failed_result(payload.job, payload.model_id, "not run yet")
    directory = task_dir(out_dir, payload.task_id)
    plan_file = directory / f"{job.label}.md"
    transcript = directory / f"{job.label}.transcript.jsonl"
    try:
        plan_text = split_document(plan_file.read_text(errors="replace"))[1]
    except OSError:
        plan_text = ""
    check = None
    if plan_text.strip():
        sections = required_sections(payload.job)
        check = validate_plan(plan_text, sections=sections, workspace=payload.workspace)
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
    return replace(
        result, agent=result.agent or payload.job.agent.name, model=result.model or payload.model_id
    )


def write_task_report(
    task: PreparedTask,
    jobs: list[BatchJob],
    records: dict[str, LedgerRecord],
    out_dir: Path,
    check: WorkspaceComparison,
) -> None:
    """report.json/md/html of one task, as `planrun plan` writes them (rewritten after a retry)."""
    spec = task.spec
    results = [recorded_result(job, records.get(job.key), out_dir) for job in jobs]
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
        exit_code=3 if check.problem else (0 if valid else 1),
        agent_override=spec.agent_override,
    )
    write_report(record)


def _parse_time(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return datetime.now(UTC)
