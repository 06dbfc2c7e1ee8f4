"""`planrun plans`: browse earlier runs (~/.planrun/plans, and those written with --out)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click
import yaml

from sandbox_runner.cli.options import (
    REPORT_JSON_HELP,
    budget_options,
    budget_overrides,
    examples,
    json_option,
)
from sandbox_runner.cli.plans_export_cmd import plans_export
from sandbox_runner.cli.plans_history_cmd import diff, history
from sandbox_runner.cli.services import reports_errors, services, warn
from sandbox_runner.plans.document import split_document
from sandbox_runner.plans.export_source import handoff_lines
from sandbox_runner.plans.history import (
    batches_dir,
    index_path,
    is_being_written,
    list_runs,
    report_page,
    run_document,
    run_named,
    runs_dir,
)
from sandbox_runner.safe_text import one_line, terminal_text

if TYPE_CHECKING:
    from sandbox_runner.cli.progress import Progress
    from sandbox_runner.runs.plan_resume import ResumePlan


@click.group(
    short_help="List earlier runs; show or open a report, show a plan.",
    epilog=examples("planrun plans list", "planrun plans show brave-comet security"),
)
def plans() -> None:
    """Earlier plan runs: list them, show a report or a plan, open report.html."""


plans.add_command(plans_export)


@plans.command("list", epilog=examples("planrun plans list", "planrun plans list --json"))
@json_option("One JSON object per run.")
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
        name = run.name if run.path.parent == runs_dir() else _shown_path(run.path)
        if run.problem:
            line = f"{name:<28} (unreadable report: {run.problem})"
        elif not run.has_report and is_being_written(run.path):
            line = f"{name:<28} (running)"
        elif not run.has_report:
            line = f"{name:<28} (no report: stopped; `planrun plans resume` finishes it)"
        else:
            first_line = (run.requirements.strip().splitlines() or [""])[0][:60]
            started = run.started_at[:16].replace("T", " ")
            names = ", ".join(run.perspectives)
            line = f"{name:<28} {started:<16}  {run.status:<17} [{names}]  {first_line}"
        click.echo(one_line(line))


def _shown_path(path: Path) -> str:
    """An --out run by its path; a batch's task as `<batch>/<task>` under batches/."""
    if path.parent.name == "tasks" and path.parent.parent.parent == batches_dir():
        return f"batch:{path.parent.parent.name}/{path.name}"
    return str(path)


@plans.command(
    "show",
    epilog=examples("planrun plans show brave-comet", "planrun plans show plans/dry-run security"),
)
@click.argument("name")
@click.argument("perspective", required=False)
@click.pass_context
@reports_errors
def plans_show(ctx: click.Context, name: str, perspective: str | None) -> None:
    """Print a run's report, or with PERSPECTIVE, that plan. NAME may be a run's path.

    On a terminal the Markdown is rendered (headings, tables, code); elsewhere it is
    printed as it is.
    """
    directory = run_named(name)
    text = run_document(directory, perspective) + handoff_section(directory, perspective)
    if services(ctx).stdout_is_terminal():
        _render(text)
    else:
        click.echo(terminal_text(text), nl=False)


@plans.command("open", epilog=examples("planrun plans open brave-comet"))
@click.argument("name")
@click.pass_context
@reports_errors
def plans_open(ctx: click.Context, name: str) -> None:
    """Open a run's report.html in the browser (without one, print its path). NAME may be
    a run's path."""
    page = report_page(run_named(name))
    if services(ctx).open_in_browser(page.as_uri()):
        click.echo(one_line(f"opened {page}"))
    else:
        click.echo(one_line(f"no browser to open it in; the report is {page}"))


@plans.command(
    "resume",
    epilog=examples(
        "planrun plans resume brave-comet",
        "planrun plans resume plans/dry-run --json",
        "planrun plans resume brave-comet --max-cost-usd 5",
    ),
)
@click.argument("name")
@budget_options
@json_option(REPORT_JSON_HELP)
@click.pass_context
@reports_errors
def plans_resume(
    ctx: click.Context,
    name: str,
    max_cost_usd: float | None,
    max_cost_usd_per_plan: float | None,
    as_json: bool,
) -> None:
    """Resume an interrupted or failed `planrun plan` run. NAME may be a run's path.

    Its complete and valid plans are kept; a plan stopped by an interruption, the cost
    budget or a failure of the API or the sandbox goes on with its conversation (the
    exploration is not paid for again); any other plan is made again. The files it
    replaces go to `.attempts/`. What the run spent before counts against its budget (the
    recorded one, or the one the budget flags give it). Exit status as `planrun plan`; 2
    also when the repository changed since the run, or its budget is spent already.
    """
    # Imported only here: listing and showing runs starts without the machinery of a run.
    from sandbox_runner.cli.plan_cmd import progress_display, show_outcome
    from sandbox_runner.runs.planning import RunStart, resume_run

    def watch(start: RunStart) -> Progress:
        if not as_json and start.resume is not None:
            _say_what_resumes(start.resume)
        return progress_display(start, as_json=as_json)

    directory = run_named(name)
    budget = budget_overrides(max_cost_usd, max_cost_usd_per_plan)
    outcome = resume_run(directory, services(ctx), warn=warn, watch=watch, budget=budget)
    if outcome is None:
        if as_json:
            click.echo((directory / "report.json").read_text(encoding="utf-8"), nl=False)
        click.echo(one_line(f"every plan of {directory} is complete and valid"), err=True)
        return
    show_outcome(ctx, outcome, as_json=as_json)


plans.add_command(history)
plans.add_command(diff)


def _say_what_resumes(resume: ResumePlan) -> None:
    for label, verb in [
        *((label, "goes on with its conversation") for label in resume.going_on),
        *((label, "is made again") for label in resume.starting_over),
        *((label, "is kept") for label in resume.kept),
    ]:
        click.echo(one_line(f"planrun: {label} {verb}"), err=True)
    if resume.unfinished and not resume.to_run:
        click.echo(one_line(f"planrun: finishing the run: {resume.unfinished}"), err=True)


def handoff_section(directory: Path, perspective: str | None) -> str:
    """A plan's acceptances and exports (from its side record), after the document."""
    plan_files = (
        [directory / f"{perspective}.md"] if perspective else sorted(directory.glob("*.md"))
    )
    lines = [f"- {path.stem}: {line}" for path in plan_files for line in handoff_lines(path)]
    return "\n## Hand-off\n\n" + "\n".join(lines) + "\n" if lines else ""


def _render(text: str) -> None:
    """Markdown on a terminal with rich: no hyperlinks (a model chose them), front matter
    as a YAML block."""
    from rich.console import Console
    from rich.markdown import Markdown

    metadata, body = split_document(terminal_text(text))
    if metadata:
        front = yaml.safe_dump(metadata, sort_keys=False, allow_unicode=True, width=100)
        body = f"```yaml\n{front}```\n\n{body}"
    Console(highlight=False).print(Markdown(body, hyperlinks=False))
