"""The user-image figure for `make bench`: how long a sandbox on the user's own toolchain
image (a Node image without python, with planrun's runtime added) takes to be ready,
against a plain `docker run` of that same image."""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from sandbox_runner.sandbox.derived_image import RUNTIME_PYTHON, derive
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.spec import SandboxSpec
from sandbox_runner.types import ToolRequest
from tests.support.toolchain_images import node_image

SAMPLES = 7
TARGET_RATIO = 1.3


def bench_user_image_ready(
    client: Any, workspace: Path, plan_dir: Path, session: str, figure: Any
) -> Any:
    """Create-to-first-reply on the derived Node image vs `docker run --rm NODE true`."""
    base = node_image(client)
    start = time.perf_counter()
    derived = derive(client, base, "bench")
    prepared = time.perf_counter() - start
    spec = SandboxSpec.plan(workspace, plan_dir, derived, session=session, python=RUNTIME_PYTHON)

    def ready_once() -> float:
        sandbox = DockerSandbox(spec, client)
        began = time.perf_counter()
        sandbox.start()
        sandbox.call(ToolRequest("ping"))
        elapsed = time.perf_counter() - began
        sandbox.stop()
        return elapsed

    run_true = ["docker", "run", "--rm", "--network", "none", base, "true"]

    def docker_run() -> float:
        began = time.perf_counter()
        subprocess.run(run_true, capture_output=True, check=True)
        return time.perf_counter() - began

    ready_once()
    docker_run()
    ours = [ready_once() for _ in range(SAMPLES)]
    baseline = [docker_run() for _ in range(SAMPLES)]
    ratio = statistics.median(ours) / statistics.median(baseline)
    return figure(
        "sandbox ready on your image (Node, no python)",
        f"p50 {statistics.median(ours) * 1e3:.0f} ms (derived image ready in {prepared:.1f} s)",
        f"docker run --rm NODE_IMAGE true: p50 {statistics.median(baseline) * 1e3:.0f} ms",
        ratio,
        f"<= {TARGET_RATIO}x",
        ratio <= TARGET_RATIO,
    )
