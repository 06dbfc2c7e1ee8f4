"""How long `planrun plan` takes to stop after Ctrl-C or SIGTERM, with every model call hung."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TARGET_SECONDS = 2.0
PERSPECTIVES = 4


def signal_exit_seconds(repo: Path, out: Path, client: Any, signum: int) -> float:
    """Seconds from the signal to the exit of a run whose model calls all hang."""
    from tests.support.fake_messages_api import FakeMessagesAPI, hang

    labels = [f"p{n}" for n in range(PERSPECTIVES)]
    with FakeMessagesAPI(lambda body: hang()) as api:
        env = dict(os.environ, ANTHROPIC_BASE_URL=api.base_url, ANTHROPIC_API_KEY="b", CI="true")
        command = [sys.executable, "-m", "sandbox_runner", "plan", "x", "--repo", str(repo)]
        command += ["--out", str(out)] + [f"--perspective={label}" for label in labels]
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 60
        while len(api.message_requests) < PERSPECTIVES or _containers(client, process.pid) < (
            PERSPECTIVES
        ):
            if time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("the hung run did not start its subagents")
            time.sleep(0.05)
        started = time.perf_counter()
        process.send_signal(signum)
        process.wait(timeout=60)
        elapsed = time.perf_counter() - started
    if process.returncode != 130 or not (out / "report.json").exists():
        raise RuntimeError(f"signal {signum}: exit {process.returncode}, no report")
    if _containers(client, process.pid):
        raise RuntimeError(f"signal {signum}: containers left behind")
    return elapsed


def _containers(client: Any, pid: int) -> int:
    managed = client.containers.list(all=True, filters={"label": f"io.planrun.pid={pid}"})
    return len(managed)


def bench_signal_exit(repo: Path, scratch: Path, client: Any) -> tuple[str, float]:
    """The slowest exit over Ctrl-C and SIGTERM, three runs each, as (text, seconds)."""
    samples = [
        signal_exit_seconds(repo, scratch / f"signal-{signum}-{n}", client, signum)
        for signum in (signal.SIGINT, signal.SIGTERM)
        for n in range(3)
    ]
    text = f"max {max(samples):.2f} s, p50 {sorted(samples)[len(samples) // 2]:.2f} s"
    return text, max(samples)
