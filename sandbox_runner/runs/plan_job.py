"""One call runs one Plan subagent end to end: model on the host, tools in a sandbox."""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandbox_runner import Model, Sandbox
from sandbox_runner.agents.conversation import saved_conversation, transcript_lines
from sandbox_runner.agents.definitions import PLAN, AgentDefinition, resolve_model
from sandbox_runner.agents.events import EventSink
from sandbox_runner.agents.plan_run import Continuation, PlanAgentRun
from sandbox_runner.agents.prompt import DEFAULT_SECTIONS, render_plan_prompt
from sandbox_runner.agents.run_state import PlanPaths
from sandbox_runner.errors import PlanrunError
from sandbox_runner.limits import RunLimits
from sandbox_runner.plans.critical_files import CRITICAL_FILES_TITLE
from sandbox_runner.plans.document import render_document
from sandbox_runner.plans.files import write_new
from sandbox_runner.plans.results import PlanResult, PlanStatus
from sandbox_runner.plans.revisions import keep_published
from sandbox_runner.runs.workspace import git_head
from sandbox_runner.sandbox.background import BackgroundStart
from sandbox_runner.tools.mcp_offer import McpTools
from sandbox_runner.types import Usage
from sandbox_runner.web_grant import WebGrant

SandboxFactory = Callable[[Path | None], Sandbox]
"""Makes a sandbox whose /plan the host keeps in the given directory (None: a probe
sandbox, such as the git-status checks, whose writes go nowhere)."""
"""Makes (does not start) a sandbox whose writable plan directory is the given host path."""


@dataclass(frozen=True)
class PlanJob:
    """What to plan, and from which point of view."""

    requirements: str
    perspective: str | None = None
    agent: AgentDefinition = PLAN
    """The agent that plans, resolved and checked (read-only; see prepare.plan_agent)."""
    context: str = ""
    """Extra context for the prompt (files the user attached, issue text)."""
    sections: tuple[str, ...] | None = None
    """A project template's sections, replacing the default ones."""
    name: str | None = None
    """The plan's file name (without .md); derived from the perspective when None."""
    sources: tuple[str, ...] = ()
    """For a synthesis: the labels of the plans it merges (in its front matter)."""
    memory: str = ""
    """The memory files' section of the prompt (agents.memory), "" when there are none."""
    scratch: bool = False
    """A scratch run: its commands may write, into a throw-away layer over the repository."""

    @property
    def label(self) -> str:
        """A file-name-safe name for this plan: its name, the perspective, or "plan"."""
        if self.name:
            return self.name
        if not self.perspective:
            return "plan"
        slug = re.sub(r"[^a-z0-9]+", "-", self.perspective.lower()).strip("-")
        return slug[:60] or "plan"


@dataclass(frozen=True)
class EarlierAttempt:
    """What a run that stopped left behind, for the next run of its job to go on with."""

    transcript: str
    plan: str | None
    """Its plan draft, if it wrote one."""
    reason: str
    """Why it stopped."""


def required_sections(job: PlanJob) -> list[str]:
    """The sections validation requires: the template's or the defaults, plus critical files."""
    sections = list(job.sections or DEFAULT_SECTIONS)
    if CRITICAL_FILES_TITLE not in sections:
        sections.append(CRITICAL_FILES_TITLE)
    return sections


