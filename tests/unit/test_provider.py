"""LiveSandboxes, the provider's record of what runs: stop_all stops them in parallel,
one failure never spares the others, and a stopped sandbox is forgotten."""

from __future__ import annotations

import threading

from sandbox_runner import SandboxBase
from sandbox_runner.sandbox.provider import LiveSandboxes
from sandbox_runner.types import ExecResult, ToolRequest


class SlowToStop(SandboxBase):
    """Enrols on start; its stop waits at a barrier the others must reach too."""

    def __init__(self, live: LiveSandboxes, barrier: threading.Barrier, fails: bool = False):
        self.live, self.barrier, self.fails = live, barrier, fails
        self.stopped = False

    def start(self) -> None:
        self.live.add(self)

    def call(self, request: ToolRequest) -> ExecResult:
        return ExecResult(ok=True, output="pong")

    def stop(self) -> None:
        # Passes only when every sandbox is stopping at the same time.
        self.barrier.wait()
        self.stopped = True
        self.live.discard(self)
        if self.fails:
            raise RuntimeError("the daemon went away")


def test_stop_all_stops_every_live_sandbox_at_once() -> None:
    live = LiveSandboxes()
    barrier = threading.Barrier(3, timeout=5)
    sandboxes = [SlowToStop(live, barrier, fails=(n == 0)) for n in range(3)]
    for sandbox in sandboxes:
        sandbox.start()
    assert len(live) == 3
    assert live.stop_all() == 3
    assert all(sandbox.stopped for sandbox in sandboxes)
    assert not barrier.broken
    assert len(live) == 0
    assert live.stop_all() == 0


def test_a_sandbox_that_stopped_is_not_stopped_again() -> None:
    live = LiveSandboxes()
    barrier = threading.Barrier(1)
    done, running = SlowToStop(live, barrier), SlowToStop(live, barrier)
    done.start()
    running.start()
    done.stop()
    done.stopped = False
    assert live.stop_all() == 1
    assert running.stopped and not done.stopped


def test_stop_all_gives_up_waiting_on_a_sandbox_that_hangs() -> None:
    live = LiveSandboxes()
    never = threading.Barrier(2, timeout=3)  # nobody else arrives: its stop hangs
    hung = SlowToStop(live, never)
    hung.start()
    assert live.stop_all(wait_seconds=0.2) == 1
    assert not hung.stopped
