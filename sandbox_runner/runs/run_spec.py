"""What a `planrun plan` run is, resolved: its spec (every input checked, every default
applied, every agent resolved), and what a resumed run keeps of the run it resumes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from sandbox_runner import Model
from sandbox_runner.agents.definitions import PLAN, SYNTHESIS, AgentDefinition
from sandbox_runner.limits import RunLimits
from sandbox_runner.model.replay import has_own_cassette
from sandbox_runner.plans.results import PlanResult
from sandbox_runner.runs.plan_job import EarlierAttempt, PlanJob
from sandbox_runner.runs.synthesis_step import SYNTHESIS_LABEL
from sandbox_runner.web_grant import WebGrant

ModelFactory = Callable[[str], Model]
"""Makes the model of one plan, by label (a replayed cassette differs per perspective)."""
RESERVED_LABELS = frozenset({"report", SYNTHESIS_LABEL})


@dataclass(frozen=True)
class PlanRunSpec:
    """One `planrun plan` invocation, resolved: every input checked, every default applied.

    Where it runs is not part of it: `planrun plan` claims a new directory, a resumed run
    reuses its own, and a batch runs each job in a scratch directory.
    """

    requirements: str
    workspace: Path
    perspectives: list[str | None]
    model_id: str
    agent: AgentDefinition = PLAN
    """The agent every perspective runs, checked read-only."""
    context: str = ""
    sections: tuple[str, ...] | None = None
    parallel: int = 4
    limits: RunLimits = field(default_factory=RunLimits)
    allowed_tools: frozenset[str] | None = None
    synthesis: bool = True
    """Whether a recommended plan is synthesised from two or more valid plans."""
    synthesis_note: str = ""
    """Why the synthesis is off, for the report ("" when it is on)."""
    synthesiser: AgentDefinition = SYNTHESIS
    """The agent that synthesises the recommended plan, checked read-only."""
    request: dict[str, object] = field(default_factory=dict)
    """The request as given, kept in run.json so that the run can be resumed."""
    memory: str = ""
    """The memory files' section of every plan agent's prompt (agents.memory)."""
    web: WebGrant = field(default_factory=WebGrant)
    """The hosts the web tools may reach; none: WebFetch and WebSearch are not offered."""

    @property
    def agent_override(self) -> str:
        """Which file replaced the built-in agent, for the report ("" when none did)."""
        return agent_override(self.agent)

    @property
    def synthesis_agent_override(self) -> str:
        """Which file replaced the built-in Synthesis agent ("" when none did)."""
        return agent_override(self.synthesiser)

    @property
    def labels(self) -> list[str]:
        """The file-name-safe names of its plans."""
        return [job.label for job in self.jobs()]

    def jobs(self) -> list[PlanJob]:
        """One job per perspective, with unique labels (file names)."""
        jobs: list[PlanJob] = []
        # The report's own files share the directory: a perspective may not take their name.
        used: set[str] = set(RESERVED_LABELS)
        for perspective in self.perspectives:
            job = PlanJob(
                self.requirements,
                perspective,
                self.agent,
                self.context,
                self.sections,
                memory=self.memory,
            )
            label, n = job.label, 2
            while label in used:
                label, n = f"{job.label}-{n}", n + 1
            used.add(label)
            jobs.append(replace(job, name=label))
        return jobs

    def replaying(self, cassettes: Path | None) -> PlanRunSpec:
        """The run as it replays `cassettes` (None: it calls the model): without a synthesis
        unless they hold a recorded one, `recommended.jsonl` (another conversation cannot
        stand in for it)."""
        if cassettes is None or not self.synthesis or has_own_cassette(cassettes, SYNTHESIS_LABEL):
            return self
        note = f"--replay {cassettes} holds no recorded synthesis ({SYNTHESIS_LABEL}.jsonl)"
        return replace(self, synthesis=False, synthesis_note=note)


def agent_override(agent: AgentDefinition) -> str:
    """How the report names a built-in agent that a file replaced ("" when none did)."""
    return agent.override_note()


@dataclass(frozen=True)
class Resumption:
    """What a resumed run keeps of the run it resumes, and what it goes on with."""

    kept: dict[str, PlanResult] = field(default_factory=dict)
    """Plans already complete and valid, by label: not run again."""
    earlier: dict[str, EarlierAttempt] = field(default_factory=dict)
    """Conversations that stopped, by label: their plans go on with them when they can."""
