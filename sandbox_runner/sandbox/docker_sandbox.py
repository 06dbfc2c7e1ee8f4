"""DockerSandbox: one hardened container per subagent, its tool server reached over attach."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

import docker.errors

from sandbox_runner import SandboxBase
from sandbox_runner.errors import PlanrunError, SandboxDiedError, SandboxError, WorkspaceError
from sandbox_runner.paths import PLAN_MOUNT
from sandbox_runner.sandbox.client import ToolServerClient
from sandbox_runner.sandbox.image import require_image
from sandbox_runner.sandbox.plan_copy import copy_all, copy_file, safe_relative, seed
from sandbox_runner.sandbox.spec import (
    MANAGED_LABEL,
    SandboxSpec,
    container_options,
    sandbox_user,
    submounts,
)
from sandbox_runner.types import ExecResult, ToolRequest

READY_TIMEOUT_SECONDS = 30.0
# At stop, copying /plan out gets this long; a finished plan was copied after its write.
FINAL_COPY_SECONDS = 1.5
PLAN_WRITING_OPS = frozenset({"write", "edit"})
REMOVAL_WAIT_SECONDS = 10

# Every sandbox that is running, so that a last-resort handler can remove them all.
_live: set[DockerSandbox] = set()
_live_lock = threading.Lock()


class DockerSandbox(SandboxBase):
    """A sandbox on the Docker SDK; a context manager that always removes its container."""

    def __init__(self, spec: SandboxSpec, docker_client: Any) -> None:
        self.spec = spec
        self._docker = docker_client
        self._container: Any | None = None
        self._client: ToolServerClient | None = None
        self._user = sandbox_user(spec.workspace)
        self._state_lock = threading.Lock()
        self._stopping = False
        self.ready_info: dict[str, Any] = {}
        self._started_at = 0.0
        self.left_out: list[str] = []
        """Files of /plan the last copy did not take (over its limits, odd names)."""

    @property
    def container_id(self) -> str | None:
        """The container's id while it exists."""
        return self._container.id if self._container is not None else None

    def start(self) -> None:
        """Create and start the container; return once its tool server is ready."""
        require_image(self._docker, self.spec.image)
        recursive = _supports_recursive_read_only(self._docker)
        if not recursive:
            _refuse_submounts(self.spec)
        self._started_at = time.time()
        options = container_options(self.spec, self._user, recursive_read_only=recursive)
        with _live_lock:
            _live.add(self)
        try:
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
            self._client = ToolServerClient(raw, explain_death=self._explain_death)
            self._container.start()
            self.ready_info = self._client.wait_ready(READY_TIMEOUT_SECONDS)
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
        if self.spec.plan_dir is None or relative is None:
            return
        deadline = time.monotonic() + max(1.0, request.timeout or 0)
        copy_file(client.request, relative, self.spec.plan_dir, deadline)

    def _copy_everything(self, client: ToolServerClient) -> None:
        if self.spec.plan_dir is None:
            return
        deadline = time.monotonic() + FINAL_COPY_SECONDS
        with contextlib.suppress(PlanrunError, OSError):
            self.left_out = copy_all(client.request, self.spec.plan_dir, deadline)

    def stop(self) -> None:
        """Copy /plan out to the plan directory, then remove the container."""
        with self._state_lock:
            was_stopping, self._stopping = self._stopping, True
            client, self._client = self._client, None
            container, self._container = self._container, None
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
                    with _live_lock:
                        _live.discard(self)
                    raise SandboxError(
                        f"cannot remove container {container.short_id} ({_api_reason(error)}); "
                        "`planrun sandbox gc` removes it once Docker answers"
                    ) from None
                # Docker is removing it already (auto-remove): wait until it is gone.
                self._wait_removed(container.id)
        with _live_lock:
            _live.discard(self)

    def _wait_removed(self, container_id: str) -> None:
        with contextlib.suppress(Exception):
            self._docker.api.wait(container_id, timeout=REMOVAL_WAIT_SECONDS, condition="removed")

    def _stop_quietly(self) -> None:
        """Clean up after a failed start without hiding why it failed."""
        with contextlib.suppress(PlanrunError):
            self.stop()

    def _death_from_events(self, container_id: str) -> str:
        """Why a container that Docker already removed died, from the daemon's events."""
        try:
            events = self._docker.events(
                since=int(self._started_at) - 1,
                until=int(time.time()) + 1,
                filters={"container": container_id},
                decode=True,
            )
            actions = {event.get("Action"): event for event in events}
        except Exception:
            return "the container was removed"
        if "oom" in actions:
            return f"OOM-killed (memory limit {self.spec.limits.memory_mb} MB)"
        died = actions.get("die")
        if died is not None:
            code = died.get("Actor", {}).get("Attributes", {}).get("exitCode", "?")
            return f"the container exited with code {code}"
        return "the container was removed"

    def _explain_death(self) -> str:
        """Why the tool server's stream ended, in the words a user needs."""
        container = self._container
        if container is None:
            return "the sandbox was stopped"
        for _ in range(20):
            try:
                container.reload()
            except docker.errors.NotFound:
                return self._death_from_events(container.id)
            except Exception as error:
                return f"the Docker daemon stopped answering ({str(error).splitlines()[0][:120]})"
            state = container.attrs.get("State", {})
            if state.get("OOMKilled"):
                return f"OOM-killed (memory limit {self.spec.limits.memory_mb} MB)"
            if not state.get("Running", False):
                return f"the container exited with code {state.get('ExitCode')}"
            time.sleep(0.05)
        return "the tool server closed its output while the container still runs"


