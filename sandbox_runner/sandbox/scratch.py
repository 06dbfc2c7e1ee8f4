"""A scratch run's /workspace: the repository under a copy-on-write overlay whose writes
land in a size-capped tmpfs, both volumes of Docker's `local` driver, thrown away with the
sandbox.

dockerd mounts a `local` volume when a container that uses it starts and unmounts it when
the last one stops. A small holder container therefore keeps the tmpfs mounted for the
sandbox's whole life, and dockerd makes the overlay's upper and work directories in it
(never the holder: it runs the image's code, which could make them links to host
directories); the overlay, whose options name them, is mounted when the sandbox starts.
Were the tmpfs not mounted then, the directories would not exist (the volume's directory
on disk is empty) and the mount would fail: a scratch layer is never uncapped on the
host's disk.
The kernel never writes an overlay's lower directory: the repository stays as it was.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import select
import stat
import struct
import tarfile
import time
from pathlib import Path
from typing import Any

import docker.errors

from sandbox_runner.errors import ConfigError, SandboxError
from sandbox_runner.limits import Limits
from sandbox_runner.sandbox.container_options import LABEL_PREFIX, labels
from sandbox_runner.sandbox.host_paths import SANDBOX_UID, sandbox_user
from sandbox_runner.sandbox.spec import SandboxSpec

SCRATCH_LABEL = f"{LABEL_PREFIX}.scratch"
"""On a scratch run's volumes and holder: `layer` (the tmpfs), `overlay`, `holder`."""
HOLDER_MOUNT = "/layer"
HOLDER_READY = b"ready\n"
HOLDER_SECONDS = 30.0
REMOVAL_SECONDS = 10.0
CONFLICT = 409
MIN_INODES = 16_384
INODES_PER_MB = 256
"""Files and directories the layer may hold per MiB: enough for a build tree, and a cap
on the kernel memory that empty files would otherwise take."""
MOUNT_OPTION_CHARACTERS = frozenset(",:\\")
"""What would end or split an overlay option (lowerdir=a:b, o=x,y) in a path."""


