"""DockerProvider: makes DockerSandboxes on one Docker client, owns the live ones, and
removes the containers gone planrun processes left behind."""

from __future__ import annotations

import os
from typing import Any

import docker.errors

from sandbox_runner.sandbox.container_options import MANAGED_LABEL
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.provider import LiveSandboxes
from sandbox_runner.sandbox.scratch import SCRATCH_LABEL
from sandbox_runner.sandbox.spec import SandboxSpec

CONFLICT = 409


class DockerProvider:
    """The sandboxes of one planrun process: one hardened container each."""

    def __init__(self, docker_client: Any) -> None:
        self.docker_client = docker_client
        """The docker-py client the containers are made with."""
        self.live = LiveSandboxes()
        """The sandboxes between start and stop."""

    def create(self, spec: SandboxSpec) -> DockerSandbox:
        """A sandbox for spec, not started yet; it counts as live from start to stop."""
        return DockerSandbox(spec, self.docker_client, self.live)

    def stop_all(self) -> int:
        """Remove every live sandbox, all at once (signal and exit handlers).

        Returns once they are gone, or after a few seconds; a container Docker was still
        removing then is left to `planrun sandbox gc`.

        Returns:
            How many sandboxes were live.
        """
        return self.live.stop_all()


def collect_garbage(
    docker_client: Any, *, everything: bool = False, session: str | None = None
) -> list[str]:
    """Remove planrun containers whose owner process on this host is gone (or all, with
    everything); those of other hosts are left alone unless everything is asked for.
    With session, only that session's containers are considered (a batch's, say).

    Scratch runs' volumes (sandbox/scratch.py) are removed after the containers, by the
    same rule.

    Returns:
        The short ids of the removed containers, then the names of the removed volumes.
    """
    removed = []
    hostname = os.uname().nodename
    labels = [MANAGED_LABEL] + ([f"io.planrun.session={session}"] if session else [])
    # The listing's own labels, without inspecting each container: cheaper when a batch's
    # jobs gc a shared engine, and no error for a sandbox removed meanwhile.
    listed = docker_client.containers.list(all=True, filters={"label": labels}, sparse=True)
    for container in listed:
        if not everything and not _abandoned(container.attrs.get("Labels") or {}, hostname):
            continue
        try:
            container.remove(force=True, v=True)
            removed.append(container.short_id)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as error:
            if error.status_code != CONFLICT:  # 409: another gc is removing it already
                raise
    return removed + _collect_volumes(docker_client, labels, hostname, everything=everything)


def _collect_volumes(
    docker_client: Any, labels: list[str], hostname: str, *, everything: bool
) -> list[str]:
    """Remove the abandoned scratch volumes, each overlay before the tmpfs it lies on."""
    listed = docker_client.volumes.list(filters={"label": [*labels, SCRATCH_LABEL]})
    # The overlay names directories of the tmpfs: it goes first.
    listed.sort(
        key=lambda volume: (volume.attrs.get("Labels") or {}).get(SCRATCH_LABEL) != "overlay"
    )
    removed = []
    for volume in listed:
        if not everything and not _abandoned(volume.attrs.get("Labels") or {}, hostname):
            continue
        try:
            volume.remove(force=True)
            removed.append(volume.name)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as error:
            if error.status_code != CONFLICT:  # 409: still in use (its sandbox runs)
                raise
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
