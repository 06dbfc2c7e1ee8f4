"""The live sandboxes of a provider: which run, so that all of them can be stopped at once."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Protocol

# stop_all returns after this long; a container Docker is still removing is left to gc.
STOP_ALL_WAIT_SECONDS = 5.0


class Stoppable(Protocol):
    """What stop_all needs of a live container: a sandbox, an MCP server's container."""

    def stop(self) -> None:
        """Remove the container; safe to call more than once."""


class LiveSandboxes:
    """The sandboxes of one provider that are running; safe to use from any thread."""

    def __init__(self) -> None:
        self._running: set[Stoppable] = set()
        self._lock = threading.Lock()

    def add(self, sandbox: Stoppable) -> None:
        """Enrol a sandbox that is starting."""
        with self._lock:
            self._running.add(sandbox)

    def discard(self, sandbox: Stoppable) -> None:
        """Forget a sandbox that stopped (or never was enrolled)."""
        with self._lock:
            self._running.discard(sandbox)

    def __len__(self) -> int:
        with self._lock:
            return len(self._running)

    def stop_all(self, wait_seconds: float = STOP_ALL_WAIT_SECONDS) -> int:
        """Stop every live sandbox, all in parallel, ignoring their errors.

        Returns once they are stopped, or after wait_seconds; a sandbox still stopping then
        goes on in the background (a daemon thread).

        Returns:
            How many sandboxes were live.
        """
        with self._lock:
            sandboxes = list(self._running)
        stoppers = [
            threading.Thread(target=_stop_quietly, args=(box,), name="sandbox-stop", daemon=True)
            for box in sandboxes
        ]
        for stopper in stoppers:
            stopper.start()
        deadline = time.monotonic() + wait_seconds
        for stopper in stoppers:
            stopper.join(max(0.0, deadline - time.monotonic()))
        return len(sandboxes)


def _stop_quietly(sandbox: Stoppable) -> None:
    # A last-resort cleanup: one sandbox that cannot be removed must not stop the others.
    with contextlib.suppress(Exception):
        sandbox.stop()
