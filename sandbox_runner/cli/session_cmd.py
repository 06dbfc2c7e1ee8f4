"""`planrun` without a command: an interactive session; and `planrun sessions list/show`."""

from __future__ import annotations

import datetime
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from sandbox_runner import Sandbox
from sandbox_runner.agents.registry import Registry
from sandbox_runner.cli.app import cli, reports_errors, services, warn
from sandbox_runner.config import LoadedSettings, load_settings
from sandbox_runner.errors import ConfigError
from sandbox_runner.safe_text import one_line
from sandbox_runner.session.commands import Commands, status_lines
from sandbox_runner.session.engine import Session
from sandbox_runner.session.line import LineUI, run_lines
from sandbox_runner.session.state import SessionStore, all_sessions, latest_for
from sandbox_runner.tools.permissions import PermissionMode


class DockerSessionSandboxes:
    """A session's containers: the work one (workspace writable), the plan one, and one
    per Task subagent."""

    def __init__(self, ctx: click.Context, workspace: Path, loaded: LoadedSettings, session: str):
        from sandbox_runner.sandbox.image import require_image

        svc = services(ctx)
        self.provider = svc.provider()
        self.image = require_image(self.provider.docker_client, loaded.settings.image)
        self.workspace = workspace
        self.extra_dirs = tuple(loaded.resolved_extra_dirs())
        self.limits = loaded.limits()
        self.session = session
        self.scratch = Path(tempfile.mkdtemp(prefix="planrun-task-"))

    def plan(self, plan_dir: Path) -> Sandbox:
        from sandbox_runner.sandbox.spec import SandboxSpec

        spec = SandboxSpec.plan(
            self.workspace, plan_dir, self.image, self.extra_dirs, self.limits,
            session=self.session, agent="plan-session",
        )  # fmt: skip
        return self.provider.create(spec)

    def read_only(self) -> Sandbox:
        from sandbox_runner.sandbox.spec import SandboxSpec

        plan_dir = Path(tempfile.mkdtemp(dir=self.scratch))
        spec = SandboxSpec.plan(
            self.workspace, plan_dir, self.image, self.extra_dirs, self.limits,
            session=self.session, agent="task",
        )  # fmt: skip
        return self.provider.create(spec)

    def work(self) -> Sandbox:
        from sandbox_runner.sandbox.spec import SandboxSpec

        spec = SandboxSpec.work(
            self.workspace, self.image, self.extra_dirs, self.limits,
            session=self.session, agent="work-session",
        )  # fmt: skip
        return self.provider.create(spec)


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
    # Imported here: the other commands start without prompt_toolkit.
    from sandbox_runner.session import terminal

    ui: LineUI | terminal.TerminalUI = (
        terminal.TerminalUI()
        if sys.stdin.isatty() and sys.stdout.isatty()
        else LineUI(_read_line, sys.stdout)
    )
    session = Session(
        store,
        state,
        workspace=workspace,
        registry=registry,
        sandboxes=DockerSessionSandboxes(ctx, workspace, loaded, state.id),
        model=_models(loaded, state.model, store.directory),
        ui=ui,
        limits=loaded.run_limits(),
    )
    if isinstance(ui, terminal.TerminalUI):
        ui.session = session
    commands = Commands(session, loaded.resolved_extra_dirs())
    if resumed:
        plan = f", plan file {state.plan_file}" if state.plan_file else ""
        ui.show(f"resumed session {state.active_id} in {state.mode} mode{plan}")
    else:
        ui.show(f"session {state.id} on {workspace} ({state.mode} mode); /help lists commands")
    try:
        session.start()
        wanted = PermissionMode.PLAN if options["start_in_plan"] else options["mode"]
        if wanted is not None and not resumed:
            session.set_mode(PermissionMode(wanted))
            if session.state.plan_file:
                ui.show(f"plan mode: the plan file is {session.state.plan_file}")
        if isinstance(ui, terminal.TerminalUI):
            terminal.run_terminal(session, commands, ui, store.directory / "history")
        else:
            run_lines(session, commands, ui)
    finally:
        session.close()


def _read_line() -> str | None:
    line = sys.stdin.readline()
    return line if line else None


def _models(loaded: LoadedSettings, model_id: str, directory: Path) -> Any:
    from sandbox_runner.model import create_model

    settings = loaded.settings

    def make(label: str) -> Any:
        return create_model(
            model_id,
            key=label,
            timeout=settings.api_timeout,
            max_retries=settings.api_retries,
        )

    return make


@cli.group("sessions", short_help="Browse interactive sessions.")
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
