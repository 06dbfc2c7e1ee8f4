"""`planrun verify`: hold an implementation to its plan (exit 0 follows, 1 drifts, 2 usage)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import click

from sandbox_runner.cli.options import examples, json_option, model_option, repo_option
from sandbox_runner.cli.services import services
from sandbox_runner.cli.signals import EXIT_INTERRUPTED
from sandbox_runner.errors import PlanrunError
from sandbox_runner.runs.preflight import PreflightError
from sandbox_runner.safe_text import one_line


class VerifyUsageError(click.ClickException):
    """A bad PLAN, REV or repository: exit status 2, one line."""

    exit_code = 2


@click.command(
    "verify",
    short_help="Check that a change follows its plan (a drift gate for CI).",
    epilog=examples(
        "planrun verify brave-comet",
        "planrun verify plans/due-dates.md --base origin/main --strict",
        "planrun verify PLAN.md --json --ignore 'gen/*'",
        "planrun verify brave-comet --base main --judge --max-cost-usd 0.50",
    ),
)
@click.argument("plan")
@click.option("--base", "base_rev", metavar="REV", help="Compare REV..HEAD and the working tree.")
@click.option(
    "--strict",
    is_flag=True,
    help="Untouched critical files, unmatched steps and tests, and a moved HEAD are drift too.",
)
@click.option(
    "--ignore",
    "ignore",
    multiple=True,
    metavar="GLOB",
    help="Do not hold files matching GLOB to the plan (repeatable; adds to verify.ignore).",
)
@click.option(
    "--judge",
    "with_judge",
    is_flag=True,
    help="Also ask a model, read-only in a sandbox, whether each step is done.",
)
@model_option("The judge's model (default: the configured planning model).")
@click.option(
    "--max-cost-usd",
    type=click.FloatRange(min=0, min_open=True),
    metavar="USD",
    help="Stop the judge once it has cost this much (list-price estimate).",
)
@repo_option("The repository whose change is verified.")
@json_option("Print the findings as JSON (schema in docs/verify.md).")
@click.pass_context
def verify(
    ctx: click.Context,
    /,
    plan: str,
    base_rev: str | None,
    strict: bool,
    ignore: tuple[str, ...],
    with_judge: bool,
    model: str | None,
    max_cost_usd: float | None,
    repo: str,
    as_json: bool,
) -> None:
    """Check that the change in the repository follows PLAN (a plan file, a run name, or a
    session's plan): every changed file named by the plan; with --strict, every critical
    file, step and test of the plan done too. Exit 0 when it follows, 1 when it drifts.
    With --judge, a model also says whether each step is done (advisory; under --strict a
    step it judges not done is drift)."""
    from sandbox_runner.config import load_settings
    from sandbox_runner.verify.changes import read_change
    from sandbox_runner.verify.check import judge
    from sandbox_runner.verify.judging import JudgeRequest, judge_change, prepare_judge
    from sandbox_runner.verify.outcome import Verification
    from sandbox_runner.verify.plan_refs import plan_refs
    from sandbox_runner.verify.plan_source import plan_file, read_plan

    workspace = Path(repo).expanduser().resolve()
    try:
        if not with_judge and (model is not None or max_cost_usd is not None):
            raise VerifyUsageError("--model and --max-cost-usd are the judge's: add --judge")
        if not workspace.is_dir():
            raise VerifyUsageError(f"--repo {repo}: no such directory")
        plan_path = plan_file(plan)
        refs = plan_refs(read_plan(plan_path), workspace)
        globs = (*load_settings(workspace).settings.verify, *ignore)
        change = read_change(workspace, base_rev, refs.base_commit)
        request = JudgeRequest(model, max_cost_usd)
        prepared = prepare_judge(workspace, refs, request, services(ctx)) if with_judge else None
    except PreflightError as error:
        *others, last = [one_line(problem) for problem in error.problems] or [""]
        for problem in others:
            click.echo(f"Error: {problem}", err=True)
        raise VerifyUsageError(last) from None
    except PlanrunError as error:
        raise VerifyUsageError(one_line(error)) from None
    verdict = judge(refs, change, globs, strict=strict)
    found = Verification(plan_path, workspace, refs, change, verdict, globs, strict)
    if prepared is not None:
        if refs.steps:
            what = f"{len(refs.steps)} step(s) with {prepared.model_id}"
            click.echo(one_line(f"planrun: judging {what} in a sandbox"), err=True)
        try:
            judged = judge_change(prepared, workspace, refs, change, verdict.changed)
        except KeyboardInterrupt:
            services(ctx).stop_sandboxes()
            click.echo("planrun: interrupted; the judge's sandbox is removed", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        found = replace(found, judged=judged)
    if as_json:
        click.echo(json.dumps(found.document(), indent=2))
    else:
        for line in found.lines():
            click.echo(line)
    ctx.exit(found.exit_code())
