"""`planrun plans history` and `planrun plans diff`: the revisions of a plan, and what
changed between two of them."""

from __future__ import annotations

import os
from pathlib import Path

import click

from sandbox_runner.cli.options import examples
from sandbox_runner.cli.services import reports_errors, services
from sandbox_runner.errors import ConfigError
from sandbox_runner.plans.history import find_run, runs_dir
from sandbox_runner.plans.revision_diff import line_changes, unified_lines
from sandbox_runner.plans.revisions import (
    REVISIONS_DIR,
    SOURCES,
    Revision,
    RevisionLog,
    load_revisions,
)
from sandbox_runner.safe_io import UnsafeFileError
from sandbox_runner.safe_text import one_line, terminal_text

PERSPECTIVE_HELP = "The plan of a run with several plans (its perspective, e.g. security)."

DIFF_COLOURS = {"+": "green", "-": "red", "@": "cyan"}


def plan_named(name: str, perspective: str | None) -> Path:
    """The plan file NAME stands for: a session's plan (its name), a plan file's path, or
    a run (with PERSPECTIVE when it has several plans with revisions).

    Raises:
        ConfigError: no plan is called that, or the run's plan is ambiguous.
    """
    if perspective is not None and ("/" in perspective or perspective.startswith(".")):
        raise ConfigError(f"{perspective!r} is not a perspective's name")
    if name.endswith(".md") and Path(name).expanduser().is_file():
        return Path(name).expanduser()
    if perspective is None and "/" not in name and not name.startswith("."):
        session_plan = runs_dir() / f"{name}.md"
        if session_plan.is_file():
            return session_plan
    run = find_run(name)
    if run is None:
        raise ConfigError(f"no plan or run called {name!r} (see `planrun plans list`)")
    if perspective is not None:
        return run / f"{perspective}.md"
    store = run / REVISIONS_DIR
    labels = sorted(path.name for path in store.iterdir()) if store.is_dir() else []
    if len(labels) == 1:
        return run / f"{labels[0]}.md"
    if not labels:
        raise ConfigError(f"{run} keeps no plan revisions")
    raise ConfigError(f"{name} has several plans ({', '.join(labels)}); choose one with -p")


def _log(name: str, perspective: str | None) -> tuple[Path, RevisionLog]:
    plan = plan_named(name, perspective)
    try:
        return plan, load_revisions(plan)
    except UnsafeFileError as error:
        raise ConfigError(str(error)) from None


def _text(log: RevisionLog, revision: Revision) -> str:
    try:
        return log.text(revision)
    except UnsafeFileError as error:
        raise ConfigError(str(error)) from None


@click.command(
    "history",
    epilog=examples(
        "planrun plans history brave-comet", "planrun plans history my-run -p security"
    ),
)
@click.argument("name")
@click.option("-p", "--perspective", default=None, help=PERSPECTIVE_HELP)
@reports_errors
def history(name: str, perspective: str | None) -> None:
    """List the revisions of a plan: number, time, what made it, and lines added and
    removed since the one before. NAME is a session's plan, a run, or a plan file."""
    plan, log = _log(name, perspective)
    if not log.revisions:
        click.echo(one_line(f"{plan} has no revisions yet"), err=True)
        return
    if log.pruned:
        click.echo(f"({log.pruned} older revisions pruned)")
    previous = ""
    for revision in log.revisions:
        text = _text(log, revision)
        added, removed = line_changes(previous, text)
        previous = text
        source = revision.source if revision.source in SOURCES else "unknown"
        again = f" (again: {', '.join(revision.again)})" if revision.again else ""
        when = revision.time[:19].replace("T", " ")
        line = f"{revision.number:>4}  {when}  {source:<13} +{added} -{removed}{again}"
        click.echo(one_line(line))


@click.command(
    "diff",
    epilog=examples("planrun plans diff brave-comet", "planrun plans diff brave-comet 1 3"),
)
@click.argument("name")
@click.argument("older", type=int, required=False)
@click.argument("newer", type=int, required=False)
@click.option("-p", "--perspective", default=None, help=PERSPECTIVE_HELP)
@click.pass_context
@reports_errors
def diff(
    ctx: click.Context, name: str, older: int | None, newer: int | None, perspective: str | None
) -> None:
    """Show what changed between two revisions of a plan as a unified diff: OLDER and
    NEWER are revision numbers (`planrun plans history`); by default the one before the
    latest and the latest, and with only OLDER, OLDER and the latest."""
    _, log = _log(name, perspective)
    if not log.revisions:
        raise ConfigError(f"{name} has no revisions yet")
    latest = log.revisions[-1]
    to = latest if newer is None else _numbered(log, newer)
    if older is None:
        earlier = [rev for rev in log.revisions if rev.number < to.number]
        if not earlier:
            raise ConfigError(f"{name} has one revision ({to.number}): nothing to compare")
        start = earlier[-1]
    else:
        start = _numbered(log, older)
    lines = unified_lines(
        _text(log, start), _text(log, to), f"revision {start.number}", f"revision {to.number}"
    )
    if not lines:
        click.echo(f"revisions {start.number} and {to.number} are the same", err=True)
        return
    colour = services(ctx).stdout_is_terminal() and not os.environ.get("NO_COLOR")
    for position, line in enumerate(lines):
        shown = terminal_text(line)
        if colour and position < 2:  # the two header lines
            shown = click.style(shown, bold=True)
        elif colour and line[:1] in DIFF_COLOURS:
            shown = click.style(shown, fg=DIFF_COLOURS[line[0]])
        click.echo(shown, color=colour)


def _numbered(log: RevisionLog, number: int) -> Revision:
    revision = log.numbered(number)
    if revision is None:
        kept = f"{log.revisions[0].number}-{log.revisions[-1].number}"
        raise ConfigError(f"no revision {number} (kept: {kept})")
    return revision
