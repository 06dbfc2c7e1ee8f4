"""The cost budget of a resumed run: a new one may replace the recorded one, what the run
spent before counts against it, and a budget that leaves nothing is refused before
anything starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from sandbox_runner.errors import ConfigError
from sandbox_runner.plans.history import run_name
from sandbox_runner.runs.plan_resume import ResumePlan
from sandbox_runner.runs.prepare import PlanRequest
from sandbox_runner.runs.run_spec import PlanRunSpec
from sandbox_runner.spend import usd


def with_budget(request: PlanRequest, budget: Mapping[str, object]) -> PlanRequest:
    """The recorded REQUEST with the cost caps BUDGET sets (`max_cost_usd`,
    `max_cost_usd_per_plan`); the run records it, so a later resume keeps them."""
    if not budget:
        return request
    return replace(request, overrides={**request.overrides, **budget})


def count_earlier_spend(spec: PlanRunSpec, resume: ResumePlan) -> None:
    """Charge what the run spent before (its last report's estimate) to SPEC's budget.

    Raises:
        ConfigError: that leaves the run nothing to spend, or a plan that goes on with its
            conversation (whose earlier calls count against its own cap) nothing.
    """
    name = run_name(resume.directory)
    spend, spent = spec.limits.spend, resume.spent_usd
    if spend is not None and spend.max_usd is not None:
        if spent >= spend.max_usd:
            raise ConfigError(
                f"run {name} has spent {usd(spent)} already, and its budget is "
                f"{usd(spend.max_usd)}: resume it with a higher --max-cost-usd"
            )
        spend.at_least(spent)
    cap = spec.limits.max_cost_usd
    for label in resume.going_on if cap is not None else ():
        cost = resume.plan_costs.get(label, 0.0)
        if cap is not None and cost >= cap:
            raise ConfigError(
                f"plan {label} of run {name} has spent {usd(cost)} already, and the cap per "
                f"plan is {usd(cap)}: resume it with a higher --max-cost-usd-per-plan"
            )
