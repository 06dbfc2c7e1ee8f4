"""The `planrun` command line: parse, build objects, call the library, report errors in one line."""

from __future__ import annotations

import signal
import sys
from typing import NoReturn

import click

from sandbox_runner.cli import agents, config_cmd, infra, plan_cmd, plans_cmd  # noqa: F401
from sandbox_runner.cli.app import Services, cli

__all__ = ["Services", "cli", "main"]


def _terminate(signum: int, _frame: object) -> NoReturn:
    # SystemExit unwinds every `with DockerSandbox(...)`, so SIGTERM cleans up like Ctrl-C.
    raise SystemExit(128 + signum)


def main() -> None:
    """Console-script entry point."""
    signal.signal(signal.SIGTERM, _terminate)
    try:
        code = cli.main(prog_name="planrun", standalone_mode=False)
    except click.ClickException as error:
        error.show()
        code = error.exit_code
    except (click.Abort, KeyboardInterrupt):
        click.echo("planrun: interrupted", err=True)
        code = 130
    finally:
        sandboxes = sys.modules.get("sandbox_runner.sandbox.docker_sandbox")
        if sandboxes is not None:
            sandboxes.stop_all()
    sys.exit(code if isinstance(code, int) else 0)