# Docker 25 (API 1.44) can make a read-only bind mount read-only all the way down.
RECURSIVE_READ_ONLY_API = (1, 44)


def _supports_recursive_read_only(docker_client: Any) -> bool:
    try:
        version = str(docker_client.api.api_version)
        major, minor = (int(part) for part in version.split(".")[:2])
    except (AttributeError, ValueError):
        return False
    return (major, minor) >= RECURSIVE_READ_ONLY_API


def _refuse_submounts(spec: SandboxSpec) -> None:
    for directory in (spec.workspace, *spec.extra_dirs):
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


STOP_ALL_WAIT_SECONDS = 5.0


def stop_all() -> int:
    """Remove every sandbox this process still runs, all at once (signal and exit handlers).

    Returns once they are gone, or after STOP_ALL_WAIT_SECONDS; a container Docker was
    still removing then is left to `planrun sandbox gc`.
    """
    with _live_lock:
        sandboxes = list(_live)
    stoppers = [
        threading.Thread(target=_stop_quietly, args=(sandbox,), name="sandbox-stop", daemon=True)
        for sandbox in sandboxes
    ]
    for stopper in stoppers:
        stopper.start()
    deadline = time.monotonic() + STOP_ALL_WAIT_SECONDS
    for stopper in stoppers:
        stopper.join(max(0.0, deadline - time.monotonic()))
    return len(sandboxes)


def _stop_quietly(sandbox: DockerSandbox) -> None:
    with contextlib.suppress(Exception):
        sandbox.stop()


def collect_garbage(
    docker_client: Any, *, everything: bool = False, session: str | None = None
) -> list[str]:
    """Remove planrun containers whose owner process on this host is gone (or all, with
    everything); those of other hosts are left alone unless everything is asked for.
    With session, only that session's containers are considered (a batch's, say).

    Returns:
        The short ids of the removed containers.
    """
    removed = []
    hostname = os.uname().nodename
    labels = [MANAGED_LABEL] + ([f"io.planrun.session={session}"] if session else [])
    for container in docker_client.containers.list(all=True, filters={"label": labels}):
        if not everything and not _abandoned(container.labels, hostname):
            continue
        try:
            container.remove(force=True, v=True)
            removed.append(container.short_id)
        except docker.errors.NotFound:
            continue
    return removed


def _abandoned(owner_labels: dict[str, str], hostname: str) -> bool:
    """Whether a container's owner is a planrun process of this host that is gone.

    A container labelled for another host (a shared Docker engine) is never judged here:
    its owner may well be alive there.
    """
    if owner_labels.get("io.planrun.host") != hostname:
        return False
    try:
        pid = int(owner_labels.get("io.planrun.pid", "0") or 0)
    except ValueError:
        return True
    return not (pid and _process_alive(pid))


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = ["DockerSandbox", "SandboxDiedError", "collect_garbage", "stop_all"]
