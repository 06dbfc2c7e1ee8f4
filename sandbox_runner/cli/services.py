"""What every command shares: the services it reaches through ctx.obj (tests inject their
own), warnings, and one-line error reporting."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import click

from sandbox_runner import Sandbox
from sandbox_runner.errors import (
    ConfigError,
    DockerUnavailableError,
    ImageMissingError,
    PlanrunError,
    WorkspaceError,
)
from sandbox_runner.runs.preflight import PreflightError
from sandbox_runner.safe_text import one_line

if TYPE_CHECKING:
    from sandbox_runner.config import LoadedSettings
    from sandbox_runner.sandbox.docker_provider import DockerProvider
    from sandbox_runner.sandbox.factory import DockerSandboxes

# Errors the user fixes by changing the command or the setup: exit status 2.
USAGE_ERRORS = (ConfigError, WorkspaceError, DockerUnavailableError, ImageMissingError)

P = ParamSpec("P")
R = TypeVar("R")


def _connect_docker() -> Any:
    from sandbox_runner.sandbox.docker_engine import connect

    return connect()


def _open_in_browser(url: str) -> bool:
    """Open url in the user's graphical browser; False when there is none (headless, CI).

    On Linux without a display, webbrowser would start a text browser (lynx, w3m) in the
    terminal, or nothing; the path is more use there, unless $BROWSER names a browser.
    """
    import webbrowser

    graphical = sys.platform in ("darwin", "win32") or any(
        os.environ.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")
    )
    if not graphical:
        return False
    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False


@dataclass
class Services:
    """What commands need from the outside world; tests pass their own through `obj`."""

    docker: Callable[[], Any] = _connect_docker
    progress: Callable[[str], None] = field(
        # Progress names what a repository wrote (a server's args, a Dockerfile's name).
        default=lambda message: click.echo(f"planrun: {one_line(message)}", err=True)
    )
    open_in_browser: Callable[[str], bool] = _open_in_browser
    """Opens a URL in the user's browser; False when there is no browser to open it in."""
    stdout_is_terminal: Callable[[], bool] = field(default=lambda: sys.stdout.isatty())
    """Whether output goes to a terminal (rich rendering) or elsewhere (plain text)."""
    _provider: DockerProvider | None = field(default=None, init=False, repr=False)
    _readable_checked: set[Path] = field(default_factory=set, init=False, repr=False)
    """The workspaces whose readability this invocation checked (a batch's tasks share
    one: its warning is said once)."""

    def sandbox_factory(
        self, workspace: Path, loaded: LoadedSettings
    ) -> Callable[[str], Callable[[Path | None], Sandbox]]:
        """Checks Docker, the image and that the sandbox user can read the workspace now;
        then, given a session name, makes a plan run's sandboxes: one Docker container per
        plan directory (None: a probe sandbox)."""
        from sandbox_runner.sandbox.readable import require_readable

        sandboxes = self.sandboxes(workspace, loaded)
        sandboxes.check()
        if workspace not in self._readable_checked:
            if warning := require_readable(workspace):
                self.progress(f"warning: {warning}")
            self._readable_checked.add(workspace)
        return sandboxes.for_run

    def sandboxes(self, workspace: Path, loaded: LoadedSettings) -> DockerSandboxes:
        """The Docker sandboxes of WORKSPACE, made to LOADED by this invocation's provider
        (Docker is asked nothing yet)."""
        from sandbox_runner.sandbox.factory import DockerSandboxes

        return DockerSandboxes(self.provider, workspace, loaded, self.progress)

    def provider(self) -> DockerProvider:
        """The provider that makes and owns this invocation's sandboxes (connects to
        Docker the first time)."""
        if self._provider is None:
            from sandbox_runner.sandbox.docker_provider import DockerProvider

            self._provider = DockerProvider(self.docker())
        return self._provider

    def stop_sandboxes(self) -> None:
        """Remove every sandbox this invocation still runs (Ctrl-C, SIGTERM, exit)."""
        if self._provider is not None:
            self._provider.stop_all()


def services(ctx: click.Context) -> Services:
    """The services of this invocation (the default ones unless a test injected others)."""
    if not isinstance(ctx.obj, Services):
        ctx.obj = Services()
    return ctx.obj


def warn(message: object) -> None:
    """A warning on stderr, on one line, whatever a repository put in the names it mentions."""
    click.echo(f"planrun: warning: {one_line(message)}", err=True)


class UsageProblem(click.ClickException):
    """A mistake in the command or the setup, reported in one line with exit status 2."""

    exit_code = 2


def reports_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn planrun's errors into one-line click errors instead of tracebacks."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except PreflightError as error:
            # One line per failed check, the last as click's own error line.
            *others, last = [one_line(problem) for problem in error.problems] or [""]
            for problem in others:
                click.echo(f"Error: {problem}", err=True)
            raise UsageProblem(last) from None
        except USAGE_ERRORS as error:
            raise UsageProblem(one_line(error)) from None
        except PlanrunError as error:
            raise click.ClickException(one_line(error)) from None

    return wrapper
