"""`--dry-run` of `planrun plan` and `planrun batch`: what would run, and its estimated
tokens and cost."""

from __future__ import annotations

import json

import click

from sandbox_runner.batch.run import DryRun, PlannedJob
from sandbox_runner.runs.estimate import (
    CHARS_PER_TOKEN,
    OUTPUT_TOKENS_PER_TURN,
    PlanEstimate,
    RunEstimate,
    dry_run,
    totals_of,
)
from sandbox_runner.runs.planning import PlanOptions
from sandbox_runner.runs.prepare import Warn
from sandbox_runner.safe_text import one_line
from sandbox_runner.spend import usd


def show_estimate(options: PlanOptions, *, warn: Warn, as_json: bool) -> None:
    """Print what `planrun plan` with OPTIONS would run and what it may cost (JSON with
    AS_JSON); starts nothing."""
    estimate = dry_run(options, warn=warn)
    if as_json:
        click.echo(json.dumps(estimate.to_dict(), indent=2))
        return
    for line in estimate_lines(estimate):
        click.echo(line)


def estimate_lines(estimate: RunEstimate) -> list[str]:
    """The dry run as lines for a person."""
    lines = ["planrun plan --dry-run: nothing was started and nothing was paid", ""]
    for plan in estimate.plans:
        view = one_line(plan.perspective or "(no perspective)")
        lines.append(
            f"  plan {plan.label}: {view}; agent {plan.agent}, model {plan.model}, "
            f"prompt ~{plan.prompt_tokens:,} tokens, up to {plan.max_turns} turns"
        )
    web = ", ".join(estimate.web) or "none"
    servers = ", ".join(estimate.mcp_servers) or "none"
    commands = "scratch (writes go to a throw-away layer)" if estimate.scratch else "read-only"
    lines += [
        f"  sandboxes: {estimate.sandboxes} (image {estimate.image})",
        f"  commands: {commands}",
        f"  web grant: {web}",
        f"  MCP servers: {servers}",
        f"  synthesis: {'on' if estimate.synthesis else 'off'}",
        f"  budget: {_cap(estimate.max_cost_usd)} per run, "
        f"{_cap(estimate.max_cost_usd_per_plan)} per plan",
        "",
    ]
    totals = estimate.totals()
    for key, what in (("one_turn", "one turn of each plan"), ("max_turns_estimate", "every turn")):
        lines.append(f"  estimate, {what}: {_figure(totals[key])}")
    lines.append(
        f"  (tokens counted as {CHARS_PER_TOKEN} characters each; each turn resends the "
        f"prompt uncached and writes {OUTPUT_TOKENS_PER_TURN:,} tokens; list prices; "
        "the synthesis is not included)"
    )
    return lines


def batch_estimate(jobs: list[PlannedJob]) -> dict[str, object]:
    """The estimate of the jobs of a batch that would run."""
    return totals_of([job.estimate for job in jobs if job.estimate is not None])


def budget_fit(run: DryRun, totals: dict[str, object]) -> dict[str, object]:
    """The batch's budget against its estimate: the cap, what earlier runs spent, what is
    left, and whether the estimate fits what is left ("yes": every turn of every job does;
    "maybe": one turn of each job does, every turn does not; "no": not even one turn;
    None: no cap, or no price known)."""
    left = None if run.max_cost_usd is None else max(run.max_cost_usd - run.spent_usd, 0.0)
    one, every = (_cost(totals[key]) for key in ("one_turn", "max_turns_estimate"))
    fits = None
    if left is not None and one is not None and every is not None:
        fits = "yes" if every <= left else "maybe" if one <= left else "no"
    return {
        "max_cost_usd": run.max_cost_usd,
        "spent_usd": round(run.spent_usd, 6),
        "left_usd": None if left is None else round(left, 6),
        "fits": fits,
    }


def budget_words(fit: dict[str, object], totals: dict[str, object]) -> str:
    """The budget of a batch's dry run, and whether its estimate fits, in one line."""
    cap, left, spent = fit["max_cost_usd"], fit["left_usd"], fit["spent_usd"]
    if not isinstance(cap, float) or not isinstance(left, float):
        return "no cap (--max-cost-usd sets one)"
    text = f"{usd(cap)} for the batch"
    if isinstance(spent, float) and spent > 0:
        text += f" ({usd(spent)} spent by earlier runs, {usd(left)} left)"
    one, every = (_cost(totals[key]) for key in ("one_turn", "max_turns_estimate"))
    if fit["fits"] == "yes":
        return f"{text}; every turn of every job ({usd(every or 0.0)}) fits it"
    if fit["fits"] == "maybe":
        return (
            f"{text}; one turn of each job ({usd(one or 0.0)}) fits it, every turn "
            f"({usd(every or 0.0)}) does not: the budget may stop jobs"
        )
    if fit["fits"] == "no":
        return f"{text}; not even one turn of each job ({usd(one or 0.0)}) fits it"
    return f"{text}; whether the estimate fits is unknown (model not in the price table)"


def _cost(figure: object) -> float | None:
    cost = figure.get("cost_usd") if isinstance(figure, dict) else None
    return cost if isinstance(cost, float) else None


def estimate_note(estimate: PlanEstimate | None) -> str:
    """A job's estimate at the end of its dry-run line ("" for a job that would not run)."""
    if estimate is None:
        return ""
    return f"  (~{estimate.prompt_tokens:,} prompt tokens, up to {estimate.max_turns} turns)"


def estimate_words(totals: dict[str, object]) -> str:
    """A batch's estimate in one line."""
    return (
        f"one turn of each job {_figure(totals['one_turn'])}; every turn "
        f"{_figure(totals['max_turns_estimate'])} ({CHARS_PER_TOKEN} characters a token, "
        f"{OUTPUT_TOKENS_PER_TURN:,} output tokens a turn, list prices)"
    )


def _figure(figure: object) -> str:
    assert isinstance(figure, dict)
    cost = figure["cost_usd"]
    money = usd(cost) if isinstance(cost, float) else "unknown (model not in the price table)"
    return f"~{figure['tokens']:,} tokens, {money}"


def _cap(amount: float | None) -> str:
    return "no cap" if amount is None else usd(amount)
