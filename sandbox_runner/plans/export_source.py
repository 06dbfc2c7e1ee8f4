"""Which plan `planrun plans export` hands on: a run's recommended plan, one perspective's,
or a plan file (a session's); and the record of its hand-offs beside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sandbox_runner.errors import ConfigError
from sandbox_runner.limits import MAX_PLAN_BYTES
from sandbox_runner.plans.document import split_document
from sandbox_runner.plans.export import PlanToExport
from sandbox_runner.plans.files import UnsafeFileError, read_sandbox_file
from sandbox_runner.plans.history import MAX_REPORT_BYTES, run_named
from sandbox_runner.plans.plan_meta import entries, read_meta
from sandbox_runner.plans.proposed_patches import patches_from


def plan_to_export(name: str, perspective: str | None) -> PlanToExport:
    """The plan NAME (a run's name or path, or a plan file) and PERSPECTIVE stand for.

    Raises:
        ConfigError: no such run or plan, or a run whose plan must be named.
    """
    candidate = Path(name).expanduser()
    if name.endswith(".md") and candidate.is_file():
        if perspective is not None:
            raise ConfigError("a plan file has no perspectives; give the file alone")
        return _read_plan(candidate.resolve())
    directory = run_named(name)
    if perspective is not None:
        if "/" in perspective or perspective.startswith("."):
            raise ConfigError(f"{perspective!r} is not a perspective of this run")
        return _read_plan(directory / f"{perspective}.md")
    return _read_plan(directory / _default_plan(directory))


def handoff_lines(plan_file: Path) -> list[str]:
    """What the side record says of a plan's hand-offs: acceptances and exports."""
    lines = [
        f"accepted {entry.get('at', '?')} ({entry.get('where', '?')}, {entry.get('mode', '?')})"
        for entry in entries(plan_file, "accepted")
    ]
    lines += [
        f"exported {entry.get('at', '?')} for {entry.get('for', '?')} to {entry.get('out', '?')}"
        for entry in entries(plan_file, "exports")
    ]
    return [line.replace("\n", " ") for line in lines]


def _default_plan(directory: Path) -> str:
    """The recommended plan's file, else the run's only valid plan's."""
    try:
        text = read_sandbox_file(directory / "report.json", MAX_REPORT_BYTES)
        report = json.loads(text) if text else {}
    except (UnsafeFileError, ValueError):
        report = {}
    if not isinstance(report, dict):
        report = {}
    recommended = report.get("recommended")
    if isinstance(recommended, dict) and _file_of(recommended):
        return _file_of(recommended)
    plans = [plan for plan in report.get("plans") or [] if isinstance(plan, dict)]
    valid = [_file_of(plan) for plan in plans if plan.get("valid") is True and _file_of(plan)]
    if len(valid) == 1:
        return valid[0]
    names = ", ".join(str(plan.get("label")) for plan in plans if _file_of(plan)) or "none"
    raise ConfigError(
        f"{directory} has no recommended plan and not exactly one valid plan: "
        f"name the perspective (plans: {names})"
    )


def _file_of(plan: dict[str, Any]) -> str:
    """A plan entry's file, when it is a plain file name beside the report."""
    file = plan.get("plan_file")
    if isinstance(file, str) and file and "/" not in file and not file.startswith("."):
        return file
    return ""


def _read_plan(path: Path) -> PlanToExport:
    try:
        text = read_sandbox_file(path, MAX_PLAN_BYTES * 2)
    except UnsafeFileError as error:
        raise ConfigError(str(error)) from None
    if not text or not text.strip():
        raise ConfigError(f"{path} does not exist or is empty: there is no plan to export")
    metadata, body = split_document(text)
    if not (path.parent / "report.json").is_file():
        # Not a run's plan (a session's): its front matter, if any, is the model's text.
        metadata = {}
    side = read_meta(path)
    patches = patches_from(side.get("proposed_patches") or metadata.get("proposed_patches"))
    repository = side.get("repository") or metadata.get("repository")
    return PlanToExport(path, body, metadata, patches, str(repository or ""))
