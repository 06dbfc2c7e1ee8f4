"""`planrun plan`: plan a change from several perspectives, each in its own read-only sandbox."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import click

from sandbox_runner.cli.estimate_view import show_estimate
from sandbox_runner.cli.next_steps import cost_line
from sandbox_runner.cli.options import (
    REPORT_JSON_HELP,
    allow_web_option,
    budget_options,
    budget_overrides,
    examples,
    image_option,
    json_option,
    mcp_options,
    model_option,
    out_option,
    repo_option,
)
from sandbox_runner.cli.progress import Progress, wants_live_display
from sandbox_runner.cli.services import reports_errors, services, warn
from sandbox_runner.mcp.launch import McpChoice
from sandbox_runner.plans.history import run_name
from sandbox_runner.plans.report import Report
from sandbox_runner.runs.multi import PlanRunOutcome
from sandbox_runner.runs.planning import PlanOptions, RunStart, plan_run
from sandbox_runner.safe_text import one_line


@click.command(
    "plan",
    short_help="Plan a change from one or more perspectives.",
    epilog=examples(
        "planrun plan -f issue.md --perspective simplicity --perspective security",
        'planrun plan "Add a --dry-run flag to deploy" --repo ../api --out plans/dry-run --json',
    ),
)
@click.argument("requirements", required=False)
@click.option(
    "-f",
    "--file",
    "requirements_file",
    type=click.Path(path_type=Path),
    help="Read the requirements from FILE.",
)
@repo_option("The repository to plan in (mounted read-only).")
@click.option(
    "--perspective", "perspectives", multiple=True, help="A perspective or preset (repeatable)."
)
@click.option("--agent", default="Plan", show_default=True, help="The subagent to run.")
@model_option("Model id (default: the configured planning model).")
@out_option("Output directory (default: a new ~/.planrun/plans/<name>/).")
@json_option(REPORT_JSON_HELP)
@click.option(
    "--template",
    type=click.Path(path_type=Path),
    help="Plan template whose sections replace the defaults.",
)
@click.option(
    "--context",
    "context_files",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Attach a file to the prompt (repeatable).",
)
@click.option("--parallel", type=int, help="How many subagents run at once.")
@click.option("--max-turns", type=int, help="Model calls per subagent.")
@click.option(
    "--timeout", type=float, help="Wall-clock seconds per subagent, model calls included."
)
@click.option(
    "--no-synthesis",
    is_flag=True,
    help="Do not merge the valid plans into a recommended plan (recommended.md).",
)
@allow_web_option()
@click.option(
    "--scratch",
    is_flag=True,
    help="Let the plans run any command (tests, builds): writes go to a throw-away layer.",
)
@click.option(
    "--replay",
    type=click.Path(path_type=Path),
    help="Play a recorded conversation (file or directory) instead of calling the API.",
)
@click.option(
    "--record",
    type=click.Path(path_type=Path),
    help="Record the conversations into this directory.",
)
@budget_options
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say what would run and estimate its tokens and cost; start nothing.",
)
@image_option()
@mcp_options
@click.pass_context
@reports_errors
def plan(
    ctx: click.Context,
    /,
    requirements: str | None,
    requirements_file: Path | None,
    repo: str,
    perspectives: tuple[str, ...],
    agent: str,
    model: str | None,
    out_dir: Path | None,
    as_json: bool,
    template: Path | None,
    context_files: tuple[Path, ...],
    parallel: int | None,
    max_turns: int | None,
    timeout: float | None,
    no_synthesis: bool,
    allow_web: tuple[str, ...],
    scratch: bool,
    replay: Path | None,
    record: Path | None,
    image: str | None,
    max_cost_usd: float | None,
    max_cost_usd_per_plan: float | None,
    dry_run: bool,
    mcp_config: Path | None,
    strict_mcp_config: bool,
) -> None:
    """Plan REQUIREMENTS (text, `-f FILE`, or `-` for stdin) from one or more perspectives.

    Exit status: 0 every plan complete and valid; 1 a plan failed, is invalid or was
    stopped by the cost budget (the report is still written); 2 a usage or configuration
    error; 3 the workspace changed; 130 interrupted by Ctrl-C or SIGTERM (the report is
    still written).
    """
    options = PlanOptions(
        requirements=requirements,
        requirements_file=requirements_file,
        repo=repo,
        perspectives=perspectives,
        agent=agent,
        model=model,
        out_dir=out_dir,
        template=template,
        context_files=context_files,
        parallel=parallel,
        max_turns=max_turns,
        timeout=timeout,
        no_synthesis=no_synthesis,
        allow_web=allow_web,
        scratch=scratch,
        replay=replay,
        record=record,
        image=image,
        mcp=McpChoice(mcp_config, strict_mcp_config),
        budget=budget_overrides(max_cost_usd, max_cost_usd_per_plan),
    )
    if dry_run:
        show_estimate(options, warn=warn, as_json=as_json)
        return
    outcome = plan_run(options, services(ctx), warn=warn, watch=_announce(as_json))
    show_outcome(ctx, outcome, as_json=as_json)


def _announce(as_json: bool) -> Callable[[RunStart], Progress]:
    """What a run shows once its directory is claimed: a line (not with --json), then the
    progress of its plans on stderr."""

    def watch(start: RunStart) -> Progress:
        if not as_json:
            count, out_dir = len(start.labels), start.out_dir
            click.echo(f"planrun: planning {count} perspective(s) into {out_dir}", err=True)
            if start.spec.agent_override:
                click.echo(f"planrun: agent {one_line(start.spec.agent_override)}", err=True)
        return progress_display(start, as_json=as_json)

    return watch


def progress_display(start: RunStart, *, as_json: bool) -> Progress:
    """The progress of a run's plans on stderr: a live table for a person at a terminal."""
    live = wants_live_display(sys.stderr, json_output=as_json)
    return Progress(start.labels, live=live)


