"""The cost budget of a run as the report pages say it."""

from __future__ import annotations

from typing import Any

from sandbox_runner.spend import usd


def budget_words(report: dict[str, Any]) -> str:
    """E.g. "budget $2.00 per run, $0.50 per plan: reached"; "" when the run had no cap."""
    budget = report.get("budget") or {}
    run_cap, plan_cap = budget.get("max_cost_usd"), budget.get("max_cost_usd_per_plan")
    if run_cap is None and plan_cap is None:
        return ""
    caps = [f"{usd(run_cap)} per run" if run_cap is not None else ""]
    caps.append(f"{usd(plan_cap)} per plan" if plan_cap is not None else "")
    state = (
        "reached (the plans it stopped have status budget)"
        if budget.get("reached")
        else "not reached"
    )
    return f"budget {', '.join(cap for cap in caps if cap)}: {state}"
