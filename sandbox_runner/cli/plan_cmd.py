"""`planrun plan`: plan a change from several perspectives, each in its own read-only sandbox."""

from __future__ import annotations

import importlib
import os
import sys
import threading
from pathlib import Path
from typing import Any

import click

from sandbox_runner.cli.progress import Progress, wants_live_display
from sandbox_runner.cli.services import reports_errors, services, warn
from sandbox_runner.config import LoadedSettings
from sandbox_runner.model import check_model_options
from sandbox_runner.plans.history import remember_run
from sandbox_runner.plans.inputs import (
    read_requirements,
)
from sandbox_runner.plans.report import Report
from sandbox_runner.runs.locks import RUN_LOCK, DirectoryLock
from sandbox_runner.runs.multi import execute
from sandbox_runner.runs.plan_job import SandboxFactory
from sandbox_runner.runs.prepare import PlanRequest, claim_out_dir, prepare
from sandbox_runner.runs.run_spec import PlanRunSpec, Resumption
from sandbox_runner.safe_text import one_line


@click.command("plan", short_help="Plan a change from one or more perspectives.")
@click.argument("requirements", required=False)
@click.option(
    "-f",
    "--file",
    "requirements_file",
    type=click.Path(path_type=Path),
    help="Read the requirements from FILE.",
)
@click.option(
    "--repo", default=".", show_default=True, help="The repository to plan in (mounted read-only)."
)
@click.option(
    "--perspective", "perspectives", multiple=True, help="A perspective or preset (repeatable)."
)
@click.option("--agent", default="Plan", show_default=True, help="The subagent to run.")
@click.option("--model", help="Model id (default: the configured planning model).")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="Output directory (default: a new ~/.planrun/plans/<name>/).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print report.json to standard output, and nothing else.",
)
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
@click.pass_context
@reports_errors
def plan(ctx: click.Context, /, **options: Any) -> None:
    """Plan REQUIREMENTS (text, `-f FILE`, or `-` for stdin) from one or more perspectives.

    Exit status: 0 every plan complete and valid; 1 a plan failed or is invalid (the
    report is still written); 2 a usage or configuration error; 3 the workspace changed;
    130 interrupted by Ctrl-C or SIGTERM (the report is still written).
    """
    if options["replay"] is None:
        _warm_up_model_client()
    requirements = read_requirements(options["requirements"], options["requirements_file"])
    spec, settings = prepare(_request(options, requirements), warn)
    spec = spec.replaying(options["replay"])
    labels = spec.labels
    check_model_options(options["replay"], options["record"], labels, os.environ)
    # Docker, the image and the workspace's readability are checked before a run
    # directory is claimed.
    sandboxes_for = services(ctx).sandbox_factory(spec.workspace, settings)
    out_dir = claim_out_dir(options["out_dir"], spec.workspace)
    if options["out_dir"] is not None:
        remember_run(out_dir)
    if not options["as_json"]:
        click.echo(f"planrun: planning {len(labels)} perspective(s) into {out_dir}", err=True)
        if spec.agent_override:
            click.echo(f"planrun: agent {one_line(spec.agent_override)}", err=True)
    # `planrun plans resume` of this run waits until it is over.
    with DirectoryLock(out_dir, name=RUN_LOCK, what="planrun plan"):
        run_and_report(ctx, spec, settings, out_dir, sandboxes_for(out_dir.name), options)


def run_and_report(
    ctx: click.Context,
    spec: PlanRunSpec,
    settings: LoadedSettings,
    out_dir: Path,
    sandboxes: SandboxFactory,
    options: dict[str, Any],
    resumption: Resumption | None = None,
) -> None:
    """Run the plans in out_dir with a progress display, print the outcome, exit with its
    code.

    options: as_json, and the model's replay and record (None to call the API).
    """
    svc = services(ctx)
    live = wants_live_display(sys.stderr, json_output=options["as_json"])
    with Progress(spec.labels, live=live) as progress:
        outcome = execute(
            spec,
            out_dir,
            model_factory=_model_factory(options, spec.model_id, settings),
            sandbox_factory=sandboxes,
            on_event=progress,
            stop_sandboxes=svc.stop_sandboxes,
            on_stop=progress.stopping,
            resumption=resumption,
        )
    report = outcome.report
    if options["as_json"]:
        click.echo(report.to_json(), nl=False)
    else:
        _summarise(report)
    if outcome.interrupted:
        click.echo("planrun: interrupted; finished plans and the report are kept", err=True)
        ctx.exit(130)
    ctx.exit(report.exit_code)


def _request(options: dict[str, Any], requirements: str) -> PlanRequest:
    return PlanRequest(
        requirements=requirements,
        repo=options["repo"],
        perspectives=options["perspectives"],
        agent=options["agent"],
        model=options["model"],
        template=options["template"],
        context_files=options["context_files"],
        parallel=options["parallel"],
        max_turns=options["max_turns"],
        timeout=options["timeout"],
        synthesis=False if options["no_synthesis"] else None,
    )


def _warm_up_model_client() -> None:
    # Importing the anthropic SDK takes about 1.5 s; doing it while Docker, the workspace
    # snapshot and the containers get ready keeps it off the critical path.
    threading.Thread(
        target=importlib.import_module,
        args=("sandbox_runner.model.anthropic_model",),
        name="import-anthropic",
        daemon=True,
    ).start()


def _model_factory(options: dict[str, Any], model_id: str, loaded: LoadedSettings) -> Any:
    from sandbox_runner.model import create_model

    settings = loaded.settings

    def make(label: str) -> Any:
        return create_model(
            model_id,
            replay=options["replay"],
            record=options["record"],
            key=label,
            timeout=settings.api_timeout,
            max_retries=settings.api_retries,
        )

    return make


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
    if report.recommended is not None and report.recommended.plan_file:
        path = report.json_path.parent / report.recommended.plan_file
        click.echo(one_line(f"Recommended plan: {path}"))
    click.echo(one_line(f"Report: {report.markdown_path}"))
    click.echo(one_line(f"HTML report: {report.html_path}"))
