"""`planrun verify`: hold an implementation to its plan (exit 0 follows, 1 drifts, 2 usage)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sandbox_runner.cli.options import examples, json_option, repo_option
from sandbox_runner.errors import PlanrunError


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
@repo_option("The repository whose change is verified.")
@json_option("Print the findings as JSON (schema in docs/verify.md).")
def verify(
    plan: str, base_rev: str | None, strict: bool, ignore: tuple[str, ...], repo: str, as_json: bool
) -> None:
    """Check that the change in the repository follows PLAN (a plan file, a run name, or a
    session's plan): every changed file named by the plan; with --strict, every critical
    file, step and test of the plan done too. Exit 0 when it follows, 1 when it drifts."""
    from sandbox_runner.config import load_settings
    from sandbox_runner.verify.changes import read_change
    from sandbox_runner.verify.check import judge
    from sandbox_runner.verify.plan_refs import plan_refs
    from sandbox_runner.verify.plan_source import plan_file, read_plan
    from sandbox_runner.verify.report import exit_code, report_json, report_lines

    workspace = Path(repo).expanduser().resolve()
    try:
        if not workspace.is_dir():
            raise VerifyUsageError(f"--repo {repo}: no such directory")
        plan_path = plan_file(plan)
        refs = plan_refs(read_plan(plan_path), workspace)
        globs = (*load_settings(workspace).settings.verify, *ignore)
        change = read_change(workspace, base_rev, refs.base_commit)
    except PlanrunError as error:
        raise VerifyUsageError(str(error)) from None
    verdict = judge(refs, change, globs, strict=strict)
    if as_json:
        document = report_json(
            plan_path, workspace, refs, change, verdict, strict=strict, ignore=globs
        )
        click.echo(json.dumps(document, indent=2))
    else:
        for line in report_lines(plan_path, change, verdict):
            click.echo(line)
    click.get_current_context().exit(exit_code(verdict))
