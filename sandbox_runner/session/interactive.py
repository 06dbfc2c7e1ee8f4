"""The entry point `planrun` without a command calls: a session opened (or resumed) on a
repository and driven to its end, in the terminal UI on a terminal, in line mode elsewhere."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sandbox_runner import Model
from sandbox_runner.agents.definitions import ungranted_note
from sandbox_runner.agents.registry import Registry
from sandbox_runner.config import LoadedSettings, load_settings
from sandbox_runner.config_values import SCRATCH
from sandbox_runner.errors import ConfigError, WorkspaceError
from sandbox_runner.limits import RunLimits
from sandbox_runner.mcp.launch import McpChoice, open_hub
from sandbox_runner.runs.preflight import AccessCheck, PreflightError, preflight
from sandbox_runner.sandbox.host_paths import work_owner_problem
from sandbox_runner.sandbox.spec import resolve_workspace
from sandbox_runner.session.commands import Commands, come_back
from sandbox_runner.session.line import LineUI, run_lines
from sandbox_runner.session.line_input import LineInput
from sandbox_runner.session.mcp_servers import SessionServers
from sandbox_runner.session.picker import choose_on_terminal, pick_session
from sandbox_runner.session.remembered import flags_of, with_remembered
from sandbox_runner.session.sandboxes import DockerSessionSandboxes
from sandbox_runner.session.session import Session
from sandbox_runner.session.state import SessionState, SessionStore, latest_for
from sandbox_runner.tools.permissions import PermissionMode
from sandbox_runner.web_grant import WebGrant, granted

if TYPE_CHECKING:
    from sandbox_runner.sandbox.factory import DockerSandboxes
    from sandbox_runner.session.terminal import TerminalUI

Warn = Callable[[object], None]
"""Shows a warning to the user (one line; the callee sanitises it)."""
SESSION_MODEL_HINT = "set it with --model or /model"
"""How a session's model is chosen, said when the API does not know it."""


@dataclass(frozen=True)
class SessionOptions:
    """What `planrun` without a command is asked to do: its flags."""

    repo: str = "."
    """The repository of the session; a resumed session keeps its own unless one is given."""
    mode: PermissionMode | None = None
    """The permission mode a new session starts in (None: its default)."""
    resume_id: str | None = None
    """The session to resume; "" (`--resume` without an id): the user picks one."""
    continue_latest: bool = False
    """Resume the latest session of the repository."""
    model: str | None = None
    """The session's model; None: the configured one."""
    allow_web: tuple[str, ...] = ()
    """Hosts the web tools may reach, besides the `web` setting's (--allow-web)."""
    image: str | None = None
    """The user's toolchain image (--image); None: the configured one."""
    network: bool | None = None
    """--network: the work sandbox reaches the network; None: the work_network setting."""
    mcp: McpChoice = field(default_factory=McpChoice)
    """`--mcp-config` and `--strict-mcp-config`."""
    scratch: bool = False
    """Plan mode's commands may write, into a throw-away layer (`--scratch`)."""
    max_cost_usd: float | None = None
    """The session's cost budget (`--max-cost-usd`); None: the `max_cost_usd` setting."""


class SessionHost(Protocol):
    """What a session needs of the machine that drives it (the CLI's services)."""

    def sandboxes(self, workspace: Path, loaded: LoadedSettings) -> DockerSandboxes: ...


def run_session(options: SessionOptions, host: SessionHost, *, warn: Warn) -> None:
    """Open (or resume) a session and drive it until the user leaves; `/resume ID` ends
    it for that session, opened the same way (same flags) in the same terminal.

    Raises:
        ConfigError, WorkspaceError: a bad repository or setting, no session to resume
            (or one of another repository).
        PreflightError: in line mode, no Docker engine or image, a key the API refuses
            or a model it does not know (one line each).
    """
    # One reader of standard input for every session of the process: a line typed after
    # `/resume ID` (and read ahead) belongs to the session it switches to.
    stdin = LineInput(sys.stdin)
    while True:
        switch_to = _run_one(options, host, warn, stdin)
        if switch_to is None:
            return
        options = replace(options, resume_id=switch_to, continue_latest=False, model=None)


