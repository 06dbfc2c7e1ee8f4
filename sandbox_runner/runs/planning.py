"""The entry points `planrun plan` and `planrun plans resume` call: the request checked,
the run directory claimed and locked, the plans run under a display, the outcome returned."""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from sandbox_runner import Model
from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.config import LoadedSettings
from sandbox_runner.config_values import SCRATCH
from sandbox_runner.mcp.launch import McpChoice, open_hub
from sandbox_runner.model import check_model_options, create_model
from sandbox_runner.plans.history import remember_run
from sandbox_runner.plans.inputs import read_requirements
from sandbox_runner.runs.locks import RUN_LOCK, DirectoryLock
from sandbox_runner.runs.multi import PlanRunOutcome, execute
from sandbox_runner.runs.plan_job import SandboxFactory
from sandbox_runner.runs.plan_resume import (
    ResumePlan,
    check_not_batch_task,
    check_unchanged,
    plan_resume,
    read_run_record,
)
from sandbox_runner.runs.preflight import AccessCheck, preflight
from sandbox_runner.runs.prepare import PlanRequest, Warn, claim_out_dir, prepare
from sandbox_runner.runs.resume_budget import count_earlier_spend, with_budget
from sandbox_runner.runs.run_spec import ModelFactory, PlanRunSpec, Resumption

if TYPE_CHECKING:
    from sandbox_runner.mcp.hub import McpHub
    from sandbox_runner.sandbox.factory import DockerSandboxes


@dataclass(frozen=True)
class PlanOptions:
    """What `planrun plan` is asked to do: its flags."""

    requirements: str | None = None
    """The requirements, or `-` for standard input (None: requirements_file)."""
    requirements_file: Path | None = None
    """A file holding the requirements (`-f`; `-` for standard input)."""
    repo: str = "."
    perspectives: tuple[str, ...] = ()
    """Perspectives or presets of them; none: the configured default."""
    agent: str = "Plan"
    model: str | None = None
    """The planning model; None: the configured one."""
    out_dir: Path | None = None
    """The run directory (--out); None: a new one under ~/.planrun/plans/."""
    template: Path | None = None
    context_files: tuple[Path, ...] = ()
    parallel: int | None = None
    max_turns: int | None = None
    timeout: float | None = None
    no_synthesis: bool = False
    """Do not merge the valid plans into a recommended plan."""
    allow_web: tuple[str, ...] = ()
    """Hosts the web tools may reach, besides the `web` setting's (--allow-web)."""
    replay: Path | None = None
    """Recorded conversations to play instead of calling the API."""
    record: Path | None = None
    """Where to record the conversations."""
    mcp: McpChoice = field(default_factory=McpChoice)
    """`--mcp-config` and `--strict-mcp-config`."""
    image: str | None = None
    """The user's toolchain image (--image); None: the configured one."""
    scratch: bool = False
    """Commands may write, into a throw-away layer over the repository (`--scratch`)."""
    budget: Mapping[str, object] = field(default_factory=dict)
    """The cost caps the flags set (`max_cost_usd`, `max_cost_usd_per_plan`)."""

    def request(self, requirements: str) -> PlanRequest:
        """The run's request, with the requirements as read."""
        return PlanRequest(
            requirements=requirements,
            repo=self.repo,
            perspectives=self.perspectives,
            agent=self.agent,
            model=self.model,
            template=self.template,
            context_files=self.context_files,
            parallel=self.parallel,
            max_turns=self.max_turns,
            timeout=self.timeout,
            synthesis=False if self.no_synthesis else None,
            allow_web=self.allow_web,
            overrides={
                **({"image": self.image} if self.image else {}),
                **({"plan_commands": SCRATCH} if self.scratch else {}),
                **self.budget,
            },
        )


class RunHost(Protocol):
    """What a plan run needs of the machine that drives it (the CLI's services)."""

    @property
    def progress(self) -> Callable[[str], None]:
        """Shows a line of progress (MCP servers starting)."""

    def sandbox_factory(
        self, workspace: Path, loaded: LoadedSettings
    ) -> Callable[[str], SandboxFactory]: ...

    def sandboxes(self, workspace: Path, loaded: LoadedSettings) -> DockerSandboxes: ...

    def stop_sandboxes(self) -> None: ...


class RunDisplay(Protocol):
    """A display of a running plan run, shown from enter to exit: its agent events."""

    def __call__(self, event: AgentEvent) -> None: ...

    def stopping(self) -> None: ...

    def __enter__(self) -> object: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@dataclass(frozen=True)
class RunStart:
    """What a run is about to do, once its directory is claimed."""

    spec: PlanRunSpec
    out_dir: Path
    """The run's directory."""
    labels: list[str]
    """The file-name-safe names of its plans."""
    resume: ResumePlan | None = None
    """What a resumed run does with each of its plans (None: a new run)."""


PLANNING_MODEL_HINT = "set it with --model, or planning_model in the config"
"""How a plan run's model is chosen, said when the API does not know it."""
RESUMED_MODEL_HINT = "the run was planned with it; plan it again with `planrun plan --model`"
"""Said instead when a resumed run's model is unknown: its model is pinned in run.json."""
Watch = Callable[[RunStart], RunDisplay]
"""Is told what a run is about to do, and returns the display of its progress."""


