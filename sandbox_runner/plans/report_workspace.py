"""The before/after workspace check as the report pages and the terminal say it."""

from __future__ import annotations

from typing import Any

CHECK_PARTS = (
    ("before_files", "files before"),
    ("before_git_status", "`git status` before"),
    ("after_files", "files after"),
    ("after_git_status", "`git status` after"),
)


def workspace_words(report: dict[str, Any]) -> str:
    """The workspace check in words; "unchanged" only when everything was compared."""
    if not report["workspace_unchanged"]:
        return f"workspace CHANGED: {report['workspace_problem']}"
    check = report.get("workspace_check", "full")
    note = report.get("workspace_check_note", "")
    if check == "full":
        return "workspace unchanged"
    if check == "files_only":
        return f"workspace files unchanged, but not fully checked: {note}"
    if check == "git_status_only":
        return f"workspace `git status` unchanged, but not fully checked: {note}"
    return f"workspace NOT CHECKED: {note}"


def check_time_words(report: dict[str, Any]) -> str:
    """How long the workspace check took, e.g. "files before 0.8 s, `git status` before
    1.2 s, files after 0.8 s, `git status` after 1.1 s"; "" when no part ran."""
    times = report.get("workspace_check_ms") or {}
    parts = [
        f"{words} {_seconds(times[key])}"
        for key, words in CHECK_PARTS
        if isinstance(times.get(key), int)
    ]
    return ", ".join(parts)


def _seconds(ms: int) -> str:
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"
