"""A resumed run's cost budget: a new one replaces the recorded caps, what the run spent
before counts against it, and a budget already spent is refused before anything starts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sandbox_runner.errors import ConfigError
from sandbox_runner.limits import RunLimits
from sandbox_runner.runs.plan_resume import plan_resume
from sandbox_runner.runs.prepare import PlanRequest
from sandbox_runner.runs.resume_budget import count_earlier_spend, with_budget
from sandbox_runner.runs.run_spec import PlanRunSpec
from sandbox_runner.spend import Spend
from tests.unit.test_plan_resume import failed_run

__all__ = ["failed_run"]  # the fixture, used by name


def priced(out: Path, costs: dict[str, object], total: object) -> None:
    """Give the run's report the costs a priced model would have left in it."""
    report = json.loads((out / "report.json").read_text())
    for entry in report["plans"]:
        entry["cost_usd"] = costs[entry["label"]]
    report["totals"]["cost_usd"] = total
    (out / "report.json").write_text(json.dumps(report))


def with_limits(spec: PlanRunSpec, max_usd: float | None, per_plan: float | None) -> PlanRunSpec:
    spend = Spend(max_usd) if max_usd is not None else None
    return replace(spec, limits=RunLimits(max_cost_usd=per_plan, spend=spend))


def test_a_new_budget_replaces_only_the_caps_it_sets() -> None:
    recorded = PlanRequest("x", overrides={"max_cost_usd": 2.0, "image": "mine"})
    assert with_budget(recorded, {}) is recorded
    again = with_budget(recorded, {"max_cost_usd_per_plan": 0.5})
    assert again.overrides == {"max_cost_usd": 2.0, "image": "mine", "max_cost_usd_per_plan": 0.5}
    assert with_budget(recorded, {"max_cost_usd": 5.0}).overrides["max_cost_usd"] == 5.0
    assert recorded.overrides["max_cost_usd"] == 2.0  # the recorded request is unchanged


def test_what_the_run_spent_counts_against_its_budget(
    failed_run: tuple[PlanRunSpec, Path],
) -> None:
    spec, out = failed_run
    priced(out, {"simplicity": 0.7, "security": 0.8}, 1.5)
    resume = plan_resume(spec, out)
    assert resume.spent_usd == 1.5
    assert resume.plan_costs == {"simplicity": 0.7, "security": 0.8}
    assert resume.going_on == ["simplicity", "security"]
    higher = with_limits(spec, 2.0, None)
    count_earlier_spend(higher, resume)
    assert higher.limits.spend is not None
    assert higher.limits.spend.spent == 1.5 and higher.limits.spend.left() == pytest.approx(0.5)


@pytest.mark.parametrize("max_usd", [1.0, 1.5])
def test_a_budget_the_run_has_spent_already_is_a_usage_error(
    failed_run: tuple[PlanRunSpec, Path], max_usd: float
) -> None:
    spec, out = failed_run
    priced(out, {"simplicity": 0.7, "security": 0.8}, 1.5)
    with pytest.raises(ConfigError) as raised:
        count_earlier_spend(with_limits(spec, max_usd, None), plan_resume(spec, out))
    message = str(raised.value)
    assert message == (
        f"run {out} has spent $1.50 already, and its budget is ${max_usd:.2f}: resume it with "
        "a higher --max-cost-usd"
    )


def test_a_cap_per_plan_that_a_going_on_plan_has_spent_is_a_usage_error(
    failed_run: tuple[PlanRunSpec, Path],
) -> None:
    spec, out = failed_run
    priced(out, {"simplicity": 0.7, "security": 0.8}, 1.5)
    resume = plan_resume(spec, out)
    count_earlier_spend(with_limits(spec, None, 0.9), resume)  # both have some left
    with pytest.raises(ConfigError, match=r"^plan security of run .* has spent \$0\.80 already"):
        count_earlier_spend(with_limits(spec, None, 0.75), resume)


@pytest.mark.parametrize("cost", ["1.5", True, -3, float("nan"), None, [1]])
def test_a_report_cost_that_is_not_a_number_counts_as_nothing(
    failed_run: tuple[PlanRunSpec, Path], cost: object
) -> None:
    spec, out = failed_run
    priced(out, {"simplicity": cost, "security": cost}, cost)
    resume = plan_resume(spec, out)
    assert resume.spent_usd == 0.0 and set(resume.plan_costs.values()) == {0.0}
    count_earlier_spend(with_limits(spec, 0.01, 0.01), resume)
