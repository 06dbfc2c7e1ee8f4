"""verify's findings for people (one line per reason) and for programs (`--json`, its
schema in docs/verify.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sandbox_runner.safe_text import one_line
from sandbox_runner.verify.changes import Change
from sandbox_runner.verify.check import Verdict
from sandbox_runner.verify.plan_refs import PlanRefs

__all__ = ["SCHEMA_VERSION", "exit_code", "report_json", "report_lines"]

SCHEMA_VERSION = 1
EXIT_FOLLOWS, EXIT_DRIFT = 0, 1


def exit_code(verdict: Verdict) -> int:
    """0 when the change follows the plan, 1 when it drifts."""
    return EXIT_DRIFT if verdict.drift else EXIT_FOLLOWS


def report_lines(plan_path: Path, change: Change, verdict: Verdict) -> list[str]:
    """The reasons, one line each, drift first, then a summary line; every line inert
    (file names come from the repository: no escape sequence, no line break that would
    forge a CI workflow command or close the code fence a job summary prints them in)."""
    ordered = sorted(verdict.reasons, key=lambda reason: not reason.drift)
    lines = [reason.line() for reason in ordered]
    compared = (
        f"{change.base_rev} ({(change.base_commit or '')[:12]})..HEAD and the working tree"
        if change.base_rev is not None
        else f"the working tree against HEAD ({change.head[:12]})"
    )
    drift = sum(reason.drift for reason in verdict.reasons)
    warnings = len(verdict.reasons) - drift
    verdict_text = "drifts from the plan" if verdict.drift else "follows the plan"
    ignored = f", {len(verdict.ignored)} ignored" if verdict.ignored else ""
    lines.append(
        f"the change {verdict_text} {plan_path}: {compared}, {len(verdict.changed)} "
        f"file(s) changed{ignored}; {drift} drift, {warnings} warning(s)"
    )
    return [one_line(line) for line in lines]


def report_json(
    plan_path: Path,
    workspace: Path,
    plan: PlanRefs,
    change: Change,
    verdict: Verdict,
    *,
    strict: bool,
    ignore: tuple[str, ...],
) -> dict[str, Any]:
    """The `--json` document."""
    check = change.base_check
    return {
        "schema_version": SCHEMA_VERSION,
        "plan": str(plan_path),
        "repository": str(workspace),
        "verdict": "drift" if verdict.drift else "follows",
        "exit_code": exit_code(verdict),
        "strict": strict,
        "ignore": list(ignore),
        "head": change.head,
        "base": {"rev": change.base_rev, "commit": change.base_commit},
        "plan_base": {
            "commit": plan.base_commit,
            "source": plan.base_source,
            "known": check.known,
            "head_moved": check.moved if check.plan_commit is not None else None,
            "in_history": check.in_history,
            "moved_files": list(check.moved_files),
        },
        "changed_files": verdict.changed,
        "committed_files": list(change.committed),
        "uncommitted_files": list(change.uncommitted),
        "ignored_files": verdict.ignored,
        "unnamed_files": verdict.unnamed,
        "critical_files": [{"path": p, "changed": done} for p, done in verdict.critical.items()],
        "steps": [
            {"number": number, "text": text, "files": list(paths), "matched": matched}
            for number, (text, paths, matched) in enumerate(verdict.steps, 1)
        ],
        "test_files": [{"path": p, "changed": done} for p, done in verdict.tests.items()],
        "reasons": [
            {"kind": r.kind, "subject": r.subject, "message": r.message, "drift": r.drift}
            for r in verdict.reasons
        ],
    }
