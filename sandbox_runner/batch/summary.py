"""summary.json and summary.md of a batch: counts by status and one row per job, rewritten
atomically after every job; and what `planrun batch status` reads back."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sandbox_runner.batch.ledger import FAILED_STATUSES, Ledger, LedgerRecord
from sandbox_runner.batch.setup import BatchJob
from sandbox_runner.batch.task_table import (
    task_rows,
    time_text,
    tokens_text,
    usd_text,
    validity_text,
    wall_text,
)
from sandbox_runner.redact import redact_data
from sandbox_runner.safe_text import markdown_cell

SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
SCHEMA_VERSION = 1
STATUS_ORDER = (
    "complete", "invalid", "incomplete", "failed", "error", "budget", "running", "pending",
)  # fmt: skip
REASON_CHARS = 120


@dataclass(frozen=True)
class JobRow:
    """A job as the summary lists it."""

    key: str
    perspective: str | None
    status: str
    """A ledger status, or running / pending."""
    attempts: int
    record: LedgerRecord | None
    synthesis: bool = False
    """A task's synthesis (its recommended plan), not one of its plans."""

    @classmethod
    def of(
        cls,
        job: BatchJob,
        record: LedgerRecord | None,
        running: bool,
        attempts: int,
        *,
        synthesis: bool = False,
    ) -> JobRow:
        """A job's row: running, else its record's status when the record is of its
        current fingerprint, else pending."""
        if running:
            status = "running"
        elif record is not None and record.fingerprint == job.fingerprint:
            status = record.status
        else:
            status = "pending"
        perspective = job.payload.job.perspective
        return cls(job.key, perspective, status, attempts, record, synthesis)


