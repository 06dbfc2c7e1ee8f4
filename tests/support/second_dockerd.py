"""A second Docker daemon on this machine, with a disk and a network of its own: what a Ray
node on another host would see (no sandbox image, no shared image store). Root only;
stopped and removed with everything it stored.

It runs in a network namespace of its own (`unshare --net`): a dockerd started with
--bridge=none deletes the `docker0` bridge it finds, and in the host's namespace that is
the main daemon's, after which every container on the default network and every build
with a RUN step fails until that daemon restarts."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors

START_SECONDS = 60.0


def missing_dockerd() -> str | None:
    """Why a second daemon cannot be started here, or None."""
    if os.geteuid() != 0:
        return "a second Docker daemon needs root"
    if shutil.which("dockerd") is None:
        return "dockerd is not installed (Debian: apt-get install docker.io)"
    if shutil.which("unshare") is None:
        return "unshare is not installed (Debian: apt-get install util-linux)"
    return None


class SecondDockerd:
    """A running dockerd on its own data root, exec root, pid file and socket, in a network
    namespace of its own; no bridge, no iptables rules (sandboxes have no network), the
    main daemon's storage driver."""

    def __init__(self, root: Path, process: subprocess.Popen[bytes]) -> None:
        self.root, self.process = root, process
        self.host = f"unix://{root / 'd.sock'}"
        """The DOCKER_HOST that reaches it."""

    def client(self) -> Any:
        return docker.DockerClient(base_url=self.host, timeout=60)

    def log_tail(self) -> str:
        return (self.root / "dockerd.log").read_text(errors="replace")[-2000:]


@contextlib.contextmanager
def second_dockerd(main_client: Any) -> Iterator[SecondDockerd]:
    """Start a second daemon; at the end stop it and remove its directories."""
    root = Path(tempfile.mkdtemp(prefix="/tmp/pdd"))  # its sockets' paths must stay short
    driver = str(main_client.info()["Driver"])
    command = [
        # unshare execs dockerd in a new network namespace: the process is dockerd itself,
        # and its containerd and containers start from there. Its socket is a file, so
        # clients in the host's namespace reach it as before.
        "unshare",
        "--net",
        "--",
        "dockerd",
        f"--data-root={root / 'data'}",
        f"--exec-root={root / 'exec'}",
        f"--pidfile={root / 'dockerd.pid'}",
        f"--host=unix://{root / 'd.sock'}",
        "--bridge=none",
        "--iptables=false",
        "--ip-masq=false",
        f"--storage-driver={driver}",
    ]
    with (root / "dockerd.log").open("wb") as log:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    daemon = SecondDockerd(root, process)
    try:
        _wait_until_ready(daemon)
        yield daemon
    finally:
        _stop(daemon)


def _wait_until_ready(daemon: SecondDockerd) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if daemon.process.poll() is not None:
            raise RuntimeError(f"the second dockerd exited: {daemon.log_tail()}")
        with contextlib.suppress(docker.errors.DockerException):
            daemon.client().ping()
            return
        time.sleep(0.2)
    raise RuntimeError(f"the second dockerd did not answer: {daemon.log_tail()}")


def _stop(daemon: SecondDockerd) -> None:
    """Remove its containers, stop it (its containerd goes with it), unmount what it left
    mounted, and delete its directories."""
    with contextlib.suppress(docker.errors.DockerException):
        for container in daemon.client().containers.list(all=True):
            container.remove(force=True)
    daemon.process.terminate()
    try:
        daemon.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        daemon.process.kill()
        daemon.process.wait(timeout=10)
    for mount in reversed(_mounts_below(daemon.root)):
        subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
    shutil.rmtree(daemon.root, ignore_errors=True)


def host_has_link(name: str) -> bool:
    """Whether the network namespace the tests run in has a network interface NAME."""
    shown = subprocess.run(["ip", "link", "show", name], capture_output=True, check=False)
    return shown.returncode == 0


def network_namespace(pid: int) -> str:
    """The network namespace of a process, e.g. "net:[4026531840]"."""
    return os.readlink(f"/proc/{pid}/ns/net")


def _mounts_below(root: Path) -> list[str]:
    mounts = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        target = line.split(" ")[1].replace("\\040", " ")
        if Path(target).is_relative_to(root):
            mounts.append(target)
    return mounts
