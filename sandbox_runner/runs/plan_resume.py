"""Resuming a `planrun plan` run that was interrupted or failed (`planrun plans resume`):
its request repeated from run.json, its complete and valid plans kept, its stopped
conversations gone on with, and every other plan made again. Nothing is deleted: the
files of the attempts it replaces go to `.attempts/`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sandbox_runner.errors import ConfigError
from sandbox_runner.plans.document import split_document
from sandbox_runner.plans.files import UnsafeFileError, read_sandbox_file
from sandbox_runner.plans.results import PlanResult
from sandbox_runner.plans.validate import validate_plan
from sandbox_runner.runs.attempts import (
    AttemptNote,
    can_go_on,
    earlier_attempt,
    move_aside,
    read_json,
    read_text,
)
from sandbox_runner.runs.multi import EXIT_INTERRUPTED, RUN_RECORD, sandbox_root_of
from sandbox_runner.runs.plan_job import EarlierAttempt, PlanJob, required_sections
from sandbox_runner.runs.prepare import PlanRequest
from sandbox_runner.runs.run_spec import PlanRunSpec, Resumption
from sandbox_runner.runs.synthesis_step import SYNTHESIS_LABEL
from sandbox_runner.sandbox.host_walk import same_tree

IN_FLIGHT = "in flight when planrun stopped"


@dataclass(frozen=True)
class RunRecordFile:
    """What run.json says of a run: its request and its repository as it started."""

    request: PlanRequest
    tree: str | None


def read_run_record(directory: Path) -> RunRecordFile:
    """The request a run recorded.

    Raises:
        ConfigError: the directory holds no run.json, or one planrun cannot read.
    """
    data = read_json(directory / RUN_RECORD)
    if not data:
        raise ConfigError(
            f"{directory} holds no {RUN_RECORD} (a run of an older planrun, or not a "
            "`planrun plan` run); it cannot be resumed: plan again"
        )
    try:
        request = PlanRequest.from_json(data["request"])
    except (KeyError, TypeError, ValueError, ArithmeticError):
        raise ConfigError(
            f"{directory / RUN_RECORD} is damaged; the run cannot be resumed"
        ) from None
    tree = data.get("tree")
    return RunRecordFile(request, tree if isinstance(tree, str) else None)


def check_not_batch_task(directory: Path) -> None:
    """A batch's task is resumed by its batch, which keeps the ledger.

    Raises:
        ConfigError: the directory is a task of a batch.
    """
    batch = directory.parent.parent
    if directory.parent.name == "tasks" and (batch / "batch.json").is_file():
        raise ConfigError(
            f"{directory} is task {directory.name} of batch {batch}: run the same "
            "`planrun batch` command again (with --retry-failed for failed jobs) to resume it"
        )


def check_unchanged(spec: PlanRunSpec, directory: Path, tree: str | None) -> None:
    """Refuse to resume the run in `directory` when the repository is no longer what the
    conversations explored.

    Raises:
        ConfigError: its files changed since the run started.
    """
    exclude = directory if directory.is_relative_to(spec.workspace) else None
    if tree is None:
        # The walk of the files runs beside the plans' first model calls: a run killed
        # before it finished never recorded them.
        raise ConfigError(
            f"run {directory.name} was stopped before its repository's files were recorded, "
            "so planrun cannot tell whether they changed since: plan again"
        )
    if not same_tree(spec.workspace, tree, exclude=exclude):
        raise ConfigError(
            f"files in {spec.workspace} changed since run {directory.name} started; its "
            "conversations describe a repository that is gone: plan again"
        )


@dataclass
class ResumePlan:
    """What resuming a run does with each of its plans."""

    directory: Path
    sandbox_root: Path
    resumption: Resumption = field(default_factory=Resumption)
    starting_over: list[str] = field(default_factory=list)
    """Plans made again from the start (their conversation ended for good, or is gone)."""
    unfinished: str = ""
    """Why the run needs finishing although every plan is kept ("" when it does not)."""
    notes: dict[str, AttemptNote] = field(default_factory=dict)
    spent_usd: float = 0.0
    """What the run cost so far, as its last report estimates it (0 without one)."""
    plan_costs: dict[str, float] = field(default_factory=dict)
    """What each plan of it cost so far, by label, as that report estimates it."""

    @property
    def kept(self) -> list[str]:
        return list(self.resumption.kept)

    @property
    def going_on(self) -> list[str]:
        return list(self.resumption.earlier)

    @property
    def to_run(self) -> list[str]:
        return [*self.going_on, *self.starting_over]

    @property
    def nothing_to_do(self) -> bool:
        return not self.to_run and not self.unfinished

    def set_aside(self) -> None:
        """Move the files of every plan made again (and the old report and recommended
        plan) to `.attempts/`. A conversation gone on with stays there until its new run
        has copied it (a resume stopped before then finds it there).

        Raises:
            ConfigError: `.attempts` holds a link.
        """
        directory = self.directory
        for label in self.to_run:
            sandbox = self.sandbox_root / label
            move_aside(directory, label, "resumed", self.notes[label], also=(sandbox,))
        stale = AttemptNote("", False, "replaced by a resumed run")
        synthesis_sandbox = self.sandbox_root / SYNTHESIS_LABEL
        move_aside(directory, SYNTHESIS_LABEL, "resumed", stale, also=(synthesis_sandbox,))
        reports = (directory / "report.json", directory / "report.html")
        move_aside(directory, "report", "resumed", stale, also=reports)


def plan_resume(spec: PlanRunSpec, directory: Path) -> ResumePlan:
    """Decide, from the report and files of the run in `directory`, what happens to each
    of its plans."""
    report = _report(directory)
    entries = _plan_entries(report)
    plan = ResumePlan(directory, sandbox_root_of(spec.workspace, directory))
    plan.spent_usd = _cost(((report or {}).get("totals") or {}).get("cost_usd"))
    plan.plan_costs = {label: _cost(entry.get("cost_usd")) for label, entry in entries.items()}
    for job in spec.jobs():
        label = job.label
        kept = kept_result(job, spec, directory)
        if kept is not None:
            plan.resumption.kept[label] = kept
            continue
        earlier = _earlier(plan, label, entries.get(label))
        if earlier is not None:
            plan.resumption.earlier[label] = earlier
        else:
            plan.starting_over.append(label)
    plan.unfinished = _unfinished(spec, report, len(plan.kept))
    return plan


def _earlier(plan: ResumePlan, label: str, entry: dict[str, Any] | None) -> EarlierAttempt | None:
    """The conversation a plan goes on with: its transcript in the run directory, or one
    an earlier resume set aside and never got going with."""
    directory = plan.directory
    transcript = read_text(directory / f"{label}.transcript.jsonl")
    if not transcript:
        earlier = earlier_attempt(directory, label, "")
        plan.notes[label] = AttemptNote("", earlier is not None, "no transcript")
        return earlier
    # Without a report the run was killed: every plan without a result was in flight.
    reason = str(entry.get("reason") or "stopped") if entry is not None else IN_FLIGHT
    resumable = entry.get("resumable") is True if entry is not None else True
    plan.notes[label] = AttemptNote("", resumable, reason)
    if not resumable or not can_go_on(transcript):
        return None
    draft = read_text(directory / f"{label}.md") or read_text(
        plan.sandbox_root / label / f"{label}.md"
    )
    return EarlierAttempt(transcript, split_document(draft)[1] if draft else None, reason)


def _unfinished(spec: PlanRunSpec, report: dict[str, Any] | None, valid: int) -> str:
    """Why a run whose plans are all kept still needs its synthesis or report."""
    if report is None:
        return "it has no report"
    if report.get("exit_code") == EXIT_INTERRUPTED:
        return "it was interrupted"
    recommended = report.get("recommended")
    made = isinstance(recommended, dict) and recommended.get("valid") is True
    if spec.synthesis and valid >= 2 and not made:
        return "it has no valid recommended plan"
    return ""


def kept_result(job: PlanJob, spec: PlanRunSpec, directory: Path) -> PlanResult | None:
    """A plan of the run that is complete and valid, rebuilt from its file."""
    plan_file = directory / f"{job.label}.md"
    try:
        text = read_sandbox_file(plan_file)
    except UnsafeFileError:
        return None
    if text is None:
        return None
    metadata, body = split_document(text)
    if metadata.get("status") != "complete" or metadata.get("valid") is not True:
        return None
    check = validate_plan(body, sections=required_sections(job), workspace=spec.workspace)
    if not check.ok:
        return None
    transcript = directory / f"{job.label}.transcript.jsonl"
    found = {
        "label": job.label,
        "plan_path": str(plan_file),
        "transcript": str(transcript) if transcript.is_file() else None,
    }
    # The front matter carries the summary's figures (someone may have edited them).
    result = PlanResult.from_dict({**metadata, **found}, plan_text=body, check=check)
    agent, model = result.agent or job.agent.name, result.model or spec.model_id
    return replace(result, agent=agent, model=model)


def _report(directory: Path) -> dict[str, Any] | None:
    """The run's report.json, if it has a readable one."""
    try:
        report = json.loads(read_text(directory / "report.json") or "null")
    except (ValueError, RecursionError):
        return None
    return report if isinstance(report, dict) else None


def _plan_entries(report: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The report's plan entries by label."""
    plans = report.get("plans") if report is not None else None
    if not isinstance(plans, list):
        return {}
    return {str(p.get("label")): p for p in plans if isinstance(p, dict)}


def _cost(value: object) -> float:
    """A cost as a report holds it (0 when it holds none, or something else)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return 0.0
    return max(0.0, float(value))