def _run_one(
    options: SessionOptions, host: SessionHost, warn: Warn, stdin: LineInput
) -> str | None:
    """One session, until the user leaves it; the session `/resume ID` switches to."""
    workspace = resolve_workspace(options.repo or ".")
    # Found now, not after the first approved edit: the work session could not write.
    problem = work_owner_problem(workspace)
    if problem:
        raise WorkspaceError(problem)
    if options.resume_id == "":
        options = replace(options, resume_id=pick_session(workspace, _chooser()))
    options = _with_flags_of_resumed(options, workspace)
    flags = {
        "planning_model": None,
        "image": options.image,
        "work_network": options.network,
        "plan_commands": SCRATCH if options.scratch else None,
        "max_cost_usd": options.max_cost_usd,
    }
    loaded = load_settings(workspace, flags=flags)
    web = granted(loaded.settings.web, options.allow_web)
    registry = _registry(workspace, loaded, warn, web)
    store, state, resumed = _open_store(options, workspace, loaded)
    if flags_of(options) != state.flags:
        state.flags = flags_of(options)
        store.save(state)
    workspace = Path(state.repo)
    switch_to = None if resumed else options.mode
    greeting = _greeting(state, workspace, resumed, switch_to)
    ui = _ui(workspace, stdin)
    if isinstance(ui, LineUI):
        # The first line comes before Docker is asked anything: the containers start in
        # the background, and a missing engine or image is still one line and exit status 2.
        ui.show(greeting)
    sandboxes = DockerSessionSandboxes(
        host.sandboxes(workspace, loaded),
        state.id,
        store.directory / "tasks",
        loaded.settings.work_disk_mb,
    )
    sandboxes.notify = ui.show
    servers = SessionServers(
        lambda ask: open_hub(
            workspace, loaded, sandboxes.sandboxes, choice=options.mcp, session=state.id,
            progress=ui.show, ask=ask,
        ),
        ui,
    )  # fmt: skip
    sandboxes.on_diff = ui.edited
    session = Session(
        store,
        state,
        workspace=workspace,
        registry=registry,
        sandboxes=sandboxes,
        model=_models(loaded, state),
        ui=ui,
        limits=session_limits(loaded, state),
        task_budget=loaded.settings.parallel,
        web=web,
        mcp=servers,
        scratch=loaded.scratch,
    )
    if not isinstance(ui, LineUI):
        ui.session = session
    commands = Commands(session, loaded.resolved_extra_dirs())
    try:
        if isinstance(ui, LineUI):
            # The API is asked about the key and the model while the containers start;
            # a failure of either is one line each and exit status 2, before any message.
            access = AccessCheck([state.model], SESSION_MODEL_HINT)
            note = "plan mode: the plan file is {}"
            preflight(lambda: _start(session, ui, switch_to, note), access)
            try:
                return run_lines(session, commands, ui)
            except KeyboardInterrupt:
                ui.show(come_back(session))  # then `planrun: interrupted`, exit status 130
                raise
        else:
            history = store.directory / "history"
            return _run_terminal(session, commands, ui, history, greeting, switch_to)
    finally:
        session.close()


def _registry(workspace: Path, loaded: LoadedSettings, warn: Warn, web: WebGrant) -> Registry:
    """The agents of the session, each warning said (an agent file's web tools that no
    grant lets it use among them)."""
    registry = Registry.load(workspace, trust_project=loaded.project_trusted)
    for warning in [*loaded.warnings, *registry.warnings]:
        warn(warning)
    for agent in registry.all():
        # A file that replaces a built-in this session runs (or its Task tool launches)
        # is said out loud, as plan runs say it: it writes the agent's system prompt.
        if note := agent.override_note():
            warn(f"agent {note}")
        if not web and (note := ungranted_note(agent)):
            warn(note)
    return registry


def _open_store(
    options: SessionOptions, workspace: Path, loaded: LoadedSettings
) -> tuple[SessionStore, SessionState, bool]:
    """The session's store and state: the one to resume, or a new one; and whether it is
    resumed."""
    resume_id = options.resume_id
    if options.continue_latest:
        resume_id = latest_for(workspace)
        if resume_id is None:
            raise ConfigError(f"no session of {workspace} to continue; start one with `planrun`")
    model_id = loaded.model_id(options.model)
    if not resume_id:
        store, state = SessionStore.create(workspace, model_id)
        return store, state, False
    store, state = SessionStore.open(resume_id)
    if Path(state.repo) != workspace and options.repo != ".":
        raise ConfigError(f"session {state.id} is of {state.repo}, not {workspace}")
    return store, state, True


