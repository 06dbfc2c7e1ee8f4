"""Several Plan subagents at once, one per perspective, each in its own sandbox; then the
synthesis of a recommended plan, and the report."""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from sandbox_runner import Model
from sandbox_runner.agents.events import AgentEvent, EventSink
from sandbox_runner.agents.registry import Registry
from sandbox_runner.errors import PlanrunError
from sandbox_runner.limits import RunLimits
from sandbox_runner.paths import planrun_home
from sandbox_runner.plans.files import replace_file
from sandbox_runner.plans.report import Report, RunRecord, write_report
from sandbox_runner.plans.results import PlanResult, Synthesis, SynthesisState
from sandbox_runner.plans.workspace import (
    WorkspaceComparison,
    WorkspaceState,
    git_head,
    snapshot,
    tree_fingerprint,
    workspace_git_status,
)
from sandbox_runner.runs.executor import Executor, ThreadExecutor
from sandbox_runner.runs.git_probe import git_in_sandbox, in_background, settled
from sandbox_runner.runs.plan_job import (
    EarlierAttempt,
    PlanJob,
    SandboxFactory,
    failed_result,
    run_plan,
)
from sandbox_runner.runs.synthesis import (
    INTERRUPTED_NOTE,
    SYNTHESIS_LABEL,
    plan_synthesis,
    synthesis_off,
    synthesis_ran,
)

__all__ = [
    "PlanRunOutcome",
    "PlanRunSpec",
    "Resumption",
    "execute",
    "exit_code",
    "git_in_sandbox",
]

ModelFactory = Callable[[str], Model]
"""Makes the model of one plan, by label (a replayed cassette differs per perspective)."""

EXIT_OK, EXIT_PLAN_FAILED, EXIT_WORKSPACE_CHANGED = 0, 1, 3  # 2 (usage) is the CLI's
EXIT_INTERRUPTED = 130
RESERVED_LABELS = frozenset({"report", SYNTHESIS_LABEL})
GIT_STATUS_WAIT_SECONDS = 180.0
INTERRUPT_GRACE_SECONDS = 1.0
"""After a signal, how long subagents get to stop and save their plans (they poll every 0.1 s)."""
RUN_RECORD, RUN_RECORD_VERSION = "run.json", 1
INTERRUPTED_TREE_SECONDS = 1.0
INTERRUPTED_GIT_NOTE = "the run was interrupted before `git status` ran again"
"""After a signal, the tree is compared only if that takes no longer than this."""


@dataclass
class PlanRunSpec:
    """One `planrun plan` invocation, resolved: every path checked, every default applied."""

    name: str
    requirements: str
    workspace: Path
    out_dir: Path
    perspectives: list[str | None]
    model_id: str
    agent: str = "Plan"
    context: str = ""
    sections: tuple[str, ...] | None = None
    parallel: int = 4
    limits: RunLimits = field(default_factory=RunLimits)
    allowed_tools: frozenset[str] | None = None
    agent_override: str = ""
    """Which file replaced the built-in agent, for the report ("" when none did)."""
    synthesis: bool = True
    """Whether a recommended plan is synthesised from two or more valid plans."""
    synthesis_note: str = ""
    """Why the synthesis is off, for the report ("" when it is on)."""
    synthesis_agent_override: str = ""
    """Which file replaced the built-in Synthesis agent ("" when none did)."""
    request: dict[str, object] = field(default_factory=dict)
    """The request as given, kept in run.json so that the run can be resumed."""

    def jobs(self) -> list[PlanJob]:
        """One job per perspective, with unique labels (file names)."""
        jobs: list[PlanJob] = []
        # The report's own files share the directory: a perspective may not take their name.
        used: set[str] = set(RESERVED_LABELS)
        for perspective in self.perspectives:
            job = PlanJob(self.requirements, perspective, self.agent, self.context, self.sections)
            label, n = job.label, 2
            while label in used:
                label, n = f"{job.label}-{n}", n + 1
            used.add(label)
            jobs.append(replace(job, name=label))
        return jobs


@dataclass(frozen=True)
class Resumption:
    """What a resumed run keeps of the run it resumes, and what it goes on with."""

    kept: dict[str, PlanResult] = field(default_factory=dict)
    """Plans already complete and valid, by label: not run again."""
    earlier: dict[str, EarlierAttempt] = field(default_factory=dict)
    """Conversations that stopped, by label: their plans go on with them when they can."""


@dataclass
class PlanRunOutcome:
    """What a run produced: the record, the written report, and whether it was interrupted."""

    record: RunRecord
    report: Report
    interrupted: bool = False


