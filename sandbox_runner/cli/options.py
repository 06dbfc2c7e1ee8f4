"""The options several commands share, declared once, and the examples that end each
command's help."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])

REPORT_JSON_HELP = "Print report.json to standard output, and nothing else."
"""`--json` of the commands that run plans (`planrun plan`, `planrun plans resume`)."""
AGENTS_REPO_HELP = "Repository whose agents to include."


def repo_option(help: str, *, must_exist: bool = False) -> Callable[[F], F]:
    """`--repo`, the current directory by default; `help` says what the command does with it."""
    kind = click.Path(exists=True, file_okay=False) if must_exist else None
    return click.option("--repo", default=".", show_default=True, type=kind, help=help)


def json_option(help: str) -> Callable[[F], F]:
    """`--json` (`as_json`): print JSON instead of text; `help` says which document."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def out_option(help: str) -> Callable[[F], F]:
    """`--out` (`out_dir`): the directory a run writes into."""
    return click.option("--out", "out_dir", type=click.Path(path_type=Path), help=help)


def model_option(help: str) -> Callable[[F], F]:
    """`--model`: a model id, overriding the configured one."""
    return click.option("--model", help=help)


def mcp_options(command: F) -> F:
    """`--mcp-config FILE` (`mcp_config`) and `--strict-mcp-config` (`strict_mcp_config`)."""
    command = click.option(
        "--strict-mcp-config",
        is_flag=True,
        help="Use only the MCP servers of --mcp-config (not your config's, nor the repository's).",
    )(command)
    return click.option(
        "--mcp-config",
        type=click.Path(path_type=Path, dir_okay=False),
        help="MCP servers of this JSON file (Claude Code's .mcp.json format), yours to run.",
    )(command)


def budget_options(command: F) -> F:
    """`--max-cost-usd` and `--max-cost-usd-per-plan`: the cost caps of a run or batch."""
    command = click.option(
        "--max-cost-usd-per-plan",
        type=click.FloatRange(min=0, min_open=True),
        metavar="USD",
        help="Stop each plan once it has cost this much (list-price estimate).",
    )(command)
    return click.option(
        "--max-cost-usd",
        type=click.FloatRange(min=0, min_open=True),
        metavar="USD",
        help="Stop every agent once the whole run has cost this much (list-price estimate).",
    )(command)


def budget_overrides(max_cost_usd: float | None, per_plan: float | None) -> dict[str, object]:
    """The settings the budget flags set (none for a flag not given)."""
    values = {"max_cost_usd": max_cost_usd, "max_cost_usd_per_plan": per_plan}
    return {name: value for name, value in values.items() if value is not None}


def image_option() -> Callable[[F], F]:
    """`--image`: the user's toolchain image, which planrun adds its runtime to."""
    return click.option(
        "--image",
        metavar="IMAGE",
        help="Run the sandboxes on your image (planrun adds its tool server to it).",
    )


def allow_web_option() -> Callable[[F], F]:
    """`--allow-web HOST` (`allow_web`, repeatable): hosts WebFetch and WebSearch may reach,
    added to the `web` setting's."""
    return click.option(
        "--allow-web",
        "allow_web",
        multiple=True,
        metavar="HOST",
        help="Let WebFetch and WebSearch reach HOST (docs.python.org, *.readthedocs.io, "
        "127.0.0.1); repeatable.",
    )


def examples(*command_lines: str) -> str:
    """A help epilog listing COMMAND_LINES as they are typed (`\\b` keeps click from
    rewrapping them); tests/unit/test_cli_examples.py parses each one."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in command_lines)
