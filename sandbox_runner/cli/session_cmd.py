"""`planrun` without a command: an interactive session; and `planrun sessions list/show`."""

from __future__ import annotations

import datetime
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from sandbox_runner.agents.registry import Registry
from sandbox_runner.cli.services import reports_errors, services, warn
from sandbox_runner.config import LoadedSettings, load_settings
from sandbox_runner.errors import ConfigError
from sandbox_runner.safe_text import one_line
from sandbox_runner.session.commands import Commands, status_lines
from sandbox_runner.session.line import LineUI, run_lines
from sandbox_runner.session.line_input import LineInput
from sandbox_runner.session.sandboxes import DockerSessionSandboxes
from sandbox_runner.session.session import Session
from sandbox_runner.session.state import SessionStore, all_sessions, latest_for
from sandbox_runner.tools.permissions import PermissionMode


@reports_errors
def run_session(ctx: click.Context, options: dict[str, Any]) -> None:
    """Open (or resume) a session and drive it: the terminal session on a terminal, line
    mode otherwise."""
    from sandbox_runner.sandbox.spec import resolve_workspace

    workspace = resolve_workspace(options["repo"] or ".")
    loaded = load_settings(workspace, flags={"planning_model": None})
    registry = Registry.load(workspace, trust_project=loaded.project_trusted)
    for warning in [*loaded.warnings, *registry.warnings]:
        warn(warning)
    for agent in registry.all():
        # A file that replaces a built-in this session runs (or its Task tool launches)
        # is said out loud: a repository's file writes the agent's system prompt.
        if agent.overrides_builtin:
            warn(
                f"agent {agent.name} comes from {agent.file_path} ({agent.scope}), not the built-in"
            )
    resume_id = options["resume_id"]
    if options["continue_latest"]:
        resume_id = latest_for(workspace)
        if resume_id is None:
            raise ConfigError(f"no session of {workspace} to continue; start one with `planrun`")
    model_id = loaded.model_id(options["model"])
    if resume_id:
        store, state = SessionStore.open(resume_id)
        if Path(state.repo) != workspace and options["repo"] != ".":
            raise ConfigError(f"session {state.id} is of {state.repo}, not {workspace}")
        workspace = Path(state.repo)
        resumed = True
    else:
        store, state = SessionStore.create(workspace, model_id)
        resumed = False
    if sys.stdin.isatty() and sys.stdout.isatty():
        # Imported only here: line mode (and every other command) starts without it.
        from sandbox_runner.session.terminal import TerminalUI

        ui: LineUI | TerminalUI = TerminalUI()
    else:
        ui = LineUI(LineInput(sys.stdin), sys.stdout)
    wanted = PermissionMode.PLAN if options["start_in_plan"] else options["mode"]
    if resumed:
        plan = f", plan file {state.plan_file}" if state.plan_file else ""
        greeting = f"resumed session {state.active_id} in {state.mode} mode{plan}"
    else:
        # Said before the mode is set (that may wait for a container): the mode asked for.
        mode = wanted or state.mode
        greeting = f"session {state.id} on {workspace} ({mode} mode); /help lists commands"
    if isinstance(ui, LineUI):
        # The first line comes before Docker is asked anything: the containers start in
        # the background, and a missing engine or image is still one line and exit status 2.
        ui.show(greeting)
    sandboxes = DockerSessionSandboxes(
        services(ctx).sandboxes(workspace, loaded),
        state.id,
        store.directory / "tasks",
        loaded.settings.work_disk_mb,
    )
    sandboxes.notify = ui.show
    session = Session(
        store,
        state,
        workspace=workspace,
        registry=registry,
        sandboxes=sandboxes,
        model=_models(loaded, state.model, store.directory),
        ui=ui,
        limits=loaded.run_limits(),
        task_budget=loaded.settings.parallel,
    )
    if not isinstance(ui, LineUI):
        ui.session = session
    commands = Commands(session, loaded.resolved_extra_dirs())
    try:
        if not isinstance(ui, LineUI):
            from sandbox_runner.session.terminal import run_terminal

            # The prompt comes up at once; the first line is printed above it, and the
            # containers start and the SDK loads behind it, under a spinner (a message
            # sent meanwhile waits for them).
            def first() -> None:
                with ui.preparing("starting the session"):
                    ui.show(greeting)
                    session.start()
                    if wanted is not None and not resumed:
                        session.set_mode(PermissionMode(wanted))
                        if session.state.plan_file:
                            ui.show(f"plan mode: the plan file is `{session.state.plan_file}`")
                with ui.preparing("loading the model client"):
                    _load_first_turn()

            run_terminal(session, commands, ui, store.directory / "history", first)
        else:
            session.start()
            if wanted is not None and not resumed:
                session.set_mode(PermissionMode(wanted))
                if session.state.plan_file:
                    ui.show(f"plan mode: the plan file is {session.state.plan_file}")
            run_lines(session, commands, ui)
    finally:
        session.close()


def _load_first_turn() -> None:
    """Import what the first turn needs (the SDK above all) while the user types."""
    import sandbox_runner.agents.loop
    import sandbox_runner.model.anthropic_model
    import sandbox_runner.session.subagents  # noqa: F401


def _models(loaded: LoadedSettings, model_id: str, directory: Path) -> Any:
    settings = loaded.settings

    def make(label: str) -> Any:
        from sandbox_runner.model import create_model  # with the first turn, in the worker

        return create_model(
            model_id,
            key=label,
            timeout=settings.api_timeout,
            max_retries=settings.api_retries,
        )

    return make


@click.group("sessions", short_help="Browse interactive sessions.")
def sessions() -> None:
    """Interactive sessions: `planrun` starts one, `planrun --resume ID` comes back."""


@sessions.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_sessions(as_json: bool) -> None:
    """The sessions, the most recently active first."""
    found = all_sessions()
    if as_json:
        click.echo(json.dumps([asdict(state) for state in found], indent=2))
        return
    if not found:
        click.echo("no sessions yet: `planrun` starts one")
        return
    for state in found:
        when = datetime.datetime.fromtimestamp(state.last_activity).strftime("%Y-%m-%d %H:%M")
        plan = state.plan_file or "-"
        line = (
            f"{state.id:<24} {state.mode:<12} {when}  {state.tokens:>8} tok  ${state.cost_usd:.2f}"
        )
        click.echo(one_line(f"{line}  {state.repo}  {plan}"))


@sessions.command("show")
@click.argument("session_id")
@reports_errors
def show_session(session_id: str) -> None:
    """One session's state and its events."""
    store, state = SessionStore.open(session_id)
    for key, value in asdict(state).items():
        if key != "snapshot":
            click.echo(one_line(f"{key}: {value}"))
    for event in store.events():
        when = datetime.datetime.fromtimestamp(event["time"]).strftime("%H:%M:%S")
        rest = {k: v for k, v in event.items() if k not in ("event", "time", "rejected")}
        click.echo(one_line(f"{when} {event['event']} {json.dumps(rest)}"))


__all__ = ["run_session", "status_lines"]
