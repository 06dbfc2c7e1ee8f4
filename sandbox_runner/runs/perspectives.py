"""The perspectives of a run on an executor: each a Plan subagent in its own sandbox, then
the synthesis; the futures are kept, so that an interrupt keeps what finished."""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import replace
from pathlib import Path

from sandbox_runner.agents.events import AgentEvent, EventSink
from sandbox_runner.errors import PlanrunError
from sandbox_runner.plans.results import PlanResult, Synthesis, SynthesisState
from sandbox_runner.runs.executor import Executor, ThreadExecutor
from sandbox_runner.runs.plan_job import (
    EarlierAttempt,
    PlanJob,
    SandboxFactory,
    failed_result,
    run_plan,
)
from sandbox_runner.runs.run_spec import ModelFactory, PlanRunSpec, Resumption
from sandbox_runner.runs.synthesis_step import (
    INTERRUPTED_NOTE,
    plan_synthesis,
    synthesis_off,
    synthesis_ran,
)
from sandbox_runner.tools.mcp_offer import McpTools

INTERRUPT_GRACE_SECONDS = 1.0
"""After a signal, how long subagents get to stop and save their plans (they poll every 0.1 s)."""


class PerspectiveRunner:
    """Runs the jobs on an executor and keeps their futures for an interrupt."""

    def __init__(
        self,
        spec: PlanRunSpec,
        out_dir: Path,
        model_factory: ModelFactory,
        sandbox_factory: SandboxFactory,
        on_event: EventSink | None,
        sandbox_root: Path,
        resumption: Resumption | None = None,
        executor: Executor | None = None,
        mcp: McpTools | None = None,
    ) -> None:
        self.spec = spec
        self.out_dir = out_dir
        self.model_factory = model_factory
        self.sandbox_factory = sandbox_factory
        self.on_event = on_event
        self.sandbox_root = sandbox_root
        self.executor = executor or ThreadExecutor(spec.parallel)
        self.cancel = self.executor.cancelled
        self.futures: list[Future[PlanResult]] = []
        self.resumption = resumption or Resumption()
        self.synthesis_job: PlanJob | None = None
        self.synthesis_future: Future[PlanResult] | None = None
        self.mcp = mcp
        """The running MCP servers, whose read-only tools the plans are offered."""

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
            agent=spec.synthesiser,
            context=spec.context,
            sections=spec.sections,
            jobs=jobs,
            results=results,
            memory=spec.memory,
        )
        if isinstance(planned, Synthesis):
            return planned
        if (spend := spec.limits.spend) is not None and spend.exhausted():
            return Synthesis(SynthesisState.SKIPPED, note=f"not started: {spend.reason()}")
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
            result = stopped_result(job, spec.model_id, "interrupted before it finished")
        return synthesis_ran(job, result, spec.synthesis_agent_override)

    def _outcome(self, job: PlanJob, future: Future[PlanResult]) -> PlanResult:
        if future.cancelled():
            return stopped_result(job, self.spec.model_id, "interrupted before it started")
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
                out_dir=self.out_dir,
                model=self.model_factory(job.label),
                model_id=spec.model_id,
                sandbox_factory=self.sandbox_factory,
                limits=spec.limits,
                on_event=self.on_event,
                cancel=self.cancel,
                sandbox_root=self.sandbox_root,
                allowed_tools=spec.allowed_tools,
                earlier=earlier,
                web=spec.web,
                mcp=self.mcp,
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
                    stopped_result(job, self.spec.model_id, "interrupted before it finished")
                )
        return results


def stopped_result(job: PlanJob, model_id: str, reason: str) -> PlanResult:
    """A plan an interrupt stopped before it had a result: resumable, since nothing about
    its conversation (if it had begun one) ended it."""
    return replace(failed_result(job, model_id, reason), resumable=True)
