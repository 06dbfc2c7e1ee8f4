"""What a command says when it ends: what the work cost, and the exact command to run
next (resume a batch, retry its failures), spelt so it can be pasted."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def cost_line(totals: Mapping[str, Any] | None) -> str | None:
    """`Cost: $0.21 estimated (82,680 tokens)` from a report's or a summary's totals;
    None when nothing was counted."""
    if not totals:
        return None
    tokens = totals.get("tokens")
    count = tokens.get("total") if isinstance(tokens, Mapping) else tokens
    if not isinstance(count, int) or count <= 0:
        return None
    cost = totals.get("cost_usd")
    if not isinstance(cost, int | float):
        return f"Cost: unknown at list price ({count:,} tokens)"
    partial = "" if totals.get("cost_complete", True) else ", some models without a price"
    dollars = f"{cost:,.2f}" if cost >= 0.01 or cost == 0 else f"{cost:.4f}"
    return f"Cost: ${dollars} estimated ({count:,} tokens{partial})"


def batch_command(
    file: Path, out_dir: Path, *, engine: str = "local", only: str | None = None
) -> str:
    """The command that runs this batch again into OUT_DIR (which resumes it)."""
    words = ["planrun", "batch", str(file), "--out", str(out_dir)]
    if engine != "local":
        words += ["--engine", engine]
    if only is not None:
        words += ["--only", only]
    return shlex.join(words)


def export_hint(summary: Mapping[str, Any], batches: Path) -> str | None:
    """`Next: planrun plans export NAME --for claude ...` for the first task of a batch
    summary with a valid recommended plan, NAME `batch:<batch>/<task>` when the batch is
    in BATCHES (where `planrun plans` finds it), else the task's path; None when no task
    has one."""
    out = Path(summary["out_dir"])
    for row in summary.get("tasks") or []:
        if row.get("recommended") and not row.get("recommended_note"):
            task = Path(row["recommended"]).parent
            name = f"batch:{out.name}/{task.name}" if out.parent == batches else str(out / task)
            words = shlex.join(["planrun", "plans", "export", name, "--for", "claude"])
            return f"Next: `{words}` hands its recommended plan to a coding agent"
    return None
