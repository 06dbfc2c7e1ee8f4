"""The root command `planrun`: an interactive session without a command; the commands,
each found in its module when it is first asked for."""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from sandbox_runner import __version__
from sandbox_runner.cli.options import (
    allow_web_option,
    examples,
    image_option,
    mcp_options,
    model_option,
    repo_option,
)

COMMAND_MODULES = {
    "agents": "agents",
    "batch": "batch_cmd",
    "config": "config_cmd",
    "engine": "infra",
    "image": "infra",
    "mcp": "mcp_cmd",
    "plan": "plan_cmd",
    "plans": "plans_cmd",
    "sandbox": "infra",
    "sessions": "session_cmd",
    "verify": "verify_cmd",
}
"""The module of each command, which defines it under its name: imported only when the
command runs (or help lists it), so `planrun` reaches its prompt without loading every
command's dependencies."""


class LazyGroup(click.Group):
    """A group whose commands are taken from their modules when first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMAND_MODULES})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in COMMAND_MODULES:
            module = importlib.import_module(f"sandbox_runner.cli.{COMMAND_MODULES[name]}")
            self.add_command(getattr(module, name), name)
        return super().get_command(ctx, name)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    invoke_without_command=True,
    epilog=examples("planrun --plan", "planrun --continue", "planrun --resume brave-comet"),
)
@click.version_option(__version__, prog_name="planrun")
@repo_option("The repository of the session.")
@click.option("--plan", "start_in_plan", is_flag=True, help="Start in plan mode.")
@click.option(
    "--mode",
    type=click.Choice(["default", "acceptEdits", "plan"]),
    help="Start in this permission mode.",
)
@click.option(
    "--resume",
    "resume_id",
    metavar="[ID]",
    is_flag=False,
    flag_value="",
    help="Resume the session ID; without one, choose from this repository's sessions.",
)
@click.option(
    "--continue",
    "continue_latest",
    is_flag=True,
    help="Resume the latest session of this repository.",
)
@model_option("The session's model (default: the configured model).")
@allow_web_option()
@image_option()
@click.option(
    "--network",
    is_flag=True,
    default=None,
    help="Let the work session's commands reach the network (plan sandboxes never do).",
)
@mcp_options
@click.option(
    "--scratch",
    is_flag=True,
    help="In plan mode, commands may write (tests, builds): into a throw-away layer.",
)
@click.pass_context
def cli(
    ctx: click.Context,
    /,
    repo: str,
    start_in_plan: bool,
    mode: str | None,
    resume_id: str | None,
    continue_latest: bool,
    model: str | None,
    allow_web: tuple[str, ...],
    image: str | None,
    network: bool | None,
    mcp_config: Path | None,
    strict_mcp_config: bool,
    scratch: bool,
) -> None:
    """planrun: read-only Plan subagents, each in its own hardened Docker container.

    Without a command, `planrun` opens an interactive session on the repository: a work
    session and a plan session, Shift+Tab (or /mode) through default, acceptEdits and plan.
    """
    if ctx.invoked_subcommand is not None:
        return
    # Imported only now: `planrun CMD` starts without loading the session.
    from sandbox_runner.cli.session_cmd import start_session
    from sandbox_runner.mcp.launch import McpChoice
    from sandbox_runner.session.interactive import SessionOptions
    from sandbox_runner.tools.permissions import PermissionMode

    wanted = "plan" if start_in_plan else mode
    options = SessionOptions(
        repo=repo,
        mode=PermissionMode(wanted) if wanted else None,
        resume_id=resume_id,
        continue_latest=continue_latest,
        model=model,
        allow_web=allow_web,
        image=image,
        network=network,
        mcp=McpChoice(mcp_config, strict_mcp_config),
        scratch=scratch,
    )
    start_session(ctx, options)
