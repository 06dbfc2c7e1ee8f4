"""A real local Ray cluster of two nodes for the tests and `make bench`: each `ray start` has
its own environment, under a temporary directory, token auth on, usage stats off, ports above
Ray's defaults; stopped by killing exactly its own processes."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

BIN = Path(sys.executable).parent
BASE_PORT = 26400
"""Ray's defaults are 6379 and 10002-19999 (workers); everything here lies above."""


def node_ports(index: int) -> list[str]:
    base = BASE_PORT + 200 * index
    return [
        f"--node-manager-port={base + 1}",
        f"--object-manager-port={base + 2}",
        f"--min-worker-port={base + 100}",
        f"--max-worker-port={base + 190}",
        f"--dashboard-agent-listen-port={base + 3}",
        f"--dashboard-agent-grpc-port={base + 4}",
        f"--metrics-export-port={base + 5}",
        f"--runtime-env-agent-port={base + 6}",
    ]


def missing_ray() -> str | None:
    """Why a local cluster cannot be started here, or None."""
    # Not imported here: Ray reads its token settings when first imported.
    if importlib.util.find_spec("ray") is None:
        return "Ray is not installed: pip install 'planrun[ray]'"
    if shutil.which("ray", path=str(BIN)) is None:
        return "the ray command is not installed next to this Python"
    return None


class Cluster:
    """A head and a worker node, each a `ray start` with its own environment."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env
        """env: what the driver and both nodes share (token auth, usage stats off)."""
        self.address = f"127.0.0.1:{BASE_PORT}"

    def start(
        self, head_env: Mapping[str, str], worker_env: Mapping[str, str], slots: int = 1
    ) -> None:
        """Start the head, then the worker, each with env plus its own variables."""
        common = [
            "--num-cpus=1",
            f'--resources={{"planrun_sandbox": {slots}}}',
            "--disable-usage-stats",
        ]
        self._ray(
            "start",
            "--head",
            f"--port={BASE_PORT}",
            f"--temp-dir={self.root / 'ray'}",
            "--include-dashboard=false",
            f"--ray-client-server-port={BASE_PORT + 10}",
            *common,
            *node_ports(1),
            env={**self.env, **head_env},
        )
        worker = ["start", f"--address={self.address}", *common, *node_ports(2)]
        self._ray(*worker, env={**self.env, **worker_env})

    def _ray(self, *args: str, env: dict[str, str]) -> None:
        result = subprocess.run(
            [str(BIN / "ray"), *args], env=env, capture_output=True, text=True, timeout=120
        )
        if result.returncode != 0:
            raise RuntimeError(f"ray {args[0]} failed: {result.stderr[-2000:]}")

    def raylets(self) -> list[tuple[int, str]]:
        """Each node's raylet, the head's first: its pid and its Ray node id."""
        raylets = []
        # By start time, not pid: pids wrap around on a machine that has run for long.
        for pid in sorted(self.pids(), key=_started_at):
            line = Path(f"/proc/{pid}/cmdline").read_bytes()
            found = re.search(rb"--node_id=([0-9a-f]+)", line)
            if b"raylet" in line[:200] and found is not None:
                raylets.append((pid, found.group(1).decode()))
        return raylets

    def pids(self) -> list[int]:
        """This cluster's processes: their command line or one of their open files names
        its temp dir (the dashboard agent renames itself over its command line and its
        environment, but keeps its logs open), or (the Ray Client server, which names
        neither) its head's port, run by this Python."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            client = "ray.util.client.server" in line and f":{BASE_PORT} " in line
            if self._names_root(entry, line) or (client and str(BIN) in line):
                pids.append(int(entry.name))
        return pids

    def _names_root(self, process: Path, line: str) -> bool:
        root = str(self.root / "ray")
        if root in line:
            return True
        with contextlib.suppress(OSError):
            for fd in (process / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd).startswith(root):
                        return True
        return False

    def stop(self) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def local_cluster(planrun_home: Path) -> Iterator[Cluster]:
    """A cluster not started yet (start() it with each node's environment), and its
    teardown. The driver uses cluster.env, whose PLANRUN_HOME is planrun_home."""
    root = Path(tempfile.mkdtemp(prefix="/tmp/prb"))  # Unix socket paths must stay short.
    token = root / "token"
    token.write_text(secrets.token_hex(32))
    env = dict(
        os.environ,
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN_PATH=str(token),
        RAY_USAGE_STATS_ENABLED="0",
        PLANRUN_HOME=str(planrun_home),
    )
    env.pop("RAY_ADDRESS", None)
    cluster = Cluster(root, env)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def _started_at(pid: int) -> int:
    """When a process started, in clock ticks since boot (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    # The command name (field 2) may hold spaces and parentheses: count after its end.
    return int(stat.rsplit(")", 1)[1].split()[19])
