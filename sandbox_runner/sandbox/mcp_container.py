"""The container of one stdio MCP server: planrun's hardening, the workspace read-only, no
network unless granted, nothing of the host's environment; the server's stdin and stdout
are the container's attached stream."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_runner.errors import SandboxError
from sandbox_runner.limits import Limits
from sandbox_runner.paths import WORKSPACE_MOUNT
from sandbox_runner.sandbox.client import ByteStream
from sandbox_runner.sandbox.container_options import container_options
from sandbox_runner.sandbox.docker_sandbox import explain_death, supports_recursive_read_only
from sandbox_runner.sandbox.host_paths import sandbox_user
from sandbox_runner.sandbox.image import require_image
from sandbox_runner.sandbox.provider import LiveSandboxes
from sandbox_runner.sandbox.spec import RESOLV_CONF_MOUNT, TOOLSERVER_MOUNT, SandboxSpec

# Git refuses a repository another uid owns; the container reads it as the sandbox user.
GIT_SAFE_DIRECTORY = {
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "safe.directory",
    "GIT_CONFIG_VALUE_0": "*",
    "HOME": "/tmp",
}


@dataclass(frozen=True)
class McpContainerSpec:
    """What one server's container is made of."""

    server: str
    command: tuple[str, ...]
    """The server's command and arguments, run as the container's main process."""
    workspace: Path
    """Mounted read-only at /workspace (the server's working directory)."""
    image: str
    env: Mapping[str, str] = field(default_factory=dict)
    """The variables its definition names, and nothing else of the host."""
    network: bool = False
    extra_dirs: tuple[Path, ...] = ()
    limits: Limits = field(default_factory=Limits)
    session: str = "adhoc"


class McpContainer:
    """A started server container and its attached stream; stop() always removes it."""

    def __init__(
        self, spec: McpContainerSpec, docker_client: Any, live: LiveSandboxes | None = None
    ) -> None:
        self.spec = spec
        self._docker = docker_client
        self._live = live
        self._container: Any | None = None
        self._started_at = 0.0
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def container_id(self) -> str | None:
        """The container's id while it exists."""
        return self._container.id if self._container is not None else None

    def start(self) -> ByteStream:
        """Create and start the container; return its attached stdin/stdout stream.

        Raises:
            SandboxError: Docker refused it (the container is removed again).
        """
        require_image(self._docker, self.spec.image)
        options = mcp_container_options(self.spec, supports_recursive_read_only(self._docker))
        if self._live is not None:
            self._live.add(self)
        self._started_at = time.time()
        try:
            container = self._docker.containers.create(**options)
            with self._lock:
                self._container = container
                if self._stopped:
                    raise SandboxError("the MCP server was stopped while it was starting")
            stream = self._docker.api.attach_socket(
                container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            container.start()
            raw: ByteStream = getattr(stream, "_sock", stream)
            return raw
        except SandboxError:
            self.stop()
            raise
        except Exception as error:
            self.stop()
            reason = str(getattr(error, "explanation", None) or error).splitlines()[0][:300]
            raise SandboxError(f"cannot start MCP server {self.spec.server!r}: {reason}") from None

    def why_it_died(self) -> str:
        """Why the server's stream ended (its exit code, an OOM kill)."""
        return explain_death(
            self._container, self._docker, memory_mb=self.spec.limits.memory_mb,
            since=self._started_at,
        )  # fmt: skip

    def stop(self) -> None:
        """Remove the container; safe to call more than once, from any thread."""
        with self._lock:
            self._stopped = True
            container, self._container = self._container, None
        if container is not None:
            with contextlib.suppress(Exception):
                container.remove(force=True, v=True)
            with contextlib.suppress(Exception):
                self._docker.api.wait(container.id, timeout=10, condition="removed")
        if self._live is not None:
            self._live.discard(self)


def mcp_container_options(spec: McpContainerSpec, recursive_read_only: bool) -> dict[str, Any]:
    """docker's `containers.create` arguments: a probe sandbox's hardening (read-only root
    and workspace, no capabilities, seccomp, limits, the repository's git config cleaned),
    running the server instead of the tool server."""
    base = SandboxSpec.probe(
        spec.workspace, spec.image, spec.extra_dirs, spec.limits,
        session=spec.session, agent=f"mcp-{spec.server}",
    )  # fmt: skip
    options = container_options(
        base, sandbox_user(spec.workspace), recursive_read_only=recursive_read_only
    )
    options["command"] = list(spec.command)
    options["environment"] = {**GIT_SAFE_DIRECTORY, **spec.env}
    options["hostname"] = "planrun-mcp"
    options["working_dir"] = WORKSPACE_MOUNT
    # The tool server's mount is of no use to a server (and not its business).
    options["mounts"] = [m for m in options["mounts"] if m["Target"] != TOOLSERVER_MOUNT]
    if spec.network:
        options["network_mode"] = "bridge"
        options["mounts"] = [m for m in options["mounts"] if m["Target"] != RESOLV_CONF_MOUNT]
    return options
