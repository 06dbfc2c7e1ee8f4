"""`planrun batch`: plan many tasks from several perspectives, resumably; `batch status`."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import click

from sandbox_runner.batch import BatchOptions, BatchStart, batch_status, run_batch
from sandbox_runner.batch import dry_run as what_would_run
from sandbox_runner.batch.ledger import FAILED_STATUSES
from sandbox_runner.batch.task_table import status_table, wall_line
from sandbox_runner.cli.batch_progress import BatchProgress, syntheses_text
from sandbox_runner.cli.estimate_view import (
    batch_estimate,
    budget_fit,
    budget_words,
    estimate_note,
    estimate_words,
)
from sandbox_runner.cli.next_steps import batch_command, cost_line, export_hint
from sandbox_runner.cli.options import (
    allow_web_option,
    budget_options,
    budget_overrides,
    examples,
    image_option,
    json_option,
    out_option,
)
from sandbox_runner.cli.progress import wants_live_display
from sandbox_runner.cli.services import reports_errors, services, warn
from sandbox_runner.plans.history import batches_dir
from sandbox_runner.safe_text import one_line


class _BatchGroup(click.Group):
    """`planrun batch FILE ...` runs a batch; `planrun batch status DIR` reads one."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().resolve_command(ctx, args)


@click.group(
    "batch",
    cls=_BatchGroup,
    short_help="Plan many tasks (a batch file).",
    epilog=examples(
        "planrun batch tasks.yaml --out runs/ --parallel 4", "planrun batch status runs/"
    ),
)
def batch() -> None:
    """Plan every task of a batch file (YAML or JSONL) from its perspectives.

    \b
    planrun batch FILE [--out DIR] [--engine local|ray] [--parallel N] [--retry-failed]
                       [--redo ID]... [--only REGEX] [--no-synthesis] [--dry-run] [--json]
    planrun batch status DIR [--json]

    A task with two or more valid plans gets a recommended plan merged from them. Run the
    same command again to resume: finished plans are never redone.
    """


@batch.command(
    "run",
    short_help="Run (or resume) a batch; `planrun batch FILE` does this.",
    epilog=examples(
        "planrun batch tasks.yaml --out runs/ --parallel 4",
        "planrun batch tasks.yaml --out runs/ --retry-failed --only '^api-'",
    ),
)
@click.argument("file", type=click.Path(path_type=Path))
@out_option("Batch directory.")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@click.option("--address", help="Ray cluster address (auto, host:port, ray://...).")
@click.option("--parallel", type=click.IntRange(1, 256), help="Jobs running at once.")
@click.option("--retry-failed", is_flag=True, help="Run failed jobs again (old attempt kept).")
@click.option("--redo", "redo", multiple=True, help="Run task ID again although it changed.")
@click.option("--only", help="Only the tasks whose id matches this regular expression.")
@allow_web_option()
@image_option()
@budget_options
@click.option(
    "--dry-run", is_flag=True, help="Say what would run and estimate its cost; run nothing."
)
@click.option(
    "--scratch", is_flag=True, help="Plans may run any command; writes go to a throw-away layer."
)
@click.option(
    "--no-synthesis",
    is_flag=True,
    help="Do not merge each task's valid plans into a recommended plan (recommended.md).",
)
@json_option("Print summary.json only.")
@click.pass_context
@reports_errors
def batch_run(
    ctx: click.Context,
    /,
    file: Path,
    out_dir: Path | None,
    engine: Literal["local", "ray"],
    address: str | None,
    parallel: int | None,
    retry_failed: bool,
    redo: tuple[str, ...],
    only: str | None,
    allow_web: tuple[str, ...],
    image: str | None,
    max_cost_usd: float | None,
    max_cost_usd_per_plan: float | None,
    dry_run: bool,
    scratch: bool,
    no_synthesis: bool,
    as_json: bool,
) -> None:
    """Exit status: 0 every job complete and valid; 1 some failed or were stopped or
    skipped by the cost budget; 2 usage (a bad batch
    file, a changed task, another driver); 3 a workspace changed; 130 interrupted."""
    options = BatchOptions(
        file=file,
        out_dir=out_dir,
        engine=engine,
        address=address,
        parallel=parallel,
        retry_failed=retry_failed,
        redo=redo,
        only=only,
        allow_web=allow_web,
        scratch=scratch,
        image=image,
        budget=budget_overrides(max_cost_usd, max_cost_usd_per_plan),
        synthesis=not no_synthesis,
    )
    if dry_run:
        _print_dry_run(options, as_json=as_json)
        return
    outcome = run_batch(options, services(ctx), warn=warn, watch=_watch(as_json))
    summary = outcome.summary
    again = batch_command(file, Path(summary["out_dir"]), engine=engine, only=only)
    if outcome.interrupted and not as_json:
        click.echo(f"planrun: interrupted; go on with `{again}`", err=True)
    if as_json:
        click.echo(json.dumps(summary, indent=2, ensure_ascii=False))
        ctx.exit(outcome.exit_code)
    _print_summary(summary)
    if not outcome.interrupted and "budget" in summary["counts"]:
        hint = f"Next: `{again} --max-cost-usd USD` with a higher budget runs the jobs it stopped"
        click.echo(one_line(hint))
    elif not outcome.interrupted and _failed(summary):
        click.echo(one_line(f"Next: `{again} --retry-failed` runs the failed jobs again"))
    elif not outcome.interrupted and (handoff := export_hint(summary, batches_dir())):
        click.echo(one_line(handoff))
    ctx.exit(outcome.exit_code)


