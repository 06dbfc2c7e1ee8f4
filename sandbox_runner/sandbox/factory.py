"""Docker sandboxes made to a workspace's settings: the one factory of plan runs, batches
and interactive sessions."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from sandbox_runner import Sandbox
from sandbox_runner.config import LoadedSettings
from sandbox_runner.errors import ConfigError
from sandbox_runner.sandbox.guard_seed import GuardSeed
from sandbox_runner.sandbox.image_choice import ImageChoice, sandbox_image
from sandbox_runner.sandbox.mcp_container import McpContainer, McpContainerSpec
from sandbox_runner.sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    from sandbox_runner.sandbox.docker_provider import DockerProvider


def _say(line: str) -> None:
    print(f"planrun: {line}", file=sys.stderr, flush=True)


log = logging.getLogger(__name__)


class DockerSandboxes:
    """The containers of one workspace: its image (planrun's own, or one derived from the
    user's), extra read-only directories, limits and the work network from the settings,
    each container labelled with its session (a run, a batch, an interactive session)
    and agent.

    Docker is asked nothing until check() or the first sandbox: an interactive session
    draws its prompt first.
    """

    def __init__(
        self,
        provider: Callable[[], DockerProvider],
        workspace: Path,
        loaded: LoadedSettings,
        progress: Callable[[str], None] = _say,
    ) -> None:
        """
        Args:
            provider: the provider of this process (connects to Docker when first called).
            workspace: the repository the sandboxes mount at /workspace.
            loaded: the settings the sandboxes are made to.
            progress: where building a derived image is told, step by step.
        """
        self._provider = provider
        self.workspace = workspace
        self._choice = ImageChoice.of(loaded, workspace)
        self.extra_dirs = tuple(loaded.resolved_extra_dirs())
        self.limits = loaded.limits()
        self.work_network = loaded.settings.work_network
        self._progress = progress
        self.scratch = loaded.scratch
        """Whether plan sandboxes have a scratch layer (plan_commands: scratch)."""
        self._lock = threading.Lock()
        self._docker: tuple[DockerProvider, str, str] | None = None
        self.git_seed = GuardSeed(workspace)
        """The git guard's first look, made once for the plan and probe sandboxes (begun
        by check: a run's or a batch's; a session's sandboxes walk for themselves)."""

    def check(self) -> str:
        """Connect to Docker and find the image (deriving it from the user's the first
        time it is needed); return the image.

        Raises:
            DockerUnavailableError: no Docker engine answers.
            ImageMissingError: the image is not there (the message says how to get it).
            ImageError: the derived image could not be built.
            ConfigError: a scratch run this engine or repository path cannot have.
        """
        image = self._connected()[1]
        if not self.scratch:  # a scratch layer shows other stamps: a seed would not match
            self.git_seed.start()
        return image

    def probe(self, *, session: str) -> Sandbox:
        """A throwaway sandbox without a plan directory (`git status` before and after)."""
        provider, image, python = self._connected()
        spec = SandboxSpec.probe(self.workspace, image, self.extra_dirs, self.limits,
                                 session=session, python=python,
                                 git_seed=self.git_seed.path())  # fmt: skip
        return provider.create(spec)

    def plan(self, plan_dir: Path, *, session: str, agent: str) -> Sandbox:
        """A read-only sandbox whose /plan is copied out to plan_dir."""
        provider, image, python = self._connected()
        spec = SandboxSpec.plan(
            self.workspace, plan_dir, image, self.extra_dirs, self.limits,
            session=session, agent=agent, python=python, scratch=self.scratch,
            git_seed=self.git_seed.path(),
        )  # fmt: skip
        return provider.create(spec)

    def work(self, *, session: str, agent: str, protected: tuple[str, ...] = ()) -> Sandbox:
        """A sandbox whose workspace is writable (a work session, a general-purpose Task),
        but for the PROTECTED entries (relative paths), mounted read-only; it reaches the
        network only when the user granted it (work_network, --network)."""
        provider, image, python = self._connected()
        spec = SandboxSpec.work(
            self.workspace, image, self.extra_dirs, self.limits, network=self.work_network,
            session=session, agent=agent, protected=protected, python=python,
        )  # fmt: skip
        return provider.create(spec)

    def mcp_server(
        self,
        name: str,
        command: tuple[str, ...],
        *,
        env: Mapping[str, str],
        network: bool,
        image: str | None,
        session: str,
    ) -> McpContainer:
        """The container of a stdio MCP server (not started): the workspace read-only, its
        IMAGE (default: the sandbox image), the ENV its definition names and nothing else."""
        provider, default_image, _python = self._connected()
        spec = McpContainerSpec(
            name, command, self.workspace, image or default_image, env, network,
            self.extra_dirs, self.limits, session,
        )  # fmt: skip
        return McpContainer(spec, provider.docker_client, provider.live)

    def for_run(self, session: str) -> Callable[[Path | None], Sandbox]:
        """A plan run's factory: a plan sandbox per plan directory (the agent is named
        after it), a probe for None."""

        def make(plan_dir: Path | None) -> Sandbox:
            if plan_dir is None:
                return self.probe(session=session)
            return self.plan(plan_dir, session=session, agent=plan_dir.name)

        return make

    def _connected(self) -> tuple[DockerProvider, str, str]:
        # Sandboxes are made from several threads (a session's worker, Task subagents).
        with self._lock:
            if self._docker is None:
                provider = self._provider()
                image, python = sandbox_image(
                    provider.docker_client, self.workspace, self._choice, self._progress
                )
                if self.scratch:
                    _require_scratch(provider.docker_client, self.workspace)
                self._docker = provider, image, python
                _collect_leftovers(provider.docker_client)
            return self._docker


def _collect_leftovers(docker_client: object) -> None:
    """Remove, behind the run, what killed planrun processes of this host left: a
    container whose program ignores the end of its input (an MCP server's) outlives a
    `kill -9` of its planrun; the next planrun on the machine takes it away."""
    from sandbox_runner.sandbox.docker_provider import collect_garbage

    def collect() -> None:
        try:
            collect_garbage(docker_client)
        except Exception as error:  # the engine went away: `planrun sandbox gc` remains
            log.debug("leftover collection failed: %s", error)

    threading.Thread(target=collect, name="planrun-gc", daemon=True).start()


def _require_scratch(docker_client: object, workspace: Path) -> None:
    """Refuse a scratch run that the engine or the repository's path cannot have."""
    from sandbox_runner.sandbox.scratch import engine_problem, path_problem

    problem = path_problem(workspace) or engine_problem(docker_client)
    if problem:
        raise ConfigError(problem)
