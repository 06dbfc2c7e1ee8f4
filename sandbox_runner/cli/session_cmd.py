"""`planrun` without a command: an interactive session; and `planrun sessions list/show`."""

from __future__ import annotations

import datetime
import json
from dataclasses import asdict

import click

from sandbox_runner.cli.options import examples, json_option
from sandbox_runner.cli.services import reports_errors, services, warn
from sandbox_runner.safe_text import one_line
from sandbox_runner.session.interactive import SessionOptions, run_session
from sandbox_runner.session.state import SessionStore, all_sessions


@reports_errors
def start_session(ctx: click.Context, options: SessionOptions) -> None:
    """Open (or resume) a session and drive it: the terminal session on a terminal, line
    mode otherwise."""
    run_session(options, services(ctx), warn=warn)


@click.group(
    "sessions",
    short_help="Browse interactive sessions.",
    epilog=examples("planrun sessions list", "planrun sessions show brave-comet"),
)
def sessions() -> None:
    """Interactive sessions: `planrun` starts one, `planrun --resume ID` comes back."""


@sessions.command("list", epilog=examples("planrun sessions list", "planrun sessions list --json"))
@json_option("Print JSON.")
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


@sessions.command("show", epilog=examples("planrun sessions show brave-comet"))
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
