"""`planrun batch --engine ray` on a real local two-node Ray cluster (started with `ray start`
under a temporary directory, token auth on, usage stats off, ports outside Ray's defaults)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unavailable
from tests.e2e.test_cli_batch import PERSPECTIVES, TASKS, CountingScript, batch_file
from tests.support.fake_messages_api import FakeMessagesAPI

pytestmark = pytest.mark.ray
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


class Cluster:
    """A head and a worker node, each a `ray start` with its own environment."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env
        self.address = f"127.0.0.1:{BASE_PORT}"

    def start(self, extra_env: dict[str, str]) -> None:
        env = {**self.env, **extra_env}
        common = ["--num-cpus=1", '--resources={"planrun_sandbox": 1}', "--disable-usage-stats"]
        self._ray(
            "start",
            "--head",
            f"--port={BASE_PORT}",
            f"--temp-dir={self.root / 'ray'}",
            "--include-dashboard=false",
            f"--ray-client-server-port={BASE_PORT + 10}",
            *common,
            *node_ports(1),
            env=env,
        )
        self._ray("start", f"--address={self.address}", *common, *node_ports(2), env=env)

    def _ray(self, *args: str, env: dict[str, str]) -> None:
        result = subprocess.run(
            [str(BIN / "ray"), *args], env=env, capture_output=True, text=True, timeout=120
        )
        if result.returncode != 0:
            raise RuntimeError(f"ray {args[0]} failed: {result.stderr[-2000:]}")

    def raylet_pids(self) -> list[int]:
        pids = self.pids()
        return [p for p in pids if b"raylet" in Path(f"/proc/{p}/cmdline").read_bytes()[:200]]

    def pids(self) -> list[int]:
        """This cluster's processes: their command line names its temp dir, or (the Ray
        Client server, which names neither) its head's port, run by this Python."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            client = "ray.util.client.server" in line and f":{BASE_PORT} " in line
            if str(self.root / "ray") in line or (client and str(BIN) in line):
                pids.append(int(entry.name))
        return pids

    def stop(self) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def cluster(sandbox_image: str, planrun_home: Path) -> Iterator[Cluster]:
    try:
        import ray  # noqa: F401
    except ImportError:
        unavailable("Ray is not installed: pip install 'planrun[ray]'")
    if shutil.which("ray", path=str(BIN)) is None:
        unavailable("the ray command is not installed next to this Python")
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
    result = Cluster(root, env)
    try:
        yield result
    finally:
        result.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_ray_batch_survives_a_killed_node(
    cluster: Cluster, sample_repo: Path, tmp_path: Path, docker_client: Any
) -> None:
    script = CountingScript(delay=1.0)
    with FakeMessagesAPI(script) as server:
        # The key lives in the nodes' environment, not in the driver's task arguments.
        cluster.start({"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "node-key"})
        out = tmp_path / "out"
        env = {**cluster.env, "ANTHROPIC_API_KEY": ""}
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sandbox_runner",
                "batch",
                str(batch_file(tmp_path, sample_repo)),
                "--out",
                str(out),
                "--engine",
                "ray",
                "--address",
                cluster.address,
                "--json",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # One sandbox slot per node: once two jobs have talked to the API, each node runs one.
        deadline = time.monotonic() + 60
        while len(script.requests) < 2 and time.monotonic() < deadline:
            if process.poll() is not None:
                break
            time.sleep(0.05)
        assert len(script.requests) >= 2, process.communicate(timeout=30)[1][-3000:]
        raylets = cluster.raylet_pids()
        assert len(raylets) == 2
        killed = max(raylets)  # the worker node's raylet started last
        found = re.search(rb"--node_id=([0-9a-f]+)", Path(f"/proc/{killed}/cmdline").read_bytes())
        assert found is not None
        killed_node = found.group(1).decode()[:12]
        os.kill(killed, signal.SIGKILL)
        stdout, stderr = process.communicate(timeout=90)
    assert process.returncode == 0, stderr[-3000:]
    summary = json.loads(stdout)
    assert summary["counts"] == {"complete": len(TASKS) * len(PERSPECTIVES)}
    # The job that was mid-run on the killed node ran again, on the head, to completion:
    # its conversation was paid for more than once; every other job's exactly once.
    ledger = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(record["key"] for record in ledger) == sorted(script.requests)
    assert all(record["status"] == "complete" for record in ledger)
    once = min(script.requests.values())
    rerun = [key for key, count in script.requests.items() if count > once]
    assert len(rerun) == 1, script.requests  # one slot per node: one job was cut short
    nodes = {record["key"]: record["node"] for record in ledger}
    assert killed_node not in nodes[rerun[0]], nodes
    assert "is terminated" in stderr  # Ray's notice went to stderr; stdout is the JSON only
    # The killed attempt's container is collected by the next job's gc on the shared
    # Docker daemon, or at the latest by the driver's end.
    leftovers = docker_client.containers.list(
        all=True, filters={"label": f"io.planrun.session=batch-{out.name}"}
    )
    for container in leftovers:
        container.remove(force=True)
    assert leftovers == []