def execute(
    spec: PlanRunSpec,
    *,
    model_factory: ModelFactory,
    sandbox_factory: SandboxFactory,
    registry: Registry,
    on_event: EventSink | None = None,
    stop_sandboxes: Callable[[], object] = lambda: None,
    on_stop: Callable[[], object] = lambda: None,
    resumption: Resumption | None = None,
) -> PlanRunOutcome:
    """Run every perspective, check the workspace did not change, and write the report
    (and run.json, which lets `planrun plans resume` repeat the run's request). A resumed
    run keeps the plans `resumption` holds and goes on with its conversations.

    On KeyboardInterrupt (or SystemExit) on_stop is called, the subagents are told to
    stop, their sandboxes are removed, what finished is kept and reported, and the
    outcome says it was interrupted.
    """
    started = datetime.now(UTC)
    exclude = spec.out_dir if spec.out_dir.is_relative_to(spec.workspace) else None
    sandbox_root = _sandbox_root(spec)
    jobs = spec.jobs()
    runner = _Runner(spec, model_factory, sandbox_factory, registry, on_event, sandbox_root)
    runner.resumption = resumption or Resumption()
    # The fingerprint is taken before anything starts; the first `git status` needs a
    # container of its own, so it runs beside the subagents' start (they cannot write
    # the workspace, and any change would show in the fingerprint anyway).
    fingerprint = tree_fingerprint(spec.workspace, exclude=exclude)
    record_request(spec, fingerprint)
    git_before = in_background(
        workspace_git_status,
        spec.workspace,
        exclude,
        git_in_sandbox(sandbox_factory),
    )
    interrupted = False
    try:
        results = runner.run(jobs)
        synthesis = runner.synthesise(jobs, results)
        after = snapshot(spec.workspace, exclude, git_in_sandbox(sandbox_factory))
    except (KeyboardInterrupt, SystemExit):
        # Ctrl-C or SIGTERM at any point of the run (the synthesis included): keep what
        # finished, compare the tree only (if that is quick), and still write the report.
        interrupted = True
        on_stop()
        results = runner.interrupted(jobs, stop_sandboxes)
        synthesis = runner.interrupted_synthesis()
        tree = tree_fingerprint(
            spec.workspace, exclude=exclude, time_limit=INTERRUPTED_TREE_SECONDS
        )
        after = WorkspaceState(tree, None)
    finally:
        if sandbox_root != spec.out_dir / ".sandbox":
            shutil.rmtree(sandbox_root, ignore_errors=True)
    git_status_before = settled(git_before, timeout=0 if interrupted else GIT_STATUS_WAIT_SECONDS)
    comparison = WorkspaceState(fingerprint, git_status_before).compare(
        after, why_not_later=INTERRUPTED_GIT_NOTE if interrupted else ""
    )
    record = _record(spec, jobs, results, synthesis, comparison, started, interrupted=interrupted)
    try:
        report = write_report(record)
    except KeyboardInterrupt:
        # A signal as the report is written: write it again, as an interrupted run (the
        # signal handler lets no second signal through while it is written).
        interrupted = True
        record = replace(record, exit_code=EXIT_INTERRUPTED)
        report = write_report(record)
    return PlanRunOutcome(record, report, interrupted)


def _record(
    spec: PlanRunSpec,
    jobs: list[PlanJob],
    results: list[PlanResult],
    synthesis: Synthesis,
    comparison: WorkspaceComparison,
    started: datetime,
    *,
    interrupted: bool,
) -> RunRecord:
    return RunRecord(
        name=spec.name,
        out_dir=spec.out_dir,
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
        exit_code=EXIT_INTERRUPTED if interrupted else exit_code(results, comparison.problem),
        agent_override=spec.agent_override,
        synthesis=synthesis,
    )


def record_request(spec: PlanRunSpec, tree: str | None) -> None:
    """run.json: the request and the repository's tree fingerprint as the run started."""
    document = {"planrun_run": RUN_RECORD_VERSION, "request": spec.request, "tree": tree}
    replace_file(spec.out_dir / RUN_RECORD, json.dumps(document, indent=2) + "\n")


def exit_code(results: list[PlanResult], workspace_problem: str) -> int:
    """3 if the workspace changed, else 1 if any plan failed or is invalid, else 0."""
    if workspace_problem:
        return EXIT_WORKSPACE_CHANGED
    return EXIT_OK if results and all(result.valid for result in results) else EXIT_PLAN_FAILED


def _sandbox_root(spec: PlanRunSpec) -> Path:
    # The sandboxes' writable plan directories must never be visible inside the
    # read-only workspace, so an --out inside the repository gets them elsewhere.
    if not spec.out_dir.is_relative_to(spec.workspace):
        return spec.out_dir / ".sandbox"
    scratch = planrun_home() / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{spec.name}-", dir=scratch))


