"""The `planrun` command line: parse, build objects, call the library, report errors in one line."""

from __future__ import annotations

import sys

import click

from sandbox_runner.cli.app import cli
from sandbox_runner.cli.services import Services
from sandbox_runner.cli.signals import StopOnSignal

__all__ = ["Services", "cli", "main"]


def main() -> None:
    """Console-script entry point."""
    # SIGTERM is handled like Ctrl-C: the KeyboardInterrupt unwinds every sandbox.
    signals = StopOnSignal()
    signals.install()
    # The commands reach these services through ctx.obj; the exit path stops what their
    # provider still runs.
    services = Services()
    try:
        code = cli.main(prog_name="planrun", standalone_mode=False, obj=services)
    except click.ClickException as error:
        error.show()
        code = error.exit_code
    except (click.Abort, KeyboardInterrupt):
        click.echo("planrun: interrupted", err=True)
        code = 130
    finally:
        signals.finishing()
        services.stop_sandboxes()
    sys.exit(code if isinstance(code, int) else 0)
