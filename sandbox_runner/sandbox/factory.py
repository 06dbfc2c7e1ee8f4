"""Docker sandboxes made to a workspace's settings: the one factory of plan runs, batches
and interactive sessions."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sandbox_runner import Sandbox
from sandbox_runner.config import LoadedSettings
from sandbox_runner.errors import ConfigError
from sandbox_runner.sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    from sandbox_runner.sandbox.docker_provider import DockerProvider


class DockerSandboxes:
    """The containers of one workspace: its image, extra read-only directories and
    limits from the settings, each container labelled with its session (a run, a batch,
    an interactive session) and agent.

    Docker is asked nothing until check() or the first sandbox: an interactive session
    draws its prompt first.
    """

    def __init__(
        self, provider: Callable[[], DockerProvider], workspace: Path, loaded: LoadedSettings
    ) -> None:
        """
        Args:
            provider: the provider of this process (connects to Docker when first called).
            workspace: the repository the sandboxes mount at /workspace.
            loaded: the settings the sandboxes are made to.
        """
        self._provider = provider
        self.workspace = workspace
        self._image = loaded.settings.image, loaded.sources["image"]
        self.extra_dirs = tuple(loaded.resolved_extra_dirs())
        self.limits = loaded.limits()
        self.scratch = loaded.scratch
        """Whether plan sandboxes have a scratch layer (plan_commands: scratch)."""
        self._lock = threading.Lock()
        self._docker: tuple[DockerProvider, str] | None = None

    def check(self) -> str:
        """Connect to Docker and find the image, the first time; return the image.

        Raises:
            DockerUnavailableError: no Docker engine answers.
            ImageMissingError: the image is not there (the message says how to get it).
            ConfigError: a scratch run this engine or repository path cannot have.
        """
        return self._connected()[1]

    def probe(self, *, session: str) -> Sandbox:
        """A throwaway sandbox without a plan directory (`git status` before and after)."""
        provider, image = self._connected()
        spec = SandboxSpec.probe(self.workspace, image, self.extra_dirs, self.limits,
                                 session=session)  # fmt: skip
        return provider.create(spec)

    def plan(self, plan_dir: Path, *, session: str, agent: str) -> Sandbox:
        """A read-only sandbox whose /plan is copied out to plan_dir."""
        provider, image = self._connected()
        spec = SandboxSpec.plan(
            self.workspace, plan_dir, image, self.extra_dirs, self.limits,
            session=session, agent=agent, scratch=self.scratch,
        )  # fmt: skip
        return provider.create(spec)

    def work(self, *, session: str, agent: str, protected: tuple[str, ...] = ()) -> Sandbox:
        """A sandbox whose workspace is writable (a work session, a general-purpose Task),
        but for the PROTECTED entries (relative paths), mounted read-only."""
        provider, image = self._connected()
        spec = SandboxSpec.work(
            self.workspace, image, self.extra_dirs, self.limits,
            session=session, agent=agent, protected=protected,
        )  # fmt: skip
        return provider.create(spec)

    def for_run(self, session: str) -> Callable[[Path | None], Sandbox]:
        """A plan run's factory: a plan sandbox per plan directory (the agent is named
        after it), a probe for None."""

        def make(plan_dir: Path | None) -> Sandbox:
            if plan_dir is None:
                return self.probe(session=session)
            return self.plan(plan_dir, session=session, agent=plan_dir.name)

        return make

    def _connected(self) -> tuple[DockerProvider, str]:
        # Sandboxes are made from several threads (a session's worker, Task subagents).
        with self._lock:
            if self._docker is None:
                from sandbox_runner.sandbox.image import require_image

                provider = self._provider()
                tag, configured_in = self._image
                image = require_image(provider.docker_client, tag, configured_in)
                if self.scratch:
                    _require_scratch(provider.docker_client, self.workspace)
                self._docker = provider, image
            return self._docker


def _require_scratch(docker_client: object, workspace: Path) -> None:
    """Refuse a scratch run that the engine or the repository's path cannot have."""
    from sandbox_runner.sandbox.scratch import engine_problem, path_problem

    problem = path_problem(workspace) or engine_problem(docker_client)
    if problem:
        raise ConfigError(problem)
