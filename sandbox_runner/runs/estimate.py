"""What a plan run would do, and a rough estimate of its tokens and cost, without starting
anything (`planrun plan --dry-run`): no container, no model call, no run directory."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from sandbox_runner.agents.definitions import resolve_model
from sandbox_runner.agents.prompt import render_plan_prompt
from sandbox_runner.config import LoadedSettings
from sandbox_runner.limits import RunLimits
from sandbox_runner.mcp.launch import McpChoice
from sandbox_runner.mcp.servers import load_servers
from sandbox_runner.plans.inputs import read_requirements
from sandbox_runner.plans.pricing import estimate_cost
from sandbox_runner.runs.plan_job import PlanJob
from sandbox_runner.runs.planning import PlanOptions
from sandbox_runner.runs.prepare import Warn, prepare
from sandbox_runner.runs.run_spec import PlanRunSpec
from sandbox_runner.sandbox.image import IMAGE_REPOSITORY
from sandbox_runner.tools.schemas import tools_for
from sandbox_runner.types import Usage

CHARS_PER_TOKEN = 4
"""The heuristic the estimate counts tokens with: about four characters of English text
or code per token. No request is sent to count them exactly, so a dry run costs nothing."""
OUTPUT_TOKENS_PER_TURN = 1_000
"""The output assumed of each turn (tool calls are short; the plan itself is longer)."""
PLAN_TOOLS = ("Write", "Edit")
"""The tools every plan agent is given besides its definition's (its plan file)."""


def count_tokens(text: str) -> int:
    """The tokens TEXT takes, by the CHARS_PER_TOKEN heuristic (at least 1 for any text)."""
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class PlanEstimate:
    """One plan's prompt and what its turns would take."""

    label: str
    perspective: str | None
    agent: str
    model: str
    prompt_tokens: int
    """System prompt, tool definitions and requirements (with the context files)."""
    max_turns: int

    def usage(self, turns: int) -> Usage:
        """Tokens of TURNS turns, each sending the prompt again (uncached) and writing
        OUTPUT_TOKENS_PER_TURN; the conversation's growth is left out."""
        return Usage(
            input_tokens=turns * self.prompt_tokens,
            output_tokens=turns * OUTPUT_TOKENS_PER_TURN,
        )

    def to_dict(self) -> dict[str, object]:
        one, full = self.usage(1), self.usage(self.max_turns)
        return {
            "label": self.label,
            "perspective": self.perspective,
            "agent": self.agent,
            "model": self.model,
            "prompt_tokens": self.prompt_tokens,
            "max_turns": self.max_turns,
            "one_turn": {"tokens": one.total, "cost_usd": _cost(self.model, one)},
            "max_turns_estimate": {"tokens": full.total, "cost_usd": _cost(self.model, full)},
        }


@dataclass(frozen=True)
class RunEstimate:
    """What `planrun plan` would run, and an estimate of its tokens and cost."""

    plans: list[PlanEstimate]
    sandboxes: int
    """Containers it would start: one per plan (the synthesis reuses none)."""
    image: str
    scratch: bool
    web: list[str]
    mcp_servers: list[str]
    synthesis: bool
    max_cost_usd: float | None
    max_cost_usd_per_plan: float | None

    def totals(self) -> dict[str, object]:
        """Tokens and cost of one turn of every plan, and of every plan using all its turns."""
        return totals_of(self.plans)

    def to_dict(self) -> dict[str, object]:
        return {
            "dry_run": True,
            "token_count": f"heuristic: {CHARS_PER_TOKEN} characters per token",
            "output_tokens_per_turn": OUTPUT_TOKENS_PER_TURN,
            "plans": [plan.to_dict() for plan in self.plans],
            "sandboxes": self.sandboxes,
            "image": self.image,
            "scratch": self.scratch,
            "web": self.web,
            "mcp_servers": self.mcp_servers,
            "synthesis": self.synthesis,
            "max_cost_usd": self.max_cost_usd,
            "max_cost_usd_per_plan": self.max_cost_usd_per_plan,
            "totals": self.totals(),
        }


def estimate_plan(job: PlanJob, label: str, model_id: str, limits: RunLimits) -> PlanEstimate:
    """The prompt of JOB's first call, as run_plan would build it, counted."""
    system = render_plan_prompt(
        job.agent,
        perspective=job.perspective,
        plan_file=f"/plan/{label}.md",
        plan_exists=False,
        sections=list(job.sections) if job.sections else None,
        requirements_context=job.context,
        memory=job.memory,
        scratch=job.scratch,
    )
    names = dict.fromkeys([*job.agent.planrun_tools(), *PLAN_TOOLS])
    tools = json.dumps([spec.to_param() for spec in tools_for(names)])
    tokens = count_tokens(system) + count_tokens(tools) + count_tokens(job.requirements)
    return PlanEstimate(
        label=label,
        perspective=job.perspective,
        agent=job.agent.name,
        model=resolve_model(job.agent, model_id),
        prompt_tokens=tokens,
        max_turns=limits.max_turns,
    )


def estimate_run(spec: PlanRunSpec, loaded: LoadedSettings, mcp: McpChoice) -> RunEstimate:
    """What SPEC would run, estimated; nothing starts.

    Raises:
        ConfigError: the user's config or the --mcp-config file is invalid.
    """
    settings = loaded.settings
    jobs = spec.jobs()
    servers = load_servers(
        spec.workspace, settings.mcp_servers, config_file=mcp.config_file, strict=mcp.strict
    )
    image = f"{settings.image} (with planrun's tool server)" if settings.image else IMAGE_REPOSITORY
    return RunEstimate(
        plans=[estimate_plan(job, job.label, spec.model_id, spec.limits) for job in jobs],
        sandboxes=len(jobs),
        image=image,
        scratch=spec.scratch,
        web=list(spec.web.entries) if spec.web else [],
        mcp_servers=[server.name for server in servers.servers],
        synthesis=spec.synthesis and len(jobs) > 1,
        max_cost_usd=settings.max_cost_usd,
        max_cost_usd_per_plan=settings.max_cost_usd_per_plan,
    )


def dry_run(options: PlanOptions, *, warn: Warn) -> RunEstimate:
    """What `planrun plan` with OPTIONS would run, estimated: its inputs are checked as
    for a run (a usage error raises the same ConfigError), but nothing starts.

    Raises:
        ConfigError, WorkspaceError, InputError: a usage or configuration error.
    """
    requirements = read_requirements(options.requirements, options.requirements_file)
    spec, loaded = prepare(options.request(requirements), warn)
    return estimate_run(spec, loaded, options.mcp)


def totals_of(plans: Sequence[PlanEstimate]) -> dict[str, object]:
    """Tokens and cost of one turn of every plan, and of every plan using all its turns
    (`cost_usd` None when a plan's model has no list price)."""
    one = [plan.usage(1) for plan in plans]
    full = [plan.usage(plan.max_turns) for plan in plans]
    return {"one_turn": _summed(plans, one), "max_turns_estimate": _summed(plans, full)}


def _cost(model: str, usage: Usage) -> float | None:
    cost = estimate_cost(model, usage)
    return None if cost is None else round(cost, 4)


def _summed(plans: Sequence[PlanEstimate], usages: Sequence[Usage]) -> dict[str, object]:
    costs = [estimate_cost(plan.model, usage) for plan, usage in zip(plans, usages, strict=True)]
    known = [cost for cost in costs if cost is not None]
    return {
        "tokens": sum(usage.total for usage in usages),
        "cost_usd": round(sum(known), 4) if known and len(known) == len(costs) else None,
    }