def show_outcome(ctx: click.Context, outcome: PlanRunOutcome, *, as_json: bool) -> None:
    """Print a run's outcome (report.json with --json, else a summary) and exit with its
    code."""
    report = outcome.report
    if as_json:
        click.echo(report.to_json(), nl=False)
    else:
        _summarise(report)
    name = run_name(report.out_dir)
    if outcome.interrupted:
        click.echo(
            "planrun: interrupted; finished plans and the report are kept; go on with "
            f"`planrun plans resume {name}`",
            err=True,
        )
        ctx.exit(130)
    if not as_json:
        click.echo(one_line(next_step(report, name)))
    ctx.exit(report.exit_code)


def next_step(report: Report, name: str) -> str:
    """The command to run next, said out loud."""
    if report.exit_code == 0:
        return f"Next: `planrun plans open {name}` opens the report"
    stopped = [entry for entry in report.plans if entry.status == "budget"]
    if stopped:
        per_plan = all("per plan" in entry.reason for entry in stopped)
        flag = "--max-cost-usd-per-plan" if per_plan else "--max-cost-usd"
        return (
            f"Next: `planrun plans resume {name} {flag} USD` goes on with the plans the "
            "cost budget stopped (what they spent counts against the higher budget)"
        )
    if any(not entry.valid for entry in report.plans):
        return f"Next: `planrun plans resume {name}` redoes the plans that failed"
    return f"Next: `planrun plans show {name}` shows the report"


def _summarise(report: Report) -> None:
    for entry in report.plans:
        verdict = "valid" if entry.valid else entry.status
        name = entry.perspective or entry.label
        reason = f" ({entry.reason})" if entry.reason else ""
        click.echo(one_line(f"  {name:<20} {verdict:<10} {entry.plan_file or '-'}{reason}"))
    if report.recommended is not None:
        entry = report.recommended
        verdict = "valid" if entry.valid else entry.status
        reason = f" ({entry.reason})" if entry.reason else ""
        line = f"  {'recommended':<20} {verdict:<10} {entry.plan_file or '-'}{reason}"
        click.echo(one_line(line))
    elif report.synthesis_note and len(report.plans) > 1:
        click.echo(one_line(f"  no recommended plan: {report.synthesis_note}"))
    if report.agent_override:
        click.echo(one_line(f"  agent: {report.agent_override}"))
    if not report.workspace_unchanged:
        click.echo(one_line(f"  WORKSPACE CHANGED: {report.workspace_problem}"))
    elif report.document.get("workspace_check", "full") != "full":
        note = report.document.get("workspace_check_note") or "unknown"
        click.echo(one_line(f"  workspace not fully checked: {note}"))
    if report.recommended is not None and report.recommended.plan_file:
        path = report.json_path.parent / report.recommended.plan_file
        click.echo(one_line(f"Recommended plan: {path}"))
    if cost := cost_line(report.document.get("totals")):
        click.echo(cost)
    click.echo(one_line(f"Report: {report.markdown_path}"))
    click.echo(one_line(f"HTML report: {report.html_path}"))
