"""DockerSandbox: one hardened container per subagent, its tool server reached over attach."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import docker.errors

from sandbox_runner import SandboxBase
from sandbox_runner.errors import PlanrunError, SandboxDiedError, SandboxError, WorkspaceError
from sandbox_runner.paths import PLAN_MOUNT
from sandbox_runner.sandbox.client import ToolServerClient
from sandbox_runner.sandbox.container_options import container_options
from sandbox_runner.sandbox.host_paths import sandbox_user, submounts, work_owner_problem
from sandbox_runner.sandbox.image import require_image
from sandbox_runner.sandbox.plan_copy import (
    CopyProblem,
    HostCopy,
    copy_all,
    copy_file,
    safe_relative,
    seed,
)
from sandbox_runner.sandbox.provider import LiveSandboxes
from sandbox_runner.sandbox.scratch import ScratchLayer
from sandbox_runner.sandbox.spec import Profile, SandboxSpec
from sandbox_runner.types import ExecResult, ToolRequest

READY_TIMEOUT_SECONDS = 30.0
# At stop, copying /plan out gets this long; a finished plan was copied after its write.
FINAL_COPY_SECONDS = 1.5
PLAN_WRITING_OPS = frozenset({"write", "edit"})
REMOVAL_WAIT_SECONDS = 10


class DockerSandbox(SandboxBase):
    """A sandbox on the Docker SDK; a context manager that always removes its container."""

    def __init__(
        self, spec: SandboxSpec, docker_client: Any, live: LiveSandboxes | None = None
    ) -> None:
        """Describe the sandbox; start() creates its container.

        Args:
            spec: what the container is made of.
            docker_client: a docker-py client.
            live: where the sandbox enrols while it runs (its provider's set), so that
                `stop_all` reaches it; None for a sandbox nobody else stops.
        """
        self.spec = spec
        self._docker = docker_client
        self._live = live
        self._container: Any | None = None
        self._client: ToolServerClient | None = None
        self._user = sandbox_user(spec.workspace)
        self._state_lock = threading.Lock()
        self._stopping = False
        self._started_at = 0.0
        self.left_out: list[str] = []
        """Files of /plan the last copy did not take (over its limits, odd names)."""
        self._host_copy = HostCopy(spec.plan_dir) if spec.plan_dir is not None else None
        """Where /plan is copied to on the host, and how many bytes that holds."""
        self._scratch: ScratchLayer | None = None
        """A scratch sandbox's copy-on-write layer, from start until it is removed."""

    @property
    def container_id(self) -> str | None:
        """The container's id while it exists."""
        return self._container.id if self._container is not None else None

    def start(self) -> None:
        """Create and start the container; return once its tool server is ready.

        Does nothing when the sandbox already runs."""
        if self._client is not None:
            return
        require_image(self._docker, self.spec.image)
        recursive = supports_recursive_read_only(self._docker)
        if not recursive:
            _refuse_submounts(self.spec)
        self._started_at = time.time()
        problem = work_owner_problem(self.spec.workspace)
        if self.spec.profile is Profile.WORK and problem:
            raise WorkspaceError(problem)
        image_volumes = _image_volumes(self._docker, self.spec.image)
        if self._live is not None:
            self._live.add(self)
        try:
            volume = self._make_scratch_layer() if self.spec.scratch else None
            options = container_options(
                self.spec,
                self._user,
                recursive_read_only=recursive,
                workspace_volume=volume,
                image_volumes=image_volumes,
            )
            container = self._docker.containers.create(**options)
            with self._state_lock:
                # stop() may have run in another thread (Ctrl-C) while create() was under way.
                self._container = container
                if self._stopping:
                    raise SandboxError("the sandbox was stopped while it was starting")
            stream = self._docker.api.attach_socket(
                self._container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            raw = getattr(stream, "_sock", stream)
            self._client = ToolServerClient(raw, explain_death=self._why_it_died)
            self._container.start()
            self._client.wait_ready(READY_TIMEOUT_SECONDS)
            if self.spec.plan_dir is not None:
                # What the plan directory already holds (a plan from earlier) goes in first.
                deadline = time.monotonic() + READY_TIMEOUT_SECONDS
                self.left_out = seed(self._client.request, self.spec.plan_dir, deadline)
        except PlanrunError:
            self._stop_quietly()
            raise
        except Exception as error:
            # Docker API errors, and connection errors when the daemon goes away mid-start.
            self._stop_quietly()
            raise SandboxError(f"cannot start the sandbox: {_api_reason(error)}") from None
        except BaseException:
            self._stop_quietly()
            raise

    def _make_scratch_layer(self) -> str:
        """Make the scratch layer; return the volume to mount at /workspace."""
        layer = ScratchLayer(self._docker, self.spec, self._user)
        with self._state_lock:
            self._scratch = layer
        volume = layer.create()
        with self._state_lock:
            stopped = self._stopping
        if stopped:
            # stop() ran (Ctrl-C) while the layer was being made: what it missed goes now.
            layer.remove()
            raise SandboxError("the sandbox was stopped while it was starting")
        return volume

    def call(self, request: ToolRequest) -> ExecResult:
        """Run one tool operation inside the container."""
        client = self._client
        if client is None:
            raise SandboxError("the sandbox is not running")
        result = client.request(request)
        if result.ok and request.op in PLAN_WRITING_OPS:
            self._copy_written(client, request)
        return result

    def _copy_written(self, client: ToolServerClient, request: ToolRequest) -> None:
        """Copy the file a write or edit changed to the host at once, so that it survives
        the container (/plan is a tmpfs that dies with it)."""
        target = str(request.args.get("file_path", ""))
        prefix = PLAN_MOUNT + "/"
        relative = safe_relative(target[len(prefix) :]) if target.startswith(prefix) else None
        if self._host_copy is None or relative is None:
            return
        deadline = time.monotonic() + max(1.0, request.timeout or 0)
        try:
            copy_file(client.request, relative, self._host_copy, deadline)
        except (CopyProblem, PlanrunError) as problem:
            # The write itself succeeded: the copy is retried when the sandbox stops.
            self.left_out.append(str(problem))

    def _copy_everything(self, client: ToolServerClient) -> None:
        if self._host_copy is None:
            return
        deadline = time.monotonic() + FINAL_COPY_SECONDS
        with contextlib.suppress(PlanrunError, OSError):
            self.left_out = copy_all(client.request, self._host_copy, deadline)

    def stop(self) -> None:
        """Copy /plan out to the plan directory, then remove the container."""
        with self._state_lock:
            was_stopping, self._stopping = self._stopping, True
            client, self._client = self._client, None
            container, self._container = self._container, None
            scratch, self._scratch = self._scratch, None
        if client is not None:
            if not was_stopping:
                self._copy_everything(client)
            client.close()
        if container is not None:
            try:
                container.remove(force=True, v=True)
            except docker.errors.NotFound:
                pass
            except Exception as error:
                if "already in progress" not in str(error):
                    self._leave_live()
                    raise SandboxError(
                        f"cannot remove container {container.short_id} ({_api_reason(error)}); "
                        "`planrun sandbox gc` removes it once Docker answers"
                    ) from None
                # Docker is removing it already (auto-remove): wait until it is gone.
                self._wait_removed(container.id)
        if scratch is not None:
            try:
                scratch.remove()
            except SandboxError:
                self._leave_live()
                raise
        self._leave_live()

    def _leave_live(self) -> None:
        if self._live is not None:
            self._live.discard(self)

    def _wait_removed(self, container_id: str) -> None:
        with contextlib.suppress(Exception):
            self._docker.api.wait(container_id, timeout=REMOVAL_WAIT_SECONDS, condition="removed")

    def _stop_quietly(self) -> None:
        """Clean up after a failed start without hiding why it failed."""
        with contextlib.suppress(PlanrunError):
            self.stop()

    def _why_it_died(self) -> str:
        return explain_death(
            self._container,
            self._docker,
            memory_mb=self.spec.limits.memory_mb,
            since=self._started_at,
        )


def explain_death(
    container: Any | None, docker_client: Any, *, memory_mb: int, since: float
) -> str:
    """Why a sandbox's tool server stream ended, in the words a user needs.

    Args:
        container: the sandbox's docker-py container, None once it was stopped.
        docker_client: asked for the daemon's events when the container is gone already.
        memory_mb: the memory limit, named when the kernel OOM-killed the container.
        since: when the container was started (seconds since the epoch).
    """
    if container is None:
        return "the sandbox was stopped"
    for _ in range(20):
        try:
            container.reload()
        except docker.errors.NotFound:
            return _death_from_events(docker_client, container.id, memory_mb, since)
        except Exception as error:
            return f"the Docker daemon stopped answering ({str(error).splitlines()[0][:120]})"
        state = container.attrs.get("State", {})
        if state.get("OOMKilled"):
            return f"OOM-killed (memory limit {memory_mb} MB)"
        if not state.get("Running", False):
            return f"the container exited with code {state.get('ExitCode')}"
        time.sleep(0.05)
    return "the tool server closed its output while the container still runs"


def _death_from_events(docker_client: Any, container_id: str, memory_mb: int, since: float) -> str:
    """Why a container that Docker already removed (auto-remove) died, from the events."""
    try:
        events = docker_client.events(
            since=int(since) - 1,
            until=int(time.time()) + 1,
            filters={"container": container_id},
            decode=True,
        )
        actions = {event.get("Action"): event for event in events}
    except Exception:
        return "the container was removed"
    if "oom" in actions:
        return f"OOM-killed (memory limit {memory_mb} MB)"
    died = actions.get("die")
    if died is not None:
        code = died.get("Actor", {}).get("Attributes", {}).get("exitCode", "?")
        return f"the container exited with code {code}"
    return "the container was removed"


# Docker 25 (API 1.44) can make a read-only bind mount read-only all the way down.
RECURSIVE_READ_ONLY_API = (1, 44)


def supports_recursive_read_only(docker_client: Any) -> bool:
    """Whether the engine makes read-only bind mounts read-only all the way down."""
    try:
        version = str(docker_client.api.api_version)
        major, minor = (int(part) for part in version.split(".")[:2])
    except (AttributeError, ValueError):
        return False
    return (major, minor) >= RECURSIVE_READ_ONLY_API


def _refuse_submounts(spec: SandboxSpec) -> None:
    for directory in (mount.source for mount in spec.mounts if not mount.writable):
        below = submounts(directory)
        if below:
            raise WorkspaceError(
                f"{directory} has a filesystem mounted below it ({below[0]}); this Docker "
                "engine (before 25) would leave it writable in the sandbox; unmount it, "
                "plan a directory without mounts below it, or use Docker 25 or newer"
            )


def _api_reason(error: Exception) -> str:
    explanation = getattr(error, "explanation", None) or str(error)
    return str(explanation).splitlines()[0][:300]


__all__ = ["DockerSandbox", "SandboxDiedError", "explain_death", "supports_recursive_read_only"]


def _image_volumes(client: Any, image: str) -> tuple[str, ...]:
    """The paths IMAGE declares as VOLUME (a user's image may; planrun's own does not)."""
    config = client.images.get(image).attrs.get("Config") or {}
    return tuple(sorted(config.get("Volumes") or {}))
