"""`planrun agents`: the subagents this repository and user can run."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sandbox_runner.agents.registry import Registry
from sandbox_runner.cli.app import cli, reports_errors


def _registry(repo: str) -> Registry:
    registry = Registry.load(Path(repo).expanduser().resolve())
    for warning in registry.warnings:
        click.echo(f"planrun: warning: {warning}", err=True)
    return registry


@cli.group()
def agents() -> None:
    """Subagent definitions: built-in, user (~/.planrun/agents) and project (.planrun/agents)."""


@agents.command("list")
@click.option("--repo", default=".", show_default=True, help="Repository whose agents to include.")
@reports_errors
def agents_list(repo: str) -> None:
    """List every subagent: name, scope, source, tools and model."""
    registry = _registry(repo)
    rows = [
        (d.name, d.scope, d.file_path, ", ".join(d.effective_tools()), d.model)
        for d in registry.all()
    ]
    headers = ("NAME", "SCOPE", "SOURCE", "TOOLS", "MODEL")
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(4)]
    for row in [headers, *rows]:
        cells = [str(cell).ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        click.echo("  ".join([*cells, str(row[4])]))


@agents.command("show")
@click.argument("name")
@click.option("--repo", default=".", show_default=True, help="Repository whose agents to include.")
@click.option("--json", "as_json", is_flag=True, help="Print the definition as JSON.")
@reports_errors
def agents_show(name: str, repo: str, as_json: bool) -> None:
    """Show one subagent's resolved definition, system prompt included."""
    registry = _registry(repo)
    definition = registry.get(name)
    if as_json:
        click.echo(json.dumps(definition.to_dict(), indent=2))
        return
    click.echo(f"name:        {definition.name}")
    click.echo(f"description: {definition.description}")
    click.echo(f"when to use: {definition.when_to_use or definition.description}")
    click.echo(f"scope:       {definition.scope} (priority {definition.priority})")
    click.echo(f"source:      {definition.file_path}")
    click.echo(f"tools:       {', '.join(definition.effective_tools())}")
    click.echo(f"model:       {definition.model}")
    click.echo(f"read-only:   {'yes' if definition.read_only else 'no'}")
    click.echo("")
    click.echo(definition.system_prompt)