def _with_flags_of_resumed(options: SessionOptions, workspace: Path) -> SessionOptions:
    """OPTIONS, with the flags the session they resume was opened with (where they give
    none of their own); unchanged for a new session or one that cannot be read (opening
    it then says why)."""
    session_id = latest_for(workspace) if options.continue_latest else options.resume_id
    if not session_id:
        return options
    try:
        _, state = SessionStore.open(session_id)
    except ConfigError:
        return options
    return with_remembered(options, state.flags)


def _greeting(
    state: SessionState, workspace: Path, resumed: bool, switch_to: PermissionMode | None
) -> str:
    """The session's first line."""
    if resumed:
        plan = f", plan file {state.plan_file}" if state.plan_file else ""
        return f"resumed session {state.active_id} in {state.mode} mode{plan}"
    # Said before the mode is set (that may wait for a container): the mode asked for.
    mode = switch_to or state.mode
    return f"session {state.id} on {workspace} ({mode} mode); /help lists commands"


def _chooser() -> Callable[[list[SessionState]], str | None] | None:
    """How a session to resume is chosen: from a list on a terminal; elsewhere not at all
    (the list is printed)."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return choose_on_terminal
    return None


def _ui(workspace: Path, stdin: LineInput) -> LineUI | TerminalUI:
    """The terminal UI on a terminal; line mode otherwise."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        # Imported only here: line mode (and every other command) starts without it.
        from sandbox_runner.session.terminal import TerminalUI

        return TerminalUI()
    return LineUI(stdin, sys.stdout, workspace)


def _start(
    session: Session, ui: LineUI | TerminalUI, mode: PermissionMode | None, plan_file_note: str
) -> None:
    """Start the session's sandboxes, and switch a new session to the mode asked for."""
    session.start()
    if mode is not None:
        session.set_mode(mode)
        if session.state.plan_file:
            ui.show(plan_file_note.format(session.state.plan_file))


def _run_terminal(
    session: Session,
    commands: Commands,
    ui: TerminalUI,
    history: Path,
    greeting: str,
    mode: PermissionMode | None,
) -> str | None:
    from sandbox_runner.session.terminal import run_terminal

    # The prompt comes up at once; the first line is printed above it, and the containers
    # start and the SDK loads behind it, under a spinner (a message sent meanwhile waits
    # for them).
    def first() -> None:
        # Whatever the checks find is shown before any message typed meanwhile is sent:
        # the worker runs this job first.
        access = AccessCheck([session.state.model], SESSION_MODEL_HINT)
        with ui.preparing("starting the session"):
            ui.show(greeting)
            note = "plan mode: the plan file is `{}`"
            try:
                preflight(lambda: _start(session, ui, mode, note), access)
            except PreflightError as error:
                for problem in error.problems:
                    ui.show(f"error: {problem}")
        with ui.preparing("loading the model client"):
            _load_first_turn()

    return run_terminal(session, commands, ui, history, first)


def _load_first_turn() -> None:
    """Import what the first turn needs (the SDK above all) while the user types, and
    have the SDK ready to read the first streamed answer."""
    import sandbox_runner.agents.loop
    import sandbox_runner.plans.pricing  # the toolbar prices the first turn as it goes
    import sandbox_runner.session.subagents  # noqa: F401
    from sandbox_runner.model.anthropic_model import warm_up

    warm_up()


def _models(loaded: LoadedSettings, state: SessionState) -> Callable[[str], Model]:
    """Makes the session's models, one per conversation label, of the session's model at
    the time (/model changes it)."""
    settings = loaded.settings

    def make(label: str) -> Model:
        from sandbox_runner.model import create_model  # with the first turn, in the worker

        return create_model(
            state.model,
            key=label,
            timeout=settings.api_timeout,
            max_retries=settings.api_retries,
        )

    return make


def session_limits(loaded: LoadedSettings, state: SessionState) -> RunLimits:
    """The limits of the session's loops; its cost budget covers the whole session, what
    it cost before this resume included."""
    limits = loaded.run_limits()
    if limits.spend is not None:
        limits.spend.at_least(state.cost_usd)
    return limits