def run_plan(
    job: PlanJob,
    *,
    workspace: Path,
    out_dir: Path,
    model: Model,
    model_id: str,
    sandbox_factory: SandboxFactory,
    limits: RunLimits | None = None,
    on_event: EventSink | None = None,
    cancel: threading.Event | None = None,
    sandbox_root: Path | None = None,
    allowed_tools: frozenset[str] | None = None,
    earlier: EarlierAttempt | None = None,
    front_matter: Mapping[str, object] | None = None,
    web: WebGrant | None = None,
    mcp: McpTools | None = None,
) -> PlanResult:
    """Run one Plan subagent and write `<label>.md` (with front matter) into out_dir.

    With `earlier`, the run goes on with that attempt's conversation and plan draft when
    its transcript is intact and was held under the same prompt and model; otherwise it
    starts over (the result says which: `continued`).

    Model and sandbox failures end in a result with status failed; nothing is lost.
    The sandbox's writable plan directory is `<sandbox_root>/<label>` (default
    `<out_dir>/.sandbox/<label>`); it must lie outside the workspace. allowed_tools, when
    given, narrows the read-only tools the definition offers (configuration can only take
    tools away, never add them); mcp, the running MCP servers, adds their read-only
    tools. web is the user's web grant: WebFetch and WebSearch are offered only with one.
    front_matter is added to the plan file's own (a batch job's fingerprint and attempt).

    Raises:
        FileExistsError: out_dir already holds a plan with this label.
    """
    resolved_model = resolve_model(job.agent, model_id)
    label = job.label
    final_path = out_dir / f"{label}.md"
    if final_path.exists():
        raise FileExistsError(f"{final_path} exists; planrun never overwrites a plan")
    sandbox_dir = (sandbox_root or out_dir / ".sandbox") / label
    sandbox_dir.mkdir(parents=True)
    paths = PlanPaths(sandbox_dir, f"{label}.md", out_dir / f"{label}.transcript.jsonl")
    prompt = render_plan_prompt(
        job.agent,
        perspective=job.perspective,
        plan_file=paths.container_plan_file,
        plan_exists=False,
        sections=list(job.sections) if job.sections else None,
        requirements_context=job.context,
        memory=job.memory,
        scratch=job.scratch,
    )
    continuation = _continuation(earlier, prompt, resolved_model)
    if continuation is not None and continuation.has_plan and earlier is not None:
        write_new(paths.host_plan_file, earlier.plan or "")
    started = datetime.now(UTC)
    # Read before the agent starts: the commit the plan is written against.
    base_commit = git_head(workspace)
    sandbox = BackgroundStart(sandbox_factory(sandbox_dir))
    run = PlanAgentRun(
        job.agent,
        model,
        resolved_model,
        sandbox,
        workspace=workspace,
        paths=paths,
        system_prompt=prompt,
        sections=required_sections(job),
        limits=limits,
        label=label,
        on_event=on_event,
        cancel=cancel,
        allowed_tools=allowed_tools,
        web=web,
        mcp=mcp,
        scratch=job.scratch,
    )
    sandbox.start()
    try:
        result = run.run(job.requirements, continuation)
    finally:
        problem = _stop(sandbox)
    if problem:
        # The plan is finished: a container that would not go away must not lose it.
        result = replace(result, reason="; ".join(filter(None, [result.reason, problem])))
    source = "plan" if earlier is None else "resume"
    front_matter = {"base_commit": base_commit, **(front_matter or {})}
    return _publish(result, job, workspace, final_path, started, front_matter, source)


def _continuation(
    earlier: EarlierAttempt | None, prompt: str, model_id: str
) -> Continuation | None:
    """The earlier attempt's conversation, if the new run can go on with it as it is."""
    if earlier is None:
        return None
    conversation = saved_conversation(transcript_lines(earlier.transcript))
    if not conversation.intact or (conversation.system, conversation.model) != (prompt, model_id):
        return None
    return Continuation(conversation, earlier.reason, has_plan=bool(earlier.plan))


def _stop(sandbox: Sandbox) -> str:
    try:
        sandbox.stop()
    except PlanrunError as error:
        return str(error)
    return ""


def _publish(
    result: PlanResult,
    job: PlanJob,
    workspace: Path,
    final_path: Path,
    started: datetime,
    front_matter: Mapping[str, object],
    source: str,
) -> PlanResult:
    """Write the plan with its metadata beside the transcript, and keep it as a revision
    made by SOURCE ("plan" or "resume"); the sandbox's copy stays."""
    if not result.plan_text.strip():
        return result
    metadata = {**plan_metadata(result, job, workspace, started), **front_matter}
    write_new(final_path, render_document(metadata, result.plan_text))
    if problem := keep_published(final_path, result.plan_text, source):
        result = replace(result, reason="; ".join(filter(None, [result.reason, problem])))
    return replace(result, plan_path=final_path)


def plan_metadata(
    result: PlanResult, job: PlanJob, workspace: Path, started: datetime
) -> dict[str, Any]:
    """The front matter of a plan file."""
    summary = result.to_dict()
    return {
        "id": str(uuid.uuid4()),
        "title": summary["title"],
        "perspective": job.perspective,
        "agent": result.agent,
        "model": result.model,
        "repository": str(workspace),
        "git_head": git_head(workspace),
        "status": result.status.value,
        "valid": result.valid,
        "reason": result.reason or None,
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": result.wall_seconds,
        "turns": result.turns,
        "tool_calls": result.tool_calls,
        "tokens": summary["tokens"],
        "critical_files": [entry["path"] for entry in summary["critical_files"]],
        "problems": summary["problems"],
        "suggested_commands": result.suggested_commands,
        "commands_run": summary["commands_run"],
        "proposed_patches": summary["proposed_patches"],
        "validation_feedback": summary["validation_feedback"],
        **({"synthesised_from": list(job.sources)} if job.sources else {}),
    }


def failed_result(
    job: PlanJob, model_id: str, reason: str, transcript: Path | None = None
) -> PlanResult:
    """A result for a run that could not even start."""
    return PlanResult(
        label=job.label,
        agent=job.agent.name,
        model=model_id,
        status=PlanStatus.FAILED,
        reason=reason,
        plan_path=None,
        plan_text="",
        check=None,
        suggested_commands=[],
        turns=0,
        tool_calls=0,
        usage=Usage(),
        wall_seconds=0.0,
        transcript=transcript,
    )
