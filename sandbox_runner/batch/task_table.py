"""One row per task of a batch, as summary.md and `planrun batch status` show it: how many
plans are valid, how far they agree, the recommended plan (or why there is none) and the
task's report; and the formatting of the batch's numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sandbox_runner.plans.report_markdown import duration
from sandbox_runner.safe_text import one_line

TASKS_DIR = "tasks"
REPORT_JSON, REPORT_HTML = "report.json", "report.html"


def tokens_text(count: int) -> str:
    """A token count with thousands separators: 1,234,567."""
    return f"{int(count):,}"


def usd_text(cost: float | None) -> str:
    """A cost in dollars with two decimals ("unknown" when no price is known); a cost under
    a cent shows as "< $0.01", not as a free run."""
    if cost is None:
        return "unknown"
    if 0 < cost < 0.005:
        return "< $0.01"
    return f"${cost:,.2f}"


def time_text(seconds: float) -> str:
    """A duration as a person reads it: 8.2 s, 3 min 05 s, 2 h 10 min."""
    return duration(max(float(seconds), 0.0))


def task_rows(out_dir: Path, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per task, in the order its first job comes in `jobs` (summary rows)."""
    by_task: dict[str, list[dict[str, Any]]] = {}
    for job in jobs:
        by_task.setdefault(str(job["task"]), []).append(job)
    return [_task_row(out_dir, task, rows) for task, rows in by_task.items()]


def _task_row(out_dir: Path, task: str, jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """A task's row; its tokens, cost and time are its plans' and its synthesis's."""
    report = _report(out_dir / TASKS_DIR / task / REPORT_JSON)
    costs = [job["cost_usd"] for job in jobs if job["cost_usd"] is not None]
    plans = [job for job in jobs if job.get("synthesis") is not True]
    done = [job for job in plans if job["status"] not in ("running", "pending")]
    row: dict[str, Any] = {
        "task": task,
        "plans": len(plans),
        "valid": sum(job["status"] == "complete" for job in plans),
        "finished": len(done),
        "agreement": _agreement(report) if report else "",
        "recommended": None,
        "recommended_note": "",
        "report": None,
        "tokens": sum(int(job["tokens"]) for job in jobs),
        "cost_usd": round(sum(costs), 6) if costs else None,
        "wall_seconds": round(sum(float(job["wall_seconds"]) for job in jobs), 3),
    }
    if report is None:
        row["recommended_note"] = "no report yet: the task's plans are not all done"
        return row
    row["report"] = f"{TASKS_DIR}/{task}/{REPORT_HTML}"
    recommended = report.get("recommended")
    if not isinstance(recommended, dict):
        synthesis = report.get("synthesis")
        note = synthesis.get("note") if isinstance(synthesis, dict) else None
        row["recommended_note"] = str(note or "no synthesis ran")
        return row
    if isinstance(recommended.get("plan_file"), str):
        row["recommended"] = f"{TASKS_DIR}/{task}/{recommended['plan_file']}"
    if recommended.get("valid") is not True:
        # As `planrun plan` shows it: the plan a failed synthesis left, and why it failed.
        status, reason = recommended.get("status"), recommended.get("reason")
        made = "not valid" if status == "complete" else f"the synthesis ended {status}"
        row["recommended_note"] = f"{made}: {reason}" if reason else made
    return row


def _report(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def _agreement(report: dict[str, Any]) -> str:
    """How far a task's plans agree on their critical files, in a few words."""
    files = report.get("critical_files")
    if not isinstance(files, dict):
        return ""
    first = files.get("first_choices") or {}
    if len(first) < 2:
        return f"{'one plan' if first else 'no plan'} names files: nothing to compare"
    shared, named = len(files.get("shared_by_all") or []), len(files.get("matrix") or [])
    same = "same first file" if files.get("agree_on_first") else "different first files"
    return f"{shared} of {named} files shared; {same}"


def validity_text(row: dict[str, Any]) -> str:
    """ "2 of 3 valid", with how many are still to finish."""
    text = f"{row['valid']} of {row['plans']} valid"
    waiting = int(row["plans"]) - int(row["finished"])
    return text + (f" ({waiting} not finished)" if waiting else "")


def recommended_text(row: dict[str, Any]) -> str:
    """The recommended plan of a task's row as plain text: its path (with what is wrong
    with it, if anything), or `none:` and why there is none."""
    note = row["recommended_note"]
    if not row["recommended"]:
        return f"none: {note}"
    return f"{row['recommended']} ({note})" if note else str(row["recommended"])


STATUS_COLUMNS = ("Task", "Plans", "Agreement", "Recommended plan", "Report")
MAX_CELL = 60
NARROWEST = {0: 16, 2: 20, 3: 24, 4: 20}
"""The text columns narrowed to fit a terminal (by index: task, agreement, recommended
plan, report path), and the narrowest each gets: still a readable start of its text."""


def status_table(tasks: list[dict[str, Any]], width: int | None = None) -> list[str]:
    """The tasks as aligned plain-text lines for a terminal, a header line first; every cell
    is one line of printable text, clipped. With WIDTH, the widest text columns (the
    recommended plan and the report path first) are narrowed, with an ellipsis, until a
    line fits it or they are as narrow as NARROWEST lets them be."""
    rows = [list(STATUS_COLUMNS)]
    for task in tasks:
        recommended = recommended_text(task)
        cells = [task["task"], validity_text(task), task["agreement"] or "—", recommended]
        rows.append([*cells, task["report"] or "not yet"])
    clipped = [[_cell(text) for text in row] for row in rows]
    widths = [max(len(row[n]) for row in clipped) for n in range(len(STATUS_COLUMNS))]
    if width is not None:
        widths = _narrowed(widths, width)
    return [
        "  ".join(
            _cell(cell, limit).ljust(limit) for cell, limit in zip(row, widths, strict=True)
        ).rstrip()
        for row in clipped
    ]


def _narrowed(widths: list[int], width: int) -> list[int]:
    """Column widths whose line (two spaces between columns) fits WIDTH, by narrowing the
    widest column NARROWEST names one character at a time; as near as NARROWEST allows."""
    widths = list(widths)
    while sum(widths) + 2 * (len(widths) - 1) > width:
        narrowable = [column for column, least in NARROWEST.items() if widths[column] > least]
        if not narrowable:
            break
        # On a tie the later column gives first: the paths before the task's name.
        widths[max(reversed(narrowable), key=lambda column: widths[column])] -= 1
    return widths


def _cell(text: str, limit: int = MAX_CELL) -> str:
    line = one_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def wall_text(totals: object) -> str:
    """The batch's wall time over every run, with the last run's when there were more;
    "" when the totals say nothing of it."""
    if not isinstance(totals, dict):
        return ""
    last, every = totals.get("wall_seconds"), totals.get("wall_seconds_all_runs", None)
    if not isinstance(last, int | float):
        return ""
    every = every if isinstance(every, int | float) else last
    text = time_text(every)
    if every - last >= 0.05:
        text += f" over every run ({time_text(last)} in the last)"
    return text


def wall_line(totals: object) -> str | None:
    """`Wall time: …` for a terminal, or None."""
    text = wall_text(totals)
    return f"Wall time: {text}" if text else None
