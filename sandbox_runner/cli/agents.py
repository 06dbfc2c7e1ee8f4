"""`planrun agents`: the subagents this repository and user can run."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sandbox_runner.agents.definitions import AgentDefinition
from sandbox_runner.agents.registry import Registry
from sandbox_runner.cli.options import AGENTS_REPO_HELP, examples, json_option, repo_option
from sandbox_runner.cli.services import reports_errors, warn
from sandbox_runner.config import load_settings
from sandbox_runner.safe_text import one_line, terminal_text


def _registry(repo: str) -> Registry:
    workspace = Path(repo).expanduser().resolve()
    trusted = load_settings(workspace).project_trusted
    registry = Registry.load(workspace, trust_project=trusted)
    for warning in registry.warnings:
        warn(warning)
    return registry


def _model(definition: AgentDefinition) -> str:
    if not definition.ignored_model:
        return definition.model
    return f"{definition.model} (the project's {definition.ignored_model} is ignored: not trusted)"


@click.group(
    short_help="List and show subagents (built-in, user, project).",
    epilog=examples("planrun agents list", "planrun agents show Plan"),
)
def agents() -> None:
    """Subagent definitions: built-in, user (~/.claude/agents, ~/.planrun/agents) and project
    (.claude/agents, .planrun/agents)."""


@agents.command("list", epilog=examples("planrun agents list", "planrun agents list --repo ../api"))
@repo_option(AGENTS_REPO_HELP)
@reports_errors
def agents_list(repo: str) -> None:
    """List every subagent: name, scope, source, tools and model."""
    registry = _registry(repo)
    rows = [
        (d.name, d.scope, d.file_path, ", ".join(d.effective_tools()), _model(d))
        for d in registry.all()
    ]
    headers = ("NAME", "SCOPE", "SOURCE", "TOOLS", "MODEL")
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(4)]
    for row in [headers, *rows]:
        cells = [str(cell).ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        click.echo(one_line("  ".join([*cells, str(row[4])])))
    directories = ", ".join(str(directory) for directory in registry.directories)
    click.echo(
        one_line(f"planrun: agent files are read from {directories} (the later wins a name)"),
        err=True,
    )


@agents.command(
    "show", epilog=examples("planrun agents show Plan", "planrun agents show Plan --json")
)
@click.argument("name")
@repo_option(AGENTS_REPO_HELP)
@json_option("Print the definition as JSON.")
@reports_errors
def agents_show(name: str, repo: str, as_json: bool) -> None:
    """Show one subagent's resolved definition, system prompt included."""
    registry = _registry(repo)
    definition = registry.get(name)
    if as_json:
        click.echo(json.dumps(definition.to_dict(), indent=2))
        return
    lines = [
        f"name:        {definition.name}",
        f"description: {definition.description}",
        f"when to use: {definition.when_to_use or definition.description}",
        f"scope:       {definition.scope} (priority {definition.priority})",
        f"source:      {definition.file_path}",
        f"tools:       {', '.join(definition.effective_tools())}",
        f"model:       {_model(definition)}",
        f"read-only:   {'yes' if definition.reads_only else 'no'}",
    ]
    for line in lines:
        click.echo(one_line(line))
    click.echo("")
    click.echo(terminal_text(definition.system_prompt))