def summary_document(
    name: str,
    out_dir: Path,
    rows: list[JobRow],
    *,
    exit_code: int | None,
    state: str,
    not_in_batch: list[str],
    wall_seconds: float,
    earlier_wall_seconds: float = 0.0,
    workspaces: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The JSON summary of a batch; earlier_wall_seconds is the wall time of the runs of
    this batch before this one (a resumed batch adds up every run); workspaces, the
    workspace check of each repository once the batch ended."""
    counts = Counter(row.status for row in rows)
    records = [row.record for row in rows if row.record is not None]
    costs = [r.cost_usd for r in records if r.cost_usd is not None]
    jobs = [_row(row) for row in rows]
    return {
        "schema_version": SCHEMA_VERSION,
        "batch": name,
        "out_dir": str(out_dir),
        "state": state,
        "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "exit_code": exit_code,
        "counts": {status: counts[status] for status in STATUS_ORDER if counts[status]},
        "total": len(rows),
        "totals": {
            "tokens": sum(r.tokens for r in records),
            "cost_usd": round(sum(costs), 6) if costs else None,
            "wall_seconds": round(wall_seconds, 3),
            "wall_seconds_all_runs": round(earlier_wall_seconds + wall_seconds, 3),
        },
        "tasks": task_rows(out_dir, jobs),
        "jobs": jobs,
        "not_in_batch": not_in_batch,
        "workspaces": workspaces or [],
    }


def _row(row: JobRow) -> dict[str, Any]:
    record = row.record
    task, _, label = row.key.partition("/")
    done = record is not None and row.status not in ("running", "pending")
    return {
        "key": row.key,
        "task": task,
        "perspective": row.perspective,
        "status": row.status,
        "attempts": row.attempts,
        "continued": bool(done and record and record.result.get("continued") is True),
        "synthesis": row.synthesis,
        "plan_file": f"tasks/{task}/{label}.md" if done else None,
        "tokens": record.tokens if done and record else 0,
        "cost_usd": record.cost_usd if done and record else None,
        "wall_seconds": record.wall_seconds if done and record else 0.0,
        "node": record.node if done and record else "",
        "reason": record.reason if done and record else "",
    }


def earlier_wall_seconds(out_dir: Path) -> float:
    """The wall time of every earlier run of the batch in out_dir, from its summary.json
    (0 for a new batch)."""
    try:
        document = json.loads((out_dir / SUMMARY_JSON).read_text(encoding="utf-8"))
        totals = document["totals"]
        seconds = totals.get("wall_seconds_all_runs", totals.get("wall_seconds"))
        return max(float(seconds), 0.0)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return 0.0


def write_summary(out_dir: Path, document: dict[str, Any]) -> None:
    """Replace summary.json and summary.md atomically; what looks like a credential (in an
    API error's text, say) is redacted."""
    document = redact_data(document)
    _replace(out_dir / SUMMARY_JSON, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    _replace(out_dir / SUMMARY_MD, render_summary(document))


def _replace(path: Path, text: str) -> None:
    temporary = path.with_name(f".tmp-{path.name}.{os.getpid()}")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def render_summary(document: dict[str, Any]) -> str:
    """summary.md: the totals, a table of tasks (validity, agreement, recommended plan,
    report), then a table of jobs.

    Every name, key and reason goes through markdown_cell: an error text from an API or a
    model (escape sequences, an image beacon, raw HTML, pipes) shows as inert text.
    """
    counts = ", ".join(f"{status} {n}" for status, n in document["counts"].items()) or "no jobs"
    totals = document["totals"]
    lines = [
        f"# Batch {markdown_cell(document['batch'])}",
        "",
        f"- State: {markdown_cell(document['state'])} (exit code {document['exit_code']})",
        f"- Jobs: {document['total']} ({counts})",
        f"- Tokens: {tokens_text(totals['tokens'])}; cost: {usd_text(totals['cost_usd'])}; "
        f"wall time: {wall_text(totals) or 'unknown'}",
    ]
    tasks = document.get("tasks") or []
    if tasks:
        lines += ["", "## Tasks", "", *task_table_lines(tasks)]
    lines += [
        "",
        "## Jobs",
        "",
        "| Job | Status | Attempts | Tokens | Cost | Time | Reason |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    lines += [_job_line(job) for job in document["jobs"]]
    if document["not_in_batch"]:
        keys = ", ".join(markdown_cell(key) for key in document["not_in_batch"])
        lines += ["", "Recorded jobs not in the batch file: " + keys]
    return "\n".join(lines) + "\n"


def task_table_lines(tasks: list[dict[str, Any]]) -> list[str]:
    """The Markdown table of tasks: one row each."""
    lines = [
        "| Task | Plans | Agreement | Recommended plan | Report | Tokens | Cost | Time |",
        "|---|---|---|---|---|---:|---:|---:|",
    ]
    for task in tasks:
        name = markdown_cell(task["task"])
        note = markdown_cell(task["recommended_note"], limit=REASON_CHARS)
        if task["recommended"]:
            recommended = f"[{name}]({quote(task['recommended'])})" + (f" ({note})" if note else "")
        else:
            recommended = "none: " + note
        report = f"[report.html]({quote(task['report'])})" if task["report"] else "not yet"
        lines.append(
            f"| {name} | {validity_text(task)} | {markdown_cell(task['agreement']) or '—'} "
            f"| {recommended} | {report} | {tokens_text(task['tokens'])} "
            f"| {usd_text(task['cost_usd'])} | {time_text(task['wall_seconds'])} |"
        )
    return lines


def _job_line(job: dict[str, Any]) -> str:
    job_cost = "" if job["cost_usd"] is None else usd_text(job["cost_usd"])
    key = markdown_cell(job["key"])
    link = f"[{key}]({quote(job['plan_file'])})" if job["plan_file"] else key
    attempts = f"{job['attempts']}" + (", went on" if job["continued"] else "")
    reason = markdown_cell(job["reason"], limit=REASON_CHARS)
    time = time_text(job["wall_seconds"]) if job["plan_file"] else ""
    return (
        f"| {link} | {markdown_cell(job['status'])} | {attempts} | {tokens_text(job['tokens'])} "
        f"| {job_cost} | {time} | {reason} |"
    )


def _is_job_row(job: dict[str, Any]) -> bool:
    """Whether a summary.json job row has what a task row reads (it may have been edited)."""
    text = isinstance(job.get("key"), str) and isinstance(job.get("task"), str)
    numbers = all(isinstance(job.get(k), int | float) for k in ("tokens", "wall_seconds"))
    cost = job.get("cost_usd") is None or isinstance(job.get("cost_usd"), int | float)
    return text and numbers and cost and isinstance(job.get("status"), str)


def read_status(out_dir: Path) -> dict[str, Any] | None:
    """summary.json of a batch directory, its counts brought up to date from the ledger
    (the driver may have died after its last line); None when it is no batch directory."""
    try:
        document = json.loads((out_dir / SUMMARY_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        document = None
    records = Ledger(out_dir).last_by_key()
    if not isinstance(document, dict):
        if not records:
            return None
        document = {"batch": out_dir.name, "out_dir": str(out_dir), "state": "unknown", "jobs": []}
    listed = document.get("jobs")
    jobs: list[Any] = listed if isinstance(listed, list) else []
    statuses = {job.get("key"): job.get("status") for job in jobs if isinstance(job, dict)}
    for key, (record, _) in records.items():
        statuses[key] = record.status
    listed_jobs = [job for job in jobs if isinstance(job, dict) and _is_job_row(job)]
    for job in listed_jobs:
        job["status"] = statuses.get(job["key"], job["status"])
    # The tasks' reports may be newer than the last summary the driver wrote.
    document["tasks"] = task_rows(out_dir, listed_jobs)
    counts = Counter(str(status) for status in statuses.values())
    document["counts"] = {s: counts[s] for s in STATUS_ORDER if counts[s]}
    document["ledger_lines"] = sum(count for _, count in records.values())
    document["failed"] = sorted(k for k, s in statuses.items() if s in FAILED_STATUSES)
    return document
