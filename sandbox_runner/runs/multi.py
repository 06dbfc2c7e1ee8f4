"""Several Plan subagents at once, one per perspective, each in its own sandbox; then the
synthesis of a recommended plan, and the report."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from sandbox_runner.agents.events import AgentEvent, EventSink
from sandbox_runner.paths import planrun_home
from sandbox_runner.plans.files import replace_file
from sandbox_runner.plans.report import Report, RunRecord, write_report
from sandbox_runner.plans.results import PlanResult, Synthesis
from sandbox_runner.runs.git_probe import git_in_sandbox
from sandbox_runner.runs.perspectives import PerspectiveRunner
from sandbox_runner.runs.plan_job import (
    PlanJob,
    SandboxFactory,
)
from sandbox_runner.runs.run_spec import ModelFactory, PlanRunSpec, Resumption
from sandbox_runner.runs.workspace import git_head
from sandbox_runner.runs.workspace_check import (
    BeforeCheck,
    Taken,
    WorkspaceComparison,
    WorkspaceState,
    take_after,
)
from sandbox_runner.sandbox.host_walk import FileTree
from sandbox_runner.tools.mcp_offer import McpTools

__all__ = [
    "PlanRunOutcome",
    "PlanRunSpec",
    "Resumption",
    "execute",
    "exit_code",
    "git_in_sandbox",
]

EXIT_OK, EXIT_PLAN_FAILED, EXIT_WORKSPACE_CHANGED = 0, 1, 3  # 2 (usage) is the CLI's
EXIT_INTERRUPTED = 130
RUN_RECORD, RUN_RECORD_VERSION = "run.json", 1
INTERRUPTED_TREE_SECONDS = 1.0
"""After a signal, the tree is compared only if that takes no longer than this."""
INTERRUPTED_GIT_NOTE = "the run was interrupted before it ran again"
INTERRUPTED_BEFORE_NOTE = "the run was interrupted before the check's first part finished"


@dataclass
class PlanRunOutcome:
    """What a run produced: the record, the written report, and whether it was interrupted."""

    record: RunRecord
    report: Report
    interrupted: bool = False


def execute(
    spec: PlanRunSpec,
    out_dir: Path,
    *,
    model_factory: ModelFactory,
    sandbox_factory: SandboxFactory,
    on_event: EventSink | None = None,
    stop_sandboxes: Callable[[], object] = lambda: None,
    on_stop: Callable[[], object] = lambda: None,
    resumption: Resumption | None = None,
    mcp: McpTools | None = None,
) -> PlanRunOutcome:
    """Run every perspective in out_dir, check the workspace did not change, and write the
    report (and run.json, which lets `planrun plans resume` repeat the run's request). A resumed
    run keeps the plans `resumption` holds and goes on with its conversations.

    On KeyboardInterrupt (or SystemExit) on_stop is called, the subagents are told to
    stop, their sandboxes are removed, what finished is kept and reported, and the
    outcome says it was interrupted.
    """
    started = datetime.now(UTC)
    exclude = out_dir if out_dir.is_relative_to(spec.workspace) else None
    sandbox_root = _sandbox_root(spec.workspace, out_dir)
    jobs = spec.jobs()
    runner = PerspectiveRunner(
        spec, out_dir, model_factory, sandbox_factory, on_event, sandbox_root, resumption,
        mcp=mcp,
    )  # fmt: skip
    # The state before the run is taken in the background while the plans start (their
    # sandboxes mount the repository read-only, so they cannot change it meanwhile), and
    # settled before the state after is taken.
    record_request(spec, out_dir, None)
    run_git = git_in_sandbox(sandbox_factory)
    before = BeforeCheck(spec.workspace, exclude, run_git, on_files=_recording_tree(spec, out_dir))
    interrupted = False
    try:
        results = runner.run(jobs)
        synthesis = runner.synthesise(jobs, results)
        settled_before = before.settle()
        _say_checking(settled_before, on_event)
        after = take_after(settled_before, spec.workspace, exclude, run_git)
    except (KeyboardInterrupt, SystemExit):
        # Ctrl-C or SIGTERM at any point of the run (the synthesis included): keep what
        # finished, compare the tree only (if that is quick), and still write the report.
        interrupted = True
        on_stop()
        results = runner.interrupted(jobs, stop_sandboxes)
        synthesis = runner.interrupted_synthesis()
        settled_before = before.settle(
            files_wait=INTERRUPTED_TREE_SECONDS, git_wait=0, why_late=INTERRUPTED_BEFORE_NOTE
        )
        after = take_after(
            settled_before,
            spec.workspace,
            exclude,
            None,
            git_missing=INTERRUPTED_GIT_NOTE,
            when="after the run was interrupted",
            time_limit=INTERRUPTED_TREE_SECONDS,
        )
    finally:
        if sandbox_root != out_dir / ".sandbox":
            shutil.rmtree(sandbox_root, ignore_errors=True)
    comparison = settled_before.compare(after)
    record = _record(
        spec, out_dir, jobs, results, synthesis, comparison, started, interrupted=interrupted
    )
    try:
        report = write_report(record)
    except KeyboardInterrupt:
        # A signal as the report is written: write it again, as an interrupted run (the
        # signal handler lets no second signal through while it is written).
        interrupted = True
        record = replace(record, exit_code=EXIT_INTERRUPTED)
        report = write_report(record)
    return PlanRunOutcome(record, report, interrupted)


CHECKING_NOTICE = "checking that the repository did not change (its files and `git status`)…"
SLOW_WALK_MS = 1000
"""A walk before the run that took longer: the one after takes as long, so it is said."""


def _say_checking(before: WorkspaceState, on_event: EventSink | None) -> None:
    """Tell the user what the seconds after the last plan are spent on, when they are
    seconds (a large repository): a notice of no subagent."""
    if on_event is not None and (before.files.ms or 0) > SLOW_WALK_MS:
        on_event(AgentEvent("notice", "", 0, None, CHECKING_NOTICE, 0, 0, 0.0))


def _record(
    spec: PlanRunSpec,
    out_dir: Path,
    jobs: list[PlanJob],
    results: list[PlanResult],
    synthesis: Synthesis,
    comparison: WorkspaceComparison,
    started: datetime,
    *,
    interrupted: bool,
) -> RunRecord:
    return RunRecord(
        name=out_dir.name,
        out_dir=out_dir,
        requirements=spec.requirements,
        repository=str(spec.workspace),
        git_head=git_head(spec.workspace),
        started_at=started,
        finished_at=datetime.now(UTC),
        results=results,
        perspectives=[job.perspective for job in jobs],
        workspace_unchanged=not comparison.problem,
        workspace_problem=comparison.problem,
        workspace_check=comparison.check,
        workspace_check_note=comparison.note,
        workspace_changed_paths=list(comparison.changed),
        workspace_changed_more=comparison.changed_more,
        workspace_check_ms=comparison.timings_ms,
        exit_code=EXIT_INTERRUPTED if interrupted else exit_code(results, comparison.problem),
        agent_override=spec.agent_override,
        synthesis=synthesis,
        scratch=spec.scratch,
        budget={
            "max_cost_usd": spec.limits.spend.max_usd if spec.limits.spend else None,
            "max_cost_usd_per_plan": spec.limits.max_cost_usd,
        },
    )


def record_request(spec: PlanRunSpec, out_dir: Path, tree: str | None) -> None:
    """run.json: the request and the repository's tree fingerprint as the run started."""
    document = {"planrun_run": RUN_RECORD_VERSION, "request": spec.request, "tree": tree}
    replace_file(out_dir / RUN_RECORD, json.dumps(document, indent=2) + "\n")


def _recording_tree(spec: PlanRunSpec, out_dir: Path) -> Callable[[Taken[FileTree]], None]:
    """Writes the tree's digest into run.json once the walk is done (from its thread)."""

    def record(taken: Taken[FileTree]) -> None:
        record_request(spec, out_dir, taken.value.digest if taken.value is not None else None)

    return record


def exit_code(results: list[PlanResult], workspace_problem: str) -> int:
    """3 if the workspace changed, else 1 if any plan failed or is invalid, else 0."""
    if workspace_problem:
        return EXIT_WORKSPACE_CHANGED
    return EXIT_OK if results and all(result.valid for result in results) else EXIT_PLAN_FAILED


def sandbox_root_of(workspace: Path, out_dir: Path) -> Path:
    """Where the sandboxes of a run in out_dir keep their plan directories: `<out>/.sandbox`,
    or, for an --out inside the repository, a place of its own under ~/.planrun/tmp (the
    sandboxes' writable directories must never be visible inside the read-only workspace).
    The same for every run of that directory, so that a resumed run finds a killed run's
    drafts."""
    if not out_dir.is_relative_to(workspace):
        return out_dir / ".sandbox"
    digest = hashlib.sha256(str(out_dir).encode()).hexdigest()[:12]
    return planrun_home() / "tmp" / f"{out_dir.name}-{digest}"


def _sandbox_root(workspace: Path, out_dir: Path) -> Path:
    root = sandbox_root_of(workspace, out_dir)
    root.mkdir(parents=True, exist_ok=True)
    return root
