"""`planrun plan`: plan a change from several perspectives, each in its own read-only sandbox."""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from sandbox_runner.agents.definitions import AgentDefinition
from sandbox_runner.agents.planner import plan_agent
from sandbox_runner.agents.registry import Registry, planrun_home
from sandbox_runner.cli.app import cli, reports_errors, services, warn
from sandbox_runner.cli.progress import Progress, wants_live_display
from sandbox_runner.config import UNTRUSTED_MODEL_HINT, LoadedSettings, load_settings
from sandbox_runner.errors import ConfigError
from sandbox_runner.model import check_model_options
from sandbox_runner.plans.history import remember_run
from sandbox_runner.plans.inputs import (
    read_context_files,
    read_requirements,
    read_template,
)
from sandbox_runner.plans.multi import PlanRunSpec, execute
from sandbox_runner.plans.names import claim_directory
from sandbox_runner.plans.workspace import git_metadata_problem
from sandbox_runner.safe_text import one_line
from sandbox_runner.sandbox.spec import resolve_workspace

PLAN_FILES = ("report.json", "report.md", "report.html")


@cli.command("plan", short_help="Plan a change from one or more perspectives.")
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
@click.option("--timeout", type=float, help="Seconds per subagent.")
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
    report is still written); 2 a usage or configuration error; 3 the workspace changed.
    """
    if options["replay"] is None:
        _warm_up_model_client()
    requirements = read_requirements(options["requirements"], options["requirements_file"])
    workspace = resolve_workspace(options["repo"])
    loaded = load_settings(workspace, flags=_flags(options))
    registry = Registry.load(workspace, trust_project=loaded.project_trusted)
    for warning in [*loaded.warnings, *registry.warnings, git_metadata_problem(workspace)]:
        if warning:
            warn(warning)
    agent = plan_agent(registry, options["agent"])
    if agent.ignored_model:
        warn(
            f"{agent.file_path} asks for model {agent.ignored_model!r}; ignored: "
            f"{UNTRUSTED_MODEL_HINT}"
        )
    svc = services(ctx)
    # Everything that can be wrong is checked before a container starts or a run
    # directory is claimed.
    spec = _spec(options, requirements, workspace, loaded, _inputs(options, workspace, loaded))
    labels = [job.label for job in spec.jobs()]
    check_model_options(options["replay"], options["record"], labels, os.environ)
    sandboxes_for = svc.sandbox_factory(workspace, loaded)
    out_dir = _out_dir(options["out_dir"], workspace)
    spec = replace(spec, name=out_dir.name, out_dir=out_dir, agent_override=_override(agent))
    if options["out_dir"] is not None:
        remember_run(spec.out_dir)
    sandbox_factory = sandboxes_for(spec.name)
    if not options["as_json"]:
        click.echo(f"planrun: planning {len(labels)} perspective(s) into {spec.out_dir}", err=True)
        if spec.agent_override:
            click.echo(f"planrun: agent {one_line(spec.agent_override)}", err=True)
    live = wants_live_display(sys.stderr, json_output=options["as_json"])
    with Progress(labels, live=live) as progress:
        outcome = execute(
            spec,
            model_factory=_model_factory(options, spec.model_id, loaded),
            sandbox_factory=sandbox_factory,
            registry=registry,
            on_event=progress,
            stop_sandboxes=svc.stop_sandboxes,
            on_stop=progress.stopping,
        )
    record = outcome.record
    report = json.loads((record.out_dir / "report.json").read_text())
    if options["as_json"]:
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        _summarise(report)
    if outcome.interrupted:
        click.echo("planrun: interrupted; finished plans and the report are kept", err=True)
        ctx.exit(130)
    ctx.exit(record.exit_code)


def _override(agent: AgentDefinition) -> str:
    """How the report names a built-in agent that a file replaced ("" when none did)."""
    if not agent.overrides_builtin:
        return ""
    return f"{agent.name} is overridden by {agent.file_path} ({agent.scope})"


def _warm_up_model_client() -> None:
    # Importing the anthropic SDK takes about 1.5 s; doing it while Docker, the workspace
    # snapshot and the containers get ready keeps it off the critical path.
    threading.Thread(
        target=importlib.import_module,
        args=("sandbox_runner.model.anthropic_model",),
        name="import-anthropic",
        daemon=True,
    ).start()


def _flags(options: dict[str, Any]) -> dict[str, Any]:
    return {
        "planning_model": options["model"],
        "parallel": options["parallel"],
        "max_turns": options["max_turns"],
        "timeout": options["timeout"],
    }


def _inputs(
    options: dict[str, Any], workspace: Path, loaded: LoadedSettings
) -> tuple[tuple[str, ...] | None, str]:
    """The template's sections and the attached context, after every check of the flags."""
    settings = loaded.settings
    if not settings.planning_enabled:
        raise ConfigError("planning is disabled by configuration (planning_enabled: false)")
    extra_dirs = loaded.resolved_extra_dirs()
    sections = None
    template = read_template(workspace, options["template"])
    if isinstance(template, str):
        warn(template)
    elif template is not None:
        sections = template.sections
    context = read_context_files(options["context_files"], workspace, extra_dirs)
    return sections, context


def _spec(
    options: dict[str, Any],
    requirements: str,
    workspace: Path,
    loaded: LoadedSettings,
    inputs: tuple[tuple[str, ...] | None, str],
) -> PlanRunSpec:
    """The run, before its directory is claimed (name and out_dir are filled in then)."""
    settings = loaded.settings
    sections, context = inputs
    return PlanRunSpec(
        name="",
        requirements=requirements,
        workspace=workspace,
        out_dir=Path(),
        perspectives=loaded.expand_perspectives(options["perspectives"]),
        model_id=loaded.planning_model_id(),
        agent=options["agent"],
        context=context,
        sections=sections,
        parallel=settings.parallel,
        limits=loaded.run_limits(),
        allowed_tools=frozenset(settings.allowed_tools),
    )


def _out_dir(requested: Path | None, workspace: Path) -> Path:
    """A new run directory, or --out, which must not hold plans already."""
    if requested is None:
        return claim_directory(planrun_home() / "plans")
    # Resolved, so that `..` or a symlink cannot hide that it lies in the workspace.
    out_dir = requested.expanduser().resolve()
    if out_dir == workspace:
        raise ConfigError(
            f"--out {requested} is the repository itself; give a directory for the plans"
        )
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {requested} exists and is not a directory")
    if out_dir.is_dir() and (
        any(out_dir.glob("*.md")) or any((out_dir / name).exists() for name in PLAN_FILES)
    ):
        raise ConfigError(f"--out {requested} already holds plans; planrun never overwrites them")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"cannot create --out {requested}: {error.strerror}") from None
    return out_dir


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


def _summarise(report: dict[str, Any]) -> None:
    for entry in report["plans"]:
        verdict = "valid" if entry["valid"] else entry["status"]
        name = entry["perspective"] or entry["label"]
        reason = f" ({entry['reason']})" if entry["reason"] else ""
        click.echo(one_line(f"  {name:<20} {verdict:<10} {entry['plan_file'] or '-'}{reason}"))
    if report.get("agent_override"):
        click.echo(one_line(f"  agent: {report['agent_override']}"))
    if not report["workspace_unchanged"]:
        click.echo(one_line(f"  WORKSPACE CHANGED: {report['workspace_problem']}"))
    click.echo(one_line(f"Report: {Path(report['out_dir']) / 'report.md'}"))
    click.echo(one_line(f"HTML report: {Path(report['out_dir']) / 'report.html'}"))
