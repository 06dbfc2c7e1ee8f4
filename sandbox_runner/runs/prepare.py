"""Preparing a plan run: everything that can be wrong is found before a container starts
or a run directory is claimed. `planrun plan`, `planrun plans resume` and each task of a
batch start here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from sandbox_runner.agents.definitions import (
    INERT_IN_SUBAGENT,
    SYNTHESIS,
    AgentDefinition,
    check_read_only,
    ungranted_note,
)
from sandbox_runner.agents.memory import load_memory
from sandbox_runner.agents.prompt import PERSPECTIVES
from sandbox_runner.agents.registry import Registry
from sandbox_runner.agents.synthesis import SYNTHESIS_AGENT
from sandbox_runner.config import LoadedSettings, load_settings
from sandbox_runner.config_trust import UNTRUSTED_MODEL_HINT
from sandbox_runner.errors import ConfigError
from sandbox_runner.paths import planrun_home
from sandbox_runner.plans.inputs import read_context_files, read_template
from sandbox_runner.plans.names import claim_directory
from sandbox_runner.runs.attempts import ATTEMPTS_DIR
from sandbox_runner.runs.perspective_names import check_perspective_names
from sandbox_runner.runs.run_spec import PlanRunSpec, agent_override
from sandbox_runner.runs.workspace import git_metadata_problem
from sandbox_runner.sandbox.spec import resolve_workspace
from sandbox_runner.web_grant import granted

T = TypeVar("T")
PLAN_FILES = ("report.json", "report.md", "report.html", "run.json")
"""Files whose presence means a directory already holds a run."""

Warn = Callable[[object], None]
"""Shows a warning to the user (one line; the callee sanitises it)."""


@dataclass(frozen=True)
class PlanRequest:
    """What the user asked for, as given (flags, or a batch task's keys)."""

    requirements: str
    repo: str | Path = "."
    perspectives: Sequence[str] = ()
    agent: str = "Plan"
    model: str | None = None
    template: Path | None = None
    context_files: Sequence[Path] = ()
    parallel: int | None = None
    max_turns: int | None = None
    timeout: float | None = None
    synthesis: bool | None = None
    """False turns the synthesis of a recommended plan off (`--no-synthesis`)."""
    overrides: dict[str, object] = field(default_factory=dict)
    """Further settings, with the precedence of flags (a batch task's `overrides`)."""
    allow_web: Sequence[str] = ()
    """Hosts `--allow-web` adds to the `web` setting's grant."""

    def to_json(self, workspace: Path, model_id: str) -> dict[str, object]:
        """The request as a resumed run repeats it: paths absolute, the model pinned."""
        return {
            "requirements": self.requirements,
            "repo": str(workspace),
            "perspectives": list(self.perspectives),
            "agent": self.agent,
            "model": model_id,
            "template": str(self.template.resolve()) if self.template else None,
            # Relative context files are read from the repository, not the current directory.
            "context_files": [
                str((workspace / path.expanduser()).resolve()) for path in self.context_files
            ],
            "parallel": self.parallel,
            "max_turns": self.max_turns,
            "timeout": self.timeout,
            "synthesis": self.synthesis,
            "overrides": self.overrides,
            "allow_web": list(self.allow_web),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PlanRequest:
        """The request a run recorded (see to_json).

        Raises:
            KeyError, TypeError, ValueError: the record is not one.
        """
        template = data["template"]
        return cls(
            requirements=str(data["requirements"]),
            repo=str(data["repo"]),
            perspectives=[str(p) for p in data["perspectives"]],
            agent=str(data["agent"]),
            model=str(data["model"]),
            template=Path(template) if template else None,
            context_files=[Path(str(path)) for path in data["context_files"]],
            parallel=_optional(int, data["parallel"]),
            max_turns=_optional(int, data["max_turns"]),
            timeout=_optional(float, data["timeout"]),
            synthesis=_optional(bool, data["synthesis"]),
            overrides=dict(data["overrides"]),
            allow_web=[str(host) for host in data.get("allow_web", [])],
        )

    def flags(self) -> dict[str, object]:
        """The settings this request sets, as flags do; a field left unset keeps the
        override of the same setting (a batch task's `overrides: {max_turns: 60}`)."""
        fields = {
            "planning_model": self.model,
            "parallel": self.parallel,
            "max_turns": self.max_turns,
            "timeout": self.timeout,
            "synthesis": self.synthesis,
        }
        return {**self.overrides, **{key: v for key, v in fields.items() if v is not None}}


def _optional(kind: Callable[[Any], T], value: object) -> T | None:
    return None if value is None else kind(value)


def prepare(
    request: PlanRequest, warn: Warn, *, new_run: bool = True
) -> tuple[PlanRunSpec, LoadedSettings]:
    """Check every input of a run and build its spec; warnings go to `warn`. The settings
    come along: the run's model and sandboxes are made with them. A resumed run
    (NEW_RUN false) keeps its perspectives' names, misspelt or not.

    Raises:
        ConfigError, WorkspaceError, InputError: a usage or configuration error.
    """
    workspace = resolve_workspace(request.repo)
    loaded = load_settings(workspace, flags=request.flags())
    registry = Registry.load(workspace, trust_project=loaded.project_trusted)
    for warning in [*loaded.warnings, *registry.warnings, git_metadata_problem(workspace)]:
        if warning:
            warn(warning)
    agent = plan_agent(registry, request.agent)
    if agent.ignored_model:
        warn(
            f"{agent.file_path} asks for model {agent.ignored_model!r}; ignored: "
            f"{UNTRUSTED_MODEL_HINT}"
        )
    settings = loaded.settings
    if not settings.planning_enabled:
        raise ConfigError("planning is disabled by configuration (planning_enabled: false)")
    sections = None
    template = read_template(workspace, request.template)
    if isinstance(template, str):
        warn(template)
    elif template is not None:
        sections = template.sections
        for note in template.notes:
            warn(note)
    context = read_context_files(request.context_files, workspace, loaded.resolved_extra_dirs())
    memory = load_memory(workspace)
    for problem in memory.problems:
        warn(f"memory file: {problem}")
    synthesiser = SYNTHESIS
    if settings.synthesis:
        # Found now, not after the plans ran: a file that makes Synthesis unfit is a usage error.
        synthesiser = plan_agent(registry, SYNTHESIS_AGENT)
        if override := agent_override(synthesiser):
            warn(f"agent {override}")
    if new_run:
        check_perspective_names(request.perspectives, loaded.presets(), PERSPECTIVES)
    model_id = loaded.planning_model_id()
    web = granted(settings.web, request.allow_web)
    if not web and (note := ungranted_note(agent)):
        warn(note)
    spec = PlanRunSpec(
        requirements=request.requirements,
        workspace=workspace,
        perspectives=loaded.expand_perspectives(request.perspectives),
        model_id=model_id,
        agent=agent,
        context=context,
        sections=sections,
        parallel=settings.parallel,
        limits=loaded.run_limits(),
        allowed_tools=frozenset(settings.allowed_tools),
        synthesis=settings.synthesis,
        synthesis_note="" if settings.synthesis else f"turned off by {loaded.sources['synthesis']}",
        synthesiser=synthesiser,
        request=request.to_json(workspace, model_id),
        memory=memory.prompt(),
        web=web,
        scratch=loaded.scratch,
    )
    return spec, loaded


def plan_agent(registry: Registry, name: str) -> AgentDefinition:
    """The definition of an agent that may plan: one that only reads, without Task.

    A built-in read-only agent, or any agent whose tools all only read: a file's custom
    reviewer with `tools: Read, Grep, Glob` plans as well as Plan does. Task is taken
    away: a plan run launches no subagents.

    Raises:
        ConfigError: unknown agent, an agent that can write or has no tools, or a
            read-only agent whose definition lists writing tools.
    """
    definition = registry.get(name)
    check_read_only(definition)
    writing = definition.writing_tools()
    if writing:
        readers = ", ".join(d.name for d in registry.all() if d.reads_only and d.effective_tools())
        raise ConfigError(
            f"agent {definition.name!r} can change files ({', '.join(writing)}), so it cannot "
            f"plan; use an agent that only reads ({readers})"
        )
    if not [tool for tool in definition.effective_tools() if tool not in INERT_IN_SUBAGENT]:
        raise ConfigError(
            f"agent {definition.name!r} has no tools, so it cannot plan (it could not read "
            f"the repository); give it some in {definition.file_path}, e.g. Read, Grep, Glob"
        )
    inert = tuple(t for t in sorted(INERT_IN_SUBAGENT) if t not in definition.disallowed_tools)
    return replace(definition, disallowed_tools=(*definition.disallowed_tools, *inert))


def claim_out_dir(requested: Path | None, workspace: Path) -> Path:
    """A new run directory, or the requested one, which must not hold plans already."""
    if requested is None:
        return claim_directory(planrun_home() / "plans")
    # Resolved, so that `..` or a symlink cannot hide that it lies in the workspace.
    out_dir = requested.expanduser().resolve()
    if out_dir == workspace:
        raise ConfigError(
            f"--out {requested} is the repository itself; give a directory for the plans"
        )
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {requested} exists and is not a directory")
    leftovers = [out_dir / name for name in (*PLAN_FILES, ATTEMPTS_DIR)]
    if out_dir.is_dir() and (
        any(out_dir.glob("*.md")) or any(p.exists() or p.is_symlink() for p in leftovers)
    ):
        raise ConfigError(f"--out {requested} already holds plans; planrun never overwrites them")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"cannot create --out {requested}: {error.strerror}") from None
    return out_dir