def capacity_mb(limits: Limits) -> int:
    """The layer's size: scratch_mb, but at most half of the memory limit (the tmpfs's
    pages count against the sandbox's memory: a full layer must not leave the tool
    server without any)."""
    return max(1, min(limits.scratch_mb, limits.memory_mb // 2))


def engine_problem(docker_client: Any) -> str | None:
    """Why this Docker engine cannot make a scratch layer, or None.

    Only a rootful dockerd mounts an overlay of a host directory for its `local` volume
    driver; a rootless engine or Podman's Docker-compatible API cannot.
    """
    try:
        info = docker_client.info()
        components = docker_client.version().get("Components") or []
    except Exception as error:
        return f"cannot ask the Docker engine about itself: {str(error).splitlines()[0][:200]}"
    names = " ".join(str(part.get("Name", "")) for part in components if isinstance(part, dict))
    options = " ".join(str(option) for option in info.get("SecurityOptions") or [])
    if "podman" in names.lower() or "podman" in str(info.get("Name", "")).lower():
        kind = "Podman"
    elif "name=rootless" in options:
        kind = "a rootless Docker engine"
    elif "name=userns" in options:
        kind = "a Docker engine with user namespace remapping"
    else:
        return None
    return (
        f"scratch runs need a rootful Docker engine, and this is {kind}: it cannot mount "
        "the copy-on-write layer over the repository; plan without --scratch "
        "(plan_commands: read-only)"
    )


def path_problem(workspace: Path) -> str | None:
    """Why the repository cannot be an overlay's lower directory, or why its commands
    could not write it (root owns it and planrun runs as root), or None."""
    if sandbox_user(workspace)[0] == SANDBOX_UID:
        return (
            f"{workspace} belongs to root, and a scratch run's commands never run as root "
            "(they could write almost nothing): run planrun as the repository's owner, or "
            "chown it to a regular user; without --scratch it is planned as it is"
        )
    return _option_problem(str(workspace))


def _option_problem(text: str) -> str | None:
    """Why a path cannot be carried in an overlay's mount options, or None."""
    bad = sorted(MOUNT_OPTION_CHARACTERS.intersection(text))
    if bad or not text.isprintable():
        shown = " ".join(repr(char) for char in bad) or "an unprintable character"
        return (
            f"{text!r} holds {shown}, which the kernel's overlay options cannot carry; "
            "plan it without --scratch, or from a path without them"
        )
    return None


class ScratchLayer:
    """The throw-away layer of one scratch sandbox: its tmpfs volume, the holder that keeps
    it mounted, and the overlay volume mounted at /workspace. remove() takes all of it
    away; whatever a killed planrun left is labelled for `planrun sandbox gc`."""

    def __init__(self, docker_client: Any, spec: SandboxSpec, user: tuple[int, int]) -> None:
        self._docker = docker_client
        self._spec = spec
        self._user = user
        name = f"planrun-scratch-{secrets.token_hex(6)}"
        self.layer_volume = f"{name}-layer"
        self.overlay_volume = f"{name}-overlay"
        self._holder: Any | None = None
        self._holder_socket: Any | None = None
        self._made: list[str] = []

    def create(self) -> str:
        """Make the layer and return the overlay volume to mount at /workspace.

        Raises:
            ConfigError: the engine or the repository's path cannot have one.
            SandboxError: Docker could not make it (what was made is removed again).
        """
        workspace = self._spec.workspace
        problem = engine_problem(self._docker) or path_problem(workspace)
        if problem:
            raise ConfigError(problem)
        megabytes = capacity_mb(self._spec.limits)
        inodes = max(MIN_INODES, megabytes * INODES_PER_MB)
        # Root's: the holder runs the image's code, which must not make these directories
        # (links to host directories would be resolved by dockerd, on the host).
        tmpfs = f"size={megabytes}m,nr_inodes={inodes},mode=0700,uid=0,gid=0"
        self._volume(self.layer_volume, "layer", {"type": "tmpfs", "device": "tmpfs", "o": tmpfs})
        holder = self._start_holder()
        self._make_directories(holder, stat.S_IMODE(os.stat(workspace).st_mode))
        mountpoint = str(self._docker.volumes.get(self.layer_volume).attrs["Mountpoint"])
        if _option_problem(mountpoint):
            raise SandboxError(f"the scratch layer's mount point is unusable: {mountpoint!r}")
        overlay = f"lowerdir={workspace},upperdir={mountpoint}/upper,workdir={mountpoint}/work"
        options = {"type": "overlay", "device": "overlay", "o": overlay}
        self._volume(self.overlay_volume, "overlay", options)
        return self.overlay_volume

    def _volume(self, name: str, role: str, options: dict[str, str]) -> None:
        volume_labels = {**labels(self._spec), SCRATCH_LABEL: role}
        self._docker.volumes.create(
            name=name, driver="local", driver_opts=options, labels=volume_labels
        )
        self._made.append(name)

    def _start_holder(self) -> Any:
        """Start the holder: it says it runs and waits for its standard input to end:
        planrun closing it, or dying. Not detached, auto-removed: it never outlives
        planrun. It runs as the sandbox user, to whom the layer's root is closed."""
        script = "echo ready && exec cat >/dev/null"
        uid, gid = self._user
        self._holder = self._docker.containers.create(
            image=self._spec.image,
            command=["sh", "-c", script],
            user=f"{uid}:{gid}",
            labels={**labels(self._spec), SCRATCH_LABEL: "holder"},
            mounts=[_volume_mount(self.layer_volume, HOLDER_MOUNT)],
            environment={},
            read_only=True,
            network_mode="none",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges:true"],
            pids_limit=8,
            mem_limit="32m",
            ipc_mode="none",
            log_config={"Type": "none", "Config": {}},
            stdin_open=True,
            detach=False,
            auto_remove=True,
            tty=False,
        )
        stream = self._docker.api.attach_socket(
            self._holder.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        )
        self._holder_socket = getattr(stream, "_sock", stream)
        self._holder.start()
        output = _read_until(self._holder_socket, HOLDER_READY, HOLDER_SECONDS)
        if not output.endswith(HOLDER_READY):
            said = output.decode("utf-8", "replace").strip().splitlines()
            reason = said[-1][:200] if said else "it stopped"
            raise SandboxError(f"cannot prepare the scratch layer: {reason}")
        return self._holder

    def _make_directories(self, holder: Any, mode: int) -> None:
        """Make the overlay's directories in the mounted tmpfs, through dockerd: the upper
        one with the repository root's mode, owned by the sandbox user (like every file a
        command makes), the work one root's. Nothing but root can replace them."""
        uid, gid = self._user
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            for name, owner, directory_mode in (
                ("upper", (uid, gid), mode),
                ("work", (0, 0), 0o700),
            ):
                entry = tarfile.TarInfo(name)
                entry.type, entry.mode = tarfile.DIRTYPE, directory_mode
                entry.uid, entry.gid = owner
                tar.addfile(entry)
        try:
            made = holder.put_archive(HOLDER_MOUNT, archive.getvalue())
        except docker.errors.APIError as error:
            raise SandboxError(f"cannot prepare the scratch layer: {error.explanation}") from None
        if not made:
            raise SandboxError("cannot prepare the scratch layer: dockerd made no directory")

    def remove(self) -> None:
        """Remove the overlay volume, the holder (its tmpfs, with every write, goes with
        it) and the tmpfs volume, once the sandbox's container is gone.

        Raises:
            SandboxError: something is left; the message says `planrun sandbox gc`.
        """
        left: list[str] = []
        if self.overlay_volume in self._made and not _remove_volume(
            self._docker, self.overlay_volume
        ):
            left.append(self.overlay_volume)
        if self._holder_socket is not None:
            with contextlib.suppress(OSError):
                self._holder_socket.close()
            self._holder_socket = None
        if self._holder is not None:
            _remove_container(self._docker, self._holder)
            self._holder = None
        if self.layer_volume in self._made and not _remove_volume(self._docker, self.layer_volume):
            left.append(self.layer_volume)
        self._made = [name for name in self._made if name in left]
        if left:
            raise SandboxError(
                f"cannot remove the scratch volume(s) {', '.join(left)}; "
                "`planrun sandbox gc` removes them once nothing uses them"
            )


def _volume_mount(volume: str, target: str) -> dict[str, Any]:
    # NoCopy: Docker would otherwise copy what the image holds at the target into it.
    return {"Type": "volume", "Source": volume, "Target": target, "ReadOnly": False,
            "VolumeOptions": {"NoCopy": True}}  # fmt: skip


def _read_until(sock: Any, marker: bytes, seconds: float) -> bytes:
    """What a non-TTY container wrote (Docker's framed stream) until marker, end of
    stream or the deadline."""
    deadline = time.monotonic() + seconds
    buffer = output = b""
    while not output.endswith(marker):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([sock], [], [], remaining)[0]:
            break
        chunk = sock.recv(4096)
        if not chunk:
            break
        buffer += chunk
        while len(buffer) >= 8:
            size = struct.unpack(">I", buffer[4:8])[0]
            if len(buffer) < 8 + size:
                break
            output += buffer[8 : 8 + size]
            buffer = buffer[8 + size :]
    return output


def _remove_container(docker_client: Any, container: Any) -> None:
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        return
    except docker.errors.APIError as error:
        if "already in progress" not in str(error):
            return
    with contextlib.suppress(Exception):
        docker_client.api.wait(container.id, timeout=REMOVAL_SECONDS, condition="removed")


def _remove_volume(docker_client: Any, name: str) -> bool:
    """Remove a volume, waiting while a container that is going away still uses it;
    whether it is gone."""
    deadline = time.monotonic() + REMOVAL_SECONDS
    while True:
        try:
            docker_client.api.remove_volume(name, force=True)
            return True
        except docker.errors.NotFound:
            return True
        except docker.errors.APIError as error:
            if error.status_code != CONFLICT or time.monotonic() > deadline:
                return False
        except Exception:
            return False
        time.sleep(0.1)
