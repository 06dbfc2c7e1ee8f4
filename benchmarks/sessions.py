"""Interactive sessions: from entering plan mode to the plan session's first tool reply,
and from `planrun` to reading its first line."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PLAN_MODE_TARGET_MS = 50.0
FIRST_LINE_TARGET_S = 0.4


class _Quiet:
    """A session UI that shows nothing and refuses every approval."""

    def show(self, text: str) -> None:
        pass

    def event(self, event: Any) -> None:
        pass

    def approve(self, ask: Any) -> Any:
        from sandbox_runner.tools.permissions import Approval

        return Approval(False)

    def review_plan(self, plan_file: Path, text: str) -> Any:
        from sandbox_runner.session.session import PlanReview

        return PlanReview(False)


class _Sandboxes:
    def __init__(self, provider: Any, image: str, workspace: Path, scratch: Path) -> None:
        self.provider, self.image, self.workspace, self.scratch = (
            provider,
            image,
            workspace,
            scratch,
        )

    def plan(self, plan_dir: Path) -> Any:
        from sandbox_runner.sandbox.spec import SandboxSpec

        spec = SandboxSpec.plan(self.workspace, plan_dir, self.image, session="bench")
        return self.provider.create(spec)

    def read_only(self) -> Any:
        return self.plan(Path(os.path.join(self.scratch, "task")))

    def work(self) -> Any:
        from sandbox_runner.sandbox.spec import SandboxSpec

        return self.provider.create(SandboxSpec.work(self.workspace, self.image, session="bench"))


def plan_mode_first_reply_ms(repo: Path, scratch: Path, client: Any, image: str) -> list[float]:
    """Milliseconds from /plan to the plan session's first tool result, the model answering
    at once, the plan container started with the session (seven sessions)."""
    from sandbox_runner.agents.registry import Registry
    from sandbox_runner.limits import RunLimits
    from sandbox_runner.sandbox.docker_provider import DockerProvider
    from sandbox_runner.session.session import Session
    from sandbox_runner.session.state import SessionStore
    from tests.support.scripted_model import ScriptedModel, reply, say, use

    samples = []
    provider = DockerProvider(client)
    for _ in range(7):
        store, state = SessionStore.create(repo, "claude-bench")
        reached: list[float] = []

        def model(label: str, reached: list[float] = reached) -> Any:
            def answer(request: Any) -> Any:
                if any(b.get("type") == "tool_result" for b in request.messages[-1]["content"]):
                    reached.append(time.perf_counter())
                    return reply(say("done"))
                return reply(use("Read", {"file_path": "README.md"}))

            return ScriptedModel([answer, answer])

        session = Session(
            store, state, workspace=repo, registry=Registry.load(repo),
            sandboxes=_Sandboxes(provider, image, repo, scratch), model=model, ui=_Quiet(),
            limits=RunLimits(),
        )  # fmt: skip
        session.start()
        time.sleep(1.5)  # the user reads the greeting; the containers come up meanwhile
        started = time.perf_counter()
        session.enter_plan()
        session.send("look")
        samples.append((reached[0] - started) * 1000)
        session.close()
    return samples


def first_line_seconds(repo: Path, home: Path) -> list[float]:
    """Seconds from starting `planrun` (line mode) to its first line on standard output."""
    samples = []
    env = dict(os.environ, PLANRUN_HOME=str(home), ANTHROPIC_API_KEY="bench")
    for _ in range(5):
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "sandbox_runner", "--repo", str(repo)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=env,
        )  # fmt: skip
        assert process.stdout is not None and process.stdin is not None
        process.stdout.readline()
        samples.append(time.perf_counter() - started)
        process.stdin.close()
        process.wait(60)
    return samples


def summary(samples: list[float]) -> float:
    return statistics.median(samples)