def plan_run(options: PlanOptions, host: RunHost, *, warn: Warn, watch: Watch) -> PlanRunOutcome:
    """Plan a change from each perspective asked for, each in its own sandbox, then write
    the report (and run.json, which lets `resume_run` repeat the request).

    Raises:
        ConfigError, WorkspaceError, InputError: a usage or configuration error, found
            before a container starts or a run directory is claimed.
        PreflightError: the API refused the key or does not know the model, or Docker
            or the image is missing (one line each), found then too.
    """
    if options.replay is None:
        _warm_up_model_client()
    requirements = read_requirements(options.requirements, options.requirements_file)
    spec, settings = prepare(options.request(requirements), warn)
    spec = spec.replaying(options.replay)
    check_model_options(options.replay, options.record, spec.labels, os.environ)
    # The key, the model, Docker, the image and the workspace's readability are checked
    # before a run directory is claimed: a run that cannot reach the model leaves nothing.
    access = None if options.replay else AccessCheck([spec.model_id], PLANNING_MODEL_HINT)
    sandboxes_for = preflight(lambda: host.sandbox_factory(spec.workspace, settings), access)
    out_dir = claim_out_dir(options.out_dir, spec.workspace)
    if options.out_dir is not None:
        remember_run(out_dir)
    display = watch(RunStart(spec, out_dir, spec.labels))
    models = _model_factory(spec.model_id, settings, options.replay, options.record)
    # `planrun plans resume` of this run waits until it is over.
    with (
        DirectoryLock(out_dir, name=RUN_LOCK, what="planrun plan"),
        _servers(spec.workspace, settings, host, options.mcp, out_dir.name, warn) as mcp,
    ):
        return _execute(spec, out_dir, sandboxes_for(out_dir.name), models, host, display, mcp=mcp)


def resume_run(
    directory: Path,
    host: RunHost,
    *,
    warn: Warn,
    watch: Watch,
    budget: Mapping[str, object] | None = None,
) -> PlanRunOutcome | None:
    """Resume the interrupted or failed run in DIRECTORY: its complete and valid plans
    kept, its stopped conversations gone on with, every other plan made again (the files
    it replaces go to `.attempts/`). None: every plan of it is complete and valid.

    BUDGET (`max_cost_usd`, `max_cost_usd_per_plan`) replaces the recorded cost caps;
    either way what the run spent before counts against them.

    Raises:
        ConfigError: a batch's task, a run planrun cannot resume, another process writing
            it, its repository changed since it started, a budget it has spent already;
            or as `plan_run` (a key or model the API refuses, no Docker: before a plan is
            set aside).
    """
    check_not_batch_task(directory)
    read_run_record(directory)  # a run planrun cannot resume is refused before any lock
    with DirectoryLock(directory, name=RUN_LOCK, what="planrun plans resume"):
        recorded = read_run_record(directory)
        spec, settings = prepare(with_budget(recorded.request, budget or {}), warn, new_run=False)
        check_model_options(None, None, spec.labels, os.environ)
        check_unchanged(spec, directory, recorded.tree)
        resume = plan_resume(spec, directory)
        if resume.nothing_to_do:
            return None
        count_earlier_spend(spec, resume)
        access = AccessCheck([spec.model_id], RESUMED_MODEL_HINT)
        sandboxes_for = preflight(lambda: host.sandbox_factory(spec.workspace, settings), access)
        display = watch(RunStart(spec, directory, spec.labels, resume))
        resume.set_aside()
        models = _model_factory(spec.model_id, settings, None, None)
        sandboxes = sandboxes_for(directory.name)
        with _servers(spec.workspace, settings, host, McpChoice(), directory.name, warn) as mcp:
            return _execute(
                spec, directory, sandboxes, models, host, display, resume.resumption, mcp=mcp
            )


@contextmanager
def _servers(
    workspace: Path,
    settings: LoadedSettings,
    host: RunHost,
    choice: McpChoice,
    session: str,
    warn: Warn,
) -> Iterator[McpHub | None]:
    """The run's MCP servers, started before its plans and stopped after them; what did
    not start is a warning line each (with the command that approves it)."""
    hub = open_hub(
        workspace, settings, host.sandboxes(workspace, settings), choice=choice,
        session=session, progress=host.progress,
    )  # fmt: skip
    for note in hub.notes if hub else ():
        warn(note)
    try:
        yield hub
    finally:
        if hub is not None:
            hub.stop()


def _execute(
    spec: PlanRunSpec,
    out_dir: Path,
    sandboxes: SandboxFactory,
    models: ModelFactory,
    host: RunHost,
    display: RunDisplay,
    resumption: Resumption | None = None,
    *,
    mcp: McpHub | None = None,
) -> PlanRunOutcome:
    with display:
        return execute(
            spec,
            out_dir,
            model_factory=models,
            sandbox_factory=sandboxes,
            on_event=display,
            stop_sandboxes=host.stop_sandboxes,
            on_stop=display.stopping,
            resumption=resumption,
            mcp=mcp,
        )


def _warm_up_model_client() -> None:
    # Importing the anthropic SDK takes about 1.5 s; doing it while Docker, the workspace
    # snapshot and the containers get ready keeps it off the critical path.
    threading.Thread(
        target=importlib.import_module,
        args=("sandbox_runner.model.anthropic_model",),
        name="import-anthropic",
        daemon=True,
    ).start()


def _model_factory(
    model_id: str, loaded: LoadedSettings, replay: Path | None, record: Path | None
) -> ModelFactory:
    """Each plan's model: its cassette of `replay`, or the API (recorded into `record`)."""
    settings = loaded.settings

    def make(label: str) -> Model:
        return create_model(
            model_id,
            replay=replay,
            record=record,
            key=label,
            timeout=settings.api_timeout,
            max_retries=settings.api_retries,
        )

    return make
