"""What a `planrun plan` run is, resolved: its spec (every path checked, every default
applied), and what a resumed run keeps of the run it resumes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from sandbox_runner import Model
from sandbox_runner.limits import RunLimits
from sandbox_runner.plans.results import PlanResult
from sandbox_runner.runs.plan_job import EarlierAttempt, PlanJob
from sandbox_runner.runs.synthesis_step import SYNTHESIS_LABEL

ModelFactory = Callable[[str], Model]
"""Makes the model of one plan, by label (a replayed cassette differs per perspective)."""
RESERVED_LABELS = frozenset({"report", SYNTHESIS_LABEL})


@dataclass
class PlanRunSpec:
    """One `planrun plan` invocation, resolved: every path checked, every default applied."""

    name: str
    requirements: str
    workspace: Path
    out_dir: Path
    perspectives: list[str | None]
    model_id: str
    agent: str = "Plan"
    context: str = ""
    sections: tuple[str, ...] | None = None
    parallel: int = 4
    limits: RunLimits = field(default_factory=RunLimits)
    allowed_tools: frozenset[str] | None = None
    agent_override: str = ""
    """Which file replaced the built-in agent, for the report ("" when none did)."""
    synthesis: bool = True
    """Whether a recommended plan is synthesised from two or more valid plans."""
    synthesis_note: str = ""
    """Why the synthesis is off, for the report ("" when it is on)."""
    synthesis_agent_override: str = ""
    """Which file replaced the built-in Synthesis agent ("" when none did)."""
    request: dict[str, object] = field(default_factory=dict)
    """The request as given, kept in run.json so that the run can be resumed."""

    def jobs(self) -> list[PlanJob]:
        """One job per perspective, with unique labels (file names)."""
        jobs: list[PlanJob] = []
        # The report's own files share the directory: a perspective may not take their name.
        used: set[str] = set(RESERVED_LABELS)
        for perspective in self.perspectives:
            job = PlanJob(self.requirements, perspective, self.agent, self.context, self.sections)
            label, n = job.label, 2
            while label in used:
                label, n = f"{job.label}-{n}", n + 1
            used.add(label)
            jobs.append(replace(job, name=label))
        return jobs


@dataclass(frozen=True)
class Resumption:
    """What a resumed run keeps of the run it resumes, and what it goes on with."""

    kept: dict[str, PlanResult] = field(default_factory=dict)
    """Plans already complete and valid, by label: not run again."""
    earlier: dict[str, EarlierAttempt] = field(default_factory=dict)
    """Conversations that stopped, by label: their plans go on with them when they can."""