def _failed(summary: dict[str, Any]) -> bool:
    """Whether a job failed: a plan, or a task's synthesis (which leaves the exit status 0)."""
    return any(job["status"] in FAILED_STATUSES for job in summary["jobs"])


def _watch(as_json: bool) -> Callable[[BatchStart], BatchProgress | None]:
    """What the batch shows once its jobs are decided: a line, then its progress (on
    stderr; nothing with --json)."""

    def watch(start: BatchStart) -> BatchProgress | None:
        if as_json:
            return None
        click.echo(start_line(start), err=True)
        live = wants_live_display(sys.stderr, json_output=False)
        return BatchProgress(start.to_run, start.skipped, live=live, syntheses=start.syntheses)

    return watch


def start_line(start: BatchStart) -> str:
    """What a batch is about to run: its plan jobs, and the syntheses that may join them."""
    syntheses = f", and up to {syntheses_text(start.syntheses)}" if start.syntheses else ""
    return one_line(
        f"planrun: batch {start.name}: {start.to_run} plan job(s) to run{syntheses}, "
        f"{start.skipped} done or skipped earlier, into {start.out_dir}"
    )


def _print_dry_run(options: BatchOptions, *, as_json: bool) -> None:
    run = what_would_run(options, warn=warn)
    jobs = run.jobs
    total = batch_estimate(jobs)
    fit = budget_fit(run, total)
    if as_json:
        listed = [job.to_dict() for job in jobs]
        document = {"dry_run": True, "jobs": listed, "totals": total, "budget": fit}
        click.echo(json.dumps(document, indent=2))
        return
    for job in jobs:
        action = job.action.value + (" (goes on)" if job.goes_on else "")
        when = f", {job.when}" if job.when else ""
        click.echo(one_line(f"{action:<18} {job.key}{estimate_note(job.estimate)}{when}"))
    runs = sum(1 for job in jobs if job.runs)
    click.echo(f"{runs} of {len(jobs)} job(s) would run", err=True)
    click.echo(one_line(f"Estimate: {estimate_words(total)}"), err=True)
    click.echo(one_line(f"Budget: {budget_words(fit, total)}"), err=True)


def _print_summary(summary: dict[str, Any]) -> None:
    width = min(max((len(job["key"]) for job in summary["jobs"]), default=0), 40)
    for job in summary["jobs"]:
        # One line per job; the whole reason is in summary.md and summary.json.
        reason = str(job["reason"]) if job["status"] != "complete" else ""
        reason = f" ({reason[:97]}…)" if len(reason) > 100 else (f" ({reason})" if reason else "")
        click.echo(one_line(f"  {job['key']:<{width}}  {job['status']:<10}{reason}".rstrip()))
    counts = ", ".join(f"{status} {n}" for status, n in summary["counts"].items())
    click.echo(one_line(f"Batch {summary['batch']}: {counts}"))
    for line in status_table(summary.get("tasks") or [], _table_width()):
        click.echo(f"  {line}")
    for check in summary.get("workspaces") or []:
        if check.get("problem"):
            click.echo(one_line(f"  WORKSPACE CHANGED: {check['repository']}: {check['problem']}"))
        elif check.get("check") != "full":
            words = f"{check['repository']}: {check.get('note') or 'unknown'}"
            click.echo(one_line(f"  workspace not fully checked: {words}"))
    if cost := cost_line(summary.get("totals")):
        click.echo(cost)
    if wall := wall_line(summary.get("totals")):
        click.echo(wall)
    click.echo(one_line(f"Summary: {Path(summary['out_dir']) / 'summary.md'}"))


def _table_width() -> int | None:
    """The width a table of tasks may take: the terminal's (or COLUMNS), less the two
    spaces each line is indented by; None in a pipe, which gets every character (`grep`
    must find a whole path)."""
    if not os.environ.get("COLUMNS") and not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size((100, 24)).columns - 2


@batch.command(
    "status", epilog=examples("planrun batch status runs/", "planrun batch status runs/ --json")
)
@click.argument("directory", type=click.Path(path_type=Path))
@json_option("Print the status as JSON.")
@reports_errors
def show_batch_status(directory: Path, as_json: bool) -> None:
    """What a batch directory holds: counts by status, failed jobs (no engine, no Docker)."""
    status = batch_status(directory)
    if as_json:
        click.echo(json.dumps(status, indent=2, ensure_ascii=False))
        return
    counts = ", ".join(f"{s} {n}" for s, n in status["counts"].items()) or "nothing recorded"
    click.echo(one_line(f"Batch {status.get('batch')}: {status.get('state')}; {counts}"))
    if status["tasks"]:
        for line in status_table(status["tasks"], _table_width()):
            click.echo(f"  {line}")
    if wall := wall_line(status.get("totals")):
        click.echo(wall)
    for key in status["failed"]:
        click.echo(one_line(f"  failed: {key}"))
    if status["failed"]:
        click.echo("Run again with --retry-failed to retry the failed jobs.")
