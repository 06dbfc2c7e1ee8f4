"""`planrun plans`: browse earlier runs in ~/.planrun/plans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from sandbox_runner.agents.registry import planrun_home
from sandbox_runner.cli.app import cli, reports_errors
from sandbox_runner.errors import ConfigError
from sandbox_runner.plans.files import UnsafeFileError, read_sandbox_file


def _runs() -> list[tuple[Path, dict[str, Any]]]:
    root = planrun_home() / "plans"
    runs = []
    for directory in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            report = json.loads(read_sandbox_file(directory / "report.json") or "null")
        except (UnsafeFileError, ValueError, OSError):
            report = None
        if isinstance(report, dict):
            runs.append((directory, report))
        elif directory.is_dir():
            runs.append((directory, {}))
    runs.sort(key=lambda run: str(run[1].get("started_at", "")), reverse=True)
    return runs


@cli.group()
def plans() -> None:
    """Earlier plan runs."""


@plans.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run.")
@reports_errors
def plans_list(as_json: bool) -> None:
    """List earlier runs, newest first: name, date, status, perspectives, requirements."""
    for directory, report in _runs():
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "name": directory.name,
                        "path": str(directory),
                        **{
                            key: report.get(key)
                            for key in ("started_at", "status", "exit_code", "requirements")
                        },
                    }
                )
            )
            continue
        if not report:
            click.echo(f"{directory.name:<28} (no report: interrupted or still running)")
            continue
        names = ", ".join(p["perspective"] or p["label"] for p in report.get("plans", []))
        first_line = (report.get("requirements") or "").strip().splitlines()[:1] or [""]
        started = str(report.get("started_at", ""))[:16].replace("T", " ")
        status = report.get("status", "?")
        click.echo(f"{directory.name:<28} {started}  {status:<17} [{names}]  {first_line[0][:60]}")


@plans.command("show")
@click.argument("name")
@click.argument("perspective", required=False)
@reports_errors
def plans_show(name: str, perspective: str | None) -> None:
    """Print a run's report, or with PERSPECTIVE, that plan."""
    directory = planrun_home() / "plans" / name
    if not directory.is_dir() or "/" in name or name.startswith("."):
        known = ", ".join(d.name for d, _ in _runs()[:10]) or "none yet"
        raise ConfigError(f"no run called {name!r} in {directory.parent} (recent: {known})")
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
    click.echo(text, nl=False)
