"""The judge: one read-only agent, in a sandbox like a Plan subagent's, that says of each
Detailed Step whether the change did it, in a verdict file checked against its schema.

An invalid verdict file gets one round of feedback with the problems; a second invalid
one, a failure of the model or the sandbox, or a spent budget leaves the judge's verdict
unavailable, with the reason. It never raises for any of those.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from sandbox_runner import Model, Sandbox
from sandbox_runner.agents.hooks import LoopHooks
from sandbox_runner.agents.loop import AgentLoop
from sandbox_runner.agents.loop_config import LoopConfig
from sandbox_runner.agents.run_state import LimitReached, PlanPaths
from sandbox_runner.catalog import READ_ONLY_TOOLS
from sandbox_runner.errors import PlanrunError
from sandbox_runner.limits import RunLimits
from sandbox_runner.plans.files import UnsafeFileError, read_sandbox_file, write_new
from sandbox_runner.plans.pricing import estimate_cost
from sandbox_runner.sandbox.background import BackgroundStart
from sandbox_runner.tools.permissions import PermissionMode, Rules
from sandbox_runner.tools.policy import ToolContext
from sandbox_runner.tools.schemas import tools_for
from sandbox_runner.types import Usage
from sandbox_runner.verify.verdict_file import (
    VERDICT_FILE,
    StepVerdict,
    VerdictFileError,
    parse_verdicts,
)

__all__ = ["JUDGE_AGENT", "JudgeResult", "run_judge"]

JUDGE_AGENT = "Judge"
JUDGE_LABEL = "judge"
"""The judge's plan directory and transcript are named after it."""
_FENCE = re.compile(r"^\s*```[a-z]*\s*\n(.*)\n\s*```\s*$", re.DOTALL)


@dataclass(frozen=True)
class JudgeResult:
    """What the judge said, or why it could not say it."""

    model: str
    verdicts: tuple[StepVerdict, ...]
    """One per step, in order; empty when the verdict is unavailable."""
    reason: str = ""
    """Why the verdict is unavailable ("" when the judge answered)."""
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    retried: bool = False
    """Whether the first verdict file was invalid and the model was asked again."""
    transcript: Path | None = None
    wall_seconds: float = 0.0

    @property
    def available(self) -> bool:
        """Whether the judge answered for every step."""
        return bool(self.verdicts)

    @property
    def cost_usd(self) -> float | None:
        """The estimated cost of its model calls (None: the model has no list price)."""
        return estimate_cost(self.model, self.usage)


class JudgeHooks(LoopHooks):
    """The check of the verdict file when the model stops: one round of feedback."""

    def __init__(self, paths: PlanPaths, steps: int) -> None:
        self.paths, self.steps = paths, steps

    def on_stop(self, loop: AgentLoop) -> str | None:
        if loop.state.feedback_sent:
            return None
        try:
            parse_verdicts(read_sandbox_file(self.paths.host_plan_file), self.steps)
        except (VerdictFileError, UnsafeFileError) as error:
            loop.state.feedback_sent = True
            loop.state.feedback_problems = [str(error)]
            return (
                f"[planrun] {self.paths.container_plan_file} does not follow the schema: "
                f"{error}. Write it again, as one JSON object with every step exactly once."
            )
        return None

    def on_budget_spent(self, loop: AgentLoop, reason: str) -> None:
        """A last call without tools, whose answer becomes the verdict file if it is one."""
        loop.add_note(
            f"[planrun] The {reason}: this is your final turn and tools are disabled. "
            f"Answer with the JSON of {self.paths.container_plan_file} only."
        )
        response = loop.turn(replace(loop.request(), tool_choice="none"))
        text = response.text.strip()
        fenced = _FENCE.match(text)
        text = fenced.group(1) if fenced else text
        try:
            parse_verdicts(text, self.steps)
            if read_sandbox_file(self.paths.host_plan_file) is None:
                write_new(self.paths.host_plan_file, text)
        except (VerdictFileError, UnsafeFileError, OSError):
            return


def run_judge(
    task: str,
    *,
    system_prompt: str,
    steps: int,
    workspace: Path,
    judge_dir: Path,
    model: Model,
    model_id: str,
    sandbox_factory: Callable[[Path | None], Sandbox],
    limits: RunLimits,
) -> JudgeResult:
    """Run the judge on TASK in a sandbox of SANDBOX_FACTORY whose /plan is kept in
    JUDGE_DIR/.sandbox/judge, its transcript in JUDGE_DIR (outside the workspace)."""
    sandbox_dir = judge_dir / ".sandbox" / JUDGE_LABEL
    sandbox_dir.mkdir(parents=True)
    paths = PlanPaths(sandbox_dir, VERDICT_FILE, judge_dir / f"{JUDGE_LABEL}.transcript.jsonl")
    tools = tools_for([*READ_ONLY_TOOLS, "Write", "Edit"])
    rules = Rules(plan_file=paths.container_plan_file)
    config = LoopConfig(
        model=model,
        model_id=model_id,
        system_prompt=system_prompt,
        tools=lambda: tools,
        context=ToolContext(
            offered=frozenset(tool.name for tool in tools),
            workspace_host=str(workspace),
            agent=JUDGE_AGENT,
        ),
        mode=lambda: PermissionMode.PLAN,
        rules=lambda: rules,
        transcript=paths.transcript,
        limits=limits,
        label=JUDGE_LABEL,
    )
    started = time.monotonic()
    stopped = ""
    try:
        sandbox = BackgroundStart(sandbox_factory(sandbox_dir))
    except PlanrunError as error:
        return JudgeResult(model_id, (), reason=f"the sandbox could not be made: {error}")
    loop = AgentLoop(config, sandbox=sandbox, hooks=JudgeHooks(paths, steps))
    sandbox.start()
    try:
        loop.run(task)
    except (LimitReached, PlanrunError, OSError) as error:
        stopped = str(error) or type(error).__name__
    finally:
        try:
            sandbox.stop()
        except PlanrunError as error:
            stopped = stopped or f"the sandbox did not stop: {error}"
    verdicts, reason = _verdicts(paths, steps, loop.state.feedback_sent, stopped)
    return JudgeResult(
        model=model_id,
        verdicts=tuple(verdicts),
        reason=reason,
        usage=loop.state.usage,
        turns=loop.state.turns,
        retried=loop.state.feedback_sent,
        transcript=paths.transcript,
        wall_seconds=round(time.monotonic() - started, 3),
    )


def _verdicts(
    paths: PlanPaths, steps: int, retried: bool, stopped: str
) -> tuple[list[StepVerdict], str]:
    """The verdict file's verdicts, or ([], why there are none)."""
    try:
        return parse_verdicts(read_sandbox_file(paths.host_plan_file), steps), ""
    except (VerdictFileError, UnsafeFileError, OSError) as error:
        if stopped:
            return [], f"the judge stopped: {stopped} ({error})"
        after = " after one retry" if retried else ""
        return [], f"the verdict file is invalid{after}: {error}"
