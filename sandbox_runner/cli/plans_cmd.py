"""`planrun plans`: browse earlier runs (~/.planrun/plans, and those written with --out)."""

from __future__ import annotations

import json

import click

from sandbox_runner.cli.app import cli, reports_errors
from sandbox_runner.errors import ConfigError
from sandbox_runner.plans.files import UnsafeFileError, read_sandbox_file
from sandbox_runner.plans.history import find_run, index_path, list_runs, runs_dir
from sandbox_runner.safe_text import one_line, terminal_text


@cli.group(short_help="List earlier runs; show a report or a plan.")
def plans() -> None:
    """Earlier plan runs: list them, show a report or a plan."""


@plans.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run.")
@reports_errors
def plans_list(as_json: bool) -> None:
    """List earlier runs, newest first: name, date, status, perspectives, requirements."""
    runs = list_runs()
    if not runs and not as_json:
        click.echo(
            f"no runs yet: `planrun plan` keeps them in {runs_dir()}; runs written with --out "
            f"are listed too (from {index_path()})",
            err=True,
        )
    for run in runs:
        if as_json:
            entry = {
                "name": run.name,
                "path": str(run.path),
                "started_at": run.started_at or None,
                "status": run.status or None,
                "exit_code": run.exit_code,
                "requirements": run.requirements or None,
            }
            click.echo(json.dumps(entry))
            continue
        # An --out run is shown by its path, so that `plans show PATH` finds it.
        name = run.name if run.path.parent == runs_dir() else str(run.path)
        if run.problem:
            line = f"{name:<28} (unreadable report: {run.problem})"
        elif not run.has_report:
            line = f"{name:<28} (no report: interrupted or still running)"
        else:
            first_line = (run.requirements.strip().splitlines() or [""])[0][:60]
            started = run.started_at[:16].replace("T", " ")
            names = ", ".join(run.perspectives)
            line = f"{name:<28} {started:<16}  {run.status:<17} [{names}]  {first_line}"
        click.echo(one_line(line))


@plans.command("show")
@click.argument("name")
@click.argument("perspective", required=False)
@reports_errors
def plans_show(name: str, perspective: str | None) -> None:
    """Print a run's report, or with PERSPECTIVE, that plan. NAME may be a run's path."""
    directory = find_run(name)
    if directory is None:
        known = ", ".join(run.name for run in list_runs()[:10]) or "none yet"
        raise ConfigError(f"no run called {name!r} in {runs_dir()} (recent: {known})")
    if perspective is not None and ("/" in perspective or perspective.startswith(".")):
        raise ConfigError(f"{perspective!r} is not a perspective of this run")
    target = directory / (f"{perspective}.md" if perspective else "report.md")
    try:
        text = read_sandbox_file(target)
    except UnsafeFileError as error:
        raise ConfigError(str(error)) from None
    if text is None:
        plans_here = ", ".join(
            p.stem for p in sorted(directory.glob("*.md")) if p.name != "report.md"
        )
        raise ConfigError(f"{target} does not exist (plans in this run: {plans_here or 'none'})")
    click.echo(terminal_text(text), nl=False)
