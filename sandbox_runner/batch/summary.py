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


def summary_document(
    name: str,
    out_dir: Path,
    rows: list[JobRow],
    *,
    exit_code: int | None,
    state: str,
    not_in_batch: list[str],
    wall_seconds: float,
) -> dict[str, Any]:
    """The JSON summary of a batch."""
    counts = Counter(row.status for row in rows)
    records = [row.record for row in rows if row.record is not None]
    costs = [r.cost_usd for r in records if r.cost_usd is not None]
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
        },
        "jobs": [_row(row) for row in rows],
        "not_in_batch": not_in_batch,
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
        "plan_file": f"tasks/{task}/{label}.md" if done else None,
        "tokens": record.tokens if done and record else 0,
        "cost_usd": record.cost_usd if done and record else None,
        "wall_seconds": record.wall_seconds if done and record else 0.0,
        "node": record.node if done and record else "",
        "reason": record.reason if done and record else "",
    }


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
    """summary.md: the counts, then a table of jobs.

    Every name, key and reason goes through markdown_cell: an error text from an API or a
    model (escape sequences, an image beacon, raw HTML, pipes) shows as inert text.
    """
    counts = ", ".join(f"{status} {n}" for status, n in document["counts"].items()) or "no jobs"
    totals = document["totals"]
    cost = "unknown" if totals["cost_usd"] is None else f"${totals['cost_usd']:.4f}"
    lines = [
        f"# Batch {markdown_cell(document['batch'])}",
        "",
        f"- State: {markdown_cell(document['state'])} (exit code {document['exit_code']})",
        f"- Jobs: {document['total']} ({counts})",
        f"- Tokens: {totals['tokens']}, cost: {cost}, wall time: {totals['wall_seconds']} s",
        "",
        "| Job | Status | Attempts | Tokens | Cost (USD) | Seconds | Reason |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [_job_line(job) for job in document["jobs"]]
    if document["not_in_batch"]:
        keys = ", ".join(markdown_cell(key) for key in document["not_in_batch"])
        lines += ["", "Recorded jobs not in the batch file: " + keys]
    return "\n".join(lines) + "\n"


def _job_line(job: dict[str, Any]) -> str:
    job_cost = "" if job["cost_usd"] is None else f"{job['cost_usd']:.4f}"
    key = markdown_cell(job["key"])
    link = f"[{key}]({quote(job['plan_file'])})" if job["plan_file"] else key
    attempts = f"{job['attempts']}" + (", went on" if job["continued"] else "")
    reason = markdown_cell(job["reason"], limit=REASON_CHARS)
    return (
        f"| {link} | {markdown_cell(job['status'])} | {attempts} | {job['tokens']} "
        f"| {job_cost} | {job['wall_seconds']} | {reason} |"
    )


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
    counts = Counter(str(status) for status in statuses.values())
    document["counts"] = {s: counts[s] for s in STATUS_ORDER if counts[s]}
    document["ledger_lines"] = sum(count for _, count in records.values())
    document["failed"] = sorted(k for k, s in statuses.items() if s in FAILED_STATUSES)
    return document
