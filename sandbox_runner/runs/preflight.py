"""The checks before anything is claimed, started or paid for: the API key and the model
(one free request), and the Docker engine and image, side by side; every failure one
line saying what to run next. `planrun plan`, `planrun batch` and a session start here."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

from sandbox_runner.errors import (
    ConfigError,
    DockerUnavailableError,
    ImageMissingError,
    PlanrunError,
)

T = TypeVar("T")
ENGINE_HINT = "run `planrun engine start` (or set DOCKER_HOST to a running engine)"


class PreflightError(ConfigError):
    """Checks before a run or a session failed: one line per problem (exit status 2)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class AccessCheck:
    """The API check of some model ids, each in a thread from the moment it is made."""

    def __init__(self, model_ids: Iterable[str], model_hint: str) -> None:
        """
        Args:
            model_ids: the models the run or session will call.
            model_hint: how to choose another model, e.g. "set it with --model or /model".
        """
        self.model_hint = model_hint
        self._problems: dict[str, str | None] = {}
        self._threads = [
            threading.Thread(target=self._check, args=(model_id,), daemon=True)
            for model_id in dict.fromkeys(model_ids)
        ]
        for thread in self._threads:
            thread.start()

    def _check(self, model_id: str) -> None:
        try:
            # Imported here: loading the SDK takes a second the caller need not wait for.
            from sandbox_runner.model.access import check_access

            problem = check_access(model_id)
        except Exception:  # a check that breaks is no verdict, and no traceback either
            problem = None
        line = None
        if problem is not None:
            line = problem.message + (f"; {self.model_hint}" if problem.model_at_fault else "")
        self._problems[model_id] = line

    def problems(self) -> list[str]:
        """Every problem found, once each, when every check is over."""
        for thread in self._threads:
            thread.join()
        return list(dict.fromkeys(line for line in self._problems.values() if line))


def docker_problem(error: PlanrunError) -> str:
    """One line for a Docker engine or image that is not there, naming the command to run."""
    if isinstance(error, DockerUnavailableError):
        return f"no Docker engine ({error.reason}): {ENGINE_HINT}"
    return str(error)


def preflight(docker: Callable[[], T], access: AccessCheck | None) -> T:
    """DOCKER's answer (a check of the engine and image) once ACCESS (already running)
    is over too.

    Raises:
        PreflightError: Docker or the API failed a check; one line each.
    """
    problems: list[str] = []
    try:
        result = docker()
    except (DockerUnavailableError, ImageMissingError) as error:
        problems.append(docker_problem(error))
    except Exception:
        if access is not None:
            access.problems()  # no check outlives the command that asked for it
        raise
    if access is not None:
        problems = [*access.problems(), *problems]
    if problems:
        raise PreflightError(problems)
    return result
