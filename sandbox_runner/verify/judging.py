"""`planrun verify --judge`: the checks before the judge may run (the API key, the model,
Docker and the image, each a one-line usage error), then the judge itself, its files in a
new `~/.planrun/judge/<name>/`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sandbox_runner import Model, Sandbox
from sandbox_runner.config import LoadedSettings, load_settings
from sandbox_runner.model import check_model_options, create_model
from sandbox_runner.paths import planrun_home
from sandbox_runner.plans.names import claim_directory
from sandbox_runner.runs.preflight import AccessCheck, preflight
from sandbox_runner.verify.change_diff import change_diff
from sandbox_runner.verify.changes import Change
from sandbox_runner.verify.git_copy import GitError
from sandbox_runner.verify.judge_run import JUDGE_LABEL, JudgeResult, run_judge
from sandbox_runner.verify.judge_task import judge_prompt, judge_task
from sandbox_runner.verify.plan_refs import PlanRefs
from sandbox_runner.verify.verdict_file import VERDICT_FILE

__all__ = ["JudgeHost", "JudgeRequest", "PreparedJudge", "judge_change", "prepare_judge"]

JUDGE_MODEL_HINT = "set it with --model, or planning_model in the config"
SandboxFactory = Callable[[Path | None], Sandbox]


class JudgeHost(Protocol):
    """What the judge needs of the machine that drives it (the CLI's services)."""

    def sandbox_factory(
        self, workspace: Path, loaded: LoadedSettings
    ) -> Callable[[str], SandboxFactory]: ...


@dataclass(frozen=True)
class JudgeRequest:
    """The judge's flags."""

    model: str | None = None
    """The model (None: the configured planning model)."""
    max_cost_usd: float | None = None
    """The most the judge may cost (list-price estimate); None: the configured cap."""


@dataclass(frozen=True)
class PreparedJudge:
    """A judge that passed its checks, ready to run."""

    model_id: str
    settings: LoadedSettings
    sandboxes: Callable[[str], SandboxFactory] | None
    """Makes the judge's sandbox (None: the plan has no step, so nothing runs)."""


def prepare_judge(
    workspace: Path, refs: PlanRefs, request: JudgeRequest, host: JudgeHost
) -> PreparedJudge:
    """Check everything the judge needs before anything runs or is paid for.

    Raises:
        ConfigError: no API key, or a setting out of range.
        PreflightError: the API refuses the key or does not know the model, or Docker or
            the image is missing (one line each).
    """
    flags = {"planning_model": request.model, "max_cost_usd": request.max_cost_usd}
    loaded = load_settings(workspace, flags=flags)
    model_id = loaded.planning_model_id()
    if not refs.steps:
        return PreparedJudge(model_id, loaded, None)
    check_model_options(None, None, [JUDGE_LABEL], os.environ)
    access = AccessCheck([model_id], JUDGE_MODEL_HINT)
    sandboxes = preflight(lambda: host.sandbox_factory(workspace, loaded), access)
    return PreparedJudge(model_id, loaded, sandboxes)


def judge_change(
    judge: PreparedJudge,
    workspace: Path,
    refs: PlanRefs,
    change: Change,
    paths: list[str],
    *,
    model: Model | None = None,
) -> JudgeResult:
    """Ask the judge about each Detailed Step of REFS, given CHANGE (the diff of PATHS,
    the changed files verify holds to the plan); MODEL, when given, answers instead of
    the API. Never raises for the judge's failures."""
    steps = [step.detail or step.text for step in refs.steps]
    if judge.sandboxes is None or not steps:
        return JudgeResult(judge.model_id, (), reason="the plan has no Detailed Steps to judge")
    try:
        diff = change_diff(workspace, change, paths)
    except GitError as error:
        return JudgeResult(judge.model_id, (), reason=f"the change's diff cannot be read: {error}")
    judge_dir = claim_directory(planrun_home() / "judge")
    settings = judge.settings.settings
    if model is None:
        model = create_model(
            judge.model_id,
            key=JUDGE_LABEL,
            timeout=settings.api_timeout,
            max_retries=settings.api_retries,
        )
    return run_judge(
        judge_task(steps, change, diff),
        system_prompt=judge_prompt(f"/plan/{VERDICT_FILE}", len(steps)),
        steps=len(steps),
        workspace=workspace,
        judge_dir=judge_dir,
        model=model,
        model_id=judge.model_id,
        sandbox_factory=judge.sandboxes(judge_dir.name),
        limits=judge.settings.run_limits(),
    )
