"""The synthesis step of a run: one recommended plan merged from the perspectives' valid plans.

It runs after the perspectives, as one more read-only agent (the built-in Synthesis) in its
own sandbox, with the valid plans as its task. It writes `recommended.md`, validated like any
plan. Its failure is reported and never fails the run: the perspectives' plans stand.
"""

from __future__ import annotations

from collections.abc import Sequence

from sandbox_runner.agents.definitions import AgentDefinition
from sandbox_runner.agents.synthesis import SourcePlan, synthesis_sections, synthesis_task
from sandbox_runner.plans.results import PlanResult, Synthesis, SynthesisState
from sandbox_runner.runs.plan_job import PlanJob

SYNTHESIS_LABEL = "recommended"
"""The recommended plan's label: `recommended.md`, `recommended.transcript.jsonl`, and the
cassette `recommended.jsonl`. No perspective may take it."""
MIN_VALID_PLANS = 2
SINGLE_PLAN_NOTE = "a single plan has nothing to merge"
INTERRUPTED_NOTE = "the run was interrupted before the synthesis started"


def plan_synthesis(
    requirements: str,
    *,
    agent: AgentDefinition,
    context: str,
    sections: Sequence[str] | None,
    jobs: Sequence[PlanJob],
    results: Sequence[PlanResult],
    memory: str = "",
) -> PlanJob | Synthesis:
    """The synthesis job for these results, or (with fewer than two valid plans) the
    outcome that says why there is none."""
    valid = [(job, result) for job, result in zip(jobs, results, strict=True) if result.valid]
    if note := skip_note(results):
        return Synthesis(SynthesisState.SKIPPED, note=note)
    sources = [SourcePlan(job.label, job.perspective, result.plan_text) for job, result in valid]
    return PlanJob(
        requirements=synthesis_task(requirements, sources),
        perspective=None,
        agent=agent,
        context=context,
        sections=synthesis_sections(sections),
        name=SYNTHESIS_LABEL,
        sources=tuple(source.label for source in sources),
        memory=memory,
    )


def skip_note(results: Sequence[PlanResult]) -> str:
    """Why these results get no synthesis ("" when two or more are valid)."""
    valid = sum(1 for result in results if result.valid)
    if len(results) < MIN_VALID_PLANS:
        return SINGLE_PLAN_NOTE
    if valid < MIN_VALID_PLANS:
        verb = "is" if valid == 1 else "are"
        return (
            f"it needs at least {MIN_VALID_PLANS} valid plans; "
            f"{valid} of {len(results)} {verb} valid"
        )
    return ""


def synthesis_ran(job: PlanJob, result: PlanResult, agent_override: str) -> Synthesis:
    """The outcome of a synthesis that ran (or was started), however it ended."""
    return Synthesis(
        SynthesisState.RAN, result=result, sources=job.sources, agent_override=agent_override
    )


def synthesis_off(note: str) -> Synthesis:
    """The outcome of a run whose synthesis was turned off."""
    return Synthesis(SynthesisState.OFF, note=note or "turned off")