class _Runner:
    """Runs the jobs on an executor and keeps their futures for an interrupt."""

    def __init__(
        self,
        spec: PlanRunSpec,
        model_factory: ModelFactory,
        sandbox_factory: SandboxFactory,
        registry: Registry,
        on_event: EventSink | None,
        sandbox_root: Path,
        executor: Executor | None = None,
    ) -> None:
        self.spec = spec
        self.model_factory = model_factory
        self.sandbox_factory = sandbox_factory
        self.registry = registry
        self.on_event = on_event
        self.sandbox_root = sandbox_root
        self.executor = executor or ThreadExecutor(spec.parallel)
        self.cancel = self.executor.cancelled
        self.futures: list[Future[PlanResult]] = []
        self.resumption = Resumption()
        self.synthesis_job: PlanJob | None = None
        self.synthesis_future: Future[PlanResult] | None = None

    def run(self, jobs: list[PlanJob]) -> list[PlanResult]:
        self.futures = []
        for job in jobs:
            kept = self.resumption.kept.get(job.label)
            if kept is not None:
                self.futures.append(self._kept(kept))
                continue
            work = functools.partial(self._one, job, self.resumption.earlier.get(job.label))
            self.futures.append(self.executor.submit(f"plan-{job.label}", work))
        pending: set[Future[PlanResult]] = set(self.futures)
        while pending:
            # A timeout keeps the main thread responsive to Ctrl-C.
            _, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
        return [self._outcome(job, future) for job, future in zip(jobs, self.futures, strict=True)]

    def synthesise(self, jobs: list[PlanJob], results: list[PlanResult]) -> Synthesis:
        """Merge the valid plans into a recommended plan (when on and there are two or more).

        It runs on the same executor, so Ctrl-C reaches it as it reaches the plans; however
        it fails, the outcome is reported and the plans are untouched.
        """
        spec = self.spec
        if not spec.synthesis:
            return synthesis_off(spec.synthesis_note)
        planned = plan_synthesis(
            spec.requirements,
            context=spec.context,
            sections=spec.sections,
            jobs=jobs,
            results=results,
        )
        if isinstance(planned, Synthesis):
            return planned
        self.synthesis_job = planned
        future = self.executor.submit("synthesis", functools.partial(self._one, planned))
        self.synthesis_future = future
        while not future.done():
            wait([future], timeout=0.5)  # a timeout keeps the main thread responsive to Ctrl-C
        return synthesis_ran(planned, self._outcome(planned, future), spec.synthesis_agent_override)

    def interrupted_synthesis(self) -> Synthesis:
        """The synthesis after a signal: kept if it finished, else reported as interrupted.

        Call after interrupted(), which stopped it and gave it the grace period."""
        spec, job, future = self.spec, self.synthesis_job, self.synthesis_future
        if not spec.synthesis:
            return synthesis_off(spec.synthesis_note)
        if job is None:
            return Synthesis(SynthesisState.SKIPPED, note=INTERRUPTED_NOTE)
        finished = future is not None and future.done() and not future.cancelled()
        if future is not None and finished and future.exception() is None:
            result = future.result()
        else:
            result = failed_result(job, spec.model_id, "interrupted before it finished")
        return synthesis_ran(job, result, spec.synthesis_agent_override)

    def _outcome(self, job: PlanJob, future: Future[PlanResult]) -> PlanResult:
        if future.cancelled():
            return failed_result(job, self.spec.model_id, "interrupted before it started")
        return future.result()

    def _kept(self, result: PlanResult) -> Future[PlanResult]:
        """A plan the resumed run keeps: finished already, and shown so."""
        if self.on_event is not None:
            kept = "kept from the run resumed"
            usage, calls = result.usage.total, result.tool_calls
            self.on_event(
                AgentEvent("finished", result.label, result.turns, None, kept, calls, usage, 0.0)
            )
        future: Future[PlanResult] = Future()
        future.set_result(result)
        return future

    def _one(self, job: PlanJob, earlier: EarlierAttempt | None = None) -> PlanResult:
        spec = self.spec
        try:
            return run_plan(
                job,
                workspace=spec.workspace,
                out_dir=spec.out_dir,
                model=self.model_factory(job.label),
                model_id=spec.model_id,
                sandbox_factory=self.sandbox_factory,
                registry=self.registry,
                limits=spec.limits,
                on_event=self.on_event,
                cancel=self.cancel,
                sandbox_root=self.sandbox_root,
                allowed_tools=spec.allowed_tools,
                earlier=earlier,
            )
        except (PlanrunError, OSError) as error:
            # One subagent failing never stops or loses the others.
            return self._failed(job, str(error))
        except Exception as error:
            return self._failed(job, f"internal error: {type(error).__name__}: {error}")

    def _failed(self, job: PlanJob, reason: str) -> PlanResult:
        """A plan that failed outside its agent loop (which reports its own failures):
        shown like any other failure, then kept as a failed result."""
        if self.on_event is not None:
            self.on_event(AgentEvent("failed", job.label, 0, None, reason, 0, 0, 0.0))
        return failed_result(job, self.spec.model_id, reason)

    def interrupted(
        self, jobs: list[PlanJob], stop_sandboxes: Callable[[], object]
    ) -> list[PlanResult]:
        """Stop every subagent, keep what finished, and mark the rest as interrupted."""
        self.executor.cancel()
        stop_sandboxes()
        running = [*self.futures, *filter(None, [self.synthesis_future])]
        wait(running, timeout=INTERRUPT_GRACE_SECONDS)
        results = []
        for index, job in enumerate(jobs):
            # Ctrl-C may come before every job had its future.
            future = self.futures[index] if index < len(self.futures) else None
            finished = future is not None and future.done() and not future.cancelled()
            if future is not None and finished and future.exception() is None:
                results.append(future.result())
            else:
                results.append(
                    failed_result(job, self.spec.model_id, "interrupted before it finished")
                )
        return results
