"""Git and background work around a run: `git status` in a throwaway sandbox (never on the
host), started in the background and collected when it is needed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from sandbox_runner.errors import PlanrunError
from sandbox_runner.runs.plan_job import SandboxFactory
from sandbox_runner.runs.workspace import GitStatusRunner
from sandbox_runner.types import ToolRequest

T = TypeVar("T")

__all__ = ["git_in_sandbox", "in_background", "settled"]


def in_background(function: Callable[..., T], *args: Any, name: str = "git-status") -> Future[T]:
    """Run function in a daemon thread; its Future carries the result or the error."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(function(*args))
        except BaseException as error:
            future.set_exception(error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


def settled(future: Future[str | None], timeout: float) -> str | None:
    """The future's result, or None if it failed or is not there in time."""
    try:
        return future.result(timeout=timeout)
    except Exception:
        return None


def git_in_sandbox(sandbox_factory: SandboxFactory) -> GitStatusRunner:
    """Runs git in a throwaway sandbox: a repository's config can name programs for git
    to run (filters, diff drivers, fsmonitor), so git never runs on the host. The sandbox
    has no plan directory: nothing it writes reaches the host."""

    def run(command: str) -> str | None:
        try:
            with sandbox_factory(None) as sandbox:
                result = sandbox.call(ToolRequest("bash", {"command": command}, timeout=120))
        except PlanrunError:
            return None
        return result.output if result.ok and result.exit_code == 0 else None

    return run
