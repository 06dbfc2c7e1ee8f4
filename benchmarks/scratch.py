"""The cost of a scratch run: a first `python3 -m unittest` of a small project (every
module compiled, its caches written) in a scratch sandbox's copy-on-write layer, against
the same command on the host, on a fresh copy each time."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from sandbox_runner.limits import Limits
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.spec import SandboxSpec
from sandbox_runner.types import ToolRequest

MODULES = 60
SAMPLES = 3
TARGET_RATIO = 2.0
"""A first test run in the layer may take at most twice as long as on the host."""
OWNER = 4321
"""The project's owner when the benchmark runs as root (a scratch run never writes as root)."""
COMMAND = "python3 -m unittest -q"


def make_project(root: Path) -> None:
    """MODULES small modules, each with a unittest test module, owned by a regular user."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    for number in range(MODULES):
        functions = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(40))
        (root / "pkg" / f"mod{number}.py").write_text(functions)
        (root / f"test_mod{number}.py").write_text(
            f"import unittest\nfrom pkg import mod{number}\n\n\n"
            "class T(unittest.TestCase):\n"
            + "".join(
                f"    def test_{i}(self):\n        self.assertEqual(mod{number}.f{i}(1), {i + 1})\n"
                for i in range(10)
            )
        )
    if os.geteuid() == 0:
        for path in [root, *root.rglob("*")]:
            os.chown(path, OWNER, OWNER)


def host_seconds(project: Path, scratch: Path) -> float:
    """A first run on the host, in a fresh copy (nothing compiled yet)."""
    copy = scratch / "host-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(project, copy)
    start = time.perf_counter()
    subprocess.run(COMMAND.split(), cwd=copy, check=True, capture_output=True)
    return time.perf_counter() - start


def sandbox_seconds(spec: SandboxSpec, client: Any) -> tuple[float, float]:
    """(start, first run) of one fresh sandbox: every layer starts empty."""
    start = time.perf_counter()
    with DockerSandbox(spec, client) as sandbox:
        ready = time.perf_counter() - start
        start = time.perf_counter()
        result = sandbox.call(ToolRequest("bash", {"command": COMMAND}, timeout=300))
        ran = time.perf_counter() - start
    if result.exit_code != 0:
        raise RuntimeError(f"{COMMAND} failed in the sandbox: {result.text[-300:]}")
    return ready, ran


def bench_scratch(
    client: Any, image: str, scratch: Path, session: str
) -> tuple[str, str, float, bool]:
    """(ours, baseline, ratio, met) of a first test run in a scratch layer."""
    project, plan_dir = scratch / "scratch-project", scratch / "scratch-plan"
    make_project(project)
    plan_dir.mkdir()
    limits = Limits(memory_mb=1024, scratch_mb=256)
    spec = SandboxSpec.plan(project, plan_dir, image, limits=limits, session=session, scratch=True)
    plain = SandboxSpec.plan(project, plan_dir, image, limits=limits, session=session)
    layered = [sandbox_seconds(spec, client) for _ in range(SAMPLES)]
    starts = [sandbox_seconds(plain, client)[0] for _ in range(SAMPLES)]
    host = statistics.median(host_seconds(project, scratch) for _ in range(SAMPLES))
    ran = statistics.median(run for _, run in layered)
    ready = statistics.median(start for start, _ in layered)
    ratio = ran / host
    return (
        f"first `{COMMAND}` ({MODULES * 10} tests) {ran:.2f} s in the layer; sandbox ready "
        f"{ready:.2f} s with the layer, {statistics.median(starts):.2f} s without",
        f"the same on the host {host:.2f} s",
        ratio,
        ratio <= TARGET_RATIO,
    )
