"""`planrun config`: the merged settings and where each value came from."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from sandbox_runner.cli.options import examples, json_option, repo_option
from sandbox_runner.cli.services import reports_errors, warn
from sandbox_runner.config import load_settings


def _shown(value: object) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(str(item) for item in value) or "(none)"
    if isinstance(value, dict):
        presets = [f"{name}: {_shown(members)}" for name, members in value.items()]
        return "; ".join(presets) or "(none)"
    return str(value)


def _masked_servers(servers: dict[str, object]) -> dict[str, object]:
    """mcp_servers with the values of each server's env and headers hidden (they often hold
    a token), unless a value only names a variable (`${GITHUB_TOKEN}`)."""
    shown: dict[str, object] = {}
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            shown[name] = entry
            continue
        shown[name] = {
            key: (
                {k: v if _names_a_variable(v) else "***" for k, v in value.items()}
                if key in ("env", "headers") and isinstance(value, dict)
                else value
            )
            for key, value in entry.items()
        }
    return shown


def _names_a_variable(value: object) -> bool:
    text = str(value).strip()
    return text.startswith("${") and text.endswith("}") and text.count("$") == 1


@click.group(
    short_help="Show the merged settings and their sources.",
    epilog=examples("planrun config show"),
)
def config() -> None:
    """Settings: ~/.planrun/config.yaml, .planrun/config.yaml, PLANRUN_* variables, flags."""


@config.command("show", epilog=examples("planrun config show", "planrun config show --json"))
@repo_option("Repository whose .planrun/config.* to include.", must_exist=True)
@json_option("Print settings, sources and files as JSON.")
@reports_errors
def config_show(repo: str, as_json: bool) -> None:
    """Show every setting, its value and where it came from."""
    loaded = load_settings(Path(repo).expanduser().resolve())
    for warning in loaded.warnings:
        warn(warning)
    values = asdict(loaded.settings)
    values["mcp_servers"] = _masked_servers(values["mcp_servers"])
    if as_json:
        document = {
            "settings": values,
            "sources": loaded.sources,
            "files": [str(path) for path in loaded.files],
        }
        click.echo(json.dumps(document, indent=2))
        return
    rows = [("SETTING", "VALUE", "SOURCE")]
    rows += [(name, _shown(value), loaded.sources[name]) for name, value in values.items()]
    name_width = max(len(row[0]) for row in rows)
    value_width = max(len(row[1]) for row in rows)
    for name, value, source in rows:
        click.echo(f"{name.ljust(name_width)}  {value.ljust(value_width)}  {source}")
    click.echo("")
    click.echo(f"files read: {', '.join(str(path) for path in loaded.files) or '(none)'}")
