"""`planrun plans export`: hand a plan to the agent or the place that will implement it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sandbox_runner.cli.options import examples
from sandbox_runner.cli.services import reports_errors
from sandbox_runner.errors import ConfigError
from sandbox_runner.plans.export import FORMATS, command_line, export_text
from sandbox_runner.plans.export_source import plan_to_export
from sandbox_runner.plans.files import replace_file
from sandbox_runner.plans.plan_meta import add_entry
from sandbox_runner.safe_text import one_line


@click.command(
    "export",
    epilog=examples(
        "planrun plans export brave-comet --for claude",
        "planrun plans export brave-comet security --for codex --out /tmp/kickoff.md",
        "planrun plans export brave-comet --for github --out -",
    ),
)
@click.argument("name")
@click.argument("perspective", required=False)
@click.option(
    "--for",
    "tool",
    type=click.Choice(FORMATS),
    required=True,
    help="claude, codex, gemini: a kickoff prompt and the plan for that agent's "
    "non-interactive mode; markdown: the plan with its metadata; github: an issue or "
    "comment body within GitHub's size limit.",
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Where to write it (`-`: standard output). Default: beside the plan.",
)
@reports_errors
def plans_export(name: str, perspective: str | None, tool: str, out: Path | None) -> None:
    """Write what TOOL needs to implement a plan, and record the export beside the plan.

    NAME is a run's name or path (its recommended plan, else its only valid plan, or the
    PERSPECTIVE named), or a plan file such as a session's. For claude, codex and gemini,
    the command that runs it in the repository is printed.
    """
    plan = plan_to_export(name, perspective)
    text = export_text(plan, tool)
    if out is not None and str(out) == "-":
        sys.stdout.write(text)
        add_entry(plan.path, "exports", {"for": tool, "out": "-"})
        return
    target = (out or _default_out(plan.path, tool)).expanduser().absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_file(target, text)
    add_entry(plan.path, "exports", {"for": tool, "out": str(target)})
    click.echo(one_line(f"wrote {target} ({len(text):,} characters) for {tool}"))
    command = command_line(tool, target, plan.repository)
    if command:
        click.echo(f"run it with:\n  {one_line(command)}")


def _default_out(plan_file: Path, tool: str) -> Path:
    """Beside the plan: in a run directory its exports/ folder (the run lists its own .md
    files as plans), elsewhere next to the plan file.

    Raises:
        ConfigError: exports/ is a link (a plan file in a stranger's repository).
    """
    if (plan_file.parent / "report.json").is_file():
        exports = plan_file.parent / "exports"
        if exports.is_symlink():
            raise ConfigError(f"{exports} is a link: it is not written through; give --out")
        return exports / f"{plan_file.stem}.{tool}.md"
    return plan_file.with_name(f"{plan_file.stem}.{tool}.md")
