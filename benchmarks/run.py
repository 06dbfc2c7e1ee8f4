"""`make bench`: planrun's sandbox against baselines measured in the same run, on this machine.

Each figure is printed with its baseline and the ratio, and checked against its target.
Exit status 1 when a target is missed, so the numbers cannot quietly regress.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.engine import connect
from sandbox_runner.sandbox.image import require_image
from sandbox_runner.sandbox.spec import Limits, SandboxSpec
from sandbox_runner.types import ToolRequest

SESSION = "bench"


@dataclass
class Figure:
    """One measured comparison and its target."""

    name: str
    ours: str
    baseline: str
    ratio: float
    target: str
    met: bool


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def timed(action: Callable[[], Any], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return samples


def make_spec(
    image: str, workspace: Path, plan_dir: Path, limits: Limits | None = None
) -> SandboxSpec:
    return SandboxSpec(
        workspace=workspace,
        plan_dir=plan_dir,
        image=image,
        limits=limits or Limits(),
        session=SESSION,
    )


def bench_round_trip(client: Any, image: str, workspace: Path, plan_dir: Path) -> Figure:
    with DockerSandbox(make_spec(image, workspace, plan_dir), client) as sandbox:
        read = ToolRequest("read", {"file_path": "/workspace/small.txt"})
        timed(lambda: sandbox.call(read), 50)
        ours = timed(lambda: sandbox.call(read), 1000)
        cid = sandbox.container_id
        assert cid is not None
        exec_cat = ["docker", "exec", cid, "cat", "/workspace/small.txt"]
        baseline = timed(lambda: subprocess.run(exec_cat, capture_output=True, check=True), 30)
    ratio = statistics.median(baseline) / statistics.median(ours)
    return Figure(
        "tool round trip (read of a small file)",
        f"p50 {statistics.median(ours) * 1e3:.2f} ms, p95 {percentile(ours, 0.95) * 1e3:.2f} ms",
        f"docker exec cat: p50 {statistics.median(baseline) * 1e3:.1f} ms, "
        f"p95 {percentile(baseline, 0.95) * 1e3:.1f} ms",
        ratio,
        ">= 100x faster at p50",
        ratio >= 100,
    )


def bench_ready(client: Any, image: str, workspace: Path, plan_dir: Path) -> Figure:
    def ready_once() -> float:
        sandbox = DockerSandbox(make_spec(image, workspace, plan_dir), client)
        start = time.perf_counter()
        sandbox.start()
        sandbox.call(ToolRequest("ping"))
        elapsed = time.perf_counter() - start
        sandbox.stop()
        return elapsed

    run_true = ["docker", "run", "--rm", "--network", "none", image, "true"]
    ready_once()
    subprocess.run(run_true, capture_output=True, check=True)
    ours, baseline = [], []
    for _ in range(7):
        ours.append(ready_once())
        baseline += timed(lambda: subprocess.run(run_true, capture_output=True, check=True), 1)
    ratio = statistics.median(ours) / statistics.median(baseline)
    return Figure(
        "sandbox ready (create to first tool reply)",
        f"p50 {statistics.median(ours) * 1e3:.0f} ms",
        f"docker run --rm IMAGE true: p50 {statistics.median(baseline) * 1e3:.0f} ms",
        ratio,
        "<= 1.2x",
        ratio <= 1.2,
    )


def bench_grep(client: Any, image: str, plan_dir: Path) -> Figure:
    tree = Path(sysconfig.get_paths()["stdlib"])
    files = sum(len(names) for _, _, names in os.walk(tree))
    pattern = r"def __init__\(self"
    cpus = float(os.cpu_count() or 1)
    spec = make_spec(image, tree, plan_dir, Limits(cpus=cpus, memory_mb=1024))
    with DockerSandbox(spec, client) as sandbox:
        grep = ToolRequest("grep", {"pattern": pattern, "output_mode": "count"}, timeout=300)
        sandbox.call(grep)
        ours = timed(lambda: sandbox.call(grep), 5)
    host_rg = [
        "rg",
        "--no-config",
        "--hidden",
        "--count",
        "--glob",
        "!.git",
        "-e",
        pattern,
        str(tree),
    ]
    subprocess.run(host_rg, capture_output=True)
    baseline = timed(lambda: subprocess.run(host_rg, capture_output=True), 5)
    ratio = statistics.median(ours) / statistics.median(baseline)
    return Figure(
        f"grep over {tree} ({files} files, sandbox with {cpus:g} CPUs)",
        f"p50 {statistics.median(ours) * 1e3:.0f} ms",
        f"ripgrep on the host: p50 {statistics.median(baseline) * 1e3:.0f} ms",
        ratio,
        "<= 1.2x",
        ratio <= 1.2,
    )


def bench_idle_memory(client: Any, image: str, workspace: Path, plan_dir: Path) -> Figure:
    with DockerSandbox(make_spec(image, workspace, plan_dir), client) as sandbox:
        sandbox.call(ToolRequest("read", {"file_path": "/workspace/small.txt"}))
        time.sleep(1.0)
        stats = client.containers.get(sandbox.container_id).stats(stream=False)
    memory = stats["memory_stats"]
    detail = memory.get("stats", {})
    cache = detail.get("total_inactive_file", detail.get("inactive_file", detail.get("cache", 0)))
    used_mb = (memory["usage"] - cache) / 2**20
    return Figure(
        "idle sandbox memory (container + tool server)",
        f"{used_mb:.1f} MiB",
        "target 30 MiB",
        used_mb / 30,
        "<= 30 MiB",
        used_mb <= 30,
    )


def main() -> int:
    client = connect()
    image = require_image(client)
    print(
        f"planrun benchmarks, {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, image {image}"
    )
    with tempfile.TemporaryDirectory() as scratch:
        workspace, plan_dir = Path(scratch, "ws"), Path(scratch, "plan")
        workspace.mkdir()
        plan_dir.mkdir()
        (workspace / "small.txt").write_text("".join(f"line {n}\n" for n in range(20)))
        figures = [
            bench_round_trip(client, image, workspace, plan_dir),
            bench_ready(client, image, workspace, plan_dir),
            bench_grep(client, image, plan_dir),
            bench_idle_memory(client, image, workspace, plan_dir),
        ]
    width = max(len(f.name) for f in figures)
    for figure in figures:
        verdict = "ok" if figure.met else "MISSED"
        print(f"{figure.name:<{width}}  {figure.ours}")
        print(f"{'':<{width}}  vs {figure.baseline}")
        print(f"{'':<{width}}  ratio {figure.ratio:.2f}, target {figure.target}: {verdict}")
    return 0 if all(f.met for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
