"""The root command group, the services commands use, and one-line error reporting."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

import click

from sandbox_runner import __version__
from sandbox_runner.errors import PlanrunError

P = ParamSpec("P")
R = TypeVar("R")


def _connect_docker() -> Any:
    from sandbox_runner.sandbox.engine import connect

    return connect()


@dataclass
class Services:
    """What commands need from the outside world; tests pass their own through `obj`."""

    docker: Callable[[], Any] = _connect_docker
    progress: Callable[[str], None] = field(
        default=lambda message: click.echo(f"planrun: {message}", err=True)
    )


def services(ctx: click.Context) -> Services:
    """The services of this invocation (the default ones unless a test injected others)."""
    if not isinstance(ctx.obj, Services):
        ctx.obj = Services()
    return ctx.obj


def reports_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn planrun's errors into one-line click errors instead of tracebacks."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except PlanrunError as error:
            raise click.ClickException(str(error)) from None

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="planrun")
def cli() -> None:
    """planrun: read-only Plan subagents, each in its own hardened Docker container."""
