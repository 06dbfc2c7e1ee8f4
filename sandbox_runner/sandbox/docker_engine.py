"""Finding a Docker engine, and starting one on a Debian machine that has none running."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import docker.errors

from sandbox_runner.errors import DockerUnavailableError

Progress = Callable[[str], None]
DOCKERD_LOG = Path("/var/log/planrun-dockerd.log")
# A daemon that was killed leaves these; the next one then refuses to start, or waits
# for a containerd that is gone.
STALE_PID_FILES = (Path("/var/run/docker.pid"), Path("/var/run/docker/containerd/containerd.pid"))
START_ATTEMPTS = 2
START_TIMEOUT_SECONDS = 60.0
INSTALL_HINT = (
    "install Docker (Debian: `apt-get install docker.io`) or Podman with its Docker-compatible "
    "socket, start it, or set DOCKER_HOST"
)


def _quiet(_: str) -> None:
    pass


def podman_sockets() -> list[Path]:
    """Where Podman's Docker-compatible API socket usually lives."""
    candidates = []
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR")
    if runtime_dir:
        candidates.append(Path(runtime_dir) / "podman" / "podman.sock")
    candidates.append(Path(f"/run/user/{os.getuid()}/podman/podman.sock"))
    candidates.append(Path("/run/podman/podman.sock"))
    return list(dict.fromkeys(candidates))


def connect(timeout: float = 120.0) -> Any:
    """Return a DockerClient for a reachable engine.

    DOCKER_HOST (and the other DOCKER_* variables) are honoured; without them the default
    socket is tried, then Podman's.

    Raises:
        DockerUnavailableError: no engine answers.
    """
    failure = _try_connect(None, timeout)
    if not isinstance(failure, str):
        return failure
    if "DOCKER_HOST" not in os.environ:
        for sock in podman_sockets():
            if sock.exists():
                client = _try_connect(f"unix://{sock}", timeout)
                if not isinstance(client, str):
                    return client
    raise DockerUnavailableError(failure, INSTALL_HINT)


def _try_connect(base_url: str | None, timeout: float) -> Any:
    try:
        if base_url is None:
            client = docker.from_env(timeout=timeout)
        else:
            client = docker.DockerClient(base_url=base_url, timeout=timeout)
        client.ping()
        return client
    except docker.errors.DockerException as error:
        return _describe(error, base_url or os.environ.get("DOCKER_HOST", "the default socket"))
    except Exception as error:
        return _describe(error, base_url or os.environ.get("DOCKER_HOST", "the default socket"))


def _describe(error: Exception, where: str) -> str:
    text = str(error)
    if "FileNotFoundError" in text or "No such file" in text:
        return f"no engine socket at {where}"
    if "Permission denied" in text:
        return f"permission denied on {where} (add your user to the docker group)"
    if "Connection refused" in text:
        return f"the engine at {where} refuses connections"
    return f"cannot reach the engine at {where}: {text.splitlines()[0][:200]}"


def ensure_engine(progress: Progress = _quiet) -> Any:
    """Return a client for a running engine, installing and starting dockerd if we may.

    On a Debian-like system where we are root, a missing engine is installed with
    apt-get (docker.io) and dockerd is started in the background.

    Raises:
        DockerUnavailableError: no engine, and we cannot provide one here.
    """
    try:
        return connect()
    except DockerUnavailableError as error:
        if "DOCKER_HOST" in os.environ or not _may_manage_engine():
            raise
        progress(f"no Docker engine answers ({error.reason}); starting one")
    if shutil.which("dockerd") is None:
        apt_install(["docker.io"], progress)
    return start_dockerd(progress)


def _may_manage_engine() -> bool:
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


def apt_install(packages: list[str], progress: Progress = _quiet) -> None:
    """Install Debian packages (root only), with progress lines."""
    if not _may_manage_engine():
        raise DockerUnavailableError(
            f"{' '.join(packages)} missing", f"install it: apt-get install {' '.join(packages)}"
        )
    progress(f"installing {' '.join(packages)} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            raise DockerUnavailableError(f"`{' '.join(command)}` failed: {last[0]}", INSTALL_HINT)


def start_dockerd(progress: Progress = _quiet) -> Any:
    """Start dockerd in the background and wait until it answers."""
    for attempt in range(1, START_ATTEMPTS + 1):
        progress(f"starting dockerd (log: {DOCKERD_LOG})")
        for pid_file in STALE_PID_FILES:
            remove_stale_pid_file(pid_file)
        try:
            return _run_dockerd(progress)
        except DockerUnavailableError:
            # A daemon killed a moment ago can still be dying; one more try after it.
            if attempt == START_ATTEMPTS:
                raise
            time.sleep(2.0)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _run_dockerd(progress: Progress) -> Any:
    DOCKERD_LOG.parent.mkdir(parents=True, exist_ok=True)
    with DOCKERD_LOG.open("ab") as log:
        process = subprocess.Popen(
            ["dockerd"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = DOCKERD_LOG.read_text(errors="replace").strip().splitlines()[-1:] or [""]
            raise DockerUnavailableError(
                f"dockerd exited with code {process.returncode}: {tail[0][:200]}"
            )
        try:
            client = connect(timeout=5)
            progress("dockerd is ready")
            return client
        except DockerUnavailableError:
            time.sleep(0.25)
    process.kill()
    raise DockerUnavailableError(f"dockerd did not answer within {START_TIMEOUT_SECONDS:.0f} s")


def remove_stale_pid_file(pid_file: Path) -> None:
    """Remove a pid file whose process is gone (a zombie, whose parent is gone, counts)."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        stat = ""
    state = stat[stat.rfind(")") + 2 :].split(" ", 1)[0] if stat else ""
    if state in {"", "Z", "X"}:
        pid_file.unlink(missing_ok=True)
